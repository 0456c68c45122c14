// Kernels against the reference: quantization round trips for every weight type,
// the matmul of every type and ISA against a double-precision dot product, and the small ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "core/cpu_features.h"
#include "core/half.h"
#include "kernels/cpu/element_ops.h"
#include "kernels/cpu/lattice_format.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/iq_grids.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/q8_activations.h"
#include "kernels/ref/quants.h"

namespace autoglm {

// For gtest's "GetParam() = ...": found by argument-dependent lookup, so in DType's namespace.
void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}

namespace {

const DType kTypes[] = {DType::F32,    DType::F16,     DType::BF16,  DType::Q8_0,    DType::Q4_0,
                        DType::Q4_1,   DType::Q5_0,    DType::Q5_1,  DType::Q4_K,    DType::Q5_K,
                        DType::Q6_K,   DType::MXFP4,   DType::Q2_K,  DType::Q3_K,    DType::IQ4_NL,
                        DType::IQ4_XS, DType::TQ1_0,   DType::TQ2_0, DType::IQ2_XXS, DType::IQ2_XS,
                        DType::IQ2_S,  DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,   DType::IQ1_M};

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Worst relative error each format may show after a round trip (rms error / rms value).
double tolerance(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1e-3;
    case DType::BF16: return 8e-3;
    case DType::Q8_0: return 0.01;
    case DType::Q6_K: return 0.04;
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K: return 0.07;
    case DType::Q3_K: return 0.16;
    case DType::Q2_K: return 0.29;
    case DType::IQ3_S: return 0.2;
    case DType::IQ3_XXS: return 0.24;
    case DType::IQ2_S:
    case DType::IQ2_XS:
    case DType::IQ2_XXS: return 0.4;
    case DType::IQ1_S:
    case DType::IQ1_M: return 0.58;
    case DType::TQ1_0:
    case DType::TQ2_0: return 1e-3;  // of ternary values (fp16 rounding of the scale)
    default: return 0.14;            // 4-bit formats
  }
}

bool is_ternary(DType t) {
  return t == DType::TQ1_0 || t == DType::TQ2_0;
}

// Gaussian values, or for the ternary types values of {-a, 0, a}: what those types are made for.
std::vector<float> round_trip_input(DType t, size_t n, uint32_t seed) {
  auto x = random_values(n, seed);
  if (is_ternary(t))
    for (auto& v : x) v = v > 0.5f ? 0.3f : v < -0.5f ? -0.3f : 0.0f;
  return x;
}

// A random [rows, cols] matrix encoded in type t.
struct EncodedMatrix {
  EncodedMatrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
    const auto w = random_values(size_t(rows * cols), seed, 0.1f);
    const int64_t row_bytes = dtype_row_bytes(t, cols);
    bytes.resize(size_t(row_bytes * rows));
    for (int64_t r = 0; r < rows; ++r) ref::quantize_row(t, &w[size_t(r * cols)], bytes.data() + r * row_bytes, cols);
    matrix = cpu::WeightMatrix{t, bytes.data(), rows, cols, row_bytes};
  }
  std::vector<uint8_t> bytes;
  cpu::WeightMatrix matrix;
};

class EveryType : public ::testing::TestWithParam<DType> {};

TEST_P(EveryType, QuantizeDequantizeRoundTrip) {
  const DType t = GetParam();
  const int64_t n = 512;
  const auto x = round_trip_input(t, size_t(n), 7);
  std::vector<uint8_t> q(size_t(dtype_row_bytes(t, n)));
  ref::quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  ref::dequantize_row(t, q.data(), y.data(), n);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (x[size_t(i)] - y[size_t(i)]) * (x[size_t(i)] - y[size_t(i)]);
    norm += x[size_t(i)] * x[size_t(i)];
  }
  EXPECT_LE(std::sqrt(err / norm), tolerance(t)) << dtype_name(t);
  if (t != DType::F32 && !is_ternary(t)) {
    EXPECT_GT(err, 0) << "a lossy format reproduced its input exactly: suspicious";
  }
}

// Every layout and runnable ISA, 1 and 3 threads, against the double-precision reference dot.
void expect_matmul_matches_reference(DType t, int64_t rows, int64_t tokens, int64_t cols = 512) {
  const EncodedMatrix enc(t, rows, cols, 11);
  const cpu::WeightMatrix& m = enc.matrix;
  const int64_t row_bytes = m.row_bytes;
  const std::vector<uint8_t>& q = enc.bytes;
  const auto x = random_values(size_t(tokens * cols), 13);
  std::vector<float> x_seen(x.size());
  // Packed (interleaved) weights where the type has them, and the plain rows.
  ThreadPool packer(2);
  cpu::WeightMatrix packed = m;
  cpu::PackedBuffer buffer;
  if (cpu::packable(t)) buffer = cpu::pack_matrix(packer, packed);
  for (const cpu::WeightMatrix* layout : {&m, static_cast<const cpu::WeightMatrix*>(&packed)}) {
    for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
      if (!cpu::select_kernel_isa(isa)) continue;  // not runnable on this CPU
      // Types with integer kernels see the activations as int8 blocks, BF16 weights as BF16 where
      // the set has AVX512-BF16 (the default): the oracle uses the values this set's kernels see.
      cpu::activations_as_seen(t, x.data(), tokens, cols, x_seen.data());
      std::vector<float> single_threaded;
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        // Past the results, a guard the kernels must not write (masked stores of short groups).
        constexpr float kGuard = -12345.5f;
        std::vector<float> y(static_cast<size_t>(rows * tokens + 64), kGuard);
        cpu::matmul(pool, *layout, x.data(), tokens, y.data());
        EXPECT_TRUE(std::all_of(y.begin() + rows * tokens, y.end(), [](float v) { return v == kGuard; }))
            << dtype_name(t) << " " << isa << ": a kernel wrote past the last row of the last token";
        if (threads == 1) single_threaded = y;
        EXPECT_EQ(y, single_threaded) << dtype_name(t) << " " << isa << ": threads changed the result";
        for (int64_t tk = 0; tk < tokens; ++tk)
          for (int64_t r = 0; r < rows; ++r) {
            const double want = ref::dot(t, q.data() + r * row_bytes, &x_seen[size_t(tk * cols)], cols);
            EXPECT_NEAR(y[size_t(tk * rows + r)], want, 1e-4 * (1 + std::fabs(want)))
                << dtype_name(t) << " " << isa << (layout->packed ? " packed" : "") << " row " << r << " token " << tk
                << " threads " << threads;
          }
      }
    }
  }
  EXPECT_TRUE(cpu::select_kernel_isa("generic"));
  cpu::select_kernel_isa("avx2");
}

