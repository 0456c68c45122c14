#include "kernels/cpu/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/packed.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace autoglm::cpu {
namespace {

uint64_t sum_portable(const uint64_t* p, int64_t n) {
  uint64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  return s;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i) + 2048, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(p + i) + 2112, _MM_HINT_T0);
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_portable(p + i, n - i);
}
#endif

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, int repeats) {
  const int64_t n = (int64_t(1) << 30) / 8;
  // Memory as the packed weights get it (huge pages where the kernel grants them): the rate the
  // machine reads at, not one lowered by page walks that the weights do not pay.
  const PackedBuffer bytes = allocate_packed(size_t(n) * 8);
  std::vector<uint64_t> fallback;  // no room for the aligned buffer: the heap's (which throws if none)
  if (!bytes) fallback.resize(size_t(n));
  uint64_t* const buf = bytes ? reinterpret_cast<uint64_t*>(bytes.get()) : fallback.data();
  std::iota(buf, buf + n, uint64_t(0));  // touched, so the pages exist
  auto sum = sum_portable;
#if defined(__x86_64__)
  if (cpu_features().avx2) sum = sum_avx2;
#endif
  std::vector<uint64_t> sums(size_t(pool.size()));
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(n, [&](int t, int64_t b, int64_t e) { sums[size_t(t)] += sum(buf + b, e - b); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(n * 8) / s);
  }
  volatile uint64_t keep = std::accumulate(sums.begin(), sums.end(), uint64_t(0));  // the reads are used
  (void)keep;
  return best;
}

}  // namespace autoglm::cpu
