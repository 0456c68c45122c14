#include "model/quantize_model.h"

#include "formats/gguf.h"
#include "kernels/ref/quants.h"
#include "model/quant_mix.h"

namespace autoglm {
namespace {

bool is_kept_tensor(const std::string& name) {
  return name == "token_embd.weight" || name == "output.weight";
}

// The type a matrix with rows of `cols` values gets: the wanted one if its rows are whole blocks.
DType fitting_type(DType wanted, int64_t cols) {
  for (DType t : {wanted, DType::Q8_0, DType::F16})
    if (dtype_row_bytes(t, cols) > 0) return t;
  return DType::F32;
}

// importance: [n_mat][cols] (a stack's matrices each their own), or null.
std::vector<uint8_t> requantize(const GgufTensorInfo& t, DType to, ThreadPool& pool, const float* importance) {
  const int64_t cols = t.dims[0], rows = t.rows();
  const int64_t rows_per_mat = t.dims.size() > 1 ? t.dims[1] : 1;
  const int64_t in_row = dtype_row_bytes(t.type, cols), out_row = dtype_row_bytes(to, cols);
  std::vector<uint8_t> out(size_t(out_row * rows));
  pool.parallel_for(rows, [&](int, int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      ref::dequantize_row(t.type, t.data + r * in_row, row.data(), cols);
      const float* w = importance ? importance + (r / rows_per_mat) * cols : nullptr;
      ref::quantize_row(to, row.data(), out.data() + r * out_row, cols, w);
    }
  });
  return out;
}

// The importance of a re-encoded matrix's columns, from the options' imatrix; null when it has
// no entry. An entry of another size is an error naming the tensor (the embedding table's is
// skipped, as llama-quantize does).
Result<std::shared_ptr<const std::vector<float>>> importance_for(const GgufTensorInfo& t, const QuantizeOptions& o) {
  if (!o.imatrix) return std::shared_ptr<const std::vector<float>>();
  auto w = o.imatrix->weights(t.name);
  if (!w) return std::shared_ptr<const std::vector<float>>();
  const int64_t want = t.dims[0] * (t.dims.size() > 2 ? t.dims[2] : 1);
  if (int64_t(w->size()) != want) {
    if (t.name == "token_embd.weight") return std::shared_ptr<const std::vector<float>>();
    return invalid_argument("quantize: the importance matrix has " + std::to_string(w->size()) + " values for '" +
                            t.name + "', which takes " + std::to_string(want));
  }
  return std::make_shared<const std::vector<float>>(std::move(*w));
}

// What becomes of one tensor: its type in the output, and whether its values are re-encoded.
struct TensorPlan {
  DType type;
  bool reencode;
  bool fallback;  // a matrix whose rows are not whole blocks of the wanted type
};

// Tensors llama.cpp keeps in F32 whatever the target: the routers (small, and the choice of
// experts is sensitive to them) and everything not named .weight (biases, gpt-oss's 2-D expert biases).
bool stays_float(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return !ends_with(".weight") || ends_with("ffn_gate_inp.weight") || ends_with("ffn_gate_inp_shexp.weight") ||
         ends_with("position_embd.weight");  // a projector's learned positions (resampled as floats)
}

// Without a mix: TYPE, the kept tensors at keep_type, unless a tensor's own type is given.
DType single_type_for(const std::string& name, const QuantizeOptions& o) {
  if (name == "output.weight" && o.mix_choices.output_type) return *o.mix_choices.output_type;
  if (name == "token_embd.weight" && o.mix_choices.token_embedding_type) return *o.mix_choices.token_embedding_type;
  return is_kept_tensor(name) ? o.keep_type.value_or(o.type) : o.type;
}

TensorPlan plan_tensor(const GgufTensorInfo& t, const QuantizeOptions& o) {
  // A projector's convolution kernels (4-D): F16 in an F16 file, else F32, as llama.cpp's converter writes them.
  if (t.dims.size() == 4 && o.vectors_to_f32 && ref::dtype_is_supported(t.type)) {
    const DType type = o.type == DType::F16 ? DType::F16 : DType::F32;
    return {type, type != t.type, false};
  }
  // Matrices and stacks of them (the experts' 3-D tensors) are re-encoded; MXFP4 experts are kept.
  const bool matrix = t.dims.size() == 2 || t.dims.size() == 3;
  const bool left = o.mix_choices.leave_output && t.name == "output.weight";
  if (matrix && !left && !stays_float(t.name) && t.type != DType::MXFP4 && ref::dtype_is_supported(t.type)) {
    const DType wanted = single_type_for(t.name, o);
    const DType type = fitting_type(wanted, t.dims[0]);
    return {type, true, type != wanted};
  }
  const bool small = t.dims.size() == 1 || stays_float(t.name);
  if (o.vectors_to_f32 && small && t.type != DType::F32 && ref::dtype_is_supported(t.type))
    return {DType::F32, true, false};
  return {t.type, false, false};
}

Status check_types(const QuantizeOptions& options) {
  if (options.mix) return Status::ok();  // checked per tensor
  const MixChoices& c = options.mix_choices;
  for (DType t : {options.type, options.keep_type.value_or(options.type), c.output_type.value_or(options.type),
                  c.token_embedding_type.value_or(options.type)})
    if (!ref::dtype_can_quantize(t))
      return invalid_argument("quantize: type '" + std::string(dtype_name(t)) + "' cannot be written");
  return Status::ok();
}

// A tensor whose type needs an importance matrix in this file (tensor_needs_imatrix, by the mix or the
// mix the one type names) has one, or the error names it.
Status require_imatrix(const QuantizeOptions& o, const std::string& tensor, DType type) {
  const bool needs = tensor_needs_imatrix(type, o.mix ? o.mix : o.named_mix, tensor);
  if (!needs || (o.imatrix && o.imatrix->weights(tensor))) return Status::ok();
  return invalid_argument("quantize: tensor '" + tensor + "' would be " + std::string(dtype_name(type)) +
                          ", which needs an importance matrix: give --imatrix FILE (autoglm imatrix makes one)");
}

// A tensor of a mix: the type llama-quantize's rules give it, or (a norm, a router ...) as the
// plain plan has it.
Result<TensorPlan> mix_plan(const GgufTensorInfo& t, const std::map<std::string, TensorChoice>& mix,
                            const QuantizeOptions& o) {
  const auto it = mix.find(t.name);
  if (it == mix.end() || !ref::dtype_is_supported(t.type)) {
    const bool small = t.dims.size() == 1 || stays_float(t.name);
    if (o.vectors_to_f32 && small && t.type != DType::F32 && ref::dtype_is_supported(t.type))
      return TensorPlan{DType::F32, true, false};
    return TensorPlan{t.type, false, false};
  }
  const TensorChoice& c = it->second;
  const std::string type(dtype_name(c.type));
  AUTOGLM_RETURN_IF_ERROR(require_imatrix(o, t.name, c.type));
  if (!ref::dtype_can_quantize(c.type))
    return invalid_argument("quantize: tensor '" + t.name + "' would be " + type +
                            ", a type this engine cannot write yet");
  return TensorPlan{c.type, c.type != t.type, c.fallback};
}

// Every tensor's plan, in the file's order.
Result<std::vector<TensorPlan>> plan_tensors(const GgufFile& file, const QuantizeOptions& o) {
  AUTOGLM_RETURN_IF_ERROR(check_types(o));
  std::vector<TensorPlan> plans;
  if (!o.mix) {
    for (const auto& t : file.tensors()) {
      const TensorPlan p = plan_tensor(t, o);
      // As llama-quantize, per tensor: one type for all (--pure, or a plain TYPE) is refused too.
      if (p.reencode) AUTOGLM_RETURN_IF_ERROR(require_imatrix(o, t.name, p.type));
      plans.push_back(p);
    }
    return plans;
  }
  MixChoices choices = o.mix_choices;
  choices.has_imatrix = o.imatrix != nullptr;
  AUTOGLM_ASSIGN_OR_RETURN(const auto mix, plan_quant_mix(file, *o.mix, choices));
  for (const auto& t : file.tensors()) {
    AUTOGLM_ASSIGN_OR_RETURN(const TensorPlan p, mix_plan(t, mix, o));
    plans.push_back(p);
  }
  return plans;
}

std::vector<std::pair<std::string, GgufValue>> output_metadata(
    const GgufFile& file, const QuantizeOptions& options,
    const std::vector<std::pair<std::string, GgufValue>>& extra = {}) {
  auto metadata = file.metadata();
  auto set = [&](const std::string& key, GgufValue v) {
    for (auto& [k, value] : metadata)
      if (k == key) return void(value = std::move(v));
    metadata.emplace_back(key, std::move(v));
  };
  set("general.file_type",
      GgufValue::u32(options.mix ? quant_mix_info(*options.mix).file_type : gguf_file_type(options.type)));
  set("general.quantization_version", GgufValue::u32(2));
  if (options.imatrix) {
    set("quantize.imatrix.file", GgufValue::string(options.imatrix_path));
    if (!options.imatrix->datasets.empty())
      set("quantize.imatrix.dataset", GgufValue::string(options.imatrix->datasets.front()));
    set("quantize.imatrix.entries_count", GgufValue::u32(uint32_t(options.imatrix->entries.size())));
    if (options.imatrix->chunk_count > 0)
      set("quantize.imatrix.chunks_count", GgufValue::u32(uint32_t(options.imatrix->chunk_count)));
  }
  for (const auto& [k, v] : extra) set(k, v);
  return metadata;
}

void count(const TensorPlan& plan, const GgufTensorInfo& t, uint64_t out_bytes, QuantizeReport& r) {
  r.bytes_in += int64_t(t.n_bytes);
  r.bytes_out += int64_t(out_bytes);
  if (plan.reencode && t.dims.size() >= 2)
    ++r.tensors_quantized, ++r.types[plan.type];
  else
    ++r.tensors_copied;
  if (plan.fallback) ++r.tensors_fallback;
}

uint64_t planned_bytes(const GgufTensorInfo& t, DType type) {
  return uint64_t(dtype_row_bytes(type, t.dims[0]) * t.rows());
}

}  // namespace

