#include "model/op_profile.h"

#include <cstdio>

namespace autoglm {

const char* op_name(Op op) {
  switch (op) {
    case Op::kEmbedding: return "embedding";
    case Op::kQkvProjection: return "attention: norm + QKV projection + rope";
    case Op::kAttentionCore: return "attention: core (KV write, softmax(QK)V)";
    case Op::kOutputProjection: return "attention: output projection";
    case Op::kFfn: return "ffn (norm, gate/up, silu, down)";
    case Op::kLogits: return "final norm + output projection";
    case Op::kSampling: return "sampling";
    default: return "other";
  }
}

const char* op_key(Op op) {
  static const char* const keys[] = {"embedding", "qkv_projection", "attention_core", "output_projection",
                                     "ffn",       "logits",         "sampling",       "other"};
  return keys[int(op)];
}

void OpProfile::reset() {
  for (auto& n : ns_) n = 0;
  tokens_ = 0;
}

std::string OpProfile::table() const {
  double total = 0;
  for (size_t i = 0; i < ns_.size(); ++i) total += seconds(Op(i));
  const double per = tokens() > 0 ? 1e3 / double(tokens()) : 0;
  std::string out = "| op | ms/token | % |\n|---|---:|---:|\n";
  char line[160];
  for (size_t i = 0; i < ns_.size(); ++i) {
    std::snprintf(line, sizeof(line), "| %s | %.3f | %.1f |\n", op_name(Op(i)), seconds(Op(i)) * per,
                  total > 0 ? 100.0 * seconds(Op(i)) / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof(line), "| total | %.3f | 100.0 |\n", total * per);
  return out + line;
}

}  // namespace autoglm
