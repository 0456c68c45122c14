#include "model/vision_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/element_ops.h"
#include "kernels/cpu/matmul.h"

namespace autoglm {
namespace {

constexpr int64_t kQueryBlock = 16;  // queries that share each key row's load
// Segments at least this long (a whole image) run as two matmuls per head on the matmul
// kernels; shorter ones (windows) as small blocks spread over the threads.
constexpr int64_t kMatmulSegment = 512;

// Rows [first, first + n) of one head's columns [off, off + head_dim) of x (rows `width` apart)
// into out [n, head_dim], times `scale`.
void gather_rows(const float* x, int64_t width, int64_t off, int64_t head_dim, int64_t first, int64_t n, float scale,
                 float* out) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t e = 0; e < head_dim; ++e) out[r * head_dim + e] = x[(first + r) * width + off + e] * scale;
}

// The same rows transposed into out [head_dim, n], eight rows at a time so that each write
// is a run of eight.
void gather_transposed(const float* x, int64_t width, int64_t off, int64_t head_dim, int64_t first, int64_t n,
                       float* out) {
  constexpr int64_t kRun = 8;
  for (int64_t r0 = 0; r0 < n; r0 += kRun) {
    const int64_t rows = std::min(kRun, n - r0);
    for (int64_t e = 0; e < head_dim; ++e)
      for (int64_t r = 0; r < rows; ++r) out[e * n + r0 + r] = x[(first + r0 + r) * width + off + e];
  }
}

// In place: softmax of each of n rows of len scores.
void softmax_rows(ThreadPool& pool, float* scores, int64_t n, int64_t len) {
  const cpu::ElementOps& element = cpu::element_ops();
  pool.parallel_for(n, [&](int, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = scores + r * len;
      const float inv = 1.0f / element.exp_sum(row, len, element.max(row, len));
      for (int64_t j = 0; j < len; ++j) row[j] *= inv;
    }
  });
}

struct Work {
  int64_t segment, head, first_query;
};

// Queries [w.first_query, + n) of head w.head over their segment [lo, hi): scores into
// `scores` (n x (hi - lo)), softmax per row, then the weighted values.
void attend_block(const Work& w, int64_t n, int64_t lo, int64_t hi, const float* q, const float* k, const float* v,
                  int64_t width, int64_t head_dim, float* out, std::vector<float>& scores) {
  const cpu::ElementOps& element = cpu::element_ops();
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
    const float inv = 1.0f / element.exp_sum(row, len, element.max(row, len));
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

void VisionAttention::prepare(const float* q, const float* k, const float* v, const std::vector<int64_t>& bounds) {
  q_ = q, k_ = k, v_ = v;
  bounds_ = bounds;
  first_head_.assign(bounds_.size(), 0);
  size_t used = 0;
  for (size_t s = 0; s + 1 < bounds_.size(); ++s) {
    first_head_[s] = used;
    if (!is_long(s)) continue;
    const int64_t lo = bounds_[s], len = bounds_[s + 1] - lo;
    const size_t first = used;
    used += size_t(n_head_);
    if (heads_.size() < used) heads_.resize(used);
    pool_.parallel_for(n_head_, [&](int, int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        HeadKeysValues& kv = heads_[first + size_t(h)];
        kv.keys.resize(size_t(len * head_dim_));
        kv.values_t.resize(size_t(len * head_dim_));
        gather_rows(k, width_, h * head_dim_, head_dim_, lo, len, 1.0f, kv.keys.data());
        gather_transposed(v, width_, h * head_dim_, head_dim_, lo, len, kv.values_t.data());
        kv.key_rows = {DType::F32, reinterpret_cast<const uint8_t*>(kv.keys.data()), len, head_dim_, head_dim_ * 4};
        kv.value_rows = {DType::F32, reinterpret_cast<const uint8_t*>(kv.values_t.data()), head_dim_, len, len * 4};
      }
    });
    // Interleaved for the packed float kernels: O(len x head_dim) once per layer.
    for (size_t h = first; h < used; ++h) {
      HeadKeysValues& kv = heads_[h];
      cpu::repack_matrix(pool_, kv.key_rows, kv.packed_keys, kv.packed_keys_bytes);
      cpu::repack_matrix(pool_, kv.value_rows, kv.packed_values, kv.packed_values_bytes);
    }
  }
}

