#include "model/hf_vision.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/json_file.h"
#include "formats/safetensors.h"

namespace autoglm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Metadata = std::vector<std::pair<std::string, GgufValue>>;

struct Storage {
  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  std::vector<std::vector<uint8_t>> buffers;
};

struct Tower {
  bool glm = false;
  std::string prefix;  // "model.visual." or "visual."
};

// Per block: HF suffix -> GGUF suffix (both models; a fused qkv is GLM's, split q/k/v Qwen's).
const std::pair<const char*, const char*> kBlockTensors[] = {
    {"norm1.weight", "ln1.weight"},
    {"norm2.weight", "ln2.weight"},
    {"attn.qkv.weight", "attn_qkv.weight"},
    {"attn.qkv.bias", "attn_qkv.bias"},
    {"attn.proj.weight", "attn_out.weight"},
    {"attn.proj.bias", "attn_out.bias"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.gate_proj.bias", "ffn_gate.bias"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.up_proj.bias", "ffn_up.bias"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.down_proj.bias", "ffn_down.bias"},
};
const std::pair<const char*, const char*> kGlmTensors[] = {
    {"patch_embed.proj.bias", "v.patch_embd.bias"},
    {"post_conv_layernorm.weight", "v.norm_embd.weight"},
    {"embeddings.position_embedding.weight", "v.position_embd.weight"},
    {"post_layernorm.weight", "v.post_ln.weight"},
    {"downsample.weight", "mm.patch_merger.weight"},
    {"downsample.bias", "mm.patch_merger.bias"},
    {"merger.proj.weight", "mm.model.fc.weight"},
    {"merger.post_projection_norm.weight", "mm.post_norm.weight"},
    {"merger.post_projection_norm.bias", "mm.post_norm.bias"},
    {"merger.gate_proj.weight", "mm.gate.weight"},
    {"merger.up_proj.weight", "mm.up.weight"},
    {"merger.down_proj.weight", "mm.down.weight"},
};
const std::pair<const char*, const char*> kQwenTensors[] = {
    {"merger.ln_q.weight", "v.post_ln.weight"}, {"merger.mlp.0.weight", "mm.0.weight"},
    {"merger.mlp.0.bias", "mm.0.bias"},         {"merger.mlp.2.weight", "mm.2.weight"},
    {"merger.mlp.2.bias", "mm.2.bias"},
};

Result<DType> float_type(const SafetensorsTensor& t, const std::string& file) {
  if (t.dtype == "F32") return DType::F32;
  if (t.dtype == "F16") return DType::F16;
  if (t.dtype == "BF16") return DType::BF16;
  return unsupported(file + ": tensor '" + t.name + "' has dtype " + t.dtype + " (F32, F16, BF16)");
}

GgufTensorInfo view(std::string name, DType type, std::vector<int64_t> dims, const uint8_t* data, uint64_t n) {
  GgufTensorInfo g;
  g.name = std::move(name);
  g.type = type;
  g.dims = std::move(dims);
  g.data = data;
  g.n_bytes = n;
  return g;
}

// The GGUF name of a tower tensor's suffix (after the prefix); "" for none.
std::string gguf_vision_name(const Tower& tower, const std::string& suffix) {
  if (suffix.rfind("blocks.", 0) == 0) {
    const size_t dot = suffix.find('.', 7);
    if (dot == std::string::npos) return "";
    const std::string rest = suffix.substr(dot + 1);
    for (const auto& [hf, gguf] : kBlockTensors)
      if (rest == hf) return "v.blk." + suffix.substr(7, dot - 7) + "." + gguf;
    return "";
  }
  if (tower.glm) {
    for (const auto& [hf, gguf] : kGlmTensors)
      if (suffix == hf) return gguf;
  } else {
    for (const auto& [hf, gguf] : kQwenTensors)
      if (suffix == hf) return gguf;
  }
  return "";
}

// The Conv3d patch kernel [C, 3, 2, p, p] as llama.cpp stores it: one [C, 3, p, p] per frame.
Result<std::vector<GgufTensorInfo>> split_patch_kernel(const SafetensorsTensor& t, const std::string& file,
                                                       Storage& storage) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, float_type(t, file));
  if (t.shape.size() != 5 || t.shape[1] != 3 || t.shape[2] != 2 || t.shape[3] != t.shape[4])
    return corrupt(file + ": tensor '" + t.name + "' must have shape [C, 3, 2, p, p]");
  const int64_t c = t.shape[0], p = t.shape[3], eb = t.element_bytes;
  std::vector<GgufTensorInfo> out;
  for (int64_t frame = 0; frame < 2; ++frame) {
    std::vector<uint8_t> bytes(size_t(c * 3 * p * p * eb));
    for (int64_t r = 0; r < c * 3; ++r)  // (o, channel) rows of p * p values per frame
      std::memcpy(bytes.data() + r * p * p * eb, t.data + (r * 2 + frame) * p * p * eb, size_t(p * p * eb));
    storage.buffers.push_back(std::move(bytes));
    const auto& b = storage.buffers.back();
    out.push_back(
        view(frame == 0 ? "v.patch_embd.weight" : "v.patch_embd.weight.1", type, {p, p, 3, c}, b.data(), b.size()));
  }
  return out;
}

