#include "model/create_vision_model.h"

#include "model/hf_vision.h"
#include "model/random_tensors.h"

namespace autoglm {
namespace {

struct VlmPreset {
  std::string name;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
  int64_t v_embd, v_layer, v_head, v_ff;  // the tower (GLM: v_ff is the merger's, the blocks' is n_embd)
};

const std::vector<VlmPreset>& presets(bool glm) {
  static const std::vector<VlmPreset> glm4v = {
      {"tiny", 256, 2, 4, 2, 64, 512, 2048, 4096, 128, 2, 2, 512},
      {"9b", 4096, 40, 32, 2, 128, 13696, 151552, 65536, 1536, 24, 12, 13696},
  };
  static const std::vector<VlmPreset> qwen25vl = {
      {"tiny", 256, 2, 4, 2, 64, 512, 2048, 4096, 128, 4, 2, 256},
      {"9b", 3584, 28, 28, 4, 128, 18944, 152064, 128000, 1280, 32, 16, 3420},
  };
  return glm ? glm4v : qwen25vl;
}

// The markers each family's template and image processor use, all control tokens (GLM-4.1V's
// tokenizer marks its <think> and <answer> tags special too: vLLM drops them from the text).
std::vector<SpecialPiece> special_pieces(bool glm) {
  const TokenType c = TokenType::kControl;
  if (glm)
    return {{"[gMASK]", c},          {"<sop>", c},         {"<|system|>", c},         {"<|user|>", c},
            {"<|assistant|>", c},    {"<|endoftext|>", c}, {"<|begin_of_image|>", c}, {"<|image|>", c},
            {"<|end_of_image|>", c}, {"<think>", c},       {"</think>", c},           {"<answer>", c},
            {"</answer>", c}};
  return {{"<|im_start|>", c},     {"<|im_end|>", c},    {"<|endoftext|>", c},
          {"<|vision_start|>", c}, {"<|image_pad|>", c}, {"<|vision_end|>", c}};
}

// GLM-4.1V's template: [gMASK]<sop>, role markers, an image part as
// <|begin_of_image|><|image|><|end_of_image|> (the processor repeats <|image|> per token).
constexpr const char* kGlm4vTemplate =
    "[gMASK]<sop>{%- for m in messages %}"
    "{%- if m.role == 'system' %}<|system|>\n{{ m.content }}"
    "{%- elif m.role == 'user' %}<|user|>\n"
    "{%- if m.content is string %}{{ m.content }}{%- else %}{%- for item in m.content %}"
    "{%- if item.type == 'image' or item.type == 'image_url' %}<|begin_of_image|><|image|><|end_of_image|>"
    "{%- elif item.type == 'text' %}{{ item.text }}{%- endif %}{%- endfor %}{%- endif %}"
    "{%- elif m.role == 'assistant' %}<|assistant|>\n{{ m.content }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{%- endif %}";

// Qwen2.5-VL's: ChatML, an image part as <|vision_start|><|image_pad|><|vision_end|>.
constexpr const char* kQwen25vlTemplate =
    "{%- for m in messages %}{%- if loop.first and m.role != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{%- endif %}"
    "<|im_start|>{{ m.role }}\n"
    "{%- if m.content is string %}{{ m.content }}{%- else %}{%- for item in m.content %}"
    "{%- if item.type == 'image' or item.type == 'image_url' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif item.type == 'text' %}{{ item.text }}{%- endif %}{%- endfor %}{%- endif %}<|im_end|>\n"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

void set_u32(GgufWriter& w, const std::string& key, int64_t v) {
  w.set(key, GgufValue::u32(uint32_t(v)));
}

void add_text_keys(GgufWriter& w, bool glm, const VlmPreset& p) {
  const std::string a = glm ? "glm4." : "qwen2vl.";
  set_u32(w, a + "context_length", p.n_ctx);
  set_u32(w, a + "embedding_length", p.n_embd);
  set_u32(w, a + "block_count", p.n_layer);
  set_u32(w, a + "feed_forward_length", p.n_ff);
  set_u32(w, a + "attention.head_count", p.n_head);
  set_u32(w, a + "attention.head_count_kv", p.n_head_kv);
  set_u32(w, a + "attention.key_length", p.head_dim);
  set_u32(w, a + "attention.value_length", p.head_dim);
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::f32(glm ? 1e-5f : 1e-6f));
  w.set(a + "rope.freq_base", GgufValue::f32(glm ? 10000.0f : 1e6f));
  const int64_t n_rot = glm ? p.head_dim / 2 : p.head_dim, pairs = n_rot / 2;
  set_u32(w, a + "rope.dimension_count", n_rot);
  // The checkpoints' split ([8, 12, 12] of 32 pairs, [16, 24, 24] of 64): a quarter for time.
  const int32_t t = int32_t(pairs / 4), hw = int32_t((pairs - t) / 2);
  w.set(a + "rope.dimension_sections", GgufValue::i32_array({t, hw, int32_t(pairs - t - hw), 0}));
}

Status add_text_block(TensorMaker& make, bool glm, const VlmPreset& p, int64_t il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  const int64_t q = p.n_head * p.head_dim, kv = p.n_head_kv * p.head_dim;
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_q.weight", q, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_k.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_v.weight", kv, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_q.bias", q, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_k.bias", kv, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_v.bias", kv, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_output.weight", p.n_embd, q));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_norm.weight", p.n_embd, 1.0f, 0.0f));
  if (glm) {  // post norms and the fused [gate; up], as llama.cpp's glm4 reads them
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "post_attention_norm.weight", p.n_embd, 1.0f, 0.0f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "post_ffw_norm.weight", p.n_embd, 1.0f, 0.0f));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", 2 * p.n_ff, p.n_embd));
  } else {
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate.weight", p.n_ff, p.n_embd));
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", p.n_ff, p.n_embd));
  }
  return make.matrix(b + "ffn_down.weight", p.n_embd, p.n_ff);
}

