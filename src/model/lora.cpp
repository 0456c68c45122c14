#include "model/lora.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/half.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "model/hf_arch.h"
#include "model/hf_checkpoint.h"
#include "model/model.h"

namespace autoglm {
namespace {

struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> v;
};

// A part of a base tensor an adapter pair changes: the target and its rows in the tensor.
struct Slot {
  LoraTarget target;
  int64_t row0, rows;
};

struct Targets {
  int64_t layer = -1;
  int64_t n_in = 0;
  std::vector<Slot> slots;
};

int64_t n_in_of(const ModelSpec& s, LoraTarget t) {
  if (t == LoraTarget::kO) return s.n_head * (s.mla.enabled() ? s.mla.v_head : s.head_dim_v);
  if (t == LoraTarget::kDown) return s.n_ff;
  return s.n_embd;
}

// What a GGUF weight name ("blk.3.attn_q.weight") covers in the base model; null targets
// (layer -1) for names an adapter cannot change here.
Targets targets_of(const std::string& name, const Model& base) {
  const ModelSpec& s = base.spec();
  Targets t;
  if (name.rfind("blk.", 0) != 0) return t;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return t;
  const std::string layer = name.substr(4, dot - 4), suffix = name.substr(dot + 1);
  if (layer.empty() || layer.size() > 6 || layer.find_first_not_of("0123456789") != std::string::npos) return t;
  const int64_t il = std::stoll(layer);
  if (il >= s.n_layer) return t;
  const std::string p = "blk." + layer + ".";
  const bool fused_gate_up = !base.file().find_tensor(p + "ffn_gate.weight");
  using T = LoraTarget;
  // A mixture-of-experts layer has no dense FFN, and latent attention no q/k/v matrices: the
  // adapter's tensor would change nothing the forward pass runs.
  const bool dense_ffn = !s.moe.is_moe_layer(il);
  if (!dense_ffn && suffix.rfind("ffn_", 0) == 0) return t;
  if (s.mla.enabled() && suffix != "attn_output.weight" && suffix.rfind("attn_", 0) == 0) return t;
  if (suffix == "attn_q.weight") t.slots = {{T::kQ, 0, s.q_dim()}};
  if (suffix == "attn_k.weight") t.slots = {{T::kK, 0, s.kv_dim()}};
  if (suffix == "attn_v.weight") t.slots = {{T::kV, 0, s.v_dim()}};
  if (suffix == "attn_qkv.weight")
    t.slots = {{T::kQ, 0, s.q_dim()}, {T::kK, s.q_dim(), s.kv_dim()}, {T::kV, s.q_dim() + s.kv_dim(), s.v_dim()}};
  if (suffix == "attn_output.weight") t.slots = {{T::kO, 0, s.n_embd}};
  if (suffix == "ffn_gate.weight") t.slots = {{T::kGate, 0, s.n_ff}};
  if (suffix == "ffn_up.weight")
    t.slots = fused_gate_up ? std::vector<Slot>{{T::kGate, 0, s.n_ff}, {T::kUp, s.n_ff, s.n_ff}}
                            : std::vector<Slot>{{T::kUp, 0, s.n_ff}};
  if (suffix == "ffn_down.weight") t.slots = {{T::kDown, 0, s.n_embd}};
  if (t.slots.empty()) return t;
  t.layer = il;
  t.n_in = n_in_of(s, t.slots[0].target);
  return t;
}

std::string shape_text(int64_t rows, int64_t cols) {
  std::string s = "[";
  s += std::to_string(rows);
  s += ", ";
  s += std::to_string(cols);
  s += ']';
  return s;
}

// Adds the pair (A: [rank, n_in], B: [n_out, rank]) over base tensor `weight`. `a_name` and
// `b_name` are the adapter's tensor names, for errors.
Status add_pair(LoraAdapter& ad, const Model& base, const std::string& where, const std::string& weight,
                const std::string& a_name, Matrix a, const std::string& b_name, Matrix b) {
  const Targets t = targets_of(weight, base);
  if (t.layer < 0 && weight.find("_exps.") != std::string::npos)
    return unsupported(where + ": tensor '" + a_name + "' changes " + weight +
                       ": adapters on routed experts are not supported (attention and dense MLP matrices only)");
  if (t.layer < 0)
    return unsupported(where + ": tensor '" + a_name + "' changes " + weight +
                       ", which an adapter cannot change here (attention and dense MLP matrices of the layers only)");
  int64_t n_out = 0;
  for (const Slot& s : t.slots) n_out += s.rows;
  if (a.cols != t.n_in)
    return invalid_argument(where + ": tensor '" + a_name + "' is " + shape_text(a.rows, a.cols) + ", expected " +
                            shape_text(a.rows, t.n_in) + " for the base model's " + weight);
  if (b.rows != n_out || b.cols != a.rows)
    return invalid_argument(where + ": tensor '" + b_name + "' is " + shape_text(b.rows, b.cols) + ", expected " +
                            shape_text(n_out, a.rows) + " for the base model's " + weight);
  if (ad.rank != 0 && a.rows != ad.rank)
    return invalid_argument(where + ": tensor '" + a_name + "' has rank " + std::to_string(a.rows) +
                            " where the adapter's other tensors have " + std::to_string(ad.rank));
  ad.rank = a.rows;
  for (const Slot& s : t.slots) {
    auto& d = ad.layers[size_t(t.layer)][size_t(s.target)];
    if (d) return invalid_argument(where + ": " + weight + " is changed twice (tensor '" + a_name + "')");
    d.emplace();
    d->rank = a.rows;
    d->n_in = a.cols;
    d->n_out = s.rows;
    d->a = a.v;
    d->b.assign(b.v.begin() + s.row0 * b.cols, b.v.begin() + (s.row0 + s.rows) * b.cols);
  }
  return Status::ok();
}

Result<std::vector<float>> floats(const std::string& dtype, const uint8_t* data, int64_t n, const std::string& what) {
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == "F32") {
    std::memcpy(out.data(), data, size_t(n) * 4);
    return out;
  }
  if (dtype != "F16" && dtype != "BF16")
    return unsupported(what + " is " + dtype + "; adapter tensors must be F32, F16 or BF16");
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, data + 2 * i, 2);
    out[size_t(i)] = dtype == "F16" ? fp16_to_float(h) : bf16_to_float(h);
  }
  return out;
}

