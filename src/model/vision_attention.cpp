#include "model/vision_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"

namespace autoglm {
namespace {

constexpr int64_t kQueryBlock = 16;  // queries that share each key row's load
// Segments at least this long (a whole image) run as two matmuls per head on the matmul
// kernels; shorter ones (windows) as small blocks spread over the threads.
constexpr int64_t kMatmulSegment = 512;

// Rows [first, first + n) of one head's columns [off, off + head_dim) of x (rows `width`
// apart), packed; transposed: [head_dim, n].
void gather_head(const float* x, int64_t width, int64_t off, int64_t head_dim, int64_t first, int64_t n,
                 bool transposed, std::vector<float>& out) {
  out.resize(size_t(n * head_dim));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t e = 0; e < head_dim; ++e)
      out[size_t(transposed ? e * n + r : r * head_dim + e)] = x[(first + r) * width + off + e];
}

// One head of a long segment [lo, hi), queries [q0, q1): scores = Q K^T on the matmul kernels
// (K as the weights), softmax per row, values = P V (V^T as the weights).
// Buffers reused by every head of a call (same sizes: no allocation or zeroing after the first).
struct HeadScratch {
  std::vector<float> keys, values_t, queries, scores, result;
};

void attend_head_by_matmul(ThreadPool& pool, const float* q, const float* k, const float* v, int64_t width,
                           int64_t head_dim, int64_t head, int64_t lo, int64_t hi, int64_t q0, int64_t q1, float* out,
                           HeadScratch& s) {
  const int64_t len = hi - lo, n = q1 - q0, off = head * head_dim;
  std::vector<float>&keys = s.keys, &values_t = s.values_t, &queries = s.queries, &scores = s.scores,
  &result = s.result;
  scores.resize(size_t(n * len));
  result.resize(size_t(n * head_dim));
  gather_head(k, width, off, head_dim, lo, len, false, keys);
  gather_head(v, width, off, head_dim, lo, len, true, values_t);
  gather_head(q, width, off, head_dim, q0, n, false, queries);
  cpu::WeightMatrix key_rows{DType::F32, reinterpret_cast<const uint8_t*>(keys.data()), len, head_dim, head_dim * 4};
  cpu::WeightMatrix value_rows{DType::F32, reinterpret_cast<const uint8_t*>(values_t.data()), head_dim, len, len * 4};
  // Interleaved for the packed float kernels: O(len x head_dim) once, for n x len x head_dim of work.
  const cpu::PackedBuffer packed_keys = cpu::pack_matrix(pool, key_rows);
  const cpu::PackedBuffer packed_values = cpu::pack_matrix(pool, value_rows);
  cpu::matmul(pool, key_rows, queries.data(), n, scores.data());
  const float scale = 1.0f / std::sqrt(float(head_dim));
  pool.parallel_for(n, [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = scores.data() + r * len;
      for (int64_t j = 0; j < len; ++j) row[j] *= scale;
      cpu::softmax(row, len);
    }
  });
  cpu::matmul(pool, value_rows, scores.data(), n, result.data());
  for (int64_t r = 0; r < n; ++r) std::copy_n(result.data() + r * head_dim, head_dim, out + (q0 + r) * width + off);
}

struct Work {
  int64_t segment, head, first_query;
};

// Queries [w.first_query, + n) of head w.head over their segment [lo, hi): scores into
// `scores` (n x (hi - lo)), softmax per row, then the weighted values.
void attend_block(const Work& w, int64_t n, int64_t lo, int64_t hi, const float* q, const float* k, const float* v,
                  int64_t width, int64_t head_dim, float* out, std::vector<float>& scores) {
  const int64_t len = hi - lo, off = w.head * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  scores.resize(size_t(n * len));
  for (int64_t j = 0; j < len; ++j) {
    const float* kj = k + (lo + j) * width + off;
    for (int64_t i = 0; i < n; ++i) {
      const float* qi = q + (w.first_query + i) * width + off;
      float dot = 0;
      for (int64_t e = 0; e < head_dim; ++e) dot += qi[e] * kj[e];
      scores[size_t(i * len + j)] = dot * scale;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    float* row = scores.data() + i * len;
    const float mx = *std::max_element(row, row + len);
    double sum = 0;
    for (int64_t j = 0; j < len; ++j) sum += row[j] = std::exp(row[j] - mx);
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < len; ++j) row[j] *= inv;
    std::fill_n(out + (w.first_query + i) * width + off, head_dim, 0.0f);
  }
  for (int64_t j = 0; j < len; ++j) {
    const float* vj = v + (lo + j) * width + off;
    for (int64_t i = 0; i < n; ++i) {
      const float p = scores[size_t(i * len + j)];
      float* o = out + (w.first_query + i) * width + off;
      for (int64_t e = 0; e < head_dim; ++e) o[e] += p * vj[e];
    }
  }
}

}  // namespace

void vision_attention(ThreadPool& pool, const float* q, const float* k, const float* v, int64_t n_head,
                      int64_t head_dim, const std::vector<int64_t>& bounds, float* out, int64_t first, int64_t last) {
  std::vector<Work> work;
  const int64_t width = n_head * head_dim;
  HeadScratch head_scratch;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    const int64_t q0 = std::max(bounds[s], first), q1 = std::min(bounds[s + 1], last);
    if (q0 >= q1) continue;
    if (bounds[s + 1] - bounds[s] >= kMatmulSegment) {
      for (int64_t h = 0; h < n_head; ++h)
        attend_head_by_matmul(pool, q, k, v, width, head_dim, h, bounds[s], bounds[s + 1], q0, q1, out, head_scratch);
      continue;
    }
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t qb = q0; qb < q1; qb += kQueryBlock) work.push_back({int64_t(s), h, qb});
  }
  std::vector<std::vector<float>> scratch(size_t(pool.size()));
  pool.parallel_for(int64_t(work.size()), [&](int share, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Work& w = work[size_t(i)];
      const int64_t lo = bounds[size_t(w.segment)], hi = bounds[size_t(w.segment) + 1];
      attend_block(w, std::min({kQueryBlock, hi - w.first_query, last - w.first_query}), lo, hi, q, k, v, width,
                   head_dim, out, scratch[size_t(share)]);
    }
  });
}

}  // namespace autoglm
