#include "model/quantize_model.h"

#include "formats/gguf.h"
#include "kernels/ref/quants.h"

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

std::vector<uint8_t> requantize(const GgufTensorInfo& t, DType to, ThreadPool& pool) {
  const int64_t cols = t.dims[0], rows = t.rows();
  const int64_t in_row = dtype_row_bytes(t.type, cols), out_row = dtype_row_bytes(to, cols);
  std::vector<uint8_t> out(size_t(out_row * rows));
  pool.parallel_for(rows, [&](int, int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      ref::dequantize_row(t.type, t.data + r * in_row, row.data(), cols);
      ref::quantize_row(to, row.data(), out.data() + r * out_row, cols);
    }
  });
  return out;
}

}  // namespace

Result<std::unique_ptr<GgufFile>> quantize_file(const GgufFile& file, const QuantizeOptions& options, ThreadPool& pool,
                                                const std::function<void(int64_t, int64_t)>& on_tensor,
                                                QuantizeReport* report_out) {
  for (DType t : {options.type, options.keep_type.value_or(options.type)})
    if (!ref::dtype_is_supported(t))
      return invalid_argument("quantize: type '" + std::string(dtype_name(t)) + "' cannot be written");
  auto metadata = file.metadata();
  auto set = [&](const std::string& key, GgufValue v) {
    for (auto& [k, value] : metadata)
      if (k == key) return void(value = std::move(v));
    metadata.emplace_back(key, std::move(v));
  };
  set("general.file_type", GgufValue::u32(gguf_file_type(options.type)));
  set("general.quantization_version", GgufValue::u32(2));
  auto storage = std::make_shared<std::vector<std::vector<uint8_t>>>();
  storage->reserve(file.tensors().size());
  std::vector<GgufTensorInfo> tensors;
  QuantizeReport report;
  const int64_t total = int64_t(file.tensors().size());
  int64_t done = 0;
  for (const auto& t : file.tensors()) {
    report.bytes_in += int64_t(t.n_bytes);
    const bool matrix = t.dims.size() == 2 && ref::dtype_is_supported(t.type);
    GgufTensorInfo out = t;
    if (matrix) {
      const DType wanted = is_kept_tensor(t.name) ? options.keep_type.value_or(options.type) : options.type;
      out.type = fitting_type(wanted, t.dims[0]);
      if (out.type != wanted) ++report.tensors_fallback;
      storage->push_back(requantize(t, out.type, pool));
      out.data = storage->back().data();
      out.n_bytes = storage->back().size();
      ++report.tensors_quantized;
    } else if (options.vectors_to_f32 && t.dims.size() == 1 && t.type != DType::F32 &&
               ref::dtype_is_supported(t.type)) {
      out.type = DType::F32;
      storage->push_back(requantize(t, DType::F32, pool));
      out.data = storage->back().data();
      out.n_bytes = storage->back().size();
      ++report.tensors_copied;
    } else {
      storage->emplace_back(t.data, t.data + t.n_bytes);
      out.data = storage->back().data();
      ++report.tensors_copied;
    }
    report.bytes_out += int64_t(out.n_bytes);
    tensors.push_back(std::move(out));
    if (on_tensor) on_tensor(++done, total);
  }
  if (report_out) *report_out = report;
  return GgufFile::from_parts(file.path(), std::move(metadata), std::move(tensors), storage);
}

Result<QuantizeReport> quantize_gguf(const std::string& in, const std::string& out, const QuantizeOptions& options,
                                     ThreadPool& pool, const std::function<void(int64_t, int64_t)>& on_tensor) {
  AUTOGLM_ASSIGN_OR_RETURN(auto file, GgufFile::open(in));
  QuantizeReport report;
  AUTOGLM_ASSIGN_OR_RETURN(auto quantized, quantize_file(*file, options, pool, on_tensor, &report));
  AUTOGLM_RETURN_IF_ERROR(write_gguf(*quantized, out));
  return report;
}

}  // namespace autoglm
