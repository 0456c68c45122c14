// Row-wise work split over the thread pool when there is enough of it to pay for the hand-off.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace autoglm {

// Below this many floats a dispatch costs more than the work: it runs on the calling thread.
constexpr int64_t kSerialFloats = 1 << 15;

// fn(r0, r1) over [0, n_rows) rows of `width` floats each: on the pool's threads when large, else
// as one call. fn must treat each row alone, so that a row's result does not depend on the split.
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t n_rows, int64_t width, const Fn& fn) {
  if (n_rows * width < kSerialFloats || n_rows < 2)
    fn(int64_t(0), n_rows);
  else
    pool.parallel_for(n_rows, [&](int, int64_t r0, int64_t r1) { fn(r0, r1); });
}

// fn(begin, end) over [0, n) elements, split only at multiples of `kElementBlock`: an element-wise
// kernel's vector lanes and padded tail then see each element as one call over all n would.
constexpr int64_t kElementBlock = 64;

template <typename Fn>
void for_elements(ThreadPool& pool, int64_t n, const Fn& fn) {
  for_rows(pool, (n + kElementBlock - 1) / kElementBlock, kElementBlock, [&](int64_t b0, int64_t b1) {
    const int64_t begin = b0 * kElementBlock, end = std::min(b1 * kElementBlock, n);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace autoglm
