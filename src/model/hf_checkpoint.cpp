#include "model/hf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "model/hf_arch.h"

namespace autoglm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// config.json fields under the names the different model families use.
class Config {
 public:
  Config(json j, std::string path) : j_(std::move(j)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  const json* find(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (j_.contains(n) && !j_[n].is_null()) return &j_[n];
    return nullptr;
  }
  Result<int64_t> integer(std::initializer_list<const char*> names, std::optional<int64_t> fallback = {}) const {
    const json* v = find(names);
    if (!v) {
      if (fallback) return *fallback;
      return corrupt(path_ + ": missing field '" + *names.begin() + "'");
    }
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      return corrupt(path_ + ": field '" + *names.begin() + "' must be a positive integer");
    return v->get<int64_t>();
  }
  Result<double> number(std::initializer_list<const char*> names, double fallback) const {
    const json* v = find(names);
    if (!v) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0))
      return corrupt(path_ + ": field '" + *names.begin() + "' must be a positive number");
    return v->get<double>();
  }
  bool flag(const char* name, bool fallback) const {
    const json* v = find({name});
    return v && v->is_boolean() ? v->get<bool>() : fallback;
  }
  const json& raw() const { return j_; }

 private:
  json j_;
  std::string path_;
};

using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// Storage for the tensors that cannot view the mapped files, kept alive by the GgufFile.
struct Storage {
  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  std::vector<std::vector<uint8_t>> buffers;
};

struct Hparams {
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
  double rope_base;
};

Status check_supported_options(const Config& c, const HfArchitecture& arch) {
  auto refuse = [&](const std::string& what) {
    return unsupported(c.path() + ": " + what + " is not supported for " + arch.hf_name);
  };
  if (const json* act = c.find({"hidden_act", "hidden_activation"}); act && act->is_string() && *act != "silu")
    return refuse("hidden_act '" + act->get<std::string>() + "'");
  if (c.flag("mlp_bias", false)) return refuse("mlp_bias");
  if (arch.gguf_arch == "chatglm") {
    if (!c.flag("rmsnorm", true)) return refuse("LayerNorm (rmsnorm: false)");
    if (c.flag("apply_residual_connection_post_layernorm", false))
      return refuse("apply_residual_connection_post_layernorm");
    if (c.flag("add_bias_linear", false)) return refuse("add_bias_linear");
  }
  return Status::ok();
}

