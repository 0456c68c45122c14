// Chat templates come from model files of any origin: parsing and rendering are bounded
// (nesting, steps, string sizes) and checked as they run, so a hostile template ends with an
// Error in bounded time and memory instead of a stack overflow or an allocation failure.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/jinja/error.h"

namespace autoglm::jinja {

struct RenderLimits {
  int max_depth = 400;                         // nested statements, expressions and macro calls
  int64_t max_steps = 4'000'000;               // statements, expressions and loop items evaluated
  size_t max_output_bytes = size_t(32) << 20;  // the rendered text (at most kMaxStringBytes)
  const std::atomic<bool>* cancel = nullptr;   // when set, the render stops at its next step
};

// Nesting of the parsed template (parentheses, `not`, blocks inside blocks).
constexpr int kMaxParseDepth = 200;
// Any string a render builds, the output included.
constexpr size_t kMaxStringBytes = size_t(64) << 20;
// Items of one range() or other generated list.
constexpr int64_t kMaxListItems = int64_t(1) << 20;

// Throws unless a string of `bytes` bytes is allowed; `what` names the operation.
inline void check_string_size(size_t bytes, const char* what) {
  if (bytes > kMaxStringBytes)
    throw Error(std::string(what) + ": the result would exceed " + std::to_string(kMaxStringBytes) + " bytes");
}

// One level of nesting for as long as it lives; throws past `limit`.
class NestingGuard {
 public:
  NestingGuard(int& depth, int limit, std::string_view what) : depth_(depth) {
    if (++depth_ > limit) {
      --depth_;
      throw Error(std::string(what) + " nest deeper than " + std::to_string(limit) + " levels");
    }
  }
  ~NestingGuard() { --depth_; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;

 private:
  int& depth_;
};

}  // namespace autoglm::jinja