Status write_text_model(const CreateModelOptions& o, bool glm, const VlmPreset& p, const std::string& path,
                        ThreadPool& pool) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string(glm ? "glm4" : "qwen2vl"));
  w.set("general.name", GgufValue::string("autoglm-random-" + o.arch + "-" + p.name));
  w.set("general.file_type", GgufValue::u32(gguf_file_type(o.type)));
  if (dtype_info(o.type).block_elems > 1) w.set("general.quantization_version", GgufValue::u32(2));
  add_text_keys(w, glm, p);
  add_vocabulary(w, p.n_vocab, special_pieces(glm));                 // before the ids below refer to it
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));  // the templates open the prompt
  const std::vector<SpecialPiece> specials = special_pieces(glm);
  for (size_t i = 0; i < specials.size(); ++i)  // they take the last ids
    if (specials[i].first == (glm ? "<|endoftext|>" : "<|im_end|>"))
      w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(p.n_vocab - int64_t(specials.size() - i))));
  w.set("tokenizer.chat_template", GgufValue::string(glm ? kGlm4vTemplate : kQwen25vlTemplate));
  TensorMaker make(w, o.type, o.seed, pool);
  AUTOGLM_RETURN_IF_ERROR(make.matrix("token_embd.weight", p.n_vocab, p.n_embd));
  AUTOGLM_RETURN_IF_ERROR(make.vector("output_norm.weight", p.n_embd, 1.0f, 0.0f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("output.weight", p.n_vocab, p.n_embd));
  for (int64_t il = 0; il < p.n_layer; ++il) AUTOGLM_RETURN_IF_ERROR(add_text_block(make, glm, p, il));
  return w.write(path);
}

void add_projector_keys(GgufWriter& w, bool glm, const VlmPreset& p) {
  w.set("general.architecture", GgufValue::string("clip"));
  w.set("general.type", GgufValue::string("mmproj"));
  w.set("clip.projector_type", GgufValue::string(glm ? "glm4v" : "qwen2.5vl_merger"));
  w.set("clip.has_vision_encoder", GgufValue::boolean(true));
  w.set("clip.use_silu", GgufValue::boolean(true));
  set_u32(w, "clip.vision.embedding_length", p.v_embd);
  set_u32(w, "clip.vision.block_count", p.v_layer);
  set_u32(w, "clip.vision.attention.head_count", p.v_head);
  set_u32(w, "clip.vision.feed_forward_length", p.v_ff);
  set_u32(w, "clip.vision.projection_dim", p.n_embd);
  set_u32(w, "clip.vision.patch_size", 14);
  set_u32(w, "clip.vision.spatial_merge_size", 2);
  w.set("clip.vision.attention.layer_norm_epsilon", GgufValue::f32(glm ? 1e-5f : 1e-6f));
  w.set("clip.vision.image_mean", GgufValue::f32_array({0.48145466f, 0.4578275f, 0.40821073f}));
  w.set("clip.vision.image_std", GgufValue::f32_array({0.26862954f, 0.26130258f, 0.27577711f}));
  set_u32(w, "clip.vision.image_size", glm ? 336 : 560);
  if (!glm) {
    set_u32(w, "clip.vision.window_size", 112);
    set_u32(w, "clip.vision.n_wa_pattern", p.v_layer >= 8 ? 8 : 2);
  }
}