// 37 rows: a lone last group of 5 rows; 41 rows: a last pair of groups with 9 rows; 61 rows, one
// thread: four groups in one register block (AVX-512 float kernels), the last of 5 rows. 69 and
// 70 tokens: more than one token tile of 64 (integer kernels; 72 for the AVX-512 float ones: 12 +
// 12 + 12 + 12 + 12 + 4 + 4 + 1 and ... + 2), then 5 (4 + 1) and 6 (4 + 2); 72 and 13 tokens over
// 61 rows: blocks of 12, 6, 4, 2 and 1. Every register block size is reached.
TEST_P(EveryType, MatmulMatchesReferenceDot) {
  expect_matmul_matches_reference(GetParam(), 37, 69);
  expect_matmul_matches_reference(GetParam(), 41, 70);
  expect_matmul_matches_reference(GetParam(), 61, 72);
  expect_matmul_matches_reference(GetParam(), 61, 13);
  // One token (decode): 61 rows are eight groups, the last of 5 rows, four at a time in the float
  // kernels with one thread and also in pairs with three; 37 rows end on a lone group.
  expect_matmul_matches_reference(GetParam(), 61, 1);
  expect_matmul_matches_reference(GetParam(), 37, 1);
  expect_matmul_matches_reference(GetParam(), 37, 2);  // two tokens: decode kernels where a type has them
}

// Float weights take any even width: 200 columns end 8 past a multiple of 16, the tail of the
// AVX-512 kernels' k-major copy of the activations (vectorised 16 columns at a time).
TEST(Matmul, FloatWidthsPastAMultipleOfSixteen) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) expect_matmul_matches_reference(t, 37, 13, 200);
}

// A token's result must not depend on the other tokens of the batch (serving relies on it), on
// any kernel set: one, two and four tokens (the decode kernels) against thirteen (the prefill ones'
// register blocks of eight, four and one, or of four, two and one); the lattice types' decode
// kernels with their entries gathered and loaded one by one.
void expect_batched_rows_equal_single_rows(DType t) {
  // 37 rows: units of four groups and a lone last one, for one token and for a batch.
  const int64_t rows = 37, cols = 256, tokens = 13;
  const EncodedMatrix enc(t, rows, cols, 3);
  cpu::WeightMatrix m = enc.matrix;
  const auto x = random_values(size_t(tokens * cols), 4);
  ThreadPool pool(2);
  cpu::PackedBuffer buffer;
  if (cpu::packable(t)) buffer = cpu::pack_matrix(pool, m);
  const std::string best = cpu::kernel_isa();
  for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
    if (!cpu::select_kernel_isa(isa)) continue;
    std::vector<float> batched(static_cast<size_t>(rows * tokens)), few(static_cast<size_t>(rows * 4));
    cpu::matmul(pool, m, x.data(), tokens, batched.data());
    for (const auto permutes : {cpu::LatticePermutes::kAuto, cpu::LatticePermutes::kOff})
      for (const auto gathers : {cpu::LatticeGathers::kOn, cpu::LatticeGathers::kOff}) {
        cpu::set_lattice_permutes(permutes);
        cpu::set_lattice_gathers(gathers);
        std::string how = gathers == cpu::LatticeGathers::kOn ? " gathers" : " scalar loads";
        if (cpu::lattice_permutes() && std::string(isa) == "avx512vnni") how += ", IQ2_XXS and IQ3_XXS by permutes";
        for (int64_t tk = 0; tk < tokens; ++tk)
          for (int64_t n : {1, 2, 3, 4}) {
            if (tk + n > tokens) continue;
            cpu::matmul(pool, m, &x[size_t(tk * cols)], n, few.data());
            for (int64_t i = 0; i < n; ++i)
              for (int64_t r = 0; r < rows; ++r)
                EXPECT_EQ(few[size_t(i * rows + r)], batched[size_t((tk + i) * rows + r)])
                    << dtype_name(t) << " " << isa << how << " token " << tk + i << " of " << n << ", row " << r;
          }
      }
    cpu::set_lattice_gathers(cpu::LatticeGathers::kAuto);
    cpu::set_lattice_permutes(cpu::LatticePermutes::kAuto);
  }
  cpu::select_kernel_isa(best.c_str());
}

// A model's packed matrices share one buffer, packed_room apart; a buffer of a huge page or more
// starts on a huge-page boundary, so that transparent huge pages can back all of it.
TEST(Packed, MatricesShareOneBufferThatStartsOnAHugePage) {
  const cpu::PackedBuffer small = cpu::allocate_packed(1000);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % 64, 0u);
  const EncodedMatrix a(DType::Q4_K, 9, 512, 21), b(DType::Q6_K, 17, 256, 22);
  cpu::WeightMatrix alone[2] = {a.matrix, b.matrix}, shared[2] = {a.matrix, b.matrix};
  ThreadPool pool(2);
  const cpu::PackedBuffer own[2] = {cpu::pack_matrix(pool, alone[0]), cpu::pack_matrix(pool, alone[1])};
  EXPECT_EQ(cpu::packed_room(shared[0]) % 64, 0);
  EXPECT_GE(cpu::packed_room(shared[0]), cpu::packed_bytes(shared[0]));
  const cpu::PackedBuffer huge = cpu::allocate_packed(size_t(3) << 20);  // past a huge page
  ASSERT_NE(huge, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.get()) % (size_t(2) << 20), 0u);
  std::memset(huge.get(), 1, size_t(3) << 20);  // all of it writable (under ASan: all of it allocated)
  std::vector<size_t> done;
  const cpu::PackedBuffer arena =
      cpu::pack_matrices(pool, {&shared[0], &shared[1]}, [&](size_t i) { done.push_back(i); });
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(done, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(shared[0].packed, arena.get());
  EXPECT_EQ(shared[1].packed, shared[0].packed + cpu::packed_room(shared[0]));
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(std::memcmp(shared[i].packed, alone[i].packed, size_t(cpu::packed_bytes(alone[i]))), 0) << i;
    const auto x = random_values(size_t(2 * shared[i].cols), 23);
    std::vector<float> want(size_t(2 * shared[i].rows)), got(want.size());
    cpu::matmul(pool, alone[i], x.data(), 2, want.data());
    cpu::matmul(pool, shared[i], x.data(), 2, got.data());
    EXPECT_EQ(want, got) << i;
  }
}