Result<std::unique_ptr<GgufFile>> quantize_file(const GgufFile& file, const QuantizeOptions& options, ThreadPool& pool,
                                                const std::function<void(int64_t, int64_t)>& on_tensor,
                                                QuantizeReport* report_out) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto plans, plan_tensors(file, options));
  auto storage = std::make_shared<std::vector<std::vector<uint8_t>>>();
  storage->reserve(file.tensors().size());
  std::vector<GgufTensorInfo> tensors;
  QuantizeReport report;
  const int64_t total = int64_t(file.tensors().size());
  int64_t done = 0;
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    const TensorPlan& plan = plans[i];
    GgufTensorInfo out = t;
    out.type = plan.type;
    AUTOGLM_ASSIGN_OR_RETURN(const auto importance, importance_for(t, options));
    if (plan.reencode)
      storage->push_back(requantize(t, plan.type, pool, importance ? importance->data() : nullptr));
    else
      storage->emplace_back(t.data, t.data + t.n_bytes);
    out.data = storage->back().data();
    out.n_bytes = storage->back().size();
    count(plan, t, out.n_bytes, report);
    tensors.push_back(std::move(out));
    if (on_tensor) on_tensor(++done, total);
  }
  if (report_out) *report_out = report;
  return GgufFile::from_parts(file.path(), output_metadata(file, options), std::move(tensors), storage);
}

