// Google Benchmark micro-benchmarks of the CPU kernels: matmul of every weight type at decode
// (1, 2 and 4 tokens) and prefill (64 tokens) shapes, packed where the type has a packed layout, a
// one-token chain of matrices of one size (MatmulChain), the same chain's weight stream with
// nothing but a set number of dot products per line (StreamAtDensity), and
// the fused attention over f16 / q8_0 KV rows, and a vision tower's attention over one image
// (GLM-4.1V's 12 heads of 128). Counters: weight GB/s and GFLOP/s.
//   build/bench/micro_kernels --benchmark_filter=Matmul/Q4_0 (MatmulOneThread/Q4_0: the same on one thread)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/bandwidth.h"
#include "kernels/cpu/element_ops.h"
#include "kernels/cpu/kv_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/quants.h"
#include "model/vision_attention.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace autoglm {
namespace {

constexpr int64_t kRows = 2048, kCols = 2048;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// rows x cols of random weights quantized to `type`, row after row as a file keeps them; rows past
// the first `distinct` repeat them (a large matrix whose quantizing costs no more than theirs).
std::vector<uint8_t> quantized_rows(DType type, int64_t rows, int64_t cols, int64_t distinct) {
  const auto w = random_floats(size_t(distinct * cols), 1);
  const int64_t row_bytes = dtype_row_bytes(type, cols);
  std::vector<uint8_t> bytes(size_t(row_bytes * rows));
  for (int64_t r = 0; r < distinct; ++r)
    ref::quantize_row(type, &w[size_t(r * cols)], bytes.data() + r * row_bytes, cols);
  for (int64_t r = distinct; r < rows; ++r)
    std::copy_n(bytes.data() + (r % distinct) * row_bytes, row_bytes, bytes.data() + r * row_bytes);
  return bytes;
}

std::string kernel_label(const cpu::WeightMatrix& m) {
  return std::string(cpu::kernel_isa()) + (m.packed ? " packed" : "");
}

ThreadPool& pool() {
  static ThreadPool p(physical_core_count());
  return p;
}

ThreadPool& one_thread() {
  static ThreadPool p(1);
  return p;
}

// A matrix of 2048 columns against state.range(0) tokens: 2048 rows on the pool's threads, or
// (on_one_thread, MatmulOneThread) 512 rows, which stay in a core's L2, on one thread: the kernel's
// own rate, without the hand-off to a second thread (a large share of a 50-100 us matvec on a VM).
void matmul_benchmark(benchmark::State& state, DType type, bool on_one_thread) {
  ThreadPool& threads = on_one_thread ? one_thread() : pool();
  const int64_t tokens = state.range(0), rows = on_one_thread ? 512 : kRows;
  const int64_t row_bytes = dtype_row_bytes(type, kCols);
  std::vector<uint8_t> bytes = quantized_rows(type, rows, kCols, rows);
  cpu::WeightMatrix m{type, bytes.data(), rows, kCols, row_bytes};
  cpu::PackedBuffer packed;
  if (cpu::packable(type)) packed = cpu::pack_matrix(threads, m);
  const auto x = random_floats(size_t(tokens * kCols), 2);
  std::vector<float> y(size_t(tokens * rows));
  for (auto _ : state) {
    cpu::matmul(threads, m, x.data(), tokens, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double iters = double(state.iterations());
  state.counters["weight_GB/s"] =
      benchmark::Counter(iters * double(row_bytes * rows) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(iters * 2.0 * double(rows * kCols * tokens) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(kernel_label(m));
}

// Decode of one token through a matrix of about 512 MiB, far past the caches: the weight stream's
// rate against the machine's read bandwidth (the decode bound's denominator, measured here too).
// The rows repeat one quantized 2048x2048 tile: only the bytes' movement is measured. Packed as a
// model's matrices are (pack_matrices: huge pages where the kernel grants them).
void matmul_from_memory_benchmark(benchmark::State& state, DType type) {
  const int64_t cols = 2048, tile_rows = 2048, row_bytes = dtype_row_bytes(type, cols);
  const int64_t rows = ((int64_t(512) << 20) / row_bytes) / tile_rows * tile_rows;
  std::vector<uint8_t> bytes = quantized_rows(type, rows, cols, tile_rows);
  cpu::WeightMatrix m{type, bytes.data(), rows, cols, row_bytes};
  cpu::PackedBuffer packed;
  if (cpu::packable(type))  // the file layout stays for sets without packed kernels
    packed = cpu::pack_matrices(pool(), {&m}, [](size_t) {});
  const auto x = random_floats(size_t(cols), 2);
  std::vector<float> y(static_cast<size_t>(rows));
  const double bandwidth = cpu::measure_read_bandwidth(pool());
  for (auto _ : state) {
    cpu::matmul(pool(), m, x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double gbs = double(state.iterations()) * double(row_bytes * rows) / 1e9;
  state.counters["weight_GB/s"] = benchmark::Counter(gbs, benchmark::Counter::kIsRate);
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.SetLabel(kernel_label(m));
}

// Decode of one token through a chain of matrices of state.range(0) KiB each, about 1 GiB in all,
// packed into one huge-page buffer as a model's are: how the weight stream's rate depends on a
// matrix's size (each product is one pool job that starts its streams cold, as a decode step's are).
// Intel Xeon, 2 threads, Q4_K: 256 KiB and 1 MiB matrices stream 15-30% slower than 16-64 MiB ones
// (a job's start and join); a model's experts share one job, so this is the case of lone small
// matrices only.
void matmul_chain_benchmark(benchmark::State& state, DType type) {
  const int64_t cols = 2048, row_bytes = dtype_row_bytes(type, cols);
  const int64_t rows = std::max<int64_t>(16, (state.range(0) << 10) / row_bytes / 16 * 16);
  const int64_t count = std::max<int64_t>(1, (int64_t(1) << 30) / (rows * row_bytes));
  const std::vector<uint8_t> bytes = quantized_rows(type, rows, cols, std::min<int64_t>(rows, 256));
  std::vector<cpu::WeightMatrix> matrices(size_t(count), cpu::WeightMatrix{type, bytes.data(), rows, cols, row_bytes});
  std::vector<cpu::WeightMatrix*> pointers;
  for (auto& m : matrices) pointers.push_back(&m);
  const cpu::PackedBuffer packed = cpu::pack_matrices(pool(), pointers, [](size_t) {});
  const auto x = random_floats(size_t(cols), 2);
  std::vector<float> y(static_cast<size_t>(rows));
  const double bandwidth = cpu::measure_read_bandwidth(pool());
  for (auto _ : state) {
    for (const auto& m : matrices) cpu::matmul(pool(), m, x.data(), 1, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double gbs = double(state.iterations()) * double(count * rows * row_bytes) / 1e9;
  state.counters["weight_GB/s"] = benchmark::Counter(gbs, benchmark::Counter::kIsRate);
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.SetLabel(kernel_label(matrices[0]));
}

// One-token decode of a mixture-of-experts layer's gate and up products as the model runs them:
// 8 experts of 128 drawn at random each step (16 matrices of 768 x 2048, Qwen3-30B-A3B's width) in
// one matmul_batch, from about 1 GiB of packed experts. Beside MatmulChain it says what the
// experts' small matrices cost a job of the same bytes.
void expert_batch_benchmark(benchmark::State& state, DType type) {
  constexpr int64_t kCols = 2048, kRows = 768, kExperts = 128, kActive = 8;
  const int64_t row_bytes = dtype_row_bytes(type, kCols);
  const int64_t layers = std::max<int64_t>(1, (int64_t(1) << 30) / (2 * kExperts * kRows * row_bytes));
  const std::vector<uint8_t> bytes = quantized_rows(type, kRows, kCols, 256);
  std::vector<cpu::WeightMatrix> matrices(size_t(layers * 2 * kExperts),
                                          cpu::WeightMatrix{type, bytes.data(), kRows, kCols, row_bytes});
  std::vector<cpu::WeightMatrix*> pointers;
  for (auto& m : matrices) pointers.push_back(&m);
  const cpu::PackedBuffer packed = cpu::pack_matrices(pool(), pointers, [](size_t) {});
  const auto x = random_floats(size_t(kCols), 2);
  std::vector<float> y(size_t(2 * kActive * kRows));
  std::mt19937 rng(7);
  std::vector<cpu::MatmulJob> jobs(2 * kActive);
  const double bandwidth = cpu::measure_read_bandwidth(pool());
  int64_t layer = 0;
  for (auto _ : state) {
    std::vector<int64_t> experts(kExperts);
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    std::sort(experts.begin(), experts.begin() + kActive);
    for (int64_t i = 0; i < kActive; ++i)
      for (int64_t j = 0; j < 2; ++j)
        jobs[size_t(2 * i + j)] = {&matrices[size_t((layer * 2 + j) * kExperts + experts[size_t(i)])], x.data(), 1,
                                   y.data() + (2 * i + j) * kRows};
    cpu::matmul_batch(pool(), jobs.data(), int(jobs.size()));
    benchmark::DoNotOptimize(y.data());
    layer = (layer + 1) % layers;
  }
  const double gbs = double(state.iterations()) * double(2 * kActive * kRows * row_bytes) / 1e9;
  state.counters["weight_GB/s"] = benchmark::Counter(gbs, benchmark::Counter::kIsRate);
  state.counters["read_GB/s"] = bandwidth / 1e9;
  state.SetLabel(kernel_label(matrices[0]));
}

#if defined(__x86_64__)
// Two streams of `bytes` each, as the paired decode reads them, requested 2304 bytes ahead (the
// 512-bit decode kernels request two blocks ahead: 2368 bytes for Q4_K), with W 512-bit dot
// products per 64 bytes and no other work: a decode kernel of that density with nothing else to do.
template <int W>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t stream_pair(const uint8_t* a, const uint8_t* b,
                                                                           int64_t bytes) {
  constexpr int64_t kAhead = 2304;
  __m512i acc[8];
  for (auto& v : acc) v = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi8(3);
  for (int64_t i = 0; i + 256 <= bytes; i += 256) {
    for (int64_t at = 0; at < 256; at += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(a + i + kAhead + at), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + i + kAhead + at), _MM_HINT_T0);
    }
    for (int k = 0; k < 4; ++k) {
      const __m512i u = _mm512_load_si512(a + i + 64 * k), v = _mm512_load_si512(b + i + 64 * k);
      for (int w = 0; w < W; ++w) {
        acc[(k * W + w) % 4] = _mm512_dpbusd_epi32(acc[(k * W + w) % 4], u, x);
        acc[4 + (k * W + w) % 4] = _mm512_dpbusd_epi32(acc[4 + (k * W + w) % 4], v, x);
      }
    }
  }
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, acc[0]);
  return std::accumulate(lanes, lanes + 16, 0);
}

// The weight stream's ceiling at a kernel's density on this machine: MatmulChain/4096's jobs
// (4 MiB, 8 shares, each share two streams) through the same pool, with stream_pair<W> for a
// kernel. Beside MatmulChain/*/4096 and the read probe it says how much of a decode kernel's gap
// to the probe is its own and how much the machine's (Intel Xeon, 2 threads, probe 34.8-36.6
// GB/s: W 2 and 3 stream at 31.2-32.3, where MatmulChain/Q4_K/4096 and IQ4_XS/4096, as dense in L2,
// stream at 26.5-28.3).
template <int W>
void stream_at_density_benchmark(benchmark::State& state) {
  if (!cpu_features().avx512vnni) return state.SkipWithError("needs AVX-512 VNNI");
  constexpr int64_t kJob = int64_t(4) << 20, kJobs = 256, kShares = 8;
  const cpu::PackedBuffer buf = cpu::allocate_packed(size_t(kJob * kJobs));
  if (!buf) return state.SkipWithError("no room for the 1 GiB buffer");
  std::fill_n(buf.get(), size_t(kJob * kJobs), uint8_t(1));  // touched, so the pages exist
  std::vector<int32_t> sums(static_cast<size_t>(kShares));
  for (auto _ : state)
    for (int64_t j = 0; j < kJobs; ++j) {
      const uint8_t* job = buf.get() + j * kJob;
      pool().parallel_for_shares(kShares, int(kShares), [&](int, int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          const uint8_t* share = job + s * (kJob / kShares);
          sums[size_t(s)] += stream_pair<W>(share, share + kJob / kShares / 2, kJob / kShares / 2);
        }
      });
    }
  benchmark::DoNotOptimize(sums.data());
  state.counters["weight_GB/s"] =
      benchmark::Counter(double(state.iterations()) * double(kJob * kJobs) / 1e9, benchmark::Counter::kIsRate);
}
#endif

void kv_attention_row_benchmark(benchmark::State& state, DType type) {
  const int64_t n_pos = state.range(0), head_dim = 64;
  const auto k = random_floats(size_t(n_pos * head_dim), 3);
  const int64_t row_bytes = dtype_row_bytes(type, head_dim);
  std::vector<uint8_t> rows(size_t(n_pos * row_bytes));
  for (int64_t p = 0; p < n_pos; ++p)
    cpu::encode_kv_row(type, &k[size_t(p * head_dim)], &rows[size_t(p * row_bytes)], head_dim);
  const auto ops = cpu::kv_row_ops(type);
  std::vector<const uint8_t*> ptrs(static_cast<size_t>(n_pos));
  for (int64_t p = 0; p < n_pos; ++p) ptrs[size_t(p)] = &rows[size_t(p * row_bytes)];
  // One decode step of a GQA group of 8 query heads: decode, scores, softmax weights and the
  // weighted sum, a chunk of positions at a time.
  constexpr int64_t kQueries = 8;
  const auto qs = random_floats(size_t(kQueries * head_dim), 4);
  std::vector<float> acc(size_t(kQueries * head_dim)), scores(size_t(kQueries * cpu::kKvChunk)),
      keys(size_t(cpu::kKvChunk * head_dim)), values(keys.size());
  const cpu::TileRows<const float> q_rows{qs.data(), 0, kQueries, head_dim};
  const cpu::TileRows<float> out_rows{acc.data(), 0, kQueries, head_dim};
  for (auto _ : state) {
    for (int64_t p = 0; p + cpu::kKvChunk <= n_pos; p += cpu::kKvChunk) {
      ops.decode_keys(&ptrs[size_t(p)], head_dim, keys.data());
      ops.decode_values(&ptrs[size_t(p)], head_dim, values.data());
      ops.scores(keys.data(), head_dim, q_rows, kQueries, 0.125f, scores.data());
      for (int64_t i = 0; i < kQueries; ++i)
        cpu::element_ops().exp_sum(&scores[size_t(i * cpu::kKvChunk)], cpu::kKvChunk, 0.0f);
      ops.accumulate(values.data(), head_dim, scores.data(), out_rows, kQueries, 0, cpu::kKvChunk);
    }
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["kv_GB/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * double(rows.size()) / 1e9, benchmark::Counter::kIsRate);
}

// One layer of full attention over an image of n patches (a 560x1232 screenshot: 3520), all
// queries in parts of 256 as the encoder runs them: packing, QK^T, softmax and PV (the
// buffers reused from the previous layer, as the encoder reuses them).
void vision_attention_benchmark(benchmark::State& state) {
  const int64_t n = state.range(0), n_head = 12, head_dim = 128, width = n_head * head_dim;
  const auto q = random_floats(size_t(n * width), 5), k = random_floats(size_t(n * width), 6),
             v = random_floats(size_t(n * width), 7);
  std::vector<float> out(q.size());
  VisionAttention attention(pool(), n_head, head_dim);
  for (auto _ : state) {
    attention.prepare(q.data(), k.data(), v.data(), {0, n});
    for (int64_t q0 = 0; q0 < n; q0 += 256) attention.run(q0, std::min(n, q0 + 256), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * 4.0 * double(n * n * width) / 1e9, benchmark::Counter::kIsRate);
}

void register_all() {
  for (DType t : {DType::F32,    DType::F16,    DType::BF16,    DType::Q8_0,  DType::Q4_0,  DType::Q4_1,
                  DType::Q5_0,   DType::Q5_1,   DType::Q4_K,    DType::Q5_K,  DType::Q6_K,  DType::Q2_K,
                  DType::Q3_K,   DType::IQ4_NL, DType::IQ4_XS,  DType::TQ1_0, DType::TQ2_0, DType::IQ2_XXS,
                  DType::IQ2_XS, DType::IQ2_S,  DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M})
    benchmark::RegisterBenchmark(("Matmul/" + std::string(dtype_name(t))).c_str(), matmul_benchmark, t, false)
        ->Arg(1)
        ->Arg(2)
        ->Arg(4)
        ->Arg(64)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS})
    benchmark::RegisterBenchmark(("MatmulOneThread/" + std::string(dtype_name(t))).c_str(), matmul_benchmark, t, true)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  for (DType t :
       {DType::F16,   DType::BF16,    DType::Q8_0,   DType::Q4_0,   DType::Q4_K,  DType::Q5_K,    DType::Q6_K,
        DType::Q2_K,  DType::Q3_K,    DType::IQ4_XS, DType::IQ4_NL, DType::TQ2_0, DType::IQ2_XXS, DType::IQ2_XS,
        DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,  DType::IQ1_S,  DType::IQ1_M, DType::MXFP4})
    benchmark::RegisterBenchmark(("MatmulFromMemory/" + std::string(dtype_name(t))).c_str(),
                                 matmul_from_memory_benchmark, t)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::IQ4_XS})
    benchmark::RegisterBenchmark(("MatmulChain/" + std::string(dtype_name(t))).c_str(), matmul_chain_benchmark, t)
        ->Arg(256)
        ->Arg(1024)
        ->Arg(4096)
        ->Arg(16384)
        ->Arg(65536)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (DType t : {DType::Q4_K, DType::Q8_0})
    benchmark::RegisterBenchmark(("ExpertBatch/" + std::string(dtype_name(t))).c_str(), expert_batch_benchmark, t)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
#if defined(__x86_64__)
  benchmark::RegisterBenchmark("StreamAtDensity/1", stream_at_density_benchmark<1>)->UseRealTime();
  benchmark::RegisterBenchmark("StreamAtDensity/2", stream_at_density_benchmark<2>)->UseRealTime();
  benchmark::RegisterBenchmark("StreamAtDensity/3", stream_at_density_benchmark<3>)->UseRealTime();
  benchmark::RegisterBenchmark("StreamAtDensity/4", stream_at_density_benchmark<4>)->UseRealTime();
  benchmark::RegisterBenchmark("StreamAtDensity/6", stream_at_density_benchmark<6>)->UseRealTime();
#endif
  for (DType t : {DType::F32, DType::F16, DType::Q8_0})
    benchmark::RegisterBenchmark(("KvRows/" + std::string(dtype_name(t))).c_str(), kv_attention_row_benchmark, t)
        ->Arg(4096)
        ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("VisionAttention", vision_attention_benchmark)
      ->Arg(1024)
      ->Arg(3520)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace autoglm

int main(int argc, char** argv) {
  // AUTOGLM_CPU_ISA=avx2 (etc.) measures a narrower kernel set, as the CLI does.
  if (const char* isa = std::getenv("AUTOGLM_CPU_ISA"); isa && !autoglm::cpu::select_kernel_isa(isa)) {
    std::fprintf(stderr, "error: AUTOGLM_CPU_ISA=%s is not a kernel set this CPU runs\n", isa);
    return 1;
  }
  // AUTOGLM_LATTICE_GATHERS=1|0 forces the lattice decode kernels' entries by gathers or scalar loads.
  if (const char* gathers = std::getenv("AUTOGLM_LATTICE_GATHERS"))
    autoglm::cpu::set_lattice_gathers(gathers[0] == '1' ? autoglm::cpu::LatticeGathers::kOn
                                                        : autoglm::cpu::LatticeGathers::kOff);
  // AUTOGLM_LATTICE_PERMUTES=0|off turns IQ2_XXS's and IQ3_XXS's entries by byte permutes off.
  if (const char* permutes = std::getenv("AUTOGLM_LATTICE_PERMUTES");
      permutes && (std::string_view(permutes) == "0" || std::string_view(permutes) == "off"))
    autoglm::cpu::set_lattice_permutes(autoglm::cpu::LatticePermutes::kOff);
  std::fprintf(stderr, "kernels: %s, lattice entries by %s%s\n", autoglm::cpu::kernel_isa(),
               autoglm::cpu::lattice_gathers() ? "gathers" : "scalar loads",
               autoglm::cpu::lattice_permutes() ? " (IQ2_XXS, IQ3_XXS by byte permutes on the AVX-512 set)" : "");
  benchmark::Initialize(&argc, argv);
  autoglm::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
