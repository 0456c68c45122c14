#include "model/convert.h"

#include <algorithm>

#include "model/hf_checkpoint.h"
#include "model/hf_vision.h"
#include "model/quantize_model.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

// Merge rules in rank order ("left right").
std::vector<std::string> ranked_merges(const Vocab& v) {
  std::vector<std::string> merges(v.merge_rank.size());
  for (const auto& [rule, rank] : v.merge_rank)
    if (rank >= 0 && size_t(rank) < merges.size()) merges[size_t(rank)] = rule;
  merges.erase(std::remove(merges.begin(), merges.end(), std::string()), merges.end());
  return merges;
}

// SentencePiece-style scores for a BPE vocabulary that is not byte-level: the token made by
// merge rank r scores -r, so that merging by the best score replays the ranks.
std::vector<float> scores_from_merges(const Vocab& v) {
  std::vector<float> scores(size_t(v.size()), 0.0f);
  std::vector<bool> set(scores.size(), false);
  for (const auto& [rule, rank] : v.merge_rank) {
    const size_t space = rule.find(' ');
    if (space == std::string::npos) continue;
    const int32_t id = v.find(rule.substr(0, space) + rule.substr(space + 1));
    if (id < 0) continue;
    if (!set[size_t(id)] || -float(rank) > scores[size_t(id)]) scores[size_t(id)] = -float(rank);
    set[size_t(id)] = true;
  }
  return scores;
}

}  // namespace

std::vector<std::pair<std::string, GgufValue>> tokenizer_metadata(const Tokenizer& tok, int64_t embedding_rows) {
  const Vocab& v = tok.vocab();
  std::vector<std::pair<std::string, GgufValue>> md;
  const bool bpe = v.byte_level;
  md.emplace_back("tokenizer.ggml.model", GgufValue::string(bpe ? "gpt2" : "llama"));
  if (bpe) md.emplace_back("tokenizer.ggml.pre", GgufValue::string(v.pre.empty() ? "default" : v.pre));
  std::vector<std::string> pieces = v.pieces;
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(int32_t(t));
  for (int64_t i = int64_t(pieces.size()); i < embedding_rows; ++i) {
    pieces.push_back("[PAD" + std::to_string(i) + "]");
    types.push_back(int32_t(TokenType::kUnused));
  }
  md.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(pieces));
  md.emplace_back("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  if (bpe) {
    md.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(ranked_merges(v)));
  } else {
    std::vector<float> scores = scores_from_merges(v);
    scores.resize(pieces.size(), 0.0f);
    md.emplace_back("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  }
  const std::pair<const char*, int32_t> ids[] = {{"bos_token_id", v.bos},
                                                 {"eos_token_id", v.eos},
                                                 {"eot_token_id", v.eot},
                                                 {"unknown_token_id", v.unk},
                                                 {"padding_token_id", v.pad}};
  for (const auto& [key, id] : ids)
    if (id >= 0) md.emplace_back(std::string("tokenizer.ggml.") + key, GgufValue::u32(uint32_t(id)));
  md.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(v.add_bos));
  md.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(v.add_eos));
  if (!bpe) md.emplace_back("tokenizer.ggml.add_space_prefix", GgufValue::boolean(true));
  if (!v.chat_template.empty()) md.emplace_back("tokenizer.chat_template", GgufValue::string(v.chat_template));
  return md;
}

Result<ConvertReport> convert_hf_folder(const std::string& dir, const std::string& out, DType type, ThreadPool& pool,
                                        const std::function<void(int64_t, int64_t)>& on_tensor) {
  AUTOGLM_ASSIGN_OR_RETURN(auto checkpoint, open_hf_checkpoint(dir));
  AUTOGLM_ASSIGN_OR_RETURN(auto tok, load_hf_tokenizer(dir));
  QuantizeOptions q;
  q.type = type;
  q.keep_type = std::nullopt;  // every matrix in `type`, as llama.cpp's converter does
  q.vectors_to_f32 = true;
  QuantizeReport qr;
  const GgufTensorInfo* embedding = checkpoint->find_tensor("token_embd.weight");
  const int64_t rows = embedding && embedding->dims.size() == 2 ? embedding->dims[1] : 0;
  AUTOGLM_RETURN_IF_ERROR(quantize_to_file(*checkpoint, out, q, pool, tokenizer_metadata(*tok, rows), on_tensor, &qr));
  return ConvertReport{int64_t(checkpoint->tensors().size()), qr.bytes_out};
}

Result<ConvertReport> convert_hf_projector(const std::string& dir, const std::string& out, DType type, ThreadPool& pool,
                                           const std::function<void(int64_t, int64_t)>& on_tensor) {
  AUTOGLM_ASSIGN_OR_RETURN(auto projector, open_hf_projector(dir));
  QuantizeOptions q;
  q.type = type;
  q.keep_type = std::nullopt;
  q.vectors_to_f32 = true;
  QuantizeReport qr;
  AUTOGLM_RETURN_IF_ERROR(quantize_to_file(*projector, out, q, pool, {}, on_tensor, &qr));
  return ConvertReport{int64_t(projector->tensors().size()), qr.bytes_out};
}

}  // namespace autoglm
