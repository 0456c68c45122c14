#include "engine/embeddings.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "model/kv_cache.h"

namespace autoglm {

Result<std::optional<Pooling>> pooling_from_name(std::string_view name) {
  if (name == "auto") return std::optional<Pooling>();
  if (name == "last") return std::optional<Pooling>(Pooling::kLast);
  if (name == "mean") return std::optional<Pooling>(Pooling::kMean);
  return invalid_argument("embeddings_pooling: '" + std::string(name) + "' is not auto, last or mean");
}

const char* pooling_name(std::optional<Pooling> pooling) {
  if (!pooling) return "auto";
  return *pooling == Pooling::kMean ? "mean" : "last";
}
void normalize_l2(std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += double(x) * x;
  const double norm = std::sqrt(sum);
  if (norm > 0)
    for (float& x : v) x = float(x / norm);
}

Result<std::vector<std::vector<float>>> compute_embeddings(ModelRunner& runner, const ModelSpec& spec, DType kv_type,
                                                           const EmbeddingJob& job, int64_t max_batch_tokens) {
  const size_t n = job.inputs.size();
  const int64_t d = spec.n_embd;
  std::vector<std::vector<double>> sums(n, std::vector<double>(size_t(d), 0.0));
  std::vector<std::vector<float>> out(n);
  std::vector<float> hidden;
  // Groups of inputs whose KV is held at once; each group runs in batches of the budget.
  for (size_t first = 0; first < n;) {
    size_t last = first;
    int64_t group_tokens = 0;
    while (last < n && (last == first || group_tokens + int64_t(job.inputs[last].size()) <= 4 * max_batch_tokens))
      group_tokens += int64_t(job.inputs[last++].size());
    std::vector<std::unique_ptr<ContiguousKvCache>> caches;
    for (size_t i = first; i < last; ++i)
      caches.push_back(
          std::make_unique<ContiguousKvCache>(spec, int64_t(job.inputs[i].size()) + 1, kv_type, runner.device()));
    std::vector<int64_t> done(last - first, 0);
    for (bool more = true; more;) {
      Batch batch;
      batch.hidden_states = true;
      std::vector<size_t> owner;  // the input of each output row
      int64_t room = max_batch_tokens;
      for (size_t k = 0; k < caches.size() && room > 0; ++k) {
        const auto& ids = job.inputs[first + k];
        const int64_t take = std::min<int64_t>(room, int64_t(ids.size()) - done[k]);
        if (take <= 0) continue;
        const int32_t seq = int32_t(batch.caches.size());
        batch.caches.push_back(caches[k].get());
        const bool ends = done[k] + take == int64_t(ids.size());
        const bool all = job.pooling == Pooling::kMean;
        batch.add_sequence_tokens(seq, ids.data() + done[k], take, int32_t(done[k]), ends && !all, all);
        for (int64_t t = 0; t < (all ? take : ends ? 1 : 0); ++t) owner.push_back(first + k);
        done[k] += take;
        room -= take;
      }
      if (batch.tokens.empty()) break;
      AUTOGLM_RETURN_IF_ERROR(runner.forward(batch, hidden));
      for (size_t row = 0; row < owner.size(); ++row)
        for (int64_t j = 0; j < d; ++j) sums[owner[row]][size_t(j)] += hidden[row * size_t(d) + size_t(j)];
      more = false;
      for (size_t k = 0; k < caches.size(); ++k) more = more || done[k] < int64_t(job.inputs[first + k].size());
    }
    for (size_t i = first; i < last; ++i) {
      const double count = job.pooling == Pooling::kMean ? double(job.inputs[i].size()) : 1.0;
      out[i].resize(size_t(d));
      for (int64_t j = 0; j < d; ++j) out[i][size_t(j)] = float(sums[i][size_t(j)] / count);
      normalize_l2(out[i]);
    }
    first = last;
  }
  return out;
}

}  // namespace autoglm