Result<Matrix> gguf_matrix(const GgufTensorInfo& t, const std::string& where) {
  const std::string what = where + ": tensor '" + t.name + "'";
  if (t.dims.size() != 2) return invalid_argument(what + " is not a matrix");
  const char* type = t.type == DType::F32 ? "F32" : t.type == DType::F16 ? "F16" : t.type == DType::BF16 ? "BF16" : "";
  if (!*type) return unsupported(what + " has a quantized type; adapter tensors must be F32, F16 or BF16");
  Matrix m{t.dims[1], t.dims[0], {}};
  AUTOGLM_ASSIGN_OR_RETURN(m.v, floats(type, t.data, m.rows * m.cols, what));
  return m;
}

// A GGUF adapter: general.type "adapter", adapter.type "lora", adapter.lora.alpha, and
// tensor pairs NAME.lora_a ([n_in, rank] in GGUF order) and NAME.lora_b ([rank, n_out]).
Status load_gguf(LoraAdapter& ad, const std::string& path, const Model& base, float& alpha) {
  AUTOGLM_ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  if (file->get_string("general.type").value_or("") != "adapter" ||
      file->get_string("adapter.type").value_or("") != "lora")
    return invalid_argument(path + ": not a LoRA adapter (general.type must be 'adapter' and adapter.type 'lora')");
  const std::string arch = file->get_string("general.architecture").value_or("");
  if (arch != base.spec().arch)
    return invalid_argument(path + ": the adapter is for architecture '" + arch + "', the base model is '" +
                            base.spec().arch + "'");
  alpha = float(file->get_float("adapter.lora.alpha").value_or(0));
  for (const GgufTensorInfo& t : file->tensors()) {
    if (t.name.ends_with(".lora_b")) {
      if (!file->find_tensor(t.name.substr(0, t.name.size() - 1) + "a"))
        return invalid_argument(path + ": tensor '" + t.name + "' has no lora_a");
      continue;
    }
    if (!t.name.ends_with(".lora_a"))
      return unsupported(path + ": tensor '" + t.name + "' is not a LoRA matrix (NAME.lora_a / NAME.lora_b)");
    const std::string weight = t.name.substr(0, t.name.size() - 7), b_name = weight + ".lora_b";
    const GgufTensorInfo* b = file->find_tensor(b_name);
    if (!b) return invalid_argument(path + ": tensor '" + t.name + "' has no " + b_name);
    AUTOGLM_ASSIGN_OR_RETURN(Matrix a_m, gguf_matrix(t, path));
    AUTOGLM_ASSIGN_OR_RETURN(Matrix b_m, gguf_matrix(*b, path));
    AUTOGLM_RETURN_IF_ERROR(add_pair(ad, base, path, weight, t.name, std::move(a_m), b_name, std::move(b_m)));
  }
  return Status::ok();
}

