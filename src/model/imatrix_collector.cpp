#include "model/imatrix_collector.h"

#include <algorithm>

namespace autoglm {

ImatrixCollector::ImatrixCollector(const GgufFile& file, bool with_output) {
  for (const auto& t : file.tensors()) {
    const bool block_matrix = t.name.rfind("blk.", 0) == 0 || (with_output && t.name == "output.weight");
    if (!block_matrix || t.dims.size() < 2 || t.n_bytes == 0) continue;
    const int64_t n_mat = t.dims.size() > 2 ? t.dims[2] : 1;
    const int64_t mat_bytes = int64_t(t.n_bytes) / n_mat;
    watched_.push_back({t.data, t.data + t.n_bytes, t.name, t.dims[0], mat_bytes});
    ImatrixEntry& e = entries_[t.name];
    e.n_cols = t.dims[0];
    e.sums.assign(size_t(e.n_cols * n_mat), 0.0f);
    e.counts.assign(size_t(n_mat), 0.0f);
  }
  std::sort(watched_.begin(), watched_.end(), [](const Watched& a, const Watched& b) { return a.begin < b.begin; });
}

void ImatrixCollector::on_matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows) {
  auto it = std::upper_bound(watched_.begin(), watched_.end(), w.data,
                             [](const uint8_t* p, const Watched& m) { return p < m.begin; });
  if (it == watched_.begin()) return;
  const Watched& m = *--it;
  if (w.data >= m.end || w.cols != m.n_cols) return;  // not a watched matrix (a LoRA, a copy)
  const int64_t mat = (w.data - m.begin) / m.mat_bytes;
  ImatrixEntry& e = entries_[m.name];
  float* sums = e.sums.data() + mat * e.n_cols;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < e.n_cols; ++c) sums[c] += x[r * e.n_cols + c] * x[r * e.n_cols + c];
  e.counts[size_t(mat)] += float(n_rows);
}

Imatrix ImatrixCollector::result() const {
  Imatrix m;
  for (const auto& [name, e] : entries_)
    if (std::any_of(e.counts.begin(), e.counts.end(), [](float c) { return c > 0; })) m.entries[name] = e;
  return m;
}

int64_t ImatrixCollector::max_count() const {
  float most = 0;
  for (const auto& [name, e] : entries_)
    for (float c : e.counts) most = std::max(most, c);
  return int64_t(most);
}

}  // namespace autoglm