// Auto gathers exactly where the CPU's gathers are fast; on and off force either way.
TEST(LatticeGathers, AutoFollowsTheCpu) {
  cpu::set_lattice_gathers(cpu::LatticeGathers::kAuto);
  EXPECT_EQ(cpu::lattice_gathers(), cpu_features().fast_gathers) << cpu_features_string();
  cpu::set_lattice_gathers(cpu::LatticeGathers::kOn);
  EXPECT_TRUE(cpu::lattice_gathers());
  cpu::set_lattice_gathers(cpu::LatticeGathers::kOff);
  EXPECT_FALSE(cpu::lattice_gathers());
  cpu::set_lattice_gathers(cpu::LatticeGathers::kAuto);
}

// Permutes run by default exactly where the CPU has AVX512-VBMI and GFNI; off turns them off.
TEST(LatticePermutes, AutoFollowsTheCpu) {
  cpu::set_lattice_permutes(cpu::LatticePermutes::kAuto);
  EXPECT_EQ(cpu::lattice_permutes(), cpu_features().avx512vbmi && cpu_features().gfni) << cpu_features_string();
  cpu::set_lattice_permutes(cpu::LatticePermutes::kOff);
  EXPECT_FALSE(cpu::lattice_permutes());
  cpu::set_lattice_permutes(cpu::LatticePermutes::kAuto);
}

// vgf2p8affineqb as the Intel manual defines it: bit i of the result is the parity of the input
// byte and byte 7 - i of the matrix, xor bit i of the constant.
uint8_t gf2_affine(uint8_t x, uint64_t matrix, uint8_t constant) {
  uint8_t out = 0;
  for (int i = 0; i < 8; ++i) {
    const auto row = uint8_t(matrix >> (8 * (7 - i)));
    out = uint8_t(out | ((std::popcount(unsigned(row & x)) & 1) << i));
  }
  return uint8_t(out ^ constant);
}

// The permute kernels' steps in scalar code, from the instructions' definitions: a chunk of 64
// index bytes looked up in both code tables, each half's lanes placed (vpermt2b: bit 6 of a control
// byte picks the high codes), value j's byte taken from lane bits shift[k] on (vpmultishiftqb:
// 8 bits, wrapping within the lane), then the magnitude (IQ2_XXS: the affine map; IQ3_XXS: vpermb,
// a byte's low 6 bits). Row r of group k of half h must be the grid's entry for that group and row
// of the packed layout (indexes [group][row][index]), for random chunks of indexes.
template <class Entry, size_t kEntries>
void expect_grid_codes_give_the_grid(DType t, const cpu::GridCodes& codes, const Entry (&grid)[kEntries]) {
  constexpr int kValues = int(sizeof(Entry)), kIndexes = 8 / kValues;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t at[64], lows[64], highs[64];
    for (int i = 0; i < 64; ++i) {
      at[i] = uint8_t(trial < 4 ? 64 * trial + i : rng());  // every index in the first four
      lows[i] = codes.low[at[i]];
      highs[i] = codes.high[at[i]];
    }
    for (int h = 0; h < 2; ++h)
      for (int r = 0; r < 8; ++r) {
        uint64_t lane = 0;
        for (int b = 0; b < 8; ++b) {
          const uint8_t control = codes.place[h][8 * r + b];
          lane |= uint64_t(control & 64 ? highs[control & 63] : lows[control & 63]) << (8 * b);
        }
        for (int k = 0; k < codes.groups_per_lane; ++k) {
          const int gk = codes.groups_per_lane * h + k;
          for (int j = 0; j < 8; ++j) {
            const auto byte = uint8_t(std::rotr(lane, codes.shift[k][8 * r + j] & 63));
            const uint8_t got = t == DType::IQ2_XXS
                                    ? gf2_affine(byte, cpu::kIq2XxsMagnitudeMatrix, cpu::kIq2XxsMagnitudeConstant)
                                    : codes.magnitude[byte & 63];
            const uint8_t index = at[8 * kIndexes * gk + kIndexes * r + j / kValues];
            const auto want = uint8_t(uint64_t(grid[index]) >> (8 * (j % kValues)));
            ASSERT_EQ(got, want) << dtype_name(t) << " trial " << trial << " half " << h << " row " << r << " group "
                                 << k << " value " << j;
          }
        }
      }
  }
}

TEST(LatticePermutes, GridCodesGiveTheGrid) {
  expect_grid_codes_give_the_grid(DType::IQ2_XXS, cpu::kIq2XxsCodes, iq_grids::kIq2XxsGrid);
  expect_grid_codes_give_the_grid(DType::IQ3_XXS, cpu::kIq3XxsCodes, iq_grids::kIq3XxsGrid);
}

TEST_P(EveryType, BatchedRowsEqualSingleRows) {
  expect_batched_rows_equal_single_rows(GetParam());
}

// Row groups may be handled in pairs (the AVX-512 kernels put two groups in one register) or
// alone (an odd group at the end of a thread's range): the rows' results must not change.
void expect_groups_paired_or_alone_equal(DType t) {
  const int64_t cols = 256;
  const EncodedMatrix enc(t, 16, cols, 5);
  cpu::WeightMatrix pair = enc.matrix, alone = enc.matrix;
  alone.rows = 8;  // the same first group, now the matrix's only one
  ThreadPool pool(1);
  cpu::PackedBuffer pair_buffer, alone_buffer;
  if (cpu::packable(t)) pair_buffer = cpu::pack_matrix(pool, pair), alone_buffer = cpu::pack_matrix(pool, alone);
  // 1 and 2 tokens: the decode forms (in pairs where the CPU decodes in pairs); 7: the register blocks.
  for (const int64_t tokens : {int64_t(1), int64_t(2), int64_t(7)}) {
    const auto x = random_values(size_t(tokens * cols), 6);
    for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
      if (!cpu::select_kernel_isa(isa)) continue;
      std::vector<float> y_pair(size_t(16 * tokens)), y_alone(size_t(8 * tokens));
      cpu::matmul(pool, pair, x.data(), tokens, y_pair.data());
      cpu::matmul(pool, alone, x.data(), tokens, y_alone.data());
      for (int64_t tk = 0; tk < tokens; ++tk)
        for (int64_t r = 0; r < 8; ++r)
          EXPECT_EQ(y_pair[size_t(tk * 16 + r)], y_alone[size_t(tk * 8 + r)])
              << dtype_name(t) << " " << isa << ", " << tokens << " tokens: token " << tk << " row " << r;
    }
  }
  cpu::select_kernel_isa("avx2");
}

TEST_P(EveryType, RowGroupsGiveTheSameResultsPairedOrAlone) {
  expect_groups_paired_or_alone_equal(GetParam());
}

