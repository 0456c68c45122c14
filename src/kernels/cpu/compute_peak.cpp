#include "kernels/cpu/compute_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace autoglm::cpu {
namespace {

constexpr int64_t kIterations = 1 << 22;

#if defined(__x86_64__)
// Ten independent accumulators: enough chains to cover the FMA latency on two ports.
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) {
  __m256 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0];
}

__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
  __m512 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  return out[0];
}
#endif

float fma_chains_scalar(int64_t iterations) {
  float acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = float(i) * 1e-3f;
  for (int64_t it = 0; it < iterations; ++it)
    for (float& x : acc) x = x * 0.999999f + 1e-7f;
  float sum = 0;
  for (float x : acc) sum += x;
  return sum;
}

}  // namespace

double measure_fma_peak(ThreadPool& pool, int repeats) {
#if defined(__x86_64__)
  const bool avx512 = cpu_features().avx512f;
  const bool avx2 = !avx512 && cpu_features().avx2 && cpu_features().fma;
#else
  const bool avx512 = false, avx2 = false;
#endif
  const double lanes = avx512 ? 16 : avx2 ? 8 : 1;
  const double flops_per_thread = double(kIterations) * 10 * lanes * 2;
  double best = 0;
  std::vector<float> results(size_t(pool.size()));  // kept, so the chains are not optimised away
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int, int64_t begin, int64_t) {
#if defined(__x86_64__)
      results[size_t(begin)] = avx512 ? fma_chains_avx512(kIterations)
                               : avx2 ? fma_chains_avx2(kIterations)
                                      : fma_chains_scalar(kIterations);
#else
      results[size_t(begin)] = fma_chains_scalar(kIterations);
#endif
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops_per_thread * double(pool.size()) / seconds);
  }
  return best;
}

}  // namespace autoglm::cpu
