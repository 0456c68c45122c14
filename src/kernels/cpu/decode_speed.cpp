#include "kernels/cpu/decode_speed.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed.h"
#include "kernels/ref/quants.h"

namespace autoglm::cpu {
namespace {

constexpr int kRepetitions = 4;

// Bytes of the measured matrix in the smallest type: twice the last-level cache, so that each
// pass streams from memory, within 64-128 MiB (a VM may report its host's whole L3).
int64_t bytes_past_the_caches() {
  const int64_t l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return std::clamp<int64_t>(2 * l3, int64_t(64) << 20, int64_t(128) << 20);
}

// rows x cols weights of type t: one encoded random row repeated (the kernels' time does not
// depend on the values, and quantizing every row would take longer than the measurement).
std::vector<uint8_t> repeated_row_matrix(DType t, int64_t rows, int64_t cols) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (float& v : row) v = dist(rng);
  const int64_t row_bytes = dtype_row_bytes(t, cols);
  std::vector<uint8_t> bytes(size_t(rows * row_bytes));
  ref::quantize_row(t, row.data(), bytes.data(), cols);
  for (int64_t r = 1; r < rows; ++r) std::memcpy(&bytes[size_t(r * row_bytes)], bytes.data(), size_t(row_bytes));
  return bytes;
}

double best_ns_per_weight(ThreadPool& pool, DType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> bytes = repeated_row_matrix(t, rows, cols);
  WeightMatrix w{t, bytes.data(), rows, cols, dtype_row_bytes(t, cols)};
  PackedBuffer packed;
  if (packable(t)) packed = pack_matrix(pool, w);
  std::vector<float> x(static_cast<size_t>(cols), 0.5f), y(static_cast<size_t>(rows));
  double best = 0;
  for (int r = 0; r <= kRepetitions; ++r) {  // pass 0 pages the matrix in
    const auto began = std::chrono::steady_clock::now();
    matmul(pool, w, x.data(), 1, y.data());
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - began).count();
    if (r > 0 && (best == 0 || ns < best)) best = ns;
  }
  return best / double(rows * cols);
}

}  // namespace

std::vector<DecodeSpeed> measure_decode_speed(ThreadPool& pool, std::span<const DType> types, int64_t cols) {
  double least_bytes_per_weight = 0;
  for (DType t : types) {
    const double b = double(dtype_row_bytes(t, cols)) / double(cols);
    if (least_bytes_per_weight == 0 || b < least_bytes_per_weight) least_bytes_per_weight = b;
  }
  const int64_t rows =
      std::max<int64_t>(8, int64_t(double(bytes_past_the_caches()) / (least_bytes_per_weight * double(cols))) / 8 * 8);
  std::vector<DecodeSpeed> out;
  for (DType t : types) out.push_back({t, best_ns_per_weight(pool, t, rows, cols)});
  return out;
}

DType fastest_type(std::span<const DecodeSpeed> speeds, double tie) {
  double fastest = 0;
  for (const DecodeSpeed& s : speeds)
    if (fastest == 0 || s.ns_per_weight < fastest) fastest = s.ns_per_weight;
  for (const DecodeSpeed& s : speeds)
    if (s.ns_per_weight <= fastest * (1 + tie)) return s.type;
  return speeds.front().type;
}

}  // namespace autoglm::cpu
