#include "model/kv_cache.h"

namespace autoglm {

ContiguousKvCache::ContiguousKvCache(const ModelSpec& spec, int64_t n_ctx)
    : n_ctx_(n_ctx),
      kv_dim_(spec.kv_dim()),
      v_dim_(spec.v_dim()),
      keys_(size_t(spec.n_layer * n_ctx * spec.kv_dim())),
      values_(size_t(spec.n_layer * n_ctx * spec.v_dim())) {}

}  // namespace autoglm
