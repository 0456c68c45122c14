// The public model tools (autoglm/model_tools.h) over the model layer's writers.
#include "autoglm/model_tools.h"

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/convert.h"
#include "model/create_model.h"
#include "model/hf_vision.h"
#include "model/lora.h"
#include "model/lora_merge.h"
#include "model/model.h"
#include "model/quant_mix.h"
#include "model/quantize_model.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

// The type called `name`; an error names the option ("type 'x' is not a weight type").
Result<DType> weight_type(const std::string& name, const char* option) {
  const auto t = dtype_from_name(name);
  if (!t) {
    std::string message = option;  // appended piece by piece: GCC 12's -Wrestrict misfires on a + chain
    message.append(" '").append(name).append("' is not a weight type");
    return invalid_argument(std::move(message));
  }
  return *t;
}

// --pure's TYPE: a weight type, or else a mix standing (as in llama-quantize) for the type its
// rules start from: Q4_K_M gives Q4_K, IQ3_XS and IQ3_M IQ3_S, IQ2_M IQ2_S. (llama-quantize reads
// IQ2_S as the mix too, whose start is IQ2_XS; here it is the weight type it names.)
Result<DType> pure_type(const std::string& name) {
  if (const auto t = dtype_from_name(name)) return *t;
  if (const auto mix = quant_mix_from_name(name)) return quant_mix_info(*mix).base;
  return weight_type(name, "type");
}

int tool_threads(int threads) {
  return threads > 0 ? threads : physical_core_count();
}

}  // namespace

Result<std::string> weight_type_name(std::string_view name) {
  const auto t = dtype_from_name(name);
  if (!t) {
    std::string message = "'";
    message.append(name).append("' is not a weight type");
    return invalid_argument(std::move(message));
  }
  return std::string(dtype_name(*t));
}

Result<LoraOption> parse_lora_option(const std::string& arg) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto parsed, parse_lora_arg(arg));
  return LoraOption{parsed.first, parsed.second};
}

Result<std::vector<TokenPiece>> tokenize_with_vocabulary(const std::string& path, const std::string& text,
                                                         bool add_special, bool parse_special) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto file, GgufFile::open(path));  // the vocabulary alone is enough
  AUTOGLM_ASSIGN_OR_RETURN(const auto tokenizer, Tokenizer::from_gguf(*file));
  std::vector<TokenPiece> out;
  for (int32_t id : tokenizer->encode(text, add_special, parse_special))
    out.push_back({id, tokenizer->token_to_piece(id, true)});
  return out;
}

std::string projector_path_for(const std::string& model_path) {
  return projector_path_beside(model_path);
}

Result<ConvertModelReport> convert_hf_model(const std::string& folder, const std::string& out,
                                            const ConvertModelOptions& options) {
  AUTOGLM_ASSIGN_OR_RETURN(const DType type, weight_type(options.type, "type"));
  ThreadPool pool(tool_threads(options.threads));
  AUTOGLM_ASSIGN_OR_RETURN(const ConvertReport report, convert_hf_folder(folder, out, type, pool, options.progress));
  ConvertModelReport result{report.tensors, report.bytes_out, "", 0, 0};
  if (!hf_folder_has_vision(folder)) return result;
  result.mmproj_path = options.mmproj_out.empty() ? projector_path_beside(out) : options.mmproj_out;
  AUTOGLM_ASSIGN_OR_RETURN(const ConvertReport vision,
                           convert_hf_projector(folder, result.mmproj_path, type, pool, options.progress));
  result.mmproj_tensors = vision.tensors;
  result.mmproj_bytes = vision.bytes_out;
  return result;
}

bool is_quantize_mix(std::string_view name) {
  return quant_mix_from_name(name).has_value();
}

Result<QuantizeModelReport> quantize_model(const std::string& in, const std::string& out,
                                           const QuantizeModelOptions& options) {
  QuantizeOptions o;
  const auto mix = options.pure ? std::nullopt : quant_mix_from_name(options.type);
  std::optional<DType> keep;
  if (options.keep_type) {
    AUTOGLM_ASSIGN_OR_RETURN(keep, weight_type(*options.keep_type, "keep_type"));
  }
  if (mix) {
    o.mix = mix;
    o.mix_choices.output_type = o.mix_choices.token_embedding_type = keep;
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(o.type, pure_type(options.type));
    o.keep_type = keep;
    o.named_mix = quant_mix_from_name(options.type);
  }
  // As llama-quantize: these name one tensor's type, over the mix's rules or --pure alike.
  if (options.output_tensor_type) {
    AUTOGLM_ASSIGN_OR_RETURN(o.mix_choices.output_type, weight_type(*options.output_tensor_type, "output_tensor_type"));
  }
  if (options.token_embedding_type) {
    AUTOGLM_ASSIGN_OR_RETURN(o.mix_choices.token_embedding_type,
                             weight_type(*options.token_embedding_type, "token_embedding_type"));
  }
  o.mix_choices.leave_output = options.leave_output_tensor;
  if (!options.imatrix.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(auto imatrix, read_imatrix(options.imatrix));
    o.imatrix = std::make_shared<const Imatrix>(std::move(imatrix));
    o.imatrix_path = options.imatrix;
  }
  o.vectors_to_f32 = options.vectors_to_f32;
  ThreadPool pool(tool_threads(options.threads));
  AUTOGLM_ASSIGN_OR_RETURN(const QuantizeReport r, quantize_gguf(in, out, o, pool, options.progress));
  QuantizeModelReport report;
  report.tensors_quantized = r.tensors_quantized;
  report.tensors_copied = r.tensors_copied;
  report.tensors_fallback = r.tensors_fallback;
  report.bytes_in = r.bytes_in;
  report.bytes_out = r.bytes_out;
  report.mix = mix ? std::string(quant_mix_info(*mix).name) : "";
  for (const auto& [type, n] : r.types) report.types.emplace_back(std::string(dtype_name(type)), n);
  return report;
}

const std::vector<std::string>& random_model_archs() {
  return create_model_archs();
}

const std::vector<std::string>& random_model_presets() {
  return create_model_presets();
}

Status write_random_model(const RandomModelOptions& options, const std::string& path) {
  CreateModelOptions o;
  o.arch = options.arch;
  o.preset = options.preset;
  AUTOGLM_ASSIGN_OR_RETURN(o.type, weight_type(options.type, "type"));
  o.seed = options.seed;
  o.n_vocab = options.n_vocab;
  o.n_layer = options.n_layer;
  o.threads = options.threads;
  return create_random_model(o, path);
}

Status write_random_lora(const std::string& base_path, int64_t rank, float alpha, uint64_t seed,
                         const std::string& path) {
  return create_random_lora(base_path, rank, alpha, seed, path);
}

Status merge_lora_model(const std::string& base_path, const std::vector<LoraOption>& adapters, const std::string& type,
                        const std::string& path) {
  std::optional<DType> merged_type;
  if (!type.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(merged_type, weight_type(type, "type"));
  }
  ModelLoadOptions load;
  load.repack = false;  // the file's own bytes are what is copied
  AUTOGLM_ASSIGN_OR_RETURN(const auto base, Model::load(base_path, load));
  LoraSet set;
  for (const LoraOption& o : adapters) {
    AUTOGLM_ASSIGN_OR_RETURN(auto adapter, load_lora(o.path, *base, o.scale));
    set.push_back(std::move(adapter));
  }
  return write_merged_model(*base, set, merged_type, path);
}

}  // namespace autoglm
