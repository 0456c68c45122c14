#include "model/kv_cache.h"

#include "core/check.h"

namespace autoglm {

Result<KvFormat> kv_format(const ModelSpec& spec, DType type) {
  if (type != DType::F32 && type != DType::F16 && type != DType::Q8_0)
    return invalid_argument("KV cache type '" + std::string(dtype_name(type)) + "' is not one of f32, f16, q8_0");
  if (type == DType::Q8_0 && (spec.head_dim % 32 != 0 || spec.head_dim_v % 32 != 0))
    return invalid_argument("KV cache type q8_0 needs head sizes that are multiples of 32; this model's are " +
                            std::to_string(spec.head_dim) + " and " + std::to_string(spec.head_dim_v));
  KvFormat f;
  f.type = type;
  f.k_row_bytes = dtype_row_bytes(type, spec.kv_dim());
  f.v_row_bytes = dtype_row_bytes(type, spec.v_dim());
  f.k_head_bytes = dtype_row_bytes(type, spec.head_dim);
  f.v_head_bytes = dtype_row_bytes(type, spec.head_dim_v);
  if (spec.mla.enabled()) {  // one cached head [latent | rope key]; the values are its latent
    f.values_in_keys = true;
    f.v_row_bytes = f.k_row_bytes;
    f.v_head_bytes = 0;
  }
  return f;
}

Status kv_type_runs_on(DType type, const Device& device) {
  if (type != DType::Q8_0 || device.kind == DeviceKind::kCpu) return Status::ok();
  return unsupported("KV cache type q8_0 does not run on " + device_name(device) +
                     " yet (its GPU rows were found wrong on an H200); use f16 there");
}

namespace {

KvFormat checked_format(const ModelSpec& spec, DType type) {
  auto f = kv_format(spec, type);
  AUTOGLM_CHECK(f.is_ok());
  return *f;
}

}  // namespace

ContiguousKvCache::ContiguousKvCache(const ModelSpec& spec, int64_t n_ctx, DType type, const Device& device)
    : KvCache(checked_format(spec, type)),
      n_ctx_(n_ctx),
      keys_(DeviceMemory::allocate_or_die(device, spec.n_layer * n_ctx * format().k_row_bytes, "KV cache keys")),
      values_(DeviceMemory::allocate_or_die(device, spec.n_layer * n_ctx * format().value_bytes(), "KV cache values")) {
}

}  // namespace autoglm
