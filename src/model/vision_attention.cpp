#include "model/vision_attention.h"

#include <algorithm>
#include <cmath>

namespace autoglm {
namespace {

constexpr int64_t kQueryBlock = 16;  // queries that share each key row's load

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
  for (size_t s = 0; s + 1 < bounds.size(); ++s)
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t q0 = std::max(bounds[s], first); q0 < std::min(bounds[s + 1], last); q0 += kQueryBlock)
        work.push_back({int64_t(s), h, q0});
  std::vector<std::vector<float>> scratch(size_t(pool.size()));
  const int64_t width = n_head * head_dim;
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