// adapter_config.json: the options this engine runs, and a clear refusal of the others.
Status check_peft_config(const nlohmann::json& c, const std::string& where) {
  auto refuse = [&](const std::string& key, const std::string& why) {
    return unsupported(where + ": '" + key + "' " + why);
  };
  if (c.value("peft_type", "LORA") != "LORA") return refuse("peft_type", "must be LORA");
  if (c.value("fan_in_fan_out", false))
    return refuse("fan_in_fan_out", "is true: that is for Conv1D models (GPT-2), which this engine does not load");
  if (c.contains("modules_to_save") && !c["modules_to_save"].is_null() && !c["modules_to_save"].empty())
    return refuse("modules_to_save",
                  "is set: the adapter replaces whole modules, which a LoRA delta cannot express; merge it instead");
  if (c.value("use_dora", false)) return refuse("use_dora", "is true: DoRA adapters are not supported");
  for (const char* pattern : {"rank_pattern", "alpha_pattern"})
    if (c.contains(pattern) && c[pattern].is_object() && !c[pattern].empty())
      return refuse(pattern, "is set: per-module ranks and alphas are not supported");
  if (c.contains("bias") && c["bias"].is_string() && c["bias"] != "none")
    return refuse("bias", "is not \"none\": adapters that train biases are not supported");
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1)
    return invalid_argument(where + ": 'r' must be a positive integer");
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number())
    return invalid_argument(where + ": 'lora_alpha' must be a number");
  return Status::ok();
}

Result<Matrix> peft_matrix(const SafetensorsTensor& t, const std::string& where) {
  const std::string what = where + ": tensor '" + t.name + "'";
  if (t.shape.size() != 2) return invalid_argument(what + " is not a matrix");
  Matrix m{t.shape[0], t.shape[1], {}};
  AUTOGLM_ASSIGN_OR_RETURN(m.v, floats(t.dtype, t.data, m.rows * m.cols, what));
  return m;
}

// A PEFT folder: tensors base_model.model.MODULE.lora_A.weight ([rank, n_in]) and
// .lora_B.weight ([n_out, rank]); MODULE.weight mapped to its GGUF name by the base
// architecture's Hugging Face table (q/k rows permuted as the base's were).
Status load_peft(LoraAdapter& ad, const std::string& dir, const Model& base, float& alpha, bool& rslora) {
  const std::string config_path = dir + "/adapter_config.json";
  AUTOGLM_ASSIGN_OR_RETURN(const nlohmann::json config, read_json_file(config_path));
  AUTOGLM_RETURN_IF_ERROR(check_peft_config(config, config_path));
  alpha = config["lora_alpha"].get<float>();
  rslora = config.value("use_rslora", false);
  const HfArchitecture* arch = find_hf_architecture_for_gguf(base.spec().arch);
  if (!arch)
    return unsupported(dir + ": PEFT adapters need a base architecture with a Hugging Face name table ('" +
                       base.spec().arch + "' has none); use a GGUF adapter");
  const std::string weights = dir + "/adapter_model.safetensors";
  if (!std::filesystem::exists(weights))
    return not_found(dir + ": no adapter_model.safetensors (adapter_model.bin is not read: convert it)");
  AUTOGLM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(weights));
  const std::string prefix = "base_model.model.";
  for (const SafetensorsTensor& t : file->tensors()) {
    if (t.name.ends_with(".lora_B.weight")) continue;  // read with its lora_A
    if (!t.name.ends_with(".lora_A.weight") || t.name.rfind(prefix, 0) != 0)
      return unsupported(weights + ": tensor '" + t.name + "' is not a LoRA matrix of the base model (" + prefix +
                         "MODULE.lora_A.weight / .lora_B.weight)");
    const std::string module = t.name.substr(prefix.size(), t.name.size() - prefix.size() - 14);
    const std::string b_name = prefix + module + ".lora_B.weight";
    const SafetensorsTensor* b = file->find(b_name);
    if (!b) return invalid_argument(weights + ": tensor '" + t.name + "' has no " + b_name);
    const std::string weight = gguf_name(*arch, module + ".weight");
    if (weight.empty())
      return unsupported(weights + ": tensor '" + t.name + "' changes " + module +
                         ", which the base model does not have or an adapter cannot change here");
    AUTOGLM_ASSIGN_OR_RETURN(Matrix a_m, peft_matrix(t, weights));
    AUTOGLM_ASSIGN_OR_RETURN(Matrix b_m, peft_matrix(*b, weights));
    const bool qk = weight.ends_with("attn_q.weight") || weight.ends_with("attn_k.weight");
    if (arch->permute_qk && qk && b_m.rows % base.spec().head_dim == 0) {
      const auto permuted = permute_rows_for_rope(reinterpret_cast<const uint8_t*>(b_m.v.data()), b_m.rows,
                                                  b_m.cols * int64_t(sizeof(float)), base.spec().head_dim);
      std::memcpy(b_m.v.data(), permuted.data(), permuted.size());
    }
    AUTOGLM_RETURN_IF_ERROR(add_pair(ad, base, weights, weight, t.name, std::move(a_m), b_name, std::move(b_m)));
  }
  return Status::ok();
}

}  // namespace

