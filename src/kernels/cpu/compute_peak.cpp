#include "kernels/cpu/compute_peak.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"

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

// Ten independent int8 dot-product chains of the kind the integer kernels issue (512-bit with
// AVX-512 VNNI: the kernels' row pairs).
__attribute__((target("avx512f,avx512vnni"))) int int8_chains_vnni(int64_t iterations) {
  __m512i acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  int32_t out[16];
  _mm512_storeu_si512(out, sum);
  return out[0];
}

__attribute__((target("avxvnni"))) int int8_chains_avxvnni(int64_t iterations) {
  __m256i acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
  __m256i sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm256_add_epi32(sum, acc[i]);
  return _mm256_extract_epi32(sum, 0);
}

// AVX2: the kernels' pair products into int16 (maddubs) added to int16 sums.
__attribute__((target("avx2"))) int int8_chains_avx2(int64_t iterations) {
  __m256i acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_epi16(int16_t(i));
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(-1);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(a, b));
  __m256i sum = acc[0];
  for (int i = 1; i < 10; ++i) sum = _mm256_add_epi16(sum, acc[i]);
  return _mm256_extract_epi16(sum, 0);
}
#endif

int int8_chains_scalar(int64_t iterations) {
  int32_t acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = i;
  volatile int8_t a = 3, b = -2;
  const int32_t product = int32_t(a) * int32_t(b);
  for (int64_t it = 0; it < iterations; ++it)
    for (int32_t& x : acc) x = x * 3 + product;
  int32_t sum = 0;
  for (int32_t x : acc) sum += x;
  return sum;
}

float fma_chains_scalar(int64_t iterations) {
  float acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = float(i) * 1e-3f;
  for (int64_t it = 0; it < iterations; ++it)
    for (float& x : acc) x = x * 0.999999f + 1e-7f;
  float sum = 0;
  for (float x : acc) sum += x;
  return sum;
}

// Best of `repeats` runs of `chains` on every thread, in operations per second.
template <class Chains>
double best_rate(ThreadPool& pool, int repeats, double ops_per_thread, Chains chains) {
  double best = 0;
  std::vector<int64_t> results(size_t(pool.size()));  // kept, so the chains are not optimised away
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int, int64_t begin, int64_t) { results[size_t(begin)] = chains(); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, ops_per_thread * double(pool.size()) / seconds);
  }
  return best;
}

}  // namespace

double measure_int8_peak(ThreadPool& pool, int repeats) {
  // The products of the kernel set in use (AUTOGLM_CPU_ISA may have chosen a narrower one).
  enum class Kind { kVnni512, kAvxVnni, kAvx2, kScalar } kind = Kind::kScalar;
  const std::string isa = kernel_isa();
  if (isa == "avx512vnni")
    kind = Kind::kVnni512;
  else if (isa == "avxvnni")
    kind = Kind::kAvxVnni;
  else if (isa == "avx2")
    kind = Kind::kAvx2;
  // multiply-adds per chain step: 64 byte products (512-bit VNNI), 32 (256-bit VNNI, maddubs), one
  // for the scalar chain
  const double macs = kind == Kind::kVnni512 ? 64 : kind == Kind::kScalar ? 1 : 32;
  return best_rate(pool, repeats, double(kIterations) * 10 * macs * 2, [&]() -> int64_t {
#if defined(__x86_64__)
    switch (kind) {
      case Kind::kVnni512: return int8_chains_vnni(kIterations);
      case Kind::kAvxVnni: return int8_chains_avxvnni(kIterations);
      case Kind::kAvx2: return int8_chains_avx2(kIterations);
      default: break;
    }
#endif
    return int8_chains_scalar(kIterations);
  });
}

double measure_fma_peak(ThreadPool& pool, int repeats) {
  // The float width of the kernel set in use: 512 bits in the AVX-512 set, 256 in the AVX2 and
  // AVX-VNNI ones (AUTOGLM_CPU_ISA may have chosen a narrower set than the CPU has).
  const std::string isa = kernel_isa();
  const bool avx512 = isa == "avx512vnni";
  const bool avx2 = isa == "avx2" || isa == "avxvnni";
  const double lanes = avx512 ? 16 : avx2 ? 8 : 1;
  return best_rate(pool, repeats, double(kIterations) * 10 * lanes * 2, [&]() -> int64_t {
#if defined(__x86_64__)
    if (avx512) return int64_t(fma_chains_avx512(kIterations));
    if (avx2) return int64_t(fma_chains_avx2(kIterations));
#endif
    return int64_t(fma_chains_scalar(kIterations));
  });
}

}  // namespace autoglm::cpu
