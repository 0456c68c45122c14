#include "model/tensor_binder.h"

#include "kernels/ref/quants.h"

namespace autoglm {

std::string shape_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The tensor `name` of exactly `dims` in a type this build computes with; null with `error` set otherwise.
const GgufTensorInfo* TensorBinder::checked(const std::string& name, const std::vector<int64_t>& dims,
                                            Status& error) const {
  const GgufTensorInfo* t = find(name);
  if (!t) {
    error = corrupt(f_.path() + ": missing tensor '" + name + "'");
    return nullptr;
  }
  if (t->dims != dims) {
    error = corrupt(f_.path() + ": tensor '" + name + "' has shape " + shape_string(t->dims) + ", expected " +
                    shape_string(dims));
    return nullptr;
  }
  if (!ref::dtype_is_supported(t->type)) {
    error = unsupported(f_.path() + ": tensor '" + name + "' has weight type " + std::string(dtype_name(t->type)) +
                        ", which this build cannot compute with");
    return nullptr;
  }
  return t;
}

Result<cpu::WeightMatrix> TensorBinder::matrix(const std::string& name, int64_t rows, int64_t cols) const {
  Status error;
  const GgufTensorInfo* t = checked(name, {cols, rows}, error);
  if (!t) return error;
  return cpu::WeightMatrix{t->type, t->data, rows, cols, dtype_row_bytes(t->type, cols)};
}

Result<std::vector<cpu::WeightMatrix>> TensorBinder::stack(const std::string& name, int64_t n, int64_t rows,
                                                           int64_t cols) const {
  Status error;
  const GgufTensorInfo* t = checked(name, {cols, rows, n}, error);
  if (!t) return error;
  const int64_t row_bytes = dtype_row_bytes(t->type, cols);
  std::vector<cpu::WeightMatrix> views;
  for (int64_t e = 0; e < n; ++e) views.push_back({t->type, t->data + e * rows * row_bytes, rows, cols, row_bytes});
  return views;
}

Result<Vec> TensorBinder::vector(const std::string& name, int64_t n, bool required) const {
  const GgufTensorInfo* t = find(name);
  if (!t) {
    if (!required) return Vec{};
    return corrupt(f_.path() + ": missing tensor '" + name + "'");
  }
  if (t->n_elements() != n)
    return corrupt(f_.path() + ": tensor '" + name + "' has shape " + shape_string(t->dims) + ", expected [" +
                   std::to_string(n) + "]");
  if (!ref::dtype_is_supported(t->type))
    return unsupported(f_.path() + ": tensor '" + name + "' has unsupported type " + std::string(dtype_name(t->type)));
  Vec v(static_cast<size_t>(n));
  ref::dequantize_row(t->type, t->data, v.data(), n);
  return v;
}

Result<Vec> TensorBinder::floats(const std::string& name, const std::vector<int64_t>& dims) const {
  Status error;
  const GgufTensorInfo* t = checked(name, dims, error);
  if (!t) return error;
  const int64_t cols = dims[0], rows = t->rows();
  const int64_t row_bytes = dtype_row_bytes(t->type, cols);
  Vec v(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) ref::dequantize_row(t->type, t->data + r * row_bytes, v.data() + r * cols, cols);
  return v;
}

}  // namespace autoglm
