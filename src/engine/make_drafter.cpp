#include "engine/make_drafter.h"

#include "engine/model_drafter.h"
#include "engine/mtp_drafter.h"
#include "engine/ngram_drafter.h"

namespace autoglm {

bool same_kv_shape(const ModelSpec& a, const ModelSpec& b) {
  return a.n_layer == b.n_layer && a.n_head_kv == b.n_head_kv && a.head_dim == b.head_dim &&
         a.head_dim_v == b.head_dim_v && a.n_ctx_train == b.n_ctx_train;
}

namespace {

Result<std::unique_ptr<Drafter>> make_drafter_of(const SpecConfig& config, const Model& target, const Model* draft,
                                                 ThreadPool& pool, const DraftPool& draft_pool) {
  switch (config.method) {
    case SpecMethod::kNone: return std::unique_ptr<Drafter>();
    case SpecMethod::kNgram:
      return std::unique_ptr<Drafter>(std::make_unique<NgramDrafter>(config.ngram_min, config.ngram_max, config.p_min));
    case SpecMethod::kDraft: {
      if (!draft) return invalid_argument("spec draft: no draft model (--draft MODEL or --draft-quantize TYPE)");
      if (config.share_target_cache && same_kv_shape(target.spec(), draft->spec()))  // no prefill of its own
        return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(*draft, pool, 0, config.p_min));
      if (auto format = kv_format(draft->spec(), draft_pool.kv_type); !format)
        return invalid_argument("draft model: its KV cache: " + format.status().message());
      return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(
          *draft, pool, draft_pool.n_blocks, draft_pool.block_size, draft_pool.kv_type, config.p_min));
    }
    case SpecMethod::kEarlyExit:
      return std::unique_ptr<Drafter>(
          std::make_unique<ModelDrafter>(target, pool, early_exit_layers(config, target.spec().n_layer), config.p_min));
    case SpecMethod::kMtp: {
      AUTOGLM_RETURN_IF_ERROR(
          check_mtp_layers(target.source_path(), target.spec().n_nextn, int64_t(target.weights().nextn.size())));
      if (target.device().kind != DeviceKind::kCpu)
        return unsupported("spec mtp: the NextN block runs on the cpu only, not on " + device_name(target.device()));
      if (auto format = kv_format(target.spec(), draft_pool.kv_type); !format)
        return invalid_argument("spec mtp: the NextN block's KV cache: " + format.status().message());
      return std::unique_ptr<Drafter>(std::make_unique<MtpDrafter>(target, pool, draft_pool, config.p_min));
    }
  }
  return invalid_argument("spec: unknown method");
}

// A drafted token against a target decode step: decode steps stream the weights, so a model's
// cost is its bytes (early exit: its share of the layers); a lookup costs next to nothing.
double draft_token_cost(const SpecConfig& config, const Model& target, const Model* draft) {
  switch (config.method) {
    case SpecMethod::kDraft: return draft ? double(draft->weight_bytes()) / double(target.weight_bytes()) : 0;
    case SpecMethod::kEarlyExit:
      return double(early_exit_layers(config, target.spec().n_layer)) / double(target.spec().n_layer);
    case SpecMethod::kMtp: return 1.0 / double(target.spec().n_layer);  // one layer more
    default: return 0;
  }
}

}  // namespace

Result<std::unique_ptr<Drafter>> make_drafter(const SpecConfig& config, const Model& target, const Model* draft,
                                              ThreadPool& pool, const DraftPool& draft_pool) {
  AUTOGLM_RETURN_IF_ERROR(validate_spec_config(config, target.spec().n_layer));
  AUTOGLM_ASSIGN_OR_RETURN(auto drafter, make_drafter_of(config, target, draft, pool, draft_pool));
  if (drafter) drafter->set_token_cost(draft_token_cost(config, target, draft));
  return drafter;
}

}  // namespace autoglm
