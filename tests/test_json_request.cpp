// Untrusted JSON in one linear pass: objects with very many keys, duplicates, nesting past
// the limit, numbers past a double, bad UTF-8.
#include <gtest/gtest.h>

#include "core/json_request.h"

namespace autoglm {
namespace {

TEST(JsonRequest, AnObjectWithManyKeysParsesInOnePass) {
  // 400 000 keys (5 MB): nlohmann's ordered_json compares each key with all before it,
  // about 10^11 comparisons, minutes of one thread (this test's TIMEOUT is 120 s).
  std::string text = "{";
  const int n = 400000;
  for (int i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  auto j = parse_json_request(text, 128);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  ASSERT_EQ(j->size(), size_t(n));
  EXPECT_EQ(j->begin().key(), "k0");  // order kept
  EXPECT_EQ((*j)["k399999"], 399999);
}

TEST(JsonRequest, DuplicateKeysKeepTheLastValueAndTheFirstPlace) {
  auto j = parse_json_request(R"({"a": 1, "b": {"x": [1, 2]}, "a": [3]})", 128);
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  EXPECT_EQ(j->dump(), R"({"a":[3],"b":{"x":[1,2]}})");
}

TEST(JsonRequest, LoneSurrogateEscapesBecomeTheReplacementCharacter) {
  // A client cut a string inside a surrogate pair; Python and JavaScript parse this.
  const auto text_of = [](const std::string& body) {
    auto j = parse_json_request(body, 128);
    return j.is_ok() ? (*j)["t"].get<std::string>() : "error: " + j.status().message();
  };
  EXPECT_EQ(text_of(R"({"t": "a\ud83d"})"), "a\xEF\xBF\xBD");  // high half alone, at the end
  EXPECT_EQ(text_of(R"({"t": "\udc00b"})"),
            "\xEF\xBF\xBD"
            "b");                                                      // low half alone
  EXPECT_EQ(text_of(R"({"t": "\ud83d\ude00"})"), "\xF0\x9F\x98\x80");  // a real pair is kept: U+1F600
  EXPECT_EQ(text_of(R"({"t": "\\ud83d"})"), "\\ud83d");                // an escaped backslash, then text
  EXPECT_EQ(text_of(R"({"t": "\ud83dx\ud83d\u0041"})"),
            "\xEF\xBF\xBD"
            "x\xEF\xBF\xBD"
            "A");
}

TEST(JsonRequest, BadTextIsAnErrorThatSaysWhy) {
  const auto error = [](const std::string& text, int depth = 128) {
    auto j = parse_json_request(text, depth);
    return j.is_ok() ? std::string("parsed") : j.status().message();
  };
  EXPECT_NE(error("[[[[1]]]]", 3).find("deeper than 3 levels (limit json_depth)"), std::string::npos);
  EXPECT_EQ(error("[[[1]]]", 3), "parsed");
  const auto keys = [](const std::string& text, int64_t max) {
    auto j = parse_json_request(text, 128, max);
    return j.is_ok() ? std::string("parsed") : j.status().message();
  };
  // Read after what was parsed ("the body ..."), the message is a sentence.
  EXPECT_EQ(keys(R"({"a": 1, "b": 2, "c": 3})", 2), "has an object with more than 2 keys (limit json_object_keys)");
  EXPECT_EQ(keys(R"({"a": 1, "b": 2, "a": 3})", 2), "parsed");  // a repeated key is not a new one
  EXPECT_NE(error(R"({"t": 3E3333})").find("number overflow"), std::string::npos) << error(R"({"t": 3E3333})");
  EXPECT_NE(error("{\"a\": \"\xff\"}").find("UTF-8"), std::string::npos) << error("{\"a\": \"\xff\"}");
  EXPECT_NE(error(R"({"a": 1,})").find("syntax error"), std::string::npos) << error(R"({"a": 1,})");
  EXPECT_NE(error("").find("syntax error"), std::string::npos);
}

}  // namespace
}  // namespace autoglm