Result<Hparams> read_hparams(const Config& c, const HfArchitecture& arch) {
  Hparams h{};
  AUTOGLM_ASSIGN_OR_RETURN(h.n_embd, c.integer({"hidden_size"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_layer, c.integer({"num_hidden_layers", "num_layers"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_head, c.integer({"num_attention_heads"}));
  AUTOGLM_ASSIGN_OR_RETURN(h.n_ff, c.integer({"intermediate_size", "ffn_hidden_size"}));
  if (h.n_embd % h.n_head != 0 && !c.find({"head_dim", "kv_channels"}))
    return corrupt(c.path() + ": hidden_size is not a multiple of num_attention_heads and no head_dim is given");
  AUTOGLM_ASSIGN_OR_RETURN(h.head_dim, c.integer({"head_dim", "kv_channels"}, h.n_embd / h.n_head));
  const bool multi_query = arch.gguf_arch != "chatglm" || c.flag("multi_query_attention", false);
  AUTOGLM_ASSIGN_OR_RETURN(h.n_head_kv, c.integer({"num_key_value_heads", "multi_query_group_num"}, h.n_head));
  if (!multi_query) h.n_head_kv = h.n_head;
  AUTOGLM_ASSIGN_OR_RETURN(const double fraction, c.number({"partial_rotary_factor"}, arch.rotary_fraction));
  if (fraction > 1) return corrupt(c.path() + ": partial_rotary_factor must be at most 1");
  h.n_rot = int64_t(double(h.head_dim) * fraction);
  if (arch.rope_base_from_ratio) {
    AUTOGLM_ASSIGN_OR_RETURN(const double ratio, c.number({"rope_ratio"}, 1.0));
    h.rope_base = 10000.0 * ratio;
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(h.rope_base, c.number({"rope_theta"}, 10000.0));
  }
  return h;
}

// Llama 3.1 scaling as per-frequency divisors of the rotation (what GGUF stores as rope_freqs).
std::vector<float> llama3_rope_factors(const json& rs, const Config& c, const Hparams& h) {
  const double factor = rs.value("factor", 8.0), low = rs.value("low_freq_factor", 1.0),
               high = rs.value("high_freq_factor", 4.0);
  double original = 8192;
  if (rs.contains("original_max_position_embeddings") && rs["original_max_position_embeddings"].is_number())
    original = rs["original_max_position_embeddings"].get<double>();
  else if (const json* v = c.find({"original_max_position_embeddings"}); v && v->is_number())
    original = v->get<double>();
  const double low_wavelen = original / low, high_wavelen = original / high;
  std::vector<float> factors;
  for (int64_t i = 0; i < h.n_rot / 2; ++i) {
    const double freq = std::pow(h.rope_base, -2.0 * double(i) / double(h.n_rot));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(float(factor));
    } else {
      const double smooth = (original / wavelen - low) / (high - low);
      factors.push_back(float(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

// rope_scaling: linear becomes a frequency scale, dynamic NTK a larger base (fixed at the
// scaled context, as vLLM does, so that cached keys never need re-rotating), llama3
// per-frequency factors.
Status apply_rope_scaling(const Config& c, Hparams& h, const std::string& p, Metadata& md,
                          std::vector<float>& factors) {
  const json* rs = c.find({"rope_scaling"});
  if (!rs) return Status::ok();
  if (!rs->is_object()) return corrupt(c.path() + ": rope_scaling must be an object");
  const std::string type = rs->value("rope_type", rs->value("type", std::string("default")));
  const double factor = rs->value("factor", 1.0);
  if (!(factor > 0)) return corrupt(c.path() + ": rope_scaling.factor must be positive");
  if (type == "default") return Status::ok();
  if (type == "linear") {
    md.emplace_back(p + "rope.scaling.type", GgufValue::string("linear"));
    md.emplace_back(p + "rope.scaling.factor", GgufValue::f32(float(factor)));
  } else if (type == "dynamic") {
    // Hugging Face's dynamic NTK base at the longest scaled context, factor x max_position_embeddings.
    if (h.n_rot > 2) h.rope_base *= std::pow(factor * factor - factor + 1, double(h.n_rot) / double(h.n_rot - 2));
  } else if (type == "llama3") {
    factors = llama3_rope_factors(*rs, c, h);
  } else {
    return unsupported(c.path() + ": rope_scaling type '" + type + "' is not supported (linear, dynamic, llama3)");
  }
  return Status::ok();
}

Result<Metadata> metadata_from_config(const Config& c, const HfArchitecture& arch, const std::string& dir,
                                      std::vector<float>& rope_factors, Hparams& h) {
  AUTOGLM_RETURN_IF_ERROR(check_supported_options(c, arch));
  AUTOGLM_ASSIGN_OR_RETURN(h, read_hparams(c, arch));
  const std::string p = arch.gguf_arch + ".";
  Metadata md;
  md.emplace_back("general.architecture", GgufValue::string(arch.gguf_arch));
  md.emplace_back("general.name", GgufValue::string(fs::path(dir).filename().string()));
  auto u32 = [&](const std::string& key, int64_t v) { md.emplace_back(p + key, GgufValue::u32(uint32_t(v))); };
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_ctx, c.integer({"max_position_embeddings", "seq_length"}, 4096));
  u32("context_length", n_ctx);
  u32("embedding_length", h.n_embd);
  u32("feed_forward_length", h.n_ff);
  u32("block_count", h.n_layer);
  u32("attention.head_count", h.n_head);
  u32("attention.head_count_kv", h.n_head_kv);
  u32("attention.key_length", h.head_dim);
  u32("attention.value_length", h.head_dim);
  u32("rope.dimension_count", h.n_rot);
  AUTOGLM_ASSIGN_OR_RETURN(const double eps, c.number({"rms_norm_eps", "layernorm_epsilon"}, 1e-6));
  md.emplace_back(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(float(eps)));
  AUTOGLM_ASSIGN_OR_RETURN(const int64_t n_vocab, c.integer({"padded_vocab_size", "vocab_size"}));
  u32("vocab_size", n_vocab);
  if (const json* w = c.find({"sliding_window"}); w && c.flag("use_sliding_window", true)) {
    if (!w->is_number_integer() || w->get<int64_t>() <= 0)
      return corrupt(c.path() + ": field 'sliding_window' must be a positive integer or null");
    u32("attention.sliding_window", w->get<int64_t>());
  }
  AUTOGLM_RETURN_IF_ERROR(apply_rope_scaling(c, h, p, md, rope_factors));
  md.emplace_back(p + "rope.freq_base", GgufValue::f32(float(h.rope_base)));
  return md;
}

Result<DType> weight_dtype(const SafetensorsTensor& t, const std::string& file) {
  if (t.dtype == "F32") return DType::F32;
  if (t.dtype == "F16") return DType::F16;
  if (t.dtype == "BF16") return DType::BF16;
  return unsupported(file + ": tensor '" + t.name + "' has dtype " + t.dtype +
                     ", which cannot be loaded as a weight (F32, F16, BF16)");
}

}  // namespace

std::string gguf_name(const HfArchitecture& arch, const std::string& name) {
  for (const auto& [hf, gguf] : arch.global_tensors)
    if (name == hf) return gguf;
  if (name.compare(0, arch.layer_prefix.size(), arch.layer_prefix) != 0) return "";
  const size_t dot = name.find('.', arch.layer_prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = name.substr(arch.layer_prefix.size(), dot - arch.layer_prefix.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return "";
  const std::string suffix = name.substr(dot + 1);
  for (const auto& [hf, gguf] : arch.layer_tensors)
    if (suffix == hf) return "blk." + layer + "." + gguf;
  return "";
}

std::vector<uint8_t> permute_rows_for_rope(const uint8_t* data, int64_t rows, int64_t row_bytes, int64_t head_dim) {
  std::vector<uint8_t> out(size_t(rows * row_bytes));
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, in_head = r % head_dim;
    const int64_t src = head * head_dim + (in_head % 2) * half + in_head / 2;
    std::memcpy(out.data() + r * row_bytes, data + src * row_bytes, size_t(row_bytes));
  }
  return out;
}

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<GgufTensorInfo> map_tensor(const SafetensorsTensor& t, const std::string& file, const std::string& name,
                                  const HfArchitecture& arch, const Hparams& h, Storage& storage) {
  GgufTensorInfo g;
  g.name = name;
  AUTOGLM_ASSIGN_OR_RETURN(g.type, weight_dtype(t, file));
  g.dims.assign(t.shape.rbegin(), t.shape.rend());
  if (g.dims.empty()) return corrupt(file + ": tensor '" + t.name + "' is a scalar");
  g.data = t.data;
  g.n_bytes = t.n_bytes;
  const bool is_q = ends_with(name, "attn_q.weight") || ends_with(name, "attn_q.bias");
  const bool is_k = ends_with(name, "attn_k.weight") || ends_with(name, "attn_k.bias");
  if (arch.permute_qk && (is_q || is_k)) {
    const int64_t rows = g.dims.size() == 2 ? g.dims[1] : g.dims[0];
    const int64_t row_bytes = int64_t(t.n_bytes) / std::max<int64_t>(rows, 1);
    if (rows != (is_q ? h.n_head : h.n_head_kv) * h.head_dim)
      return corrupt(file + ": tensor '" + t.name + "' has " + std::to_string(rows) + " rows, expected " +
                     std::to_string((is_q ? h.n_head : h.n_head_kv) * h.head_dim));
    storage.buffers.push_back(permute_rows_for_rope(t.data, rows, row_bytes, h.head_dim));
    g.data = storage.buffers.back().data();
  }
  return g;
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

namespace {

Result<std::unique_ptr<GgufFile>> open_checked(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  AUTOGLM_ASSIGN_OR_RETURN(json j, read_json_file(config_path));
  if (!j.is_object()) return corrupt(config_path + ": expected a JSON object");
  const Config config(j, config_path);
  const json* names = config.find({"architectures"});
  if (!names || !names->is_array() || names->empty() || !(*names)[0].is_string())
    return corrupt(config_path + ": field 'architectures' must be a non-empty list of names");
  const std::string hf_name = (*names)[0].get<std::string>();
  const HfArchitecture* arch = find_hf_architecture(hf_name);
  if (!arch)
    return unsupported(config_path + ": architecture '" + hf_name +
                       "' is not supported (supported: " + supported_hf_architectures() + ")");
  std::vector<float> rope_factors;
  Hparams h{};
  AUTOGLM_ASSIGN_OR_RETURN(Metadata md, metadata_from_config(config, *arch, dir, rope_factors, h));

  auto storage = std::make_shared<Storage>();
  AUTOGLM_ASSIGN_OR_RETURN(storage->checkpoint, SafetensorsCheckpoint::open_folder(dir));
  std::vector<GgufTensorInfo> tensors;
  for (const auto& file : storage->checkpoint->files())
    for (const SafetensorsTensor& t : file->tensors()) {
      const std::string name = gguf_name(*arch, t.name);
      if (name.empty()) continue;  // not used by the decoder (e.g. rotary inv_freq buffers)
      AUTOGLM_ASSIGN_OR_RETURN(GgufTensorInfo g, map_tensor(t, file->path(), name, *arch, h, *storage));
      tensors.push_back(std::move(g));
    }
  if (!rope_factors.empty()) {
    std::vector<uint8_t> bytes(rope_factors.size() * 4);
    std::memcpy(bytes.data(), rope_factors.data(), bytes.size());
    storage->buffers.push_back(std::move(bytes));
    tensors.push_back({"rope_freqs.weight",
                       DType::F32,
                       {int64_t(rope_factors.size())},
                       0,
                       storage->buffers.back().data(),
                       storage->buffers.back().size()});
  }
  return GgufFile::from_parts(dir, std::move(md), std::move(tensors), storage);
}

}  // namespace

Result<std::unique_ptr<GgufFile>> open_hf_checkpoint(const std::string& dir) {
  try {
    return open_checked(dir);
  } catch (const nlohmann::json::exception& e) {  // a field with a value of the wrong type
    return corrupt(dir + "/config.json: a field has a value of the wrong type (" + e.what() + ")");
  }
}

Result<GenerationDefaults> read_generation_config(const std::string& dir) {
  GenerationDefaults d;
  const std::string path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return d;
  AUTOGLM_ASSIGN_OR_RETURN(json j, read_json_file(path));
  if (!j.is_object()) return corrupt(path + ": expected a JSON object");
  auto number = [&](const char* key, std::optional<double>& out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::ok();
    if (!j[key].is_number()) return corrupt(path + ": field '" + key + "' must be a number");
    out = j[key].get<double>();
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(number("temperature", d.temperature));
  AUTOGLM_RETURN_IF_ERROR(number("top_p", d.top_p));
  AUTOGLM_RETURN_IF_ERROR(number("repetition_penalty", d.repetition_penalty));
  if (j.contains("top_k") && !j["top_k"].is_null()) {
    if (!j["top_k"].is_number_integer()) return corrupt(path + ": field 'top_k' must be an integer");
    d.top_k = j["top_k"].get<int64_t>();
  }
  if (j.contains("do_sample") && j["do_sample"].is_boolean()) d.greedy = !j["do_sample"].get<bool>();
  const json eos = j.value("eos_token_id", json());
  for (const json& e : eos.is_array() ? eos : json::array({eos})) {
    if (e.is_null()) continue;
    if (!e.is_number_integer()) return corrupt(path + ": field 'eos_token_id' must be an id or a list of ids");
    d.eos_ids.push_back(e.get<int32_t>());
  }
  return d;
}

}  // namespace autoglm
