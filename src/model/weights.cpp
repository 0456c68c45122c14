#include "model/weights.h"

#include "formats/mapped_file.h"
#include "kernels/ref/quants.h"
#include "model/tensor_binder.h"

namespace autoglm {
namespace {

Status bind_attention(const TensorBinder& b, const ModelSpec& s, const std::string& p, LayerWeights& l) {
  const bool fused = b.find(p + "attn_qkv.weight") != nullptr;
  if (fused) {  // rows: [q (q_dim) | k (kv_dim) | v (v_dim)]
    AUTOGLM_ASSIGN_OR_RETURN(auto qkv, b.matrix(p + "attn_qkv.weight", s.q_dim() + s.kv_dim() + s.v_dim(), s.n_embd));
    l.wq = row_range(qkv, 0, s.q_dim());
    l.wk = row_range(qkv, s.q_dim(), s.kv_dim());
    l.wv = row_range(qkv, s.q_dim() + s.kv_dim(), s.v_dim());
    AUTOGLM_ASSIGN_OR_RETURN(Vec bias, b.vector(p + "attn_qkv.bias", s.q_dim() + s.kv_dim() + s.v_dim(), s.qkv_bias));
    if (!bias.empty()) {
      l.bq = slice(bias, 0, s.q_dim());
      l.bk = slice(bias, s.q_dim(), s.kv_dim());
      l.bv = slice(bias, s.q_dim() + s.kv_dim(), s.v_dim());
    }
    return Status::ok();
  }
  AUTOGLM_ASSIGN_OR_RETURN(l.wq, b.matrix(p + "attn_q.weight", s.q_dim(), s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(l.wk, b.matrix(p + "attn_k.weight", s.kv_dim(), s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(l.wv, b.matrix(p + "attn_v.weight", s.v_dim(), s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(l.bq, b.vector(p + "attn_q.bias", s.q_dim(), s.qkv_bias));
  AUTOGLM_ASSIGN_OR_RETURN(l.bk, b.vector(p + "attn_k.bias", s.kv_dim(), s.qkv_bias));
  AUTOGLM_ASSIGN_OR_RETURN(l.bv, b.vector(p + "attn_v.bias", s.v_dim(), s.qkv_bias));
  return Status::ok();
}

Status bind_mlp(const TensorBinder& b, const ModelSpec& s, const std::string& p, LayerWeights& l) {
  if (!b.find(p + "ffn_gate.weight")) {  // fused: ffn_up rows are [gate (n_ff) | up (n_ff)]
    AUTOGLM_ASSIGN_OR_RETURN(auto gate_up, b.matrix(p + "ffn_up.weight", 2 * s.n_ff, s.n_embd));
    l.gate = row_range(gate_up, 0, s.n_ff);
    l.up = row_range(gate_up, s.n_ff, s.n_ff);
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(l.gate, b.matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(l.up, b.matrix(p + "ffn_up.weight", s.n_ff, s.n_embd));
  }
  AUTOGLM_ASSIGN_OR_RETURN(l.down, b.matrix(p + "ffn_down.weight", s.n_embd, s.n_ff));
  return Status::ok();
}

Status bind_experts(const TensorBinder& b, const ModelSpec& s, const std::string& p, ExpertWeights& x) {
  const MoeSpec& m = s.moe;
  AUTOGLM_ASSIGN_OR_RETURN(x.router, b.matrix(p + "ffn_gate_inp.weight", m.n_expert, s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(x.router_bias, b.vector(p + "ffn_gate_inp.bias", m.n_expert, false));
  AUTOGLM_ASSIGN_OR_RETURN(x.selection_bias, b.vector(p + "exp_probs_b.bias", m.n_expert, false));
  AUTOGLM_ASSIGN_OR_RETURN(x.gate, b.stack(p + "ffn_gate_exps.weight", m.n_expert, m.n_ff_exp, s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(x.up, b.stack(p + "ffn_up_exps.weight", m.n_expert, m.n_ff_exp, s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(x.down, b.stack(p + "ffn_down_exps.weight", m.n_expert, s.n_embd, m.n_ff_exp));
  AUTOGLM_ASSIGN_OR_RETURN(x.gate_bias, b.vector(p + "ffn_gate_exps.bias", m.n_expert * m.n_ff_exp, false));
  AUTOGLM_ASSIGN_OR_RETURN(x.up_bias, b.vector(p + "ffn_up_exps.bias", m.n_expert * m.n_ff_exp, false));
  AUTOGLM_ASSIGN_OR_RETURN(x.down_bias, b.vector(p + "ffn_down_exps.bias", m.n_expert * s.n_embd, false));
  if (m.n_ff_shexp > 0 || b.find(p + "ffn_gate_shexp.weight")) {
    const int64_t n_sh = m.n_ff_shexp;
    AUTOGLM_ASSIGN_OR_RETURN(x.shared_gate, b.matrix(p + "ffn_gate_shexp.weight", n_sh, s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(x.shared_up, b.matrix(p + "ffn_up_shexp.weight", n_sh, s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(x.shared_down, b.matrix(p + "ffn_down_shexp.weight", s.n_embd, n_sh));
    if (b.find(p + "ffn_gate_inp_shexp.weight")) {
      AUTOGLM_ASSIGN_OR_RETURN(x.shared_gate_inp, b.matrix(p + "ffn_gate_inp_shexp.weight", 1, s.n_embd));
    }
  }
  return Status::ok();
}

Status bind_mla(const TensorBinder& b, const ModelSpec& s, const std::string& p, MlaWeights& w) {
  const MlaSpec& m = s.mla;
  const int64_t q_width = s.n_head * (m.qk_nope + s.n_rot);
  if (m.q_lora_rank > 0) {
    AUTOGLM_ASSIGN_OR_RETURN(w.q_a, b.matrix(p + "attn_q_a.weight", m.q_lora_rank, s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(w.q_a_norm, b.vector(p + "attn_q_a_norm.weight", m.q_lora_rank));
    AUTOGLM_ASSIGN_OR_RETURN(w.q_b, b.matrix(p + "attn_q_b.weight", q_width, m.q_lora_rank));
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(w.q, b.matrix(p + "attn_q.weight", q_width, s.n_embd));
  }
  AUTOGLM_ASSIGN_OR_RETURN(w.kv_a, b.matrix(p + "attn_kv_a_mqa.weight", m.kv_lora_rank + s.n_rot, s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(w.kv_a_norm, b.vector(p + "attn_kv_a_norm.weight", m.kv_lora_rank));
  if (!b.find(p + "attn_k_b.weight") && b.find(p + "attn_kv_b.weight"))
    return unsupported(p +
                       "attn_kv_b.weight: this deepseek2 file predates the split attn_k_b/attn_v_b tensors of "
                       "multi-head latent attention; convert the model again");
  AUTOGLM_ASSIGN_OR_RETURN(w.k_b, b.stack(p + "attn_k_b.weight", s.n_head, m.kv_lora_rank, m.qk_nope));
  AUTOGLM_ASSIGN_OR_RETURN(w.v_b, b.stack(p + "attn_v_b.weight", s.n_head, m.v_head, m.kv_lora_rank));
  return Status::ok();
}

Result<LayerWeights> bind_layer(const TensorBinder& b, const ModelSpec& s, int64_t il) {
  const std::string p = "blk." + std::to_string(il) + ".";
  LayerWeights l;
  AUTOGLM_ASSIGN_OR_RETURN(l.attn_norm, b.vector(p + "attn_norm.weight", s.n_embd));
  // glm4moe and gpt-oss name their pre-FFN norm post_attention_norm (it is not a post norm).
  const bool pre_ffn_named_post =
      !s.post_norms && !b.find(p + "ffn_norm.weight") && b.find(p + "post_attention_norm.weight");
  AUTOGLM_ASSIGN_OR_RETURN(
      l.ffn_norm, b.vector(p + (pre_ffn_named_post ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd));
  const int64_t attn_out = s.mla.enabled() ? s.n_head * s.mla.v_head : s.n_head * s.head_dim_v;
  if (s.mla.enabled()) {
    AUTOGLM_RETURN_IF_ERROR(bind_mla(b, s, p, l.mla));
  } else {
    AUTOGLM_RETURN_IF_ERROR(bind_attention(b, s, p, l));
  }
  AUTOGLM_ASSIGN_OR_RETURN(l.wo, b.matrix(p + "attn_output.weight", s.n_embd, attn_out));
  AUTOGLM_ASSIGN_OR_RETURN(l.bo, b.vector(p + "attn_output.bias", s.n_embd, false));
  if (s.attn_sinks) {
    AUTOGLM_ASSIGN_OR_RETURN(l.sinks, b.vector(p + "attn_sinks.weight", s.n_head));
  }
  // qwen3 needs them; others (glm4moe in some releases) have them where the file does.
  if (!s.mla.enabled()) {
    AUTOGLM_ASSIGN_OR_RETURN(l.q_norm, b.vector(p + "attn_q_norm.weight", s.head_dim, s.qk_norm));
    AUTOGLM_ASSIGN_OR_RETURN(l.k_norm, b.vector(p + "attn_k_norm.weight", s.head_dim, s.qk_norm));
    if (l.q_norm.empty() != l.k_norm.empty())  // the forward pass norms both or neither
      return corrupt(b.path() + ": tensor '" + p + (l.q_norm.empty() ? "attn_q_norm" : "attn_k_norm") +
                     ".weight' is missing (its q/k partner is there)");
  }
  if (s.post_norms) {
    AUTOGLM_ASSIGN_OR_RETURN(l.attn_post_norm, b.vector(p + "post_attention_norm.weight", s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(l.ffn_post_norm, b.vector(p + "post_ffw_norm.weight", s.n_embd));
  }
  if (s.moe.is_moe_layer(il)) {
    AUTOGLM_RETURN_IF_ERROR(bind_experts(b, s, p, l.experts));
  } else {
    AUTOGLM_RETURN_IF_ERROR(bind_mlp(b, s, p, l));
  }
  return l;
}

// NextN block k: the decoder layer at n_layer + k and its nextn.* tensors; absent optional
// ones fall back on the model's embedding, output norm and output.
Result<NextnWeights> bind_nextn(const TensorBinder& b, const ModelSpec& s, const ModelWeights& w, int64_t k) {
  const int64_t il = s.n_layer + k;
  const std::string p = "blk." + std::to_string(il) + ".nextn.";
  NextnWeights n;
  AUTOGLM_ASSIGN_OR_RETURN(n.layer, bind_layer(b, s, il));
  AUTOGLM_ASSIGN_OR_RETURN(n.eh_proj, b.matrix(p + "eh_proj.weight", s.n_embd, 2 * s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(n.enorm, b.vector(p + "enorm.weight", s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(n.hnorm, b.vector(p + "hnorm.weight", s.n_embd));
  AUTOGLM_ASSIGN_OR_RETURN(n.shared_head_norm, b.vector(p + "shared_head_norm.weight", s.n_embd, false));
  if (n.shared_head_norm.empty()) n.shared_head_norm = w.output_norm;
  n.embed = w.token_embd;
  if (b.find(p + "embed_tokens.weight")) {
    AUTOGLM_ASSIGN_OR_RETURN(n.embed, b.matrix(p + "embed_tokens.weight", s.n_vocab, s.n_embd));
  }
  n.head = w.output;
  if (b.find(p + "shared_head_head.weight")) {
    AUTOGLM_ASSIGN_OR_RETURN(n.head, b.matrix(p + "shared_head_head.weight", s.n_vocab, s.n_embd));
  }
  return n;
}

}  // namespace

Result<ModelWeights> bind_weights(const GgufFile& file, ModelSpec& spec) {
  TensorBinder b(file);
  const GgufTensorInfo* embd = b.find("token_embd.weight");
  if (!embd) return corrupt(file.path() + ": missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != spec.n_embd)
    return corrupt(file.path() + ": tensor 'token_embd.weight' has shape " + shape_string(embd->dims) + ", expected [" +
                   std::to_string(spec.n_embd) + ", n_vocab]");
  if (spec.n_vocab == 0) spec.n_vocab = embd->dims[1];

  ModelWeights w;
  AUTOGLM_ASSIGN_OR_RETURN(w.token_embd, b.matrix("token_embd.weight", spec.n_vocab, spec.n_embd));
  // Decoding reads the table in place, a row a token: with a cold page cache each row was a major
  // fault (0.3-2.5 ms of a 25 ms MoE step, measured).
  read_ahead(w.token_embd.data, size_t(w.token_embd.bytes()));
  AUTOGLM_ASSIGN_OR_RETURN(w.output_norm, b.vector("output_norm.weight", spec.n_embd));
  spec.tied_embeddings = b.find("output.weight") == nullptr;
  if (spec.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(w.output, b.matrix("output.weight", spec.n_vocab, spec.n_embd));
  }
  AUTOGLM_ASSIGN_OR_RETURN(spec.rope_freq_factors, b.vector("rope_freqs.weight", spec.n_rot / 2, false));
  for (float f : spec.rope_freq_factors)
    if (!(f > 0)) return corrupt(file.path() + ": tensor 'rope_freqs.weight' holds a factor that is not positive");
  for (int64_t il = 0; il < spec.n_layer; ++il) {
    AUTOGLM_ASSIGN_OR_RETURN(LayerWeights layer, bind_layer(b, spec, il));
    w.layers.push_back(std::move(layer));
  }
  const bool has_nextn = b.find("blk." + std::to_string(spec.n_layer) + ".nextn.eh_proj.weight") != nullptr;
  for (int64_t k = 0; has_nextn && k < spec.n_nextn; ++k) {
    AUTOGLM_ASSIGN_OR_RETURN(NextnWeights block, bind_nextn(b, spec, w, k));
    w.nextn.push_back(std::move(block));
  }
  return w;
}

}  // namespace autoglm