Status quantize_to_file(const GgufFile& file, const std::string& out, const QuantizeOptions& options, ThreadPool& pool,
                        const std::vector<std::pair<std::string, GgufValue>>& extra_metadata,
                        const std::function<void(int64_t, int64_t)>& on_tensor, QuantizeReport* report_out) {
  AUTOGLM_ASSIGN_OR_RETURN(const auto plans, plan_tensors(file, options));
  GgufWriter w;
  for (const auto& [key, value] : output_metadata(file, options, extra_metadata))
    if (key != "general.alignment") w.set(key, value);
  QuantizeReport report;
  auto buffer = std::make_shared<std::vector<uint8_t>>();  // one tensor at a time
  const int64_t total = int64_t(file.tensors().size());
  auto done = std::make_shared<int64_t>(0);
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    const TensorPlan plan = plans[i];
    const uint64_t n_bytes = plan.reencode ? planned_bytes(t, plan.type) : t.n_bytes;
    count(plan, t, n_bytes, report);
    const GgufTensorInfo* src = &t;
    AUTOGLM_ASSIGN_OR_RETURN(const auto importance, importance_for(t, options));
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor_deferred(
        t.name, plan.type, t.dims, n_bytes,
        [src, plan, buffer, done, total, importance, &pool, &on_tensor]() -> Result<std::pair<const uint8_t*, size_t>> {
          if (on_tensor) on_tensor(++*done, total);
          if (!plan.reencode) return std::make_pair(src->data, size_t(src->n_bytes));
          *buffer = requantize(*src, plan.type, pool, importance ? importance->data() : nullptr);
          return std::make_pair<const uint8_t*, size_t>(buffer->data(), buffer->size());
        }));
  }
  AUTOGLM_RETURN_IF_ERROR(w.write(out, file.alignment()));
  if (report_out) *report_out = report;
  return Status::ok();
}

Result<QuantizeReport> quantize_gguf(const std::string& in, const std::string& out, const QuantizeOptions& options,
                                     ThreadPool& pool, const std::function<void(int64_t, int64_t)>& on_tensor) {
  AUTOGLM_ASSIGN_OR_RETURN(auto file, GgufFile::open(in));
  QuantizeReport report;
  AUTOGLM_RETURN_IF_ERROR(quantize_to_file(*file, out, options, pool, {}, on_tensor, &report));
  return report;
}

}  // namespace autoglm