// BF16 weights with activations rounded to BF16 (--bf16-activations on): what the kernels
// see is the rounding, every ISA (vdpbf16ps where the CPU has AVX512-BF16) matches the reference
// dot over it, and the batch and pairing rules hold.
TEST(Bf16Activations, RoundedActivationsMatchTheReferenceOnEveryIsa) {
  cpu::set_bf16_activations(cpu::Bf16Activations::kOn);
  const auto x = random_values(64, 21);
  std::vector<float> seen(x.size());
  cpu::activations_as_seen(DType::BF16, x.data(), 1, 64, seen.data());
  int changed = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(seen[i], bf16_to_float(float_to_bf16(x[i]))) << i;
    changed += seen[i] != x[i];
  }
  EXPECT_GT(changed, 32) << "the activations were not rounded";
  expect_matmul_matches_reference(DType::BF16, 37, 69);
  expect_matmul_matches_reference(DType::BF16, 41, 70);
  expect_batched_rows_equal_single_rows(DType::BF16);
  expect_groups_paired_or_alone_equal(DType::BF16);
  cpu::set_bf16_activations(cpu::Bf16Activations::kOff);
  cpu::activations_as_seen(DType::BF16, x.data(), 1, 64, seen.data());
  EXPECT_EQ(seen, x) << "off: float activations";
  cpu::set_bf16_activations(cpu::Bf16Activations::kAuto);
}

// The default (auto) rounds BF16 weights' activations exactly where the kernel set in use has
// the BF16 dot-product instructions: the AVX-512 set on a CPU with AVX512-BF16, never AVX2.
TEST(Bf16Activations, AutoRoundsWhereTheKernelSetHasBf16Dot) {
  const std::string isa = cpu::kernel_isa();
  cpu::set_bf16_activations(cpu::Bf16Activations::kAuto);
  for (const char* set : {"avx512vnni", "avxvnni", "avx2", "generic"}) {
    if (!cpu::select_kernel_isa(set)) continue;
    const bool hardware = std::string(set) == "avx512vnni" && cpu_features().avx512bf16;
    EXPECT_EQ(cpu::kernel_isa_has_bf16_dot(), hardware) << set;
    EXPECT_EQ(cpu::bf16_activations(), hardware) << set;
    EXPECT_EQ(cpu::activation_format(DType::BF16),
              hardware ? cpu::ActivationFormat::kBf16Floats : cpu::ActivationFormat::kFloat)
        << set;
    cpu::set_bf16_activations(cpu::Bf16Activations::kOff);
    EXPECT_FALSE(cpu::bf16_activations()) << set << ": off keeps floats";
    cpu::set_bf16_activations(cpu::Bf16Activations::kOn);
    EXPECT_TRUE(cpu::bf16_activations()) << set << ": on rounds on every set";
    cpu::set_bf16_activations(cpu::Bf16Activations::kAuto);
  }
  ASSERT_TRUE(cpu::select_kernel_isa(isa.c_str()));
}

INSTANTIATE_TEST_SUITE_P(Kernels, EveryType, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Hand-decoded blocks: the layouts, not just self-consistency.
TEST(Q8Activations, RoundTripWithinHalfAStep) {
  const auto x = random_values(256, 21);
  std::vector<Q8Block> b(8);
  ref::quantize_activations_q8(x.data(), 256, b.data());
  std::vector<float> y(256);
  ref::dequantize_activations_q8(b.data(), 256, y.data());
  for (size_t i = 0; i < 256; ++i) EXPECT_LE(std::fabs(x[i] - y[i]), 0.5f * b[i / 32].d + 1e-7f);
  for (const auto& blk : b)
    EXPECT_EQ(*std::max_element(blk.q, blk.q + 32, [](int8_t p, int8_t q) { return std::abs(p) < std::abs(q); }) != 0,
              true);
}

// Every ISA's activation quantizers give ref's blocks bit for bit: random values, exact ties
// (x * id landing on k + 0.5: round to even), an all-zero block and values at the clamp.
TEST(Q8Activations, EveryIsaMatchesTheReference) {
  auto x = random_values(1024, 22);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;  // block 0: zeros
  x[32] = 127.0f;  // block 1: amax 127, so d = 1 and the rest are exact ties at k + 0.5 (round to even)
  for (int i = 33; i < 64; ++i) x[size_t(i)] = float(i - 48) + 0.5f;
  for (int i = 64; i < 96; ++i) x[size_t(i)] = (i % 2 ? 1.0f : -1.0f) * 3e4f;  // block 2: every value at +-amax
  std::vector<Q8Block> want(32), got(32);
  std::vector<Q8KBlock> want_k(4), got_k(4);
  ref::quantize_activations_q8(x.data(), 1024, want.data());
  ref::quantize_activations_q8k(x.data(), 1024, want_k.data());
  int tested = 0;
  for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
    if (!cpu::select_kernel_isa(isa)) continue;
    ++tested;
    cpu::element_ops().quantize_q8(x.data(), 1024, got.data());
    cpu::element_ops().quantize_q8k(x.data(), 1024, got_k.data());
    for (size_t b = 0; b < want.size(); ++b)
      EXPECT_EQ(0, std::memcmp(&want[b], &got[b], sizeof(Q8Block))) << isa << " block " << b;
    for (size_t b = 0; b < want_k.size(); ++b)
      EXPECT_EQ(0, std::memcmp(&want_k[b], &got_k[b], sizeof(Q8KBlock))) << isa << " k-block " << b;
  }
  EXPECT_GE(tested, 1);
  cpu::select_kernel_isa("avx2");
}

TEST(Dequantize, Q4_0BlockLayout) {
  uint8_t block[18] = {};
  const uint16_t d = float_to_fp16(0.5f);
  std::memcpy(block, &d, 2);
  block[2] = 0x9f;  // element 0: low nibble 15 -> (15-8)*0.5; element 16: high nibble 9 -> (9-8)*0.5
  float y[32];
  ref::dequantize_row(DType::Q4_0, block, y, 32);
  EXPECT_FLOAT_EQ(y[0], 3.5f);
  EXPECT_FLOAT_EQ(y[16], 0.5f);
  EXPECT_FLOAT_EQ(y[1], -4.0f);
}

TEST(Dequantize, Q5_0UsesTheFifthBit) {
  uint8_t block[22] = {};
  const uint16_t d = float_to_fp16(1.0f);
  std::memcpy(block, &d, 2);
  const uint32_t qh = (1u << 0) | (1u << 16);  // fifth bit of element 0 and element 16
  std::memcpy(block + 2, &qh, 4);
  float y[32];
  ref::dequantize_row(DType::Q5_0, block, y, 32);
  EXPECT_FLOAT_EQ(y[0], 0.0f);    // 16 - 16
  EXPECT_FLOAT_EQ(y[16], 0.0f);   // 16 - 16
  EXPECT_FLOAT_EQ(y[1], -16.0f);  // 0 - 16
}

