#include "cli/common.h"

#include <cstdio>

#include "core/read_file.h"
#include "core/thread_pool.h"
#include "formats/json_file.h"
#include "sample/json_schema.h"

namespace autoglm::cli {

Result<ModelLoadOptions> load_options(const std::string& quantize) {
  ModelLoadOptions o;
  if (quantize.empty()) return o;
  const auto type = dtype_from_name(quantize);
  if (!type) return invalid_argument("--quantize '" + quantize + "' is not a weight type (q8_0, q4_0, q4_k, ...)");
  o.quantize = *type;
  return o;
}

void add_quantize_option(CLI::App& cmd, std::string& quantize) {
  cmd.add_option("--quantize", quantize, "Re-encode the weights at load: q8_0, q4_0, q4_k, q6_k, ... (default: keep)");
}

Result<LoadedModel> load_model_and_tokenizer(const std::string& path, const std::string& quantize) {
  LoadedModel m;
  AUTOGLM_ASSIGN_OR_RETURN(const ModelLoadOptions options, load_options(quantize));
  AUTOGLM_ASSIGN_OR_RETURN(m.model, Model::load(path, options));
  AUTOGLM_ASSIGN_OR_RETURN(m.tokenizer, m.model->load_tokenizer());
  if (m.tokenizer->n_vocab() > m.model->spec().n_vocab)
    return corrupt(path + ": the tokenizer has " + std::to_string(m.tokenizer->n_vocab()) +
                   " tokens but the model only " + std::to_string(m.model->spec().n_vocab) + " logits");
  return m;
}

Result<std::shared_ptr<const Grammar>> load_output_grammar(const std::string& grammar_file,
                                                           const std::string& schema_file) {
  if (grammar_file.empty() && schema_file.empty()) return std::shared_ptr<const Grammar>();
  if (!grammar_file.empty() && !schema_file.empty())
    return invalid_argument("--grammar and --json-schema cannot be combined");
  const std::string& path = grammar_file.empty() ? schema_file : grammar_file;
  auto text = read_file(path);
  if (!text || text->empty()) return invalid_argument(path + ": cannot read it (or it is empty)");
  std::string gbnf = *text;
  if (!schema_file.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(const nlohmann::json schema, parse_json(*text, path));
    auto converted = json_schema_to_gbnf(schema);
    if (!converted) return invalid_argument(path + ": " + converted.status().message());
    gbnf = *converted;
  }
  auto grammar = Grammar::parse(gbnf);
  if (!grammar) return invalid_argument(path + ": " + grammar.status().message());
  return std::shared_ptr<const Grammar>(*grammar);
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return exit_code() = 1;
}

void add_kv_type_option(CLI::App& cmd, std::string& kv_type) {
  cmd.add_option("--kv-type", kv_type, "KV cache type: f16, q8_0 (half the memory) or f32")->capture_default_str();
}

Result<DType> resolve_kv_type(const std::string& name, const ModelSpec& spec) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, kv_type_from_name(name));
  AUTOGLM_RETURN_IF_ERROR(kv_format(spec, type).status());
  return type;
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
