// Importance matrices as llama-imatrix writes and llama-quantize reads them: per weight matrix
// (and per expert of a stack), the sum over the tokens seen of each input column's squared
// activation, and how many tokens were summed. The GGUF form (general.type "imatrix",
// imatrix.datasets / chunk_count / chunk_size; tensors "<weight>.in_sum2" [n_cols, n_mat] and
// "<weight>.counts" [1, n_mat], F32) is written; it and the older .dat form are read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct ImatrixEntry {
  int64_t n_cols = 0;
  std::vector<float> sums;    // [n_mat][n_cols]
  std::vector<float> counts;  // [n_mat]
  int64_t n_mat() const { return int64_t(counts.size()); }
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight tensor name
  std::vector<std::string> datasets;
  int64_t chunk_count = 0, chunk_size = 0;

  // The quantizer's importance of each column of `name`, matrix by matrix ([n_mat][n_cols]):
  // the mean squared activation (1 where a matrix saw no token); nullopt when absent.
  std::optional<std::vector<float>> weights(const std::string& name) const;
};

// GGUF first, else the .dat form; errors name the file and what is wrong (an entry without its
// counts, a non-F32 tensor, sizes that disagree, a non-finite value).
Result<Imatrix> read_imatrix(const std::string& path);
Status write_imatrix(const Imatrix& m, const std::string& path);

}  // namespace autoglm
