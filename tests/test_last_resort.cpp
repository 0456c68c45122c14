// The last-resort guard of long-lived threads: whatever a piece of work throws is reported
// to its handler and logged, and never escapes (std::terminate would end the server).
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/last_resort.h"

namespace autoglm {
namespace {

TEST(LastResort, EveryKindOfExceptionIsReportedNotThrown) {
  std::string reported;
  auto report = [&](const std::string& what) { reported = what; };
  EXPECT_TRUE(run_guarded(
      "test", [] {}, report));
  EXPECT_EQ(reported, "");
  EXPECT_FALSE(run_guarded(
      "test", [] { throw std::runtime_error("boom"); }, report));
  EXPECT_EQ(reported, "boom");
  EXPECT_FALSE(run_guarded(
      "test", [] { throw std::bad_alloc(); }, report));
  EXPECT_EQ(reported, "out of memory");
  EXPECT_FALSE(run_guarded(
      "test", [] { throw 42; }, report));
  EXPECT_EQ(reported, "an exception of an unknown type");
}

TEST(LastResort, AThrowingReporterIsContainedToo) {
  EXPECT_FALSE(run_guarded(
      "test", [] { throw std::runtime_error("first"); }, [](const std::string&) { throw std::logic_error("second"); }));
}

}  // namespace
}  // namespace autoglm