// Qwen's fused qkv ([3C, C] and [3C]) as llama.cpp's attn_q / attn_k / attn_v: row ranges, no copy.
Result<std::vector<GgufTensorInfo>> split_qkv(const SafetensorsTensor& t, const std::string& file,
                                              const std::string& blk, bool bias) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, float_type(t, file));
  if (t.shape.empty() || t.shape[0] % 3 != 0) return corrupt(file + ": tensor '" + t.name + "' must have 3 x C rows");
  const int64_t c = t.shape[0] / 3, row = t.shape.size() == 2 ? t.shape[1] : 1;
  const uint64_t part = uint64_t(c * row * t.element_bytes);
  std::vector<GgufTensorInfo> out;
  const char* names[] = {"attn_q", "attn_k", "attn_v"};
  for (int i = 0; i < 3; ++i)
    out.push_back(view(blk + names[i] + (bias ? ".bias" : ".weight"), type,
                       bias ? std::vector<int64_t>{c} : std::vector<int64_t>{row, c}, t.data + i * part, part));
  return out;
}

Result<std::vector<GgufTensorInfo>> map_tower_tensor(const Tower& tower, const SafetensorsTensor& t,
                                                     const std::string& file, Storage& storage) {
  const std::string suffix = t.name.substr(tower.prefix.size());
  if (suffix == "patch_embed.proj.weight") return split_patch_kernel(t, file, storage);
  const std::string name = gguf_vision_name(tower, suffix);
  if (name.empty()) return std::vector<GgufTensorInfo>{};
  if (!tower.glm && (name.ends_with("attn_qkv.weight") || name.ends_with("attn_qkv.bias")))
    return split_qkv(t, file, name.substr(0, name.rfind("attn_qkv")), name.ends_with(".bias"));
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, float_type(t, file));
  return std::vector<GgufTensorInfo>{
      view(name, type, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()), t.data, t.n_bytes)};
}

Result<int64_t> vision_int(const json& v, const std::string& path, const char* field, std::optional<int64_t> fallback) {
  if (!v.contains(field) || v[field].is_null()) {
    if (fallback) return *fallback;
    return corrupt(path + ": missing field 'vision_config." + std::string(field) + "'");
  }
  if (!v[field].is_number_integer() || v[field].get<int64_t>() <= 0)
    return corrupt(path + ": field 'vision_config." + std::string(field) + "' must be a positive integer");
  return v[field].get<int64_t>();
}