TEST(Dequantize, Q6_KSignedScales) {
  uint8_t block[210] = {};
  const uint16_t d = float_to_fp16(1.0f);
  std::memcpy(block + 208, &d, 2);
  reinterpret_cast<int8_t*>(block + 192)[0] = -2;  // scale of elements 0..15
  block[0] = 0x01;                                 // element 0: q = 1 -> (1 - 32) * -2
  float y[256];
  ref::dequantize_row(DType::Q6_K, block, y, 256);
  EXPECT_FLOAT_EQ(y[0], 62.0f);
  EXPECT_FLOAT_EQ(y[1], 64.0f);
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = float_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Q2_K: bit pair s of code byte l (of a 32-byte half) is element 32 s + l (+ 128 for the second
// half), in runs of 16 with a scale byte each (low nibble scale, high nibble min).
TEST(Dequantize, Q2_KElementOrderAndMins) {
  uint8_t block[84] = {};
  put_half(block + 80, 1.0f);  // d
  put_half(block + 82, 0.5f);  // dmin
  block[16 + 17] = 0b11 << 2;  // byte 17 of the first half, bit pair 1: element 32 + 17 = 49
  block[3] = 0x21;             // run 3 (elements 48..63): scale 1, min 2
  float y[256];
  ref::dequantize_row(DType::Q2_K, block, y, 256);
  EXPECT_FLOAT_EQ(y[49], 3.0f * 1 - 0.5f * 2);
  EXPECT_FLOAT_EQ(y[48], -1.0f);  // code 0, same run
  EXPECT_FLOAT_EQ(y[17], 0.0f);   // run 1: scale and min 0
}

// Q3_K: scale j's low 4 bits in byte j % 8 (high nibble from j = 8), high 2 bits in bytes 8..11;
// the codes laid out as Q2_K's; high-mask bit (half * 4 + pair) of byte 16 run + l: clear
// subtracts 4.
TEST(Dequantize, Q3_KScalesAndHighMask) {
  uint8_t block[110] = {};
  put_half(block + 108, 1.0f);
  uint8_t* scales = block + 96;
  scales[9 - 8] = 0x30;            // scale 9 (second half, pair 0, run 1: elements 144..159): low bits 3
  scales[8 + 1] = 0b10 << 4;       // its high bits 2 (bit pair 2 of byte 9): 3 + 32 - 32 = 3
  block[32 + 32 + 16 + 4] = 0b01;  // element 148: code 1
  block[16 + 4] = 1 << 4;          // its high-mask bit (second half, pair 0): set, no -4
  float y[256];
  ref::dequantize_row(DType::Q3_K, block, y, 256);
  EXPECT_FLOAT_EQ(y[148], 3.0f * 1);
  EXPECT_FLOAT_EQ(y[149], 3.0f * -4);  // code 0, mask bit clear
  EXPECT_FLOAT_EQ(y[0], -32.0f * -4);  // scale 0 is 0 - 32
}

// IQ4_XS: run r's 6-bit scale from nibble r of the low bytes and bit pair r of the high word
// (offset 32), codes through the IQ4 codebook.
TEST(Dequantize, Iq4XsScaleBitsAndCodebook) {
  uint8_t block[136] = {};
  put_half(block, 0.5f);
  const uint16_t high = 0b10 << 6;  // run 3: high bits 2
  std::memcpy(block + 2, &high, 2);
  block[4 + 1] = 0x50;           // run 3: low bits 5 -> 37 - 32 = 5
  block[8 + 16 * 3 + 2] = 0xf0;  // run 3, byte 2: low code 0 (-127), high code 15 (113)
  float y[256];
  ref::dequantize_row(DType::IQ4_XS, block, y, 256);
  EXPECT_FLOAT_EQ(y[96 + 2], 0.5f * 5 * -127);
  EXPECT_FLOAT_EQ(y[96 + 18], 0.5f * 5 * 113);
}

// TQ1_0: five base-3 digits per byte as a fraction of 243 (digit n = top of (q * 3^n mod 256) * 3);
// TQ2_0: value = 2-bit code - 1.
TEST(Dequantize, TernaryTypes) {
  uint8_t tq1[54] = {};
  put_half(tq1 + 52, 2.0f);
  // Digits 2, 0, 1, 2, 2 (most significant first): 2*81 + 0*27 + 1*9 + 2*3 + 2 = 179, stored as
  // ceil(179 * 256 / 243), the fraction of 243 in 8 bits.
  tq1[5] = uint8_t((179 * 256 + 242) / 243);
  float y[256];
  ref::dequantize_row(DType::TQ1_0, tq1, y, 256);
  const float expected[5] = {2, -2, 0, 2, 2};  // (digit - 1) * d for digits 2, 0, 1, 2, 2
  for (int n = 0; n < 5; ++n) EXPECT_FLOAT_EQ(y[32 * n + 5], expected[n]) << "digit " << n;
  uint8_t tq2[66] = {};
  put_half(tq2 + 64, 1.0f);
  tq2[33] = 0b10 << 4;  // second half, byte 1, bit pair 2: element 128 + 64 + 1
  ref::dequantize_row(DType::TQ2_0, tq2, y, 256);
  EXPECT_FLOAT_EQ(y[193], 1.0f);
  EXPECT_FLOAT_EQ(y[192], -1.0f);
}

// IQ2_XXS: a run's grid index picks 8 lattice values; 7 stored sign bits get an eighth that
// makes their count even; the run's 4-bit scale s gives d * (0.5 + s) / 4.
TEST(Dequantize, Iq2XxsGridSignsAndScale) {
  uint8_t block[66] = {};
  put_half(block, 4.0f);
  const uint32_t words[2] = {0x00000500u, (3u << 28) | (0b0000001u << 7)};  // group 1: index 5; its signs 1
  std::memcpy(block + 2, words, 8);
  float y[256];
  ref::dequantize_row(DType::IQ2_XXS, block, y, 256);
  const uint64_t entry = iq_grids::kIq2XxsGrid[5];
  const float db = 4.0f * 3.5f * 0.25f;
  // signs 0b0000001 has one bit set: the parity bit (value 7) is set too.
  for (int j = 0; j < 8; ++j)
    EXPECT_FLOAT_EQ(y[8 + j], db * float(uint8_t(entry >> (8 * j))) * (j == 0 || j == 7 ? -1.0f : 1.0f)) << j;
  EXPECT_FLOAT_EQ(y[0], db * float(uint8_t(iq_grids::kIq2XxsGrid[0])));  // group 0: index 0, no signs
}

// Every type read is also written: create-model, quantize and export-lora take each.
TEST(Dequantize, EveryTypeReadIsWritten) {
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M,
                  DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::TQ1_0, DType::TQ2_0, DType::Q4_K}) {
    EXPECT_TRUE(ref::dtype_is_supported(t)) << dtype_name(t);
    EXPECT_TRUE(ref::dtype_can_quantize(t)) << dtype_name(t);
  }
}

