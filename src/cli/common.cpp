#include "cli/common.h"

#include <cstdio>

#include "core/thread_pool.h"

namespace autoglm::cli {

Result<LoadedModel> load_model_and_tokenizer(const std::string& path) {
  LoadedModel m;
  AUTOGLM_ASSIGN_OR_RETURN(m.model, Model::load(path));
  AUTOGLM_ASSIGN_OR_RETURN(m.tokenizer, Tokenizer::from_gguf(m.model->file()));
  if (m.tokenizer->n_vocab() > m.model->spec().n_vocab)
    return corrupt(path + ": the tokenizer has " + std::to_string(m.tokenizer->n_vocab()) +
                   " tokens but the model only " + std::to_string(m.model->spec().n_vocab) + " logits");
  return m;
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return exit_code() = 1;
}

void add_threads_option(CLI::App& cmd, int& threads) {
  threads = physical_core_count();
  cmd.add_option("-t,--threads", threads, "Worker threads (default: physical cores)")->check(CLI::Range(1, 1024));
}

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace autoglm::cli