// preprocessor_config.json: the pixel limits, mean and std (absent file: the projector's defaults).
Status read_preprocessor(const std::string& dir, bool glm, Metadata& md) {
  const std::string path = (fs::path(dir) / "preprocessor_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::ok();
  AUTOGLM_ASSIGN_OR_RETURN(const json j, read_json_file(path));
  if (!j.is_object()) return corrupt(path + ": expected a JSON object");
  // Qwen's min_pixels / max_pixels win over size (its processor replaces a size dict); GLM has size only.
  const auto pixels = [&](const char* field, const char* size_key, const char* key) -> Status {
    const json* v = nullptr;
    std::string name = field;
    if (!glm && j.contains(field)) {
      v = &j[field];
    } else if (j.contains("size") && j["size"].is_object() && j["size"].contains(size_key)) {
      v = &j["size"][size_key];
      name = std::string("size.") + size_key;
    }
    if (!v || v->is_null()) return Status::ok();
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > INT32_MAX)
      return corrupt(path + ": field '" + name + "' must be a positive integer");
    md.emplace_back(key, GgufValue::u32(v->get<uint32_t>()));
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(pixels("min_pixels", "shortest_edge", "clip.vision.image_min_pixels"));
  AUTOGLM_RETURN_IF_ERROR(pixels("max_pixels", "longest_edge", "clip.vision.image_max_pixels"));
  for (const auto& [field, key] :
       {std::pair{"image_mean", "clip.vision.image_mean"}, {"image_std", "clip.vision.image_std"}}) {
    if (!j.contains(field)) continue;
    const json& v = j[field];
    if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number())
      return corrupt(path + ": field '" + std::string(field) + "' must hold 3 numbers");
    md.emplace_back(key, GgufValue::f32_array({v[0].get<float>(), v[1].get<float>(), v[2].get<float>()}));
  }
  return Status::ok();
}

Result<Metadata> projector_metadata(const json& config, const std::string& path, const Tower& tower,
                                    const std::string& dir) {
  const json& v = config["vision_config"];
  Metadata md;
  md.emplace_back("general.architecture", GgufValue::string("clip"));
  md.emplace_back("general.type", GgufValue::string("mmproj"));
  md.emplace_back("clip.projector_type", GgufValue::string(tower.glm ? "glm4v" : "qwen2.5vl_merger"));
  md.emplace_back("clip.has_vision_encoder", GgufValue::boolean(true));
  md.emplace_back("clip.use_silu", GgufValue::boolean(true));
  if (v.contains("hidden_act") && v["hidden_act"] != "silu")
    return unsupported(path + ": vision_config.hidden_act " + v["hidden_act"].dump() + " is not supported (silu)");
  const auto u32 = [&](const char* key, int64_t value) { md.emplace_back(key, GgufValue::u32(uint32_t(value))); };
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t hidden, vision_int(v, path, "hidden_size", std::nullopt));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t depth, vision_int(v, path, "depth", std::nullopt));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t heads, vision_int(v, path, "num_heads", std::nullopt));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t ff, vision_int(v, path, "intermediate_size", std::nullopt));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t out, vision_int(v, path, "out_hidden_size", std::nullopt));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t patch, vision_int(v, path, "patch_size", 14));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t merge, vision_int(v, path, "spatial_merge_size", 2));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t temporal, vision_int(v, path, "temporal_patch_size", 2));
  if (temporal != 2) return unsupported(path + ": vision_config.temporal_patch_size must be 2");
  u32("clip.vision.embedding_length", hidden);
  u32("clip.vision.block_count", depth);
  u32("clip.vision.attention.head_count", heads);
  u32("clip.vision.feed_forward_length", ff);
  u32("clip.vision.projection_dim", out);
  u32("clip.vision.patch_size", patch);
  u32("clip.vision.spatial_merge_size", merge);
  const double eps = v.value("rms_norm_eps", tower.glm ? 1e-5 : 1e-6);
  md.emplace_back("clip.vision.attention.layer_norm_epsilon", GgufValue::f32(float(eps)));
  if (tower.glm) {
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t image_size, vision_int(v, path, "image_size", 336));
    u32("clip.vision.image_size", image_size);
  } else {
    u32("clip.vision.image_size", 560);  // unused; llama.cpp's converter writes it so
    AUTOGLM_ASSIGN_OR_RETURN(const int64_t window, vision_int(v, path, "window_size", 112));
    u32("clip.vision.window_size", window);
    const json full = v.value("fullatt_block_indexes", json::array({7, 15, 23, 31}));
    if (!full.is_array() || full.empty() || !full[0].is_number_integer())
      return corrupt(path + ": field 'vision_config.fullatt_block_indexes' must be a list of layer indexes");
    const int64_t every = full[0].get<int64_t>() + 1;
    for (size_t i = 0; i < full.size(); ++i)
      if (!full[i].is_number_integer() || full[i].get<int64_t>() != int64_t(i + 1) * every - 1)
        return unsupported(path + ": vision_config.fullatt_block_indexes must be evenly spaced (every n-th layer)");
    u32("clip.vision.n_wa_pattern", every);
  }
  AUTOGLM_RETURN_IF_ERROR(read_preprocessor(dir, tower.glm, md));
  return md;
}

