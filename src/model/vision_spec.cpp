#include "model/vision_spec.h"

namespace autoglm {
namespace {

Result<int64_t> positive(const GgufFile& f, const std::string& key) {
  const auto v = f.get_int(key);
  if (!v) return corrupt(f.path() + ": missing or non-integer metadata key '" + key + "'");
  if (*v <= 0 || *v > (1 << 20))
    return corrupt(f.path() + ": metadata key '" + key + "' must be in [1, 2^20], found " + std::to_string(*v));
  return *v;
}

// image_mean / image_std: three floats, the std positive.
Status read_channels(const GgufFile& f, const std::string& key, std::array<float, 3>& out, bool positive_only) {
  const GgufValue* v = f.find(key);
  if (!v) return Status::ok();  // the processors' CLIP defaults
  if (v->type != GgufValueType::kArray || v->reals.size() != 3)
    return corrupt(f.path() + ": metadata key '" + key + "' must hold 3 floats");
  for (size_t c = 0; c < 3; ++c) {
    if (positive_only && !(v->reals[c] > 0)) return corrupt(f.path() + ": metadata key '" + key + "' must be positive");
    out[c] = float(v->reals[c]);
  }
  return Status::ok();
}

Status read_preprocess(const GgufFile& f, VisionSpec& s) {
  VisionPreprocess& p = s.preprocess;
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t patch, positive(f, "clip.vision.patch_size"));
  p.patch_size = int32_t(patch);
  p.merge_size = int32_t(f.get_int("clip.vision.spatial_merge_size").value_or(2));
  if (p.merge_size != 2) return unsupported(f.path() + ": clip.vision.spatial_merge_size must be 2");
  p.temporal_patch_size = 2;
  // The processors' limits (preprocessor_config.json) unless the file says: GLM counts frames.
  const bool glm = s.projector == ProjectorType::kGlm4v;
  p.limits_count_frames = glm;
  p.min_pixels = f.get_int("clip.vision.image_min_pixels").value_or(glm ? 112 * 112 : 56 * 56);
  p.max_pixels = f.get_int("clip.vision.image_max_pixels").value_or(glm ? 9633792 : 12845056);
  if (p.min_pixels <= 0 || p.max_pixels < p.min_pixels)
    return corrupt(f.path() + ": clip.vision.image_min_pixels / image_max_pixels must be positive and ordered");
  AUTOGLM_RETURN_IF_ERROR(read_channels(f, "clip.vision.image_mean", p.mean, false));
  return read_channels(f, "clip.vision.image_std", p.std, true);
}

}  // namespace

const char* projector_type_name(ProjectorType t) {
  return t == ProjectorType::kGlm4v ? "glm4v" : "qwen2.5vl_merger";
}

const char* projector_display_name(ProjectorType t) {
  return t == ProjectorType::kGlm4v ? "GLM-4.1V" : "Qwen2.5-VL";
}

Result<VisionSpec> vision_spec_from_gguf(const GgufFile& f) {
  VisionSpec s;
  const auto type = f.get_string("clip.projector_type");
  if (!type) return corrupt(f.path() + ": missing metadata key 'clip.projector_type' (not a projector file?)");
  if (*type == "glm4v") {
    s.projector = ProjectorType::kGlm4v;
  } else if (*type == "qwen2.5vl_merger") {
    s.projector = ProjectorType::kQwen25vl;
  } else {
    return unsupported(f.path() + ": projector type '" + *type + "' is not supported (glm4v, qwen2.5vl_merger)");
  }
  if (!f.get_bool("clip.has_vision_encoder").value_or(true))
    return unsupported(f.path() + ": the projector has no vision encoder");
  AUTOGLM_ASSIGN_OR_RETURN(s.n_embd, positive(f, "clip.vision.embedding_length"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_layer, positive(f, "clip.vision.block_count"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_head, positive(f, "clip.vision.attention.head_count"));
  AUTOGLM_ASSIGN_OR_RETURN(s.n_out, positive(f, "clip.vision.projection_dim"));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_ff, positive(f, "clip.vision.feed_forward_length"));
  if (s.n_embd % s.n_head != 0 || (s.n_embd / s.n_head) % 4 != 0)
    return corrupt(f.path() + ": clip.vision.embedding_length " + std::to_string(s.n_embd) +
                   " must split into heads (clip.vision.attention.head_count " + std::to_string(s.n_head) +
                   ") of a multiple of 4 dims (2-D rotary)");
  s.head_dim = s.n_embd / s.n_head;
  s.eps = float(f.get_float("clip.vision.attention.layer_norm_epsilon").value_or(1e-6));
  if (!(s.eps > 0)) return corrupt(f.path() + ": clip.vision.attention.layer_norm_epsilon must be positive");
  AUTOGLM_RETURN_IF_ERROR(read_preprocess(f, s));
  if (s.projector == ProjectorType::kGlm4v) {
    // llama.cpp's converter writes the merger's width here; the blocks' FFN is out_hidden_size wide.
    s.n_merger_ff = n_ff;
    s.n_ff = s.n_out;
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t image_size, positive(f, "clip.vision.image_size"));
    s.pos_grid = image_size / s.preprocess.patch_size;
    if (s.pos_grid * s.preprocess.patch_size != image_size)
      return corrupt(f.path() + ": clip.vision.image_size is not a multiple of the patch size");
  } else {
    s.n_ff = n_ff;
    const int64_t window = f.get_int("clip.vision.window_size").value_or(112);
    s.window_units = window / (int64_t(s.preprocess.patch_size) * s.merge());
    AUTOGLM_ASSIGN_OR_RETURN(s.full_every, positive(f, "clip.vision.n_wa_pattern"));
    if (s.window_units <= 0) return corrupt(f.path() + ": clip.vision.window_size is smaller than a merged patch");
  }
  return s;
}

}  // namespace autoglm