// TQ1_0 packs five ternary digits per byte (four in its last 4 bytes): every combination of
// digits in every kind of byte comes back.
TEST(Quantize, Tq1EveryDigitCombinationRoundTrips) {
  constexpr int kBlocks = 24;  // 24 x 48 five-digit bytes >= 243 combinations, 24 x 4 >= 81
  std::vector<float> x(size_t(256 * kBlocks), 0.0f);
  auto put = [&](int block, int element, int combo, int digits, int n) {
    for (int p = digits - 1; p >= 0; --p, combo /= 3)
      if (p == n) x[size_t(256 * block + element)] = 0.5f * float(combo % 3 - 1);
  };
  for (int b = 0; b < kBlocks; ++b)
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) put(b, 32 * n + m, (48 * b + m) % 243, 5, n);
      for (int m = 0; m < 16; ++m) put(b, 160 + 16 * n + m, (48 * b + 32 + m) % 243, 5, n);
      if (n < 4)
        for (int m = 0; m < 4; ++m) put(b, 240 + 4 * n + m, (4 * b + m) % 81, 4, n);
    }
  for (int b = 0; b < kBlocks; ++b) x[size_t(256 * b)] = 0.5f;  // every block's scale is 0.5
  std::vector<uint8_t> q(size_t(dtype_row_bytes(DType::TQ1_0, int64_t(x.size()))));
  ref::quantize_row(DType::TQ1_0, x.data(), q.data(), int64_t(x.size()));
  std::vector<float> y(x.size());
  ref::dequantize_row(DType::TQ1_0, q.data(), y.data(), int64_t(x.size()));
  EXPECT_EQ(y, x);
}

// An importance weight per value (an imatrix) trades error on unimportant values for error on
// important ones: the weighted error falls against the unweighted encoding of the same values.
TEST(Quantize, ImportanceLowersTheWeightedError) {
  const int64_t n = 4096;
  const auto x = random_values(size_t(n), 31);
  std::vector<float> importance(static_cast<size_t>(n));
  std::mt19937 rng(5);
  std::normal_distribution<float> spread(0.0f, 2.0f);
  for (auto& w : importance) w = std::exp(spread(rng));
  auto weighted_error = [&](DType t, const float* weights) {
    std::vector<uint8_t> q(size_t(dtype_row_bytes(t, n)));
    ref::quantize_row(t, x.data(), q.data(), n, weights);
    std::vector<float> y(static_cast<size_t>(n));
    ref::dequantize_row(t, q.data(), y.data(), n);
    double e = 0;
    for (int64_t i = 0; i < n; ++i)
      e += importance[size_t(i)] * (x[size_t(i)] - y[size_t(i)]) * (x[size_t(i)] - y[size_t(i)]);
    return e;
  };
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    const double plain = weighted_error(t, nullptr), weighted = weighted_error(t, importance.data());
    EXPECT_LT(weighted, 0.95 * plain) << dtype_name(t);
  }
}

// MXFP4: value = doubled e2m1 table[code] * 2^(e - 128); low nibbles are elements 0..15.
TEST(Dequantize, Mxfp4BlockLayout) {
  uint8_t block[17] = {};
  block[0] = 127;    // 2^-1 times the doubled table: the e2m1 values themselves
  block[1] = 0xc7;   // element 0: code 7 -> 6.0; element 16: code 12 -> -2.0
  block[2] = 0x8f;   // element 1: code 15 -> -6.0; element 17: code 8 (-0) -> 0
  block[16] = 0x21;  // element 15: code 1 -> 0.5; element 31: code 2 -> 1.0
  float y[32];
  ref::dequantize_row(DType::MXFP4, block, y, 32);
  EXPECT_FLOAT_EQ(y[0], 6.0f);
  EXPECT_FLOAT_EQ(y[16], -2.0f);
  EXPECT_FLOAT_EQ(y[1], -6.0f);
  EXPECT_FLOAT_EQ(y[17], 0.0f);
  EXPECT_FLOAT_EQ(y[15], 0.5f);
  EXPECT_FLOAT_EQ(y[31], 1.0f);
  EXPECT_FLOAT_EQ(y[2], 0.0f);
  // The smallest exponents give subnormal scales, exactly.
  for (uint8_t e : {uint8_t(0), uint8_t(1)}) {
    block[0] = e;
    ref::dequantize_row(DType::MXFP4, block, y, 32);
    EXPECT_EQ(y[15], std::ldexp(1.0f, int(e) - 128)) << int(e);
    EXPECT_EQ(y[0], std::ldexp(12.0f, int(e) - 128)) << int(e);
  }
  block[0] = 254;
  ref::dequantize_row(DType::MXFP4, block, y, 32);
  EXPECT_EQ(y[15], std::ldexp(1.0f, 126));
}

// The exponent is llama.cpp's floor(log2(amax)) - 2, so its largest value 12 * 2^(e - 128) is 1.5x
// the power of two at or below amax (larger values clip), and codes are the nearest values.
TEST(Quantize, Mxfp4ExponentAndCodes) {
  float x[32] = {};
  x[0] = 3.9f;    // amax: floor(log2) = 1, e = 126, step 0.25, clipped to 12 * 0.25 = 3
  x[1] = -0.26f;  // nearest -0.25: code 9
  x[2] = 0.625f;  // tie between 0.5 and 0.75: the smaller magnitude (code 2)
  x[16] = -1.3f;  // nearest -1.5: code 13 (-6 * 0.25)
  uint8_t block[17];
  ref::quantize_row(DType::MXFP4, x, block, 32);
  EXPECT_EQ(block[0], 126);
  EXPECT_EQ(block[1], 0xd7);
  EXPECT_EQ(block[2] & 0x0f, 9);
  EXPECT_EQ(block[3] & 0x0f, 2);
  const float zeros[32] = {};
  ref::quantize_row(DType::MXFP4, zeros, block, 32);
  EXPECT_EQ(block[0], 0);
  float y[32];
  ref::dequantize_row(DType::MXFP4, block, y, 32);
  EXPECT_TRUE(std::all_of(y, y + 32, [](float v) { return v == 0.0f; }));
}

