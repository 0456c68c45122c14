// Binds a GGUF file's tensors to roles, checking every shape: matrices and stacks of them as
// views of the mapped data, small vectors as floats. Errors name the file and the tensor.
#pragma once

#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "kernels/cpu/weight_matrix.h"

namespace autoglm {

using Vec = std::vector<float>;  // small per-channel parameters, kept as floats

std::string shape_string(const std::vector<int64_t>& dims);  // "[a, b]"

class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& f) : f_(f) {}

  const GgufTensorInfo* find(const std::string& name) const { return f_.find_tensor(name); }
  const std::string& path() const { return f_.path(); }

  // A matrix with `rows` outputs of `cols` inputs: GGUF dims [cols, rows].
  Result<cpu::WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) const;
  // A stack of n matrices of `rows` outputs of `cols` inputs: GGUF dims [cols, rows, n], one
  // view per matrix.
  Result<std::vector<cpu::WeightMatrix>> stack(const std::string& name, int64_t n, int64_t rows, int64_t cols) const;
  // A vector of n floats; absent optional vectors give an empty result.
  Result<Vec> vector(const std::string& name, int64_t n, bool required = true) const;
  // Any tensor of `dims` (GGUF order) decoded to floats (patch kernels, position tables).
  Result<Vec> floats(const std::string& name, const std::vector<int64_t>& dims) const;

 private:
  const GgufTensorInfo* checked(const std::string& name, const std::vector<int64_t>& dims, Status& error) const;
  const GgufFile& f_;
};

// Rows [first, first + n) of a matrix, as a matrix of its own.
inline cpu::WeightMatrix row_range(const cpu::WeightMatrix& m, int64_t first, int64_t n) {
  return {m.type, m.data + first * m.row_bytes, n, m.cols, m.row_bytes};
}

inline Vec slice(const Vec& v, int64_t first, int64_t n) {
  return Vec(v.begin() + first, v.begin() + first + n);
}

}  // namespace autoglm
