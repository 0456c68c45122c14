// Ids that grant access to state: 128 random bits in 22 base64url characters, no counter.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "core/random_id.h"

namespace autoglm {
namespace {

int decode_base64url(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '-' ? 62 : 63;
}

TEST(RandomId, FormatIsPrefixAnd22Base64UrlCharacters) {
  const std::string id = random_id("task_");
  EXPECT_TRUE(std::regex_match(id, std::regex("task_[A-Za-z0-9_-]{22}"))) << id;
}

TEST(RandomId, EveryOneOfThe128BitsVaries) {
  std::set<std::string> seen;
  std::vector<int> ones(128, 0);
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const std::string id = random_id("");
    ASSERT_EQ(id.size(), 22u);
    seen.insert(id);
    for (int bit = 0; bit < 128; ++bit)
      ones[size_t(bit)] += (decode_base64url(id[size_t(bit / 6)]) >> (5 - bit % 6)) & 1;
  }
  EXPECT_EQ(seen.size(), size_t(n));
  // A counter or a timestamp would leave the high bits fixed; random bits are set about half the time.
  for (int bit = 0; bit < 128; ++bit) {
    EXPECT_GT(ones[size_t(bit)], n / 2 - 200) << "bit " << bit;
    EXPECT_LT(ones[size_t(bit)], n / 2 + 200) << "bit " << bit;
  }
}

TEST(RandomId, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("sk-abc", "sk-abc"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-abd"));
  EXPECT_FALSE(constant_time_equal("sk-abc", "sk-ab"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace autoglm
