// The KV cache as the forward pass sees it: per layer and position, one key row and one
// value row, encoded in the cache's type (f32, f16 or q8_0 blocks of 32). Positions come
// in spans of contiguous rows (a paged block, or the whole context); attention walks the
// spans. The serving layer's paged cache implements the same interface.
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/status.h"
#include "core/device.h"
#include "core/dtype.h"
#include "model/device_memory.h"
#include "model/model_spec.h"

namespace autoglm {

struct KvFormat {
  DType type = DType::F16;
  int64_t k_row_bytes = 0;  // one position's keys, all KV heads
  int64_t v_row_bytes = 0;
  int64_t k_head_bytes = 0;  // one KV head's slice of a row
  int64_t v_head_bytes = 0;
  // Latent attention: a position's values are the first head_dim_v elements of its key row
  // (the latent), so nothing is stored for them: value rows are the key rows (v_row_bytes is
  // then the key rows' stride) and a cache keeps no value memory.
  bool values_in_keys = false;
  int64_t value_bytes() const { return values_in_keys ? 0 : v_row_bytes; }  // stored per position
};

// The row layout for a model; an error naming the type when the model's head sizes cannot
// be stored in it (q8_0 needs head sizes that are multiples of 32) or the type is not a KV type.
Result<KvFormat> kv_format(const ModelSpec& spec, DType type);

// Whether a KV cache of `type` may run on `device`: q8_0 on a GPU is refused rather than giving
// wrong logits (its rows did not match the CPU's encoding on an H200, 2026-12-04: the disabled
// tests Cuda.DISABLED_Q8Kv* of test_backend show it once this refusal is lifted).
Status kv_type_runs_on(DType type, const Device& device);

class KvCache {
 public:
  explicit KvCache(const KvFormat& format) : format_(format) {}
  virtual ~KvCache() = default;
  const KvFormat& format() const { return format_; }
  // Positions [0, capacity()) may be written and read.
  virtual int64_t capacity() const = 0;
  // Positions per span; spans start at multiples of it.
  virtual int64_t span() const = 0;
  // First row of the span that starts at `first_pos`.
  virtual uint8_t* key_span(int64_t layer, int64_t first_pos) = 0;
  virtual uint8_t* value_span(int64_t layer, int64_t first_pos) = 0;

  uint8_t* key_row(int64_t layer, int64_t pos) {
    const int64_t in = pos % span();
    return key_span(layer, pos - in) + in * format_.k_row_bytes;
  }
  uint8_t* value_row(int64_t layer, int64_t pos) {
    const int64_t in = pos % span();
    return value_span(layer, pos - in) + in * format_.v_row_bytes;
  }

 private:
  KvFormat format_;
};

// One sequence's KV in a single preallocated buffer of n_ctx positions, in the memory of
// the device whose backend runs the model.
class ContiguousKvCache final : public KvCache {
 public:
  // type must have passed kv_format for this spec.
  ContiguousKvCache(const ModelSpec& spec, int64_t n_ctx, DType type = DType::F16, const Device& device = {});
  int64_t capacity() const override { return n_ctx_; }
  int64_t span() const override { return n_ctx_; }
  uint8_t* key_span(int64_t layer, int64_t first_pos) override {
    return keys_.data() + (layer * n_ctx_ + first_pos) * format().k_row_bytes;
  }
  uint8_t* value_span(int64_t layer, int64_t first_pos) override {
    if (format().values_in_keys) return key_span(layer, first_pos);
    return values_.data() + (layer * n_ctx_ + first_pos) * format().v_row_bytes;
  }

 private:
  int64_t n_ctx_;
  DeviceMemory keys_;
  DeviceMemory values_;
};

}  // namespace autoglm
