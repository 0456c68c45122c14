// The KV cache as the forward pass sees it: per layer and position, one key row
// (kv_dim floats) and one value row (v_dim floats). The serving layer's paged cache
// implements the same interface, so the model code never knows how KV is stored.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_spec.h"

namespace autoglm {

class KvCache {
 public:
  virtual ~KvCache() = default;
  // Positions [0, capacity()) may be written and read.
  virtual int64_t capacity() const = 0;
  virtual float* key(int64_t layer, int64_t pos) = 0;
  virtual float* value(int64_t layer, int64_t pos) = 0;
};

// One sequence's KV in a single preallocated buffer of n_ctx positions.
class ContiguousKvCache final : public KvCache {
 public:
  ContiguousKvCache(const ModelSpec& spec, int64_t n_ctx);
  int64_t capacity() const override { return n_ctx_; }
  float* key(int64_t layer, int64_t pos) override { return keys_.data() + (layer * n_ctx_ + pos) * kv_dim_; }
  float* value(int64_t layer, int64_t pos) override { return values_.data() + (layer * n_ctx_ + pos) * v_dim_; }

 private:
  int64_t n_ctx_;
  int64_t kv_dim_;
  int64_t v_dim_;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace autoglm
