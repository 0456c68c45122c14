// Helpers shared by the tests: where ../shared is, and reading its files.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace autoglm::test {

// ../shared beside the project, or $AUTOGLM_SHARED_DIR.
inline std::string shared_dir() {
  if (const char* env = std::getenv("AUTOGLM_SHARED_DIR")) return env;
  return std::string(AUTOGLM_SOURCE_DIR) + "/../shared";
}

inline std::string shared_path(const std::string& rel) {
  return shared_dir() + "/" + rel;
}

inline bool shared_exists(const std::string& rel) {
  return std::filesystem::exists(shared_path(rel));
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("autoglm_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace autoglm::test

namespace autoglm::test {

// CI always has ../shared: there (CI=true, or AUTOGLM_REQUIRE_SHARED=1) absent data fails.
inline bool shared_required() {
  const char* ci = std::getenv("CI");
  const char* required = std::getenv("AUTOGLM_REQUIRE_SHARED");
  return (ci && std::string(ci) == "true") || (required && std::string(required) == "1");
}

// True while a live process has `arg` as one of its argv elements (zombies have none).
// Never throws: a process that exits while /proc is read is skipped (its cmdline's read fails)
// or ends that scan (the iterator's error code), and the scan starts again.
inline bool process_with_argument(const std::string& arg) {
  const std::string needle = std::string(1, '\0') + arg + std::string(1, '\0');
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::error_code ec;
    bool found = false;
    for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
      std::string cmdline;
      try {  // a process that exits while its cmdline is read: libstdc++'s read throws (ESRCH)
        std::ifstream in(it->path() / "cmdline", std::ios::binary);
        cmdline.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      } catch (const std::exception&) {
        continue;
      }
      found = found || cmdline.find(needle) != std::string::npos;
    }
    if (found || !ec) return found;
  }
  return false;
}

// Polls `cond` every few milliseconds until it holds or `bound` has passed; whether it held.
// Tests order events by a state the code reports, never by a sleep that assumes it:
//   ASSERT_TRUE(test::wait_until([&] { return api->in_flight() == 3; })) << "never three in flight";
inline bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds bound = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A parameterised test's name from its parameter's text: gtest allows only [A-Za-z0-9_] in
// names, so every other character becomes '_' ("gpt-oss" -> "gpt_oss", "q4_k" stays).
//   INSTANTIATE_TEST_SUITE_P(A, B, Values("x-1", "y"), [](const auto& i) { return test::param_name(i.param); });
inline std::string param_name(std::string_view text) {
  std::string name(text.empty() ? std::string_view("empty") : text);
  for (char& c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!keep) c = '_';
  }
  return name;
}

}  // namespace autoglm::test

// Skips the current test when a file of ../shared is absent (fails instead under CI).
#define AUTOGLM_REQUIRE_SHARED(rel)                                                                     \
  do {                                                                                                  \
    if (!::autoglm::test::shared_exists(rel)) {                                                         \
      if (::autoglm::test::shared_required())                                                           \
        FAIL() << "test data " << ::autoglm::test::shared_path(rel) << " is absent (../shared), in CI"; \
      GTEST_SKIP() << "test data " << ::autoglm::test::shared_path(rel) << " is absent (../shared)";    \
    }                                                                                                   \
  } while (0)