Status add_tower_block(TensorMaker& make, bool glm, const VlmPreset& p, int64_t il) {
  const std::string b = "v.blk." + std::to_string(il) + ".";
  const int64_t c = p.v_embd, ff = glm ? p.n_embd : p.v_ff;
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ln1.weight", c, 1.0f, 0.05f));
  AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ln2.weight", c, 1.0f, 0.05f));
  if (glm) {
    AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_qkv.weight", 3 * c, c));
  } else {
    for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
      AUTOGLM_RETURN_IF_ERROR(make.matrix(b + m + ".weight", c, c));
      AUTOGLM_RETURN_IF_ERROR(make.vector(b + m + ".bias", c, 0.0f, 0.02f));
    }
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "attn_out.bias", c, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_gate.bias", ff, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_up.bias", ff, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.vector(b + "ffn_down.bias", c, 0.0f, 0.02f));
  }
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "attn_out.weight", c, c));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_gate.weight", ff, c));
  AUTOGLM_RETURN_IF_ERROR(make.matrix(b + "ffn_up.weight", ff, c));
  return make.matrix(b + "ffn_down.weight", c, ff);
}

Status write_projector(const CreateModelOptions& o, bool glm, const VlmPreset& p, const std::string& path,
                       ThreadPool& pool) {
  GgufWriter w;
  add_projector_keys(w, glm, p);
  TensorMaker make(w, o.type, o.seed + 1, pool);
  const int64_t c = p.v_embd, d = p.n_embd;
  for (const char* frame : {"v.patch_embd.weight", "v.patch_embd.weight.1"})
    AUTOGLM_RETURN_IF_ERROR(make.vector(frame, {14, 14, 3, c}, 0.0f, 0.02f));
  for (int64_t il = 0; il < p.v_layer; ++il) AUTOGLM_RETURN_IF_ERROR(add_tower_block(make, glm, p, il));
  AUTOGLM_RETURN_IF_ERROR(make.vector("v.post_ln.weight", c, 1.0f, 0.05f));
  if (!glm) {
    AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.0.weight", 4 * c, 4 * c));
    AUTOGLM_RETURN_IF_ERROR(make.vector("mm.0.bias", 4 * c, 0.0f, 0.02f));
    AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.2.weight", d, 4 * c));
    AUTOGLM_RETURN_IF_ERROR(make.vector("mm.2.bias", d, 0.0f, 0.02f));
    return w.write(path);
  }
  AUTOGLM_RETURN_IF_ERROR(make.vector("v.patch_embd.bias", c, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.vector("v.norm_embd.weight", c, 1.0f, 0.05f));
  AUTOGLM_RETURN_IF_ERROR(make.vector("v.position_embd.weight", {c, 24 * 24}, 0.0f, 0.02f));  // F32, as llama.cpp
  AUTOGLM_RETURN_IF_ERROR(make.vector("mm.patch_merger.weight", {2, 2, c, d}, 0.0f, 0.5f / 22.6f));
  AUTOGLM_RETURN_IF_ERROR(make.vector("mm.patch_merger.bias", d, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.model.fc.weight", d, d));
  AUTOGLM_RETURN_IF_ERROR(make.vector("mm.post_norm.weight", d, 1.0f, 0.05f));
  AUTOGLM_RETURN_IF_ERROR(make.vector("mm.post_norm.bias", d, 0.0f, 0.02f));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.gate.weight", p.v_ff, d));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.up.weight", p.v_ff, d));
  AUTOGLM_RETURN_IF_ERROR(make.matrix("mm.down.weight", d, p.v_ff));
  return w.write(path);
}

}  // namespace

bool is_vision_arch(const std::string& arch) {
  return arch == "glm4v" || arch == "qwen25vl";
}

Status create_random_vision_model(const CreateModelOptions& o, const std::string& path) {
  const bool glm = o.arch == "glm4v";
  const VlmPreset* preset = nullptr;
  for (const VlmPreset& p : presets(glm))
    if (p.name == o.preset) preset = &p;
  if (!preset)
    return invalid_argument("--preset '" + o.preset + "' is not one of tiny, 9b (for --arch " + o.arch + ")");
  VlmPreset p = *preset;
  if (o.n_layer != 0) {
    if (o.n_layer < 1 || o.n_layer > 1000)
      return invalid_argument("--n-layer " + std::to_string(o.n_layer) + " is not in [1, 1000]");
    p.n_layer = o.n_layer;
  }
  if (o.n_vocab != 0)
    return invalid_argument("--vocab is not taken for --arch " + o.arch + " (its markers are placed)");
  if (!ref::dtype_can_quantize(o.type))
    return invalid_argument("--type " + std::string(dtype_name(o.type)) +
                            " is not a weight type this build writes (it reads more than it writes)");
  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  AUTOGLM_RETURN_IF_ERROR(write_text_model(o, glm, p, path, pool));
  return write_projector(o, glm, p, projector_path_beside(path), pool);
}

}  // namespace autoglm
