// The activation statistics llama-imatrix gathers: for every weight matrix of the blocks (and
// the output projection, when asked), per input column the sum of the squared inputs it was
// multiplied with, and how many inputs; per expert for the experts' stacks.
#pragma once

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/imatrix_file.h"
#include "model/observing_backend.h"

namespace autoglm {

class ImatrixCollector final : public MatmulObserver {
 public:
  // The matrices of `file` (whose tensor data the model's weights point into) that are watched.
  ImatrixCollector(const GgufFile& file, bool with_output);
  void on_matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows) override;
  // The sums so far, as an importance matrix (entries that saw no input are left out).
  Imatrix result() const;
  // The largest count of tokens any matrix has seen.
  int64_t max_count() const;

 private:
  struct Watched {
    const uint8_t* begin;
    const uint8_t* end;
    std::string name;
    int64_t n_cols, mat_bytes;  // a stack's matrices are mat_bytes apart
  };
  std::vector<Watched> watched_;  // sorted by begin
  std::map<std::string, ImatrixEntry> entries_;
};

}  // namespace autoglm
