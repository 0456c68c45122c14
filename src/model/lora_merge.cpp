#include "model/lora_merge.h"

#include <memory>

#include "kernels/ref/quants.h"
#include "model/hf_checkpoint.h"
#include "model/model.h"

namespace autoglm {
namespace {

// The tensor as floats with every adapter's delta on its rows.
std::vector<float> merged_rows(const GgufTensorInfo& t, const std::vector<LoraSlot>& slots, const LoraSet& adapters) {
  const int64_t n_in = t.dims[0], rows = t.rows(), row_bytes = dtype_row_bytes(t.type, n_in);
  std::vector<float> w(size_t(rows * n_in));
  for (int64_t r = 0; r < rows; ++r) ref::dequantize_row(t.type, t.data + r * row_bytes, &w[size_t(r * n_in)], n_in);
  std::vector<double> acc(static_cast<size_t>(n_in));
  for (const LoraSlot& s : slots)
    for (int64_t o = 0; o < s.rows; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (const auto& adapter : adapters) {
        const LoraDelta* d = adapter->delta(s.layer, s.target);
        if (!d) continue;
        for (int64_t k = 0; k < d->rank; ++k) {
          const double b = double(adapter->scale) * d->b[size_t(o * d->rank + k)];
          const float* a = &d->a[size_t(k * n_in)];
          for (int64_t i = 0; i < n_in; ++i) acc[size_t(i)] += b * a[i];
        }
      }
      float* row = &w[size_t((s.row0 + o) * n_in)];
      for (int64_t i = 0; i < n_in; ++i) row[i] = float(double(row[i]) + acc[size_t(i)]);
    }
  return w;
}

}  // namespace

Status write_merged_model(const Model& base, const LoraSet& adapters, std::optional<DType> type,
                          const std::string& path) {
  if (is_hf_folder(base.source_path()))
    return unsupported(base.source_path() +
                       ": export-lora writes GGUF and needs a GGUF base (convert the folder first: autoglm convert)");
  if (type && !ref::dtype_can_quantize(*type)) return invalid_argument("--type: not a weight type this engine writes");
  const GgufFile& file = base.file();
  GgufWriter w;
  for (const auto& [key, value] : file.metadata())
    if (key != "general.alignment") w.set(key, value);
  auto buffer = std::make_shared<std::vector<uint8_t>>();  // one tensor at a time
  for (const GgufTensorInfo& t : file.tensors()) {
    const std::vector<LoraSlot> slots = lora_slots(t.name, base);
    bool changed = false;
    for (const LoraSlot& s : slots)
      for (const auto& a : adapters) changed = changed || a->delta(s.layer, s.target);
    if (!changed) {
      AUTOGLM_RETURN_IF_ERROR(w.add_tensor_view(t.name, t.type, t.dims, t.data, t.n_bytes));
      continue;
    }
    const DType out = type.value_or(t.type);
    const int64_t n_in = t.dims[0], rows = t.rows();
    if (dtype_row_bytes(out, n_in) <= 0) return invalid_argument(t.name + ": rows cannot be stored as that type");
    const GgufTensorInfo* src = &t;
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor_deferred(
        t.name, out, t.dims, size_t(rows * dtype_row_bytes(out, n_in)),
        [src, slots, &adapters, out, buffer, n_in, rows]() -> Result<std::pair<const uint8_t*, size_t>> {
          const std::vector<float> merged = merged_rows(*src, slots, adapters);
          const int64_t row_bytes = dtype_row_bytes(out, n_in);
          buffer->assign(size_t(rows * row_bytes), 0);
          for (int64_t r = 0; r < rows; ++r)
            ref::quantize_row(out, &merged[size_t(r * n_in)], buffer->data() + r * row_bytes, n_in);
          return std::make_pair<const uint8_t*, size_t>(buffer->data(), buffer->size());
        }));
  }
  return w.write(path, file.alignment());
}

}  // namespace autoglm
