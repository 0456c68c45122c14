// A vision tower's attention: bidirectional softmax attention of every head within segments of
// the token sequence (an image, or one of Qwen2.5-VL's windows); no mask beyond them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/weight_matrix.h"

namespace autoglm {

// One layer's attention over one image, run in parts (ranges of queries) so that the caller can
// yield between them. prepare() gathers each long segment's keys and values per head and packs
// them for the matmul kernels once per layer, into buffers kept from the previous layer (an
// image's layers all have the same shapes: no allocation, zeroing or page faults after the first).
class VisionAttention {
 public:
  VisionAttention(ThreadPool& pool, int64_t n_head, int64_t head_dim)
      : pool_(pool), n_head_(n_head), head_dim_(head_dim), width_(n_head * head_dim) {}

  // q, k, v are [N, n_head * head_dim] and must outlive the runs that follow; segment i is
  // tokens [bounds[i], bounds[i + 1]).
  void prepare(const float* q, const float* k, const float* v, const std::vector<int64_t>& bounds);

  // Rows [first, last) of out ([N, n_head * head_dim]): those queries' attention.
  void run(int64_t first, int64_t last, float* out);

 private:
  // One head of one long segment: keys [len, head_dim] and values transposed [head_dim, len]
  // as weight matrices (their packed copies beside them).
  struct HeadKeysValues {
    std::vector<float> keys, values_t;
    cpu::WeightMatrix key_rows, value_rows;
    cpu::PackedBuffer packed_keys, packed_values;
    int64_t packed_keys_bytes = 0, packed_values_bytes = 0;
  };
  bool is_long(size_t segment) const;
  void attend_long(size_t segment, int64_t q0, int64_t q1, float* out);
  void attend_short(int64_t first, int64_t last, float* out);

  ThreadPool& pool_;
  const float *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  int64_t n_head_, head_dim_, width_;
  std::vector<int64_t> bounds_;
  std::vector<HeadKeysValues> heads_;  // [long segment][head], long segments in order
  std::vector<size_t> first_head_;     // per segment: its first entry in heads_ (long ones)
  std::vector<float> queries_, scores_, result_;
};

}  // namespace autoglm
