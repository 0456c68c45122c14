// autoglm tokenize: show how a text is split into tokens.
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"

namespace autoglm::cli {
namespace {

struct TokenizeArgs {
  std::string model, text;
  bool ids_only = false, no_bos = false, parse_special = false;
};

int tokenize(const TokenizeArgs& a) {
  auto tokens = tokenize_with_vocabulary(a.model, a.text, !a.no_bos, a.parse_special);
  if (!tokens) return fail(tokens.status());
  if (a.ids_only) {
    std::printf("[");
    for (size_t i = 0; i < tokens->size(); ++i) std::printf("%s%d", i ? ", " : "", (*tokens)[i].id);
    std::printf("]\n");
    return 0;
  }
  for (const TokenPiece& t : *tokens) std::printf("%6d -> '%s'\n", t.id, t.piece.c_str());
  std::printf("%zu tokens\n", tokens->size());
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids and pieces of a text");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model or vocabulary file")->required();
  cmd->add_option("text", a->text, "Text to tokenize")->required();
  cmd->add_flag("--ids", a->ids_only, "Print only the list of ids");
  cmd->add_flag("--no-bos", a->no_bos, "Do not add BOS/EOS");
  cmd->add_flag("--parse-special", a->parse_special, "Recognise control tokens written in the text");
  cmd->callback([a] { exit_code() = tokenize(*a); });
}

}  // namespace autoglm::cli