bool VisionAttention::is_long(size_t segment) const {
  return bounds_[segment + 1] - bounds_[segment] >= kMatmulSegment;
}

// Queries [q0, q1) of a long segment, every head in one job for the threads per step (three
// waits for the pool per part, not three per head): scores = Q K^T on the matmul kernels (K as
// the weights; Q scaled by 1 / sqrt(head_dim) as it is gathered), softmax per row, then
// values = P V (V^T as the weights).
void VisionAttention::attend_long(size_t segment, int64_t q0, int64_t q1, float* out) {
  const int64_t len = bounds_[segment + 1] - bounds_[segment], n = q1 - q0;
  const float scale = 1.0f / std::sqrt(float(head_dim_));
  queries_.resize(size_t(n_head_ * n * head_dim_));
  scores_.resize(size_t(n_head_ * n * len));
  result_.resize(size_t(n_head_ * n * head_dim_));
  std::vector<cpu::MatmulJob> jobs(static_cast<size_t>(n_head_));
  for (int64_t h = 0; h < n_head_; ++h) {
    float* queries = queries_.data() + h * n * head_dim_;
    gather_rows(q_, width_, h * head_dim_, head_dim_, q0, n, scale, queries);
    jobs[size_t(h)] = {&heads_[first_head_[segment] + size_t(h)].key_rows, queries, n, scores_.data() + h * n * len};
  }
  cpu::matmul_batch(pool_, jobs.data(), int(jobs.size()));
  softmax_rows(pool_, scores_.data(), n_head_ * n, len);
  for (int64_t h = 0; h < n_head_; ++h)
    jobs[size_t(h)] = {&heads_[first_head_[segment] + size_t(h)].value_rows, scores_.data() + h * n * len, n,
                       result_.data() + h * n * head_dim_};
  cpu::matmul_batch(pool_, jobs.data(), int(jobs.size()));
  for (int64_t h = 0; h < n_head_; ++h)
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(result_.data() + (h * n + r) * head_dim_, head_dim_, out + (q0 + r) * width_ + h * head_dim_);
}

void VisionAttention::attend_short(int64_t first, int64_t last, float* out) {
  std::vector<Work> work;
  for (size_t s = 0; s + 1 < bounds_.size(); ++s) {
    const int64_t q0 = std::max(bounds_[s], first), q1 = std::min(bounds_[s + 1], last);
    if (q0 >= q1 || is_long(s)) continue;
    for (int64_t h = 0; h < n_head_; ++h)
      for (int64_t qb = q0; qb < q1; qb += kQueryBlock) work.push_back({int64_t(s), h, qb});
  }
  std::vector<std::vector<float>> scratch(size_t(pool_.size()));
  pool_.parallel_for(int64_t(work.size()), [&](int share, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Work& w = work[size_t(i)];
      const int64_t lo = bounds_[size_t(w.segment)], hi = bounds_[size_t(w.segment) + 1];
      attend_block(w, std::min({kQueryBlock, hi - w.first_query, last - w.first_query}), lo, hi, q_, k_, v_, width_,
                   head_dim_, out, scratch[size_t(share)]);
    }
  });
}

void VisionAttention::run(int64_t first, int64_t last, float* out) {
  for (size_t s = 0; s + 1 < bounds_.size(); ++s) {
    const int64_t q0 = std::max(bounds_[s], first), q1 = std::min(bounds_[s + 1], last);
    if (q0 < q1 && is_long(s)) attend_long(s, q0, q1, out);
  }
  attend_short(first, last, out);
}

}  // namespace autoglm
