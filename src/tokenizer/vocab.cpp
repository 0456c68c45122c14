#include "tokenizer/vocab.h"

#include <cstdio>

namespace autoglm {
namespace {

Status read_special_id(const GgufFile& f, const char* key, int32_t n_vocab, int32_t& out) {
  const GgufValue* v = f.find(std::string("tokenizer.ggml.") + key);
  if (!v) return Status::ok();
  if (!v->is_integer()) return corrupt(f.path() + ": tokenizer.ggml." + key + " is not an integer");
  // Some converters write -1 (as uint32 0xFFFFFFFF) for "none".
  if (v->integer < 0 || v->integer >= n_vocab) return Status::ok();
  out = int32_t(v->integer);
  return Status::ok();
}

// Pre-tokenizers whose reference tokenizer adds BOS unless the file says otherwise.
bool bpe_adds_bos_by_default(const std::string& pre) {
  return pre == "llama3" || pre == "llama-bpe" || pre == "falcon3";
}

}  // namespace

int32_t guess_end_of_turn(const Vocab& v) {
  for (const char* name : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
    const int32_t id = v.find(name);
    if (id >= 0 && v.types[size_t(id)] == TokenType::kControl && id != v.eos) return id;
  }
  return -1;
}

void apply_harmony_ends(Vocab& v) {
  const int32_t ret = v.find("<|return|>"), call = v.find("<|call|>"), end = v.find("<|end|>");
  if (ret < 0 || call < 0) return;
  if (end >= 0) {
    if (v.eos == end) v.eos = ret;
    if (v.eot == end) v.eot = -1;
    if (v.eom == end) v.eom = -1;
    std::erase(v.extra_eog, end);
  }
  for (int32_t id : {ret, call})
    if (!v.is_eog(id)) v.extra_eog.push_back(id);
}

Result<Vocab> load_vocab(const GgufFile& f) {
  Vocab v;
  const std::string model = f.get_string("tokenizer.ggml.model").value_or("");
  if (model == "llama") {
    v.kind = TokenizerKind::kSpm;
    v.add_bos = true;
  } else if (model == "gpt2") {
    v.kind = TokenizerKind::kBpe;
    v.add_space_prefix = false;
  } else if (model.empty()) {
    return corrupt(f.path() + ": no tokenizer (metadata key 'tokenizer.ggml.model' is missing)");
  } else {
    return unsupported(f.path() + ": tokenizer.ggml.model '" + model + "' is not supported (llama, gpt2)");
  }
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  if (v.kind == TokenizerKind::kBpe) {
    v.add_bos = bpe_adds_bos_by_default(v.pre);
    v.ignore_merges = v.pre == "llama3" || v.pre == "llama-bpe";
  }

  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufValueType::kArray || tokens->elem_type != GgufValueType::kString ||
      tokens->strs.empty())
    return corrupt(f.path() + ": tokenizer.ggml.tokens is missing or not a non-empty string array");
  v.pieces = tokens->strs;
  const size_t n = v.pieces.size();
  if (n > size_t(INT32_MAX)) return corrupt(f.path() + ": tokenizer.ggml.tokens is too large");

  v.scores.assign(n, 0.0f);
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    if (s->type != GgufValueType::kArray || s->reals.size() != n)
      return corrupt(f.path() + ": tokenizer.ggml.scores must be a float array with one score per token");
    for (size_t i = 0; i < n; ++i) v.scores[i] = float(s->reals[i]);
  }
  v.types.assign(n, TokenType::kNormal);
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    if (t->type != GgufValueType::kArray || t->ints.size() != n)
      return corrupt(f.path() + ": tokenizer.ggml.token_type must be an integer array with one type per token");
    for (size_t i = 0; i < n; ++i) {
      if (t->ints[i] < 0 || t->ints[i] > 6)
        return corrupt(f.path() + ": tokenizer.ggml.token_type[" + std::to_string(i) +
                       "] = " + std::to_string(t->ints[i]) + " is not a known token type");
      v.types[i] = TokenType(t->ints[i]);
    }
  }
  v.index.reserve(n);
  for (size_t i = 0; i < n; ++i) v.index.emplace(v.pieces[i], int32_t(i));

  if (v.kind == TokenizerKind::kBpe) {
    const GgufValue* m = f.find("tokenizer.ggml.merges");
    if (!m || m->type != GgufValueType::kArray || m->elem_type != GgufValueType::kString)
      return corrupt(f.path() + ": BPE tokenizer without tokenizer.ggml.merges");
    v.merge_rank.reserve(m->strs.size());
    for (size_t i = 0; i < m->strs.size(); ++i) v.merge_rank.emplace(m->strs[i], int32_t(i));
  }

  const int32_t nv = int32_t(n);
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "bos_token_id", nv, v.bos));
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "eos_token_id", nv, v.eos));
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "eot_token_id", nv, v.eot));
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "eom_token_id", nv, v.eom));
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "unknown_token_id", nv, v.unk));
  AUTOGLM_RETURN_IF_ERROR(read_special_id(f, "padding_token_id", nv, v.pad));
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto e = f.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *e;
  if (auto s = f.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *s;
  if (v.add_bos && v.bos < 0) v.add_bos = false;
  if (v.add_eos && v.eos < 0) v.add_eos = false;
  if (v.eot < 0) v.eot = guess_end_of_turn(v);
  apply_harmony_ends(v);

  v.byte_tokens.fill(-1);
  if (v.kind == TokenizerKind::kSpm)
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      v.byte_tokens[size_t(b)] = v.find(name);
    }
  v.chat_template = f.get_string("tokenizer.chat_template").value_or("");
  return v;
}

}  // namespace autoglm
