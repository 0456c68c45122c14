#include "model/model.h"

#include <atomic>
#include <map>
#include <string>

#include "core/log.h"
#include "kernels/ref/quants.h"
#include "model/arch.h"
#include "model/place_weights.h"
#include "model/quantize_model.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

// Every tensor of a type the engine reads, row by row on the cores: the first row with a
// block that decodes to a NaN or an infinity is an error naming it.
Status check_tensor_values(const GgufFile& file) {
  ThreadPool pool(physical_core_count());
  for (const auto& t : file.tensors()) {
    if (!ref::dtype_is_supported(t.type) || t.dims.empty()) continue;
    const int64_t cols = t.dims[0], rows = t.rows(), row_bytes = dtype_row_bytes(t.type, cols);
    std::atomic<int64_t> bad_row{rows};
    pool.parallel_for(rows, [&](int, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1 && r < bad_row.load(); ++r)
        if (ref::first_nonfinite_block(t.type, t.data + r * row_bytes, cols) >= 0) {
          int64_t seen = bad_row.load();
          while (r < seen && !bad_row.compare_exchange_weak(seen, r)) {
          }
          return;
        }
    });
    if (const int64_t r = bad_row.load(); r < rows) {
      const int64_t block = ref::first_nonfinite_block(t.type, t.data + r * row_bytes, cols);
      return corrupt(file.path() + ": tensor '" + t.name + "' (" + std::string(dtype_name(t.type)) + "): row " +
                     std::to_string(r) + ", block " + std::to_string(block) +
                     " decodes to a NaN or an infinity (a corrupt scale)");
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelLoadOptions& options) {
  const bool folder = is_hf_folder(path);
  AUTOGLM_ASSIGN_OR_RETURN(auto file, folder ? open_hf_checkpoint(path) : GgufFile::open(path, options.file_load));
  if (const std::string why = file->lock_failure(); !why.empty()) log_line(LogLevel::kWarning, why);
  if (options.check_tensors) AUTOGLM_RETURN_IF_ERROR(check_tensor_values(*file));
  if (options.quantize) {
    ThreadPool pool(physical_core_count());
    const std::string step = "quantizing to " + std::string(dtype_name(*options.quantize));
    QuantizeOptions q;
    q.type = *options.quantize;
    q.keep_type = DType::Q8_0;
    if (q.type == DType::F16 || q.type == DType::BF16 || q.type == DType::F32) q.keep_type = std::nullopt;
    auto quantized = quantize_file(*file, q, pool, [&](int64_t done, int64_t total) {
      if (options.progress) options.progress(step, done, total);
    });
    if (!quantized) return Status(quantized.status().code(), path + ": " + quantized.status().message());
    file = std::move(quantized).value();
  }
  AUTOGLM_ASSIGN_OR_RETURN(auto model, from_gguf(std::move(file), options));
  model->source_path_ = path;
  if (folder) {
    AUTOGLM_ASSIGN_OR_RETURN(model->generation_defaults_, read_generation_config(path));
  }
  return model;
}

Result<std::unique_ptr<Tokenizer>> Model::load_tokenizer() const {
  if (!is_hf_folder(source_path_)) return Tokenizer::from_gguf(*file_);
  AUTOGLM_ASSIGN_OR_RETURN(auto tok, load_hf_tokenizer(source_path_));
  for (int32_t id : generation_defaults_.eos_ids) tok->add_end_of_generation(id);
  return tok;
}

Result<std::unique_ptr<Model>> Model::from_gguf(std::unique_ptr<GgufFile> file, const ModelLoadOptions& options) {
  auto model = std::make_unique<Model>();
  model->file_ = std::move(file);
  AUTOGLM_ASSIGN_OR_RETURN(model->spec_, spec_from_gguf(*model->file_, options.arch_override));
  AUTOGLM_ASSIGN_OR_RETURN(model->weights_, bind_weights(*model->file_, model->spec_));
  model->device_ = options.device;
  if (options.n_cpu_moe < 0)
    return invalid_argument("n_cpu_moe: " + std::to_string(options.n_cpu_moe) + " is negative (0: no layer)");
  AUTOGLM_RETURN_IF_ERROR(device_runs_spec(options.device, model->spec_));
  const std::vector<bool> host_experts = host_expert_layers(model->spec_, options.n_cpu_moe);
  AUTOGLM_ASSIGN_OR_RETURN(model->placed_, place_weights(options.device, model->weights_, host_experts));
  // The interleaved layouts are the CPU kernels'; a GPU reads the file's blocks, and the CPU
  // those of the experts left in host memory. (After the placement: a missing GPU fails first.)
  const bool cpu = options.device.kind == DeviceKind::kCpu;
  if (options.repack) AUTOGLM_RETURN_IF_ERROR(model->repack_weights(options.progress, cpu ? nullptr : &host_experts));
  return model;
}

Status Model::repack_weights(const LoadProgress& progress, const std::vector<bool>* host_experts) {
  std::vector<cpu::WeightMatrix*> matrices;
  for (size_t il = 0; il < weights_.layers.size(); ++il) {
    LayerWeights& l = weights_.layers[il];
    if (host_experts && !(il < host_experts->size() && (*host_experts)[il])) continue;
    if (!host_experts)
      for (cpu::WeightMatrix* m :
           {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &l.experts.shared_gate, &l.experts.shared_up,
            &l.experts.shared_down, &l.mla.q_a, &l.mla.q_b, &l.mla.q, &l.mla.kv_a, &l.experts.router})
        if (m->rows > 0 && cpu::packable(m->type)) matrices.push_back(m);
    for (auto* experts : {&l.experts.gate, &l.experts.up, &l.experts.down})
      for (cpu::WeightMatrix& m : *experts)
        if (cpu::packable(m.type)) matrices.push_back(&m);
  }
  if (!host_experts && cpu::packable(weights_.output.type)) matrices.push_back(&weights_.output);
  if (matrices.empty()) return Status::ok();
  for (const cpu::WeightMatrix* m : matrices) repacked_bytes_ += cpu::packed_bytes(*m);
  ThreadPool pool(physical_core_count());
  packed_ = cpu::pack_matrices(pool, matrices, [&](size_t i) {
    if (progress) progress("repacking weights", int64_t(i + 1), int64_t(matrices.size()));
  });
  if (!packed_)
    return resource_exhausted("out of memory repacking the weights of " + file_->path() + " (" +
                              std::to_string(repacked_bytes_ >> 20) + " MiB)");
  return Status::ok();
}

int64_t Model::n_params() const {
  int64_t n = 0;
  for (const auto& t : file_->tensors()) n += t.n_elements();
  return n;
}

int64_t Model::weight_bytes() const {
  int64_t n = 0;
  for (const auto& t : file_->tensors()) n += int64_t(t.n_bytes);
  return n;
}

std::string Model::weight_type_summary() const {
  std::map<std::string, int> counts;
  for (const auto& t : file_->tensors()) ++counts[std::string(dtype_name(t.type))];
  std::string s;
  for (const auto& [name, n] : counts) s += (s.empty() ? "" : ", ") + name + " x " + std::to_string(n);
  return s;
}

}  // namespace autoglm
