#include "model/hf_arch.h"

namespace autoglm {
namespace {

using Names = std::vector<std::pair<std::string, std::string>>;

Names concat(std::initializer_list<Names> parts) {
  Names all;
  for (const Names& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// transformers' decoder layout (Llama, Mistral, Qwen2/3, GLM-4-0414); tensors a model
// lacks are simply absent.
const Names kDecoderGlobals = {{"model.embed_tokens.weight", "token_embd.weight"},
                               {"model.norm.weight", "output_norm.weight"},
                               {"lm_head.weight", "output.weight"}};
const Names kAttention = {
    {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},          {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},          {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},          {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
};
const Names kDenseMlp = {
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},  // fused [gate; up]
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
const Names kDecoderLayer = concat({kAttention,
                                    {
                                        // the pre-MLP norm, despite its name
                                        {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                        {"post_self_attn_layernorm.weight", "post_attention_norm.weight"},
                                        {"post_mlp_layernorm.weight", "post_ffw_norm.weight"},
                                    },
                                    kDenseMlp});

// The router and shared experts of the MoE families (Qwen2-MoE's shared_expert with its
// sigmoid gate, DeepSeek's and GLM's shared_experts, DeepSeek-V3's selection bias).
const Names kMoeRouter = {
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
};
// The NextN (multi-token prediction) block's own tensors, after the last decoder layer.
const Names kNextn = {
    {"eh_proj.weight", "nextn.eh_proj.weight"},
    {"enorm.weight", "nextn.enorm.weight"},
    {"hnorm.weight", "nextn.hnorm.weight"},
    {"shared_head.norm.weight", "nextn.shared_head_norm.weight"},
    {"shared_head.head.weight", "nextn.shared_head_head.weight"},
    {"embed_tokens.weight", "nextn.embed_tokens.weight"},
};
const Names kQwenMoeLayer = concat({kDecoderLayer, kMoeRouter});
// GLM-4.5: llama.cpp's glm4moe calls the pre-MLP norm post_attention_norm.
const Names kGlm4MoeLayer = concat(
    {kAttention, {{"post_attention_layernorm.weight", "post_attention_norm.weight"}}, kDenseMlp, kMoeRouter, kNextn});
// DeepSeek-V2/V3 multi-head latent attention; kv_b_proj is split into attn_k_b and attn_v_b.
const Names kMlaLayer = concat({{
                                    {"input_layernorm.weight", "attn_norm.weight"},
                                    {"self_attn.q_proj.weight", "attn_q.weight"},
                                    {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
                                    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
                                    {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
                                    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
                                    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
                                    {"self_attn.kv_b_proj.weight", "attn_kv_b.weight"},
                                    {"self_attn.o_proj.weight", "attn_output.weight"},
                                    {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                },
                                kDenseMlp,
                                kMoeRouter,
                                kNextn});
// Mixtral: block_sparse_moe (transformers 5 folders: mlp.gate and mlp.experts).
const Names kMixtralLayer =
    concat({kDecoderLayer,
            {{"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}, {"mlp.gate.weight", "ffn_gate_inp.weight"}}});

// gpt-oss: attention sinks and biases, the pre-MLP norm as post_attention_norm, a router
// with a bias; its experts are handled whole (HfArchitecture::gpt_oss_experts).
const Names kGptOssLayer = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.sinks", "attn_sinks.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"mlp.router.weight", "ffn_gate_inp.weight"},
    {"mlp.router.bias", "ffn_gate_inp.bias"},
};

const HfExperts kSwigluExperts = {
    "mlp.experts.", {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"}}};
const HfExperts kMixtralExperts = {"block_sparse_moe.experts.",
                                   {{"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"}}};

// THUDM's ChatGLM remote-code layout (GLM-4-9B-chat).
const Names kChatGlmGlobals = {{"transformer.embedding.word_embeddings.weight", "token_embd.weight"},
                               {"transformer.encoder.final_layernorm.weight", "output_norm.weight"},
                               {"transformer.output_layer.weight", "output.weight"}};
const Names kChatGlmLayer = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attention.query_key_value.weight", "attn_qkv.weight"},
    {"self_attention.query_key_value.bias", "attn_qkv.bias"},
    {"self_attention.dense.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.dense_h_to_4h.weight", "ffn_up.weight"},  // fused [gate; up]
    {"mlp.dense_4h_to_h.weight", "ffn_down.weight"},
};

constexpr int kSoftmax = 1, kSigmoid = 2;  // GGUF expert_gating_func

HfArchitecture dense(std::string hf, std::string gguf, std::string prefix, Names globals, Names layer,
                     bool permute_qk = false, double rotary_fraction = 1.0, bool rope_base_from_ratio = false) {
  HfArchitecture a;
  a.hf_name = std::move(hf);
  a.gguf_arch = std::move(gguf);
  a.layer_prefix = std::move(prefix);
  a.global_tensors = std::move(globals);
  a.layer_tensors = std::move(layer);
  a.permute_qk = permute_qk;
  a.rotary_fraction = rotary_fraction;
  a.rope_base_from_ratio = rope_base_from_ratio;
  return a;
}

HfArchitecture moe(std::string hf, std::string gguf, Names layer, HfExperts experts) {
  HfArchitecture a = dense(std::move(hf), std::move(gguf), "model.layers.", kDecoderGlobals, std::move(layer));
  a.experts = std::move(experts);
  return a;
}

// DeepSeek-V2/V3 and GLM-4.7-Flash (which llama.cpp converts to deepseek2). The rope part of
// q and k is rotated in adjacent pairs by both the Hugging Face code and llama.cpp: no permutation.
HfArchitecture mla(std::string hf, int gating, bool keep_nextn) {
  HfArchitecture a = moe(std::move(hf), "deepseek2", kMlaLayer, kSwigluExperts);
  a.mla = true;
  a.default_gating = gating;
  a.keep_nextn = keep_nextn;
  return a;
}

std::vector<HfArchitecture> build_table() {
  std::vector<HfArchitecture> t = {
      dense("LlamaForCausalLM", "llama", "model.layers.", kDecoderGlobals, kDecoderLayer, true),
      dense("MistralForCausalLM", "llama", "model.layers.", kDecoderGlobals, kDecoderLayer, true),
      dense("Qwen2ForCausalLM", "qwen2", "model.layers.", kDecoderGlobals, kDecoderLayer),
      dense("Qwen3ForCausalLM", "qwen3", "model.layers.", kDecoderGlobals, kDecoderLayer),
      dense("Glm4ForCausalLM", "glm4", "model.layers.", kDecoderGlobals, kDecoderLayer, false, 0.5),
      dense("ChatGLMModel", "chatglm", "transformer.encoder.layers.", kChatGlmGlobals, kChatGlmLayer, false, 0.5, true),
      dense("ChatGLMForConditionalGeneration", "chatglm", "transformer.encoder.layers.", kChatGlmGlobals, kChatGlmLayer,
            false, 0.5, true),
  };
  // Mixtral runs as llama with experts (after Llama, which stays llama's LoRA naming).
  HfArchitecture mixtral = moe("MixtralForCausalLM", "llama", kMixtralLayer, kMixtralExperts);
  mixtral.permute_qk = true;
  t.push_back(mixtral);
  t.push_back(moe("Qwen2MoeForCausalLM", "qwen2moe", kQwenMoeLayer, kSwigluExperts));
  t.push_back(moe("Qwen3MoeForCausalLM", "qwen3moe", kQwenMoeLayer, kSwigluExperts));
  // GLM-4.5/4.6/4.7: rotate_half (NeoX) rope on the first half of each head, sigmoid router.
  HfArchitecture glm4moe = moe("Glm4MoeForCausalLM", "glm4moe", kGlm4MoeLayer, kSwigluExperts);
  glm4moe.rotary_fraction = 0.5;
  glm4moe.default_gating = kSigmoid;
  glm4moe.keep_nextn = true;
  t.push_back(glm4moe);
  HfArchitecture gpt_oss = moe("GptOssForCausalLM", "gpt-oss", kGptOssLayer, {"mlp.experts.", {}});
  gpt_oss.gpt_oss_experts = true;
  t.push_back(gpt_oss);
  // Vision-language models: the text decoders of GLM-4.1V (glm4 with M-RoPE) and Qwen2.5-VL.
  HfArchitecture glm4v =
      dense("Glm4vForConditionalGeneration", "glm4", "model.layers.", kDecoderGlobals, kDecoderLayer, false, 0.5);
  glm4v.vision_language = glm4v.neox_rope_rows = true;
  t.push_back(glm4v);
  HfArchitecture qwen25vl =
      dense("Qwen2_5_VLForConditionalGeneration", "qwen2vl", "model.layers.", kDecoderGlobals, kDecoderLayer);
  qwen25vl.vision_language = true;
  t.push_back(qwen25vl);
  t.push_back(mla("DeepseekV2ForCausalLM", kSoftmax, false));
  t.push_back(mla("DeepseekV3ForCausalLM", kSigmoid, false));
  t.push_back(mla("Glm4MoeLiteForCausalLM", kSigmoid, true));
  return t;
}

const std::vector<HfArchitecture>& table() {
  static const std::vector<HfArchitecture> t = build_table();
  return t;
}

}  // namespace

std::string text_tensor_name(const HfArchitecture& arch, const std::string& name) {
  if (!arch.vision_language) return name;
  const auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (starts("model.visual.") || starts("visual.")) return "";
  const std::string moved = "model.language_model.";
  if (starts(moved.c_str())) return "model." + name.substr(moved.size());
  return name;
}

const HfArchitecture* find_hf_architecture(const std::string& hf_name) {
  for (const auto& a : table())
    if (a.hf_name == hf_name) return &a;
  return nullptr;
}

const HfArchitecture* find_hf_architecture_for_gguf(const std::string& gguf_arch) {
  for (const auto& a : table())
    if (a.gguf_arch == gguf_arch) return &a;
  return nullptr;
}

std::string supported_hf_architectures() {
  std::string s;
  for (const auto& a : table()) s += (s.empty() ? "" : ", ") + a.hf_name;
  return s;
}

}  // namespace autoglm