std::vector<LoraSlot> lora_slots(const std::string& name, const Model& base) {
  const Targets t = targets_of(name, base);
  std::vector<LoraSlot> out;
  if (t.layer >= 0)
    for (const Slot& s : t.slots) out.push_back({t.layer, s.target, s.row0, s.rows});
  return out;
}

// The adapter's identity for the prefix cache and its disk tier: its matrices and scale hashed, so
// the same adapter has the same id in every process and a changed file another (a per-process
// counter could give a restarted server's adapter the id of another one's blocks on disk).
static uint64_t content_id(const LoraAdapter& ad) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &ad.rank, sizeof(ad.rank));
  XXH3_64bits_update(state, &ad.scale, sizeof(ad.scale));
  for (const auto& layer : ad.layers)
    for (const auto& d : layer) {
      const int64_t shape[3] = {d ? d->rank : 0, d ? d->n_in : 0, d ? d->n_out : 0};
      XXH3_64bits_update(state, shape, sizeof(shape));
      if (!d) continue;
      XXH3_64bits_update(state, d->a.data(), d->a.size() * sizeof(float));
      XXH3_64bits_update(state, d->b.data(), d->b.size() * sizeof(float));
    }
  const uint64_t id = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return id | 1;  // never 0
}

int64_t LoraAdapter::bytes() const {
  int64_t n = 0;
  for (const auto& layer : layers)
    for (const auto& d : layer)
      if (d) n += int64_t((d->a.size() + d->b.size()) * sizeof(float));
  return n;
}

Result<std::shared_ptr<const LoraAdapter>> load_lora(const std::string& path, const Model& base, float scale) {
  auto ad = std::make_shared<LoraAdapter>();
  ad->path = path;
  ad->layers.resize(size_t(base.spec().n_layer));
  float alpha = 0;
  bool rslora = false;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    AUTOGLM_RETURN_IF_ERROR(load_peft(*ad, path, base, alpha, rslora));
  } else {
    AUTOGLM_RETURN_IF_ERROR(load_gguf(*ad, path, base, alpha));
  }
  if (ad->rank == 0) return invalid_argument(path + ": the adapter has no LoRA matrices");
  const double r = double(ad->rank);
  // llama.cpp's rule for GGUF adapters: no alpha means a scale of 1.
  const double own = alpha == 0 ? 1.0 : rslora ? alpha / std::sqrt(r) : alpha / r;
  ad->scale = float(own * scale);
  ad->id = content_id(*ad);
  return std::shared_ptr<const LoraAdapter>(std::move(ad));
}

Result<std::pair<std::string, float>> parse_lora_arg(const std::string& arg) {
  const size_t colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::pair<std::string, float>(arg, 1.0f);
  const std::string tail = arg.substr(colon + 1);
  char* end = nullptr;
  const float scale = std::strtof(tail.c_str(), &end);
  if (tail.empty() || *end || !std::isfinite(scale))
    return invalid_argument("--lora '" + arg + "': the scale after ':' must be a number (PATH or PATH:SCALE)");
  return std::pair<std::string, float>(arg.substr(0, colon), scale);
}

}  // namespace autoglm
