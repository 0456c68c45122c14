#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace autoglm {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(total > 0 ? total : 1), enabled_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && shown_percent_.load() >= 0) std::fputc('\n', stderr);
}

void ProgressBar::advance(int64_t n) {
  if (!enabled_) return;
  const int64_t done = done_.fetch_add(n) + n;
  const int percent = int(done * 100 / total_);
  int shown = shown_percent_.load();
  if (percent <= shown || !shown_percent_.compare_exchange_strong(shown, percent)) return;
  constexpr int kWidth = 30;
  const int filled = percent * kWidth / 100;
  std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(), std::string(size_t(filled), '#').c_str(),
               std::string(size_t(kWidth - filled), ' ').c_str(), percent);
  std::fflush(stderr);
}

}  // namespace autoglm