// Weights and activations far from 1 (subnormal and huge scales) through every kernel set.
TEST(Matmul, Mxfp4ExtremeScalesOnEveryIsa) {
  for (float scale : {2e-38f, 1e30f}) {  // exponents 1 (a subnormal scale) and 226
    const int64_t rows = 9, cols = 64, tokens = 5;
    const auto w = random_values(size_t(rows * cols), 31, scale);
    const int64_t row_bytes = dtype_row_bytes(DType::MXFP4, cols);
    std::vector<uint8_t> q(size_t(row_bytes * rows));
    for (int64_t r = 0; r < rows; ++r)
      ref::quantize_row(DType::MXFP4, &w[size_t(r * cols)], &q[size_t(r * row_bytes)], cols);
    const cpu::WeightMatrix m{DType::MXFP4, q.data(), rows, cols, row_bytes};
    cpu::WeightMatrix packed = m;
    ThreadPool pool(1);
    const cpu::PackedBuffer buffer = cpu::pack_matrix(pool, packed);
    const auto x = random_values(size_t(tokens * cols), 32);
    std::vector<float> seen(x.size()), y(size_t(rows * tokens));
    for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"})
      for (const cpu::WeightMatrix* layout : {&m, static_cast<const cpu::WeightMatrix*>(&packed)}) {
        if (!cpu::select_kernel_isa(isa)) continue;
        cpu::activations_as_seen(DType::MXFP4, x.data(), tokens, cols, seen.data());
        cpu::matmul(pool, *layout, x.data(), tokens, y.data());
        for (int64_t tk = 0; tk < tokens; ++tk)
          for (int64_t r = 0; r < rows; ++r) {
            const double want = ref::dot(DType::MXFP4, &q[size_t(r * row_bytes)], &seen[size_t(tk * cols)], cols);
            EXPECT_NEAR(y[size_t(tk * rows + r)], want, 1e-4 * (std::fabs(want) + scale))
                << isa << (layout->packed ? " packed" : "") << " scale " << scale;
          }
      }
  }
  cpu::select_kernel_isa("avx2");
}

TEST(Ops, RmsNorm) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 1};
  float y[4];
  cpu::rmsnorm(x, w, 0.0f, 4, y);
  const float inv = 1.0f / std::sqrt(7.5f);
  EXPECT_NEAR(y[0], inv, 1e-6);
  EXPECT_NEAR(y[2], 6 * inv, 1e-6);
}

TEST(Ops, AddRmsNormIsTheAddThenTheNorm) {
  float x[4] = {1, 2, 3, 4};
  const float delta[4] = {0.5f, -1, 2, 0}, w[4] = {1, 2, 1, 0.5f};
  float sum[4], want[4], got[4];
  for (int i = 0; i < 4; ++i) sum[i] = x[i] + delta[i];
  cpu::rmsnorm(sum, w, 1e-5f, 4, want);
  cpu::add_rmsnorm(x, delta, w, 1e-5f, 4, got);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(x[i], sum[i]);
    EXPECT_EQ(got[i], want[i]);
  }
}

TEST(Ops, RopeStylesPairDifferentDims) {
  float a[4] = {1, 0, 0, 0}, b[4] = {1, 0, 0, 0};
  const double inv[2] = {1.0, 0.01};  // 10000^(-2i/4)
  cpu::rope(a, 1, 4, 4, 1.0f, inv, cpu::RopeStyle::kAdjacentPairs);
  cpu::rope(b, 1, 4, 4, 1.0f, inv, cpu::RopeStyle::kNeox);
  EXPECT_NEAR(a[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(a[1], std::sin(1.0f), 1e-6);  // partner of dim 0 is dim 1
  EXPECT_NEAR(b[2], std::sin(1.0f), 1e-6);  // partner of dim 0 is dim 2
  EXPECT_NEAR(b[1], 0.0f, 1e-6);
}

TEST(Ops, PartialRopeLeavesTheRestAlone) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const double inv[2] = {1.0, 0.01};
  cpu::rope(x, 1, 8, 4, 3.0f, inv, cpu::RopeStyle::kAdjacentPairs);
  EXPECT_FLOAT_EQ(x[4], 5);
  EXPECT_FLOAT_EQ(x[7], 8);
  EXPECT_NE(x[0], 1);
}

// The attention's per-chunk maximum: every ISA's vector max is the scalar one, over lengths
// below, at and past a vector, with the largest value in a tail or a leading lane.
TEST(Ops, MaxOfEveryIsaIsTheLargest) {
  const auto x = random_values(40, 21);
  for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
    if (!cpu::select_kernel_isa(isa)) continue;
    EXPECT_EQ(cpu::element_ops().max(x.data(), 0), -std::numeric_limits<float>::infinity()) << isa;
    for (int64_t n : {1, 7, 8, 9, 16, 33, 40})
      for (int64_t at : {int64_t(0), n - 1}) {
        std::vector<float> v(x.begin(), x.begin() + n);
        v[size_t(at)] = 7.5f;  // above every random value
        EXPECT_EQ(cpu::element_ops().max(v.data(), n), 7.5f) << isa << " n " << n << " at " << at;
        v[size_t(at)] = x[size_t(at)];
        EXPECT_EQ(cpu::element_ops().max(v.data(), n), *std::max_element(v.begin(), v.end())) << isa << " n " << n;
        // NaNs, first or last, in the vector part or the tail, are passed over.
        v[size_t(at)] = NAN;
        const float rest = n == 1 ? -std::numeric_limits<float>::infinity()
                                  : *std::max_element(v.begin() + (at == 0 ? 1 : 0), v.begin() + (at == 0 ? n : n - 1));
        EXPECT_EQ(cpu::element_ops().max(v.data(), n), rest) << isa << " n " << n << " NaN at " << at;
      }
  }
  cpu::select_kernel_isa("avx2");
}