Result<Tower> find_tower(const json& config, const std::string& path, const SafetensorsCheckpoint& ck) {
  const json* names = config.contains("architectures") ? &config["architectures"] : nullptr;
  const std::string arch = names && names->is_array() && !names->empty() && (*names)[0].is_string()
                               ? (*names)[0].get<std::string>()
                               : std::string();
  Tower tower;
  if (arch == "Glm4vForConditionalGeneration") {
    tower.glm = true;
  } else if (arch != "Qwen2_5_VLForConditionalGeneration") {
    return unsupported(path + ": architecture '" + arch +
                       "' has no supported vision tower (Glm4vForConditionalGeneration, "
                       "Qwen2_5_VLForConditionalGeneration)");
  }
  if (!config.contains("vision_config") || !config["vision_config"].is_object())
    return corrupt(path + ": missing object 'vision_config'");
  for (const char* prefix : {"model.visual.", "visual."})
    if (ck.find(std::string(prefix) + "patch_embed.proj.weight")) tower.prefix = prefix;
  if (tower.prefix.empty())
    return corrupt(path + ": the checkpoint has no tensor 'model.visual.patch_embed.proj.weight' (or 'visual.')");
  return tower;
}

Result<std::unique_ptr<GgufFile>> open_checked(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  AUTOGLM_ASSIGN_OR_RETURN(const json config, read_json_file(path));
  if (!config.is_object()) return corrupt(path + ": expected a JSON object");
  auto storage = std::make_shared<Storage>();
  AUTOGLM_ASSIGN_OR_RETURN(storage->checkpoint, SafetensorsCheckpoint::open_folder(dir));
  AUTOGLM_ASSIGN_OR_RETURN(const Tower tower, find_tower(config, path, *storage->checkpoint));
  AUTOGLM_ASSIGN_OR_RETURN(Metadata md, projector_metadata(config, path, tower, dir));
  std::vector<GgufTensorInfo> tensors;
  for (const auto& file : storage->checkpoint->files())
    for (const SafetensorsTensor& t : file->tensors()) {
      if (t.name.rfind(tower.prefix, 0) != 0) continue;
      AUTOGLM_ASSIGN_OR_RETURN(auto mapped, map_tower_tensor(tower, t, file->path(), *storage));
      for (GgufTensorInfo& g : mapped) tensors.push_back(std::move(g));
    }
  return GgufFile::from_parts(dir + " (vision)", std::move(md), std::move(tensors), storage);
}

}  // namespace

std::string projector_path_beside(const std::string& model_path) {
  const std::string ext = ".gguf";
  const bool gguf = model_path.size() > ext.size() && model_path.ends_with(ext);
  return (gguf ? model_path.substr(0, model_path.size() - ext.size()) : model_path) + ".mmproj.gguf";
}

bool hf_folder_has_vision(const std::string& dir) {
  auto j = read_json_file((fs::path(dir) / "config.json").string());
  return j.is_ok() && j->is_object() && j->contains("vision_config");
}

Result<std::unique_ptr<GgufFile>> open_hf_projector(const std::string& dir) {
  try {
    return open_checked(dir);
  } catch (const json::exception& e) {
    return corrupt(dir + "/config.json: a field has a value of the wrong type (" + e.what() + ")");
  }
}

}  // namespace autoglm
