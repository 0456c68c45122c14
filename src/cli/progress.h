// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace autoglm {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  ~ProgressBar();  // finishes the line if anything was drawn
  // Thread-safe; redraws at most once per percent.
  void advance(int64_t n = 1);

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  std::atomic<int64_t> done_{0};
  std::atomic<int> shown_percent_{-1};
};

}  // namespace autoglm