// The sampler's double sums: value i into sum i % 8, the eight added in one order; every ISA gives
// those bits, over lengths below, at and past a vector, and the ranked-above sum takes a tie only
// before its index (in a vector's lanes, at its edge, or in the tail) and never a NaN.
TEST(Ops, DoubleSumsOfEveryIsaAreTheEightLaneOnes) {
  auto eight_lane_sum = [](const std::vector<float>& v, const std::function<bool(size_t)>& take) {
    double lane[8] = {};
    for (size_t i = 0; i < v.size(); ++i) lane[i % 8] += take(i) ? double(v[i]) : 0.0;
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  };
  const auto p = random_values(1000, 25);
  auto x = random_values(1000, 26);
  for (float& v : x) v = std::round(2 * v) / 2;  // halves: many ties
  x[13] = NAN;
  for (const char* isa : {"generic", "avx2", "avxvnni", "avx512vnni"}) {
    if (!cpu::select_kernel_isa(isa)) continue;
    for (size_t n : {0, 1, 7, 8, 9, 17, 40, 1000}) {
      const std::vector<float> pn(p.begin(), p.begin() + long(n));
      EXPECT_EQ(cpu::element_ops().sum_f64(pn.data(), int64_t(n)), eight_lane_sum(pn, [](size_t) { return true; }))
          << isa << " n " << n;
      for (size_t at : {size_t(0), size_t(5), size_t(12), size_t(16), n / 2, n}) {
        if (n == 0 || at > n) continue;
        const float t = x[std::min(at, n - 1)];
        const double want = eight_lane_sum(pn, [&](size_t i) { return x[i] > t || (x[i] == t && i < at); });
        EXPECT_EQ(cpu::element_ops().sum_ranked_above(x.data(), pn.data(), int64_t(n), t, int64_t(at)), want)
            << isa << " n " << n << " ties before " << at;
      }
      // Thresholds no value passes or every finite one does, ties allowed past the end.
      for (float t : {NAN, -INFINITY, INFINITY}) {
        const double want = eight_lane_sum(pn, [&](size_t i) { return x[i] > t || x[i] == t; });
        EXPECT_EQ(cpu::element_ops().sum_ranked_above(x.data(), pn.data(), int64_t(n), t, int64_t(n) + 5), want)
            << isa << " n " << n << " t " << t;
      }
    }
  }
  cpu::select_kernel_isa("avx2");
}

// The softmax's exp and sum: within the vector exp's error of std::exp on every ISA, and every
// vector ISA (8 lanes with AVX2, 16 with AVX-512) bit for bit the AVX2 values and sum, over
// lengths below, at and past one and two vectors.
TEST(Ops, ExpSumOfEveryIsaIsTheAvx2One) {
  const auto x = random_values(40, 23);
  const float max = *std::max_element(x.begin(), x.end());
  for (int64_t n : {1, 7, 8, 9, 16, 17, 24, 32, 40}) {
    std::vector<float> avx2_values;
    float avx2_sum = 0;
    for (const char* isa : {"avx2", "generic", "avxvnni", "avx512vnni"}) {
      if (!cpu::select_kernel_isa(isa)) continue;
      std::vector<float> v(x.begin(), x.begin() + n);
      const float sum = cpu::element_ops().exp_sum(v.data(), n, max);
      double want_sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double want = std::exp(double(x[size_t(j)]) - max);
        want_sum += want;
        EXPECT_NEAR(v[size_t(j)], want, 2e-7 * want) << isa << " n " << n << " j " << j;
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << isa << " n " << n;
      if (std::string(isa) == "avx2") avx2_values = v, avx2_sum = sum;
      if (std::string(isa) != "generic" && !avx2_values.empty()) {
        EXPECT_EQ(v, avx2_values) << isa << " n " << n;
        EXPECT_EQ(sum, avx2_sum) << isa << " n " << n;
      }
    }
  }
  cpu::select_kernel_isa("avx2");
}

TEST(Ops, SoftmaxAndSilu) {
  float x[3] = {1000, 1000, 1000};
  cpu::softmax(x, 3);
  EXPECT_NEAR(x[0], 1.0 / 3, 1e-6);
  float g[1] = {2}, u[1] = {3};
  cpu::silu_mul(g, u, 1);
  EXPECT_NEAR(g[0], 2 / (1 + std::exp(-2.0)) * 3, 1e-5);
}

// The runner applies silu_mul to [tokens x n_ff] at once: a token's features must come out the
// same in a batch as alone, wherever n_ff % 8 puts them (the vector tail).
TEST(Ops, SiluMulOfAValueDoesNotDependOnItsPlace) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n_ff : {int64_t(172), int64_t(13), int64_t(5), int64_t(64)}) {
    const int64_t tokens = 6;
    std::vector<float> gate(size_t(tokens * n_ff)), up(gate.size());
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = dist(rng), up[i] = dist(rng);
    std::vector<float> batched = gate;
    cpu::silu_mul(batched.data(), up.data(), tokens * n_ff);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<float> alone(gate.begin() + t * n_ff, gate.begin() + (t + 1) * n_ff);
      cpu::silu_mul(alone.data(), up.data() + t * n_ff, n_ff);
      for (int64_t f = 0; f < n_ff; ++f)
        ASSERT_EQ(alone[size_t(f)], batched[size_t(t * n_ff + f)]) << "n_ff " << n_ff << " token " << t << " f " << f;
    }
  }
}

// The production ops (kernels/cpu/ops) against their double-precision oracles (kernels/ref/ops).
TEST(Ops, MatchTheirOracles) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int n = 4096;
  std::vector<float> x(n), w(n), delta(n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = normal(rng), w[size_t(i)] = normal(rng), delta[size_t(i)] = normal(rng);
  auto close = [](const std::vector<float>& a, const std::vector<float>& b, float tol) {
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > tol * (1.0f + std::fabs(b[i]))) return false;
    return true;
  };
  std::vector<float> got(n), want(n);
  cpu::rmsnorm(x.data(), w.data(), 1e-5f, n, got.data());
  ref::rmsnorm(x.data(), w.data(), 1e-5f, n, want.data());
  EXPECT_TRUE(close(got, want, 1e-6f));
  std::vector<float> xa = x, xb = x;
  cpu::add_rmsnorm(xa.data(), delta.data(), w.data(), 1e-5f, n, got.data());
  ref::add_rmsnorm(xb.data(), delta.data(), w.data(), 1e-5f, n, want.data());
  EXPECT_TRUE(close(xa, xb, 1e-7f));
  EXPECT_TRUE(close(got, want, 1e-6f));
  std::vector<double> inv(64);
  for (int i = 0; i < 64; ++i) inv[size_t(i)] = std::pow(10000.0, -2.0 * i / 128);
  for (auto style : {cpu::RopeStyle::kAdjacentPairs, cpu::RopeStyle::kNeox}) {
    std::vector<float> a(x.begin(), x.begin() + 512), b = a;
    cpu::rope(a.data(), 4, 128, 128, 1234.0f, inv.data(), style);
    ref::rope(b.data(), 4, 128, 128, 1234.0f, inv.data(), style);
    EXPECT_TRUE(close(a, b, 1e-5f));
  }
  std::vector<float> sa = x, sb = x;
  cpu::softmax(sa.data(), n);
  ref::softmax(sb.data(), n);
  EXPECT_TRUE(close(sa, sb, 1e-5f));
  std::vector<float> ga = x, gb = x;
  cpu::silu_mul(ga.data(), w.data(), n);
  ref::silu_mul(gb.data(), w.data(), n);
  EXPECT_TRUE(close(ga, gb, 1e-5f));
}

}  // namespace
}  // namespace autoglm
