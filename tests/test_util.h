// Helpers shared by the tests: where ../shared is, and reading its files.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
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
inline bool process_with_argument(const std::string& arg) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(std::string(1, '\0') + arg + std::string(1, '\0')) != std::string::npos) return true;
  }
  return false;
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
