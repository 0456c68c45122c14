// autoglm tokenize: show how a text is split into tokens.
#include <cstdio>

#include "cli/common.h"

namespace autoglm::cli {
namespace {

struct TokenizeArgs {
  std::string model, text;
  bool ids_only = false, no_bos = false, parse_special = false;
};

int tokenize(const TokenizeArgs& a) {
  auto file = GgufFile::open(a.model);  // the vocabulary alone is enough
  if (!file) return fail(file.status());
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok) return fail(tok.status());
  const auto ids = (*tok)->encode(a.text, !a.no_bos, a.parse_special);
  if (a.ids_only) {
    std::printf("[");
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
    std::printf("]\n");
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, (*tok)->token_to_piece(id, true).c_str());
  std::printf("%zu tokens\n", ids.size());
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
