#include "model/hf_arch.h"

namespace autoglm {
namespace {

using Names = std::vector<std::pair<std::string, std::string>>;

// transformers' decoder layout (Llama, Mistral, Qwen2/3, GLM-4-0414); tensors a model
// lacks are simply absent.
const Names kDecoderGlobals = {{"model.embed_tokens.weight", "token_embd.weight"},
                               {"model.norm.weight", "output_norm.weight"},
                               {"lm_head.weight", "output.weight"}};
const Names kDecoderLayer = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},  // the pre-MLP norm, despite its name
    {"post_self_attn_layernorm.weight", "post_attention_norm.weight"},
    {"post_mlp_layernorm.weight", "post_ffw_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.gate_up_proj.weight", "ffn_up.weight"},  // fused [gate; up]
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

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

const std::vector<HfArchitecture>& table() {
  static const std::vector<HfArchitecture> t = {
      {"LlamaForCausalLM", "llama", "model.layers.", kDecoderGlobals, kDecoderLayer, true},
      {"MistralForCausalLM", "llama", "model.layers.", kDecoderGlobals, kDecoderLayer, true},
      {"Qwen2ForCausalLM", "qwen2", "model.layers.", kDecoderGlobals, kDecoderLayer},
      {"Qwen3ForCausalLM", "qwen3", "model.layers.", kDecoderGlobals, kDecoderLayer},
      {"Glm4ForCausalLM", "glm4", "model.layers.", kDecoderGlobals, kDecoderLayer, false, 0.5},
      {"ChatGLMModel", "chatglm", "transformer.encoder.layers.", kChatGlmGlobals, kChatGlmLayer, false, 0.5, true},
      {"ChatGLMForConditionalGeneration", "chatglm", "transformer.encoder.layers.", kChatGlmGlobals, kChatGlmLayer,
       false, 0.5, true},
  };
  return t;
}

}  // namespace

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
