#include "model/backend_cuda.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/check.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_ops.h"
#include "model/device_memory.h"
#include "model/model.h"

namespace autoglm {
namespace {

// Device copies of the weights, found by the host data they copy.
class CudaWeights final : public PlacedWeights {
 public:
  int64_t bytes() const override { return memory.bytes(); }
  const void* find(const void* host) const {
    const auto it = where.find(host);
    AUTOGLM_CHECK(it != where.end());  // every matrix and vector of ModelWeights was placed
    return it->second;
  }

  DeviceMemory memory;
  std::unordered_map<const void*, const void*> where;
};

struct HostBlock {
  const void* data;
  int64_t bytes;
};

// Every matrix and vector of the model, named for errors; tied and fused weights appear once.
Status collect(const ModelWeights& w, std::vector<HostBlock>& blocks) {
  std::unordered_set<const void*> seen;
  const auto add = [&](const void* data, int64_t bytes) {
    if (data && bytes > 0 && seen.insert(data).second) blocks.push_back({data, bytes});
  };
  const auto matrix = [&](const cpu::WeightMatrix& m, const std::string& name) -> Status {
    if (!cuda::weight_type_supported(m.type))
      return unsupported(name + ": weight type " + std::string(dtype_name(m.type)) +
                         " has no CUDA kernel (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K have; "
                         "--quantize q8_0 re-encodes)");
    add(m.data, m.rows * m.row_bytes);
    return Status::ok();
  };
  const auto vec = [&](const Vec& v) { add(v.data(), int64_t(v.size() * sizeof(float))); };
  AUTOGLM_RETURN_IF_ERROR(matrix(w.token_embd, "token_embd"));
  AUTOGLM_RETURN_IF_ERROR(matrix(w.output, "output"));
  vec(w.output_norm);
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    const std::string layer = "layer " + std::to_string(il) + " ";
    const std::pair<const cpu::WeightMatrix*, const char*> matrices[] = {
        {&l.wq, "attn_q"},     {&l.wk, "attn_k"}, {&l.wv, "attn_v"},    {&l.wo, "attn_output"},
        {&l.gate, "ffn_gate"}, {&l.up, "ffn_up"}, {&l.down, "ffn_down"}};
    for (const auto& [m, name] : matrices) AUTOGLM_RETURN_IF_ERROR(matrix(*m, layer + name));
    for (const Vec* v :
         {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.attn_post_norm, &l.ffn_post_norm, &l.q_norm, &l.k_norm})
      vec(*v);
  }
  return Status::ok();
}

constexpr int64_t kAlignment = 256;

int64_t aligned(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Model& model, const CudaWeights& weights, std::unique_ptr<cuda::Queue> queue)
      : device_(model.device()), n_layer_(model.spec().n_layer), weights_(weights), queue_(std::move(queue)) {}

  Device device() const override { return device_; }

  Status begin_step(const Batch& batch, const int32_t* tile_start, int64_t n_tiles) override;
  void embed(const cpu::WeightMatrix& table, float* x) override {
    cuda::embed(*queue_, table.type, matrix(table), table.row_bytes, table.cols, ids_, n_tokens_, x);
  }
  void matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows, float* y) override {
    cuda::matmul(*queue_, w.type, matrix(w), w.rows, w.cols, w.row_bytes, x, n_rows, y);
  }
  void matmul_multi(const cpu::WeightMatrix* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_rows) override {
    for (int i = 0; i < n; ++i) matmul(*ws[i], x, n_rows, ys[i]);
  }
  void add_bias(float* y, const Vec& bias, int64_t n_rows) override {
    cuda::add_bias(*queue_, y, vector(bias), int64_t(bias.size()), n_rows);
  }
  void rmsnorm(const float* x, const Vec& w, float eps, int64_t width, int64_t n_rows, float* y) override {
    cuda::rmsnorm(*queue_, x, vector(w), eps, width, n_rows, y);
  }
  void add_rmsnorm(float* x, const float* delta, const Vec* w, float eps, int64_t width, int64_t n_rows,
                   float* y) override {
    cuda::add_rmsnorm(*queue_, x, delta, w ? vector(*w) : nullptr, eps, width, n_rows, y);
  }
  void rmsnorm_logit_rows(const float* x, const Vec& w, float eps, int64_t width, float* y) override {
    cuda::rmsnorm_gather(*queue_, x, logit_rows_, n_logit_rows_, vector(w), eps, width, y);
  }
  void rope(float* x, int64_t n_heads, const RopeTable& rope) override {
    cuda::rope(*queue_, x, kv_.positions, n_tokens_, n_heads, rope.head_dim, rope.n_rot, inv_freq(rope),
               rope.style == cpu::RopeStyle::kNeox);
  }
  void silu_mul(float* gate, const float* up, int64_t n) override { cuda::silu_mul(*queue_, gate, up, n); }
  void store_kv(int64_t layer, const float* k, int64_t kv_dim, const float* v, int64_t v_dim) override {
    cuda::store_kv(*queue_, kv_, layer, k, kv_dim, v, v_dim, n_tokens_);
  }
  void attention(int64_t layer, const float* q, int64_t q_stride, float* out, int64_t out_stride,
                 const AttentionShape& shape) override {
    const int64_t n_heads = q_stride / shape.head_dim;
    AUTOGLM_CHECK(shape.head_dim_v <= 512);  // the kernel's threads hold at most 4 dims of 128 each
    cuda::attention(*queue_, kv_,
                    {q, q_stride, out, out_stride, n_tokens_, n_heads, shape.group, shape.head_dim, shape.head_dim_v,
                     shape.scale, shape.window, layer});
  }
  Status read_back(const float* src, int64_t n, float* dst) override {
    return queue_->download(dst, src, n * int64_t(sizeof(float)));
  }

 private:
  const uint8_t* matrix(const cpu::WeightMatrix& w) const { return static_cast<const uint8_t*>(weights_.find(w.data)); }
  const float* vector(const Vec& v) const { return static_cast<const float*>(weights_.find(v.data())); }
  const double* inv_freq(const RopeTable& rope);
  Status check_cache(KvCache& cache, int64_t (&layer_strides)[2]);

  Device device_;
  int64_t n_layer_;
  const CudaWeights& weights_;
  std::unique_ptr<cuda::Queue> queue_;
  // The step's tables (device copies of the host vectors below, in step_memory_).
  DeviceMemory step_memory_;
  std::vector<uint8_t> step_host_;
  const int32_t* ids_ = nullptr;
  const int32_t* logit_rows_ = nullptr;
  int64_t n_tokens_ = 0, n_logit_rows_ = 0;
  cuda::KvTable kv_{};
  DeviceMemory inv_freq_;
  const double* inv_freq_of_ = nullptr;  // the host table inv_freq_ copies
};

// A cache the kernels can read: in this GPU's memory, layers evenly spaced from layer 0.
Status CudaBackend::check_cache(KvCache& cache, int64_t (&layer_strides)[2]) {
  if (!cuda::is_device_pointer(device_.index, cache.key_span(0, 0)))
    return invalid_argument("batch: a KV cache is not in the memory of " + device_name(device_) +
                            " (made for another device)");
  for (int keys = 0; keys < 2; ++keys) {
    const auto span = [&](int64_t layer) { return keys ? cache.key_span(layer, 0) : cache.value_span(layer, 0); };
    const int64_t stride = n_layer_ > 1 ? span(1) - span(0) : 0;
    if (span(n_layer_ - 1) != span(0) + (n_layer_ - 1) * stride)
      return unsupported("batch: a KV cache whose layers are not evenly spaced cannot run on cuda");
    layer_strides[keys ? 0 : 1] = stride;
  }
  return Status::ok();
}

Status CudaBackend::begin_step(const Batch& b, const int32_t*, int64_t) {
  AUTOGLM_RETURN_IF_ERROR(queue_->make_current());
  n_tokens_ = int64_t(b.tokens.size());
  n_logit_rows_ = int64_t(b.logit_tokens.size());
  const int64_t n_slots = int64_t(b.caches.size());
  std::vector<int64_t> most_pos(size_t(n_slots), -1);
  for (int64_t t = 0; t < n_tokens_; ++t)
    most_pos[size_t(b.seq[size_t(t)])] = std::max<int64_t>(most_pos[size_t(b.seq[size_t(t)])], b.positions[size_t(t)]);
  std::vector<int64_t> slot_info(size_t(4 * n_slots), 0);
  std::vector<const uint8_t*> k_spans, v_spans;
  DType kv_type = DType::F16;
  for (int64_t s = 0; s < n_slots; ++s) {
    KvCache* cache = b.caches[size_t(s)];
    if (!cache || most_pos[size_t(s)] < 0) continue;
    if (k_spans.empty()) kv_type = cache->format().type;
    if (cache->format().type != kv_type) return invalid_argument("batch: the KV caches differ in type");
    if (auto s = kv_type_runs_on(kv_type, device_); !s.is_ok()) return Status(s.code(), "batch: " + s.message());
    int64_t strides[2];
    AUTOGLM_RETURN_IF_ERROR(check_cache(*cache, strides));
    const int64_t span = cache->span();
    slot_info[size_t(4 * s)] = span;
    slot_info[size_t(4 * s + 1)] = int64_t(k_spans.size());
    slot_info[size_t(4 * s + 2)] = strides[0];
    slot_info[size_t(4 * s + 3)] = strides[1];
    for (int64_t first = 0; first <= most_pos[size_t(s)]; first += span) {
      k_spans.push_back(cache->key_span(0, first));
      v_spans.push_back(cache->value_span(0, first));
    }
    kv_.k_row_bytes = cache->format().k_row_bytes;
    kv_.v_row_bytes = cache->format().v_row_bytes;
  }
  // One upload: ids, positions, token slots, logit rows, slot info, span tables.
  const struct Part {
    const void* data;
    int64_t bytes;
  } parts[] = {{b.tokens.data(), n_tokens_ * 4},
               {b.positions.data(), n_tokens_ * 4},
               {b.seq.data(), n_tokens_ * 4},
               {b.logit_tokens.data(), n_logit_rows_ * 4},
               {slot_info.data(), int64_t(slot_info.size() * 8)},
               {k_spans.data(), int64_t(k_spans.size() * sizeof(void*))},
               {v_spans.data(), int64_t(v_spans.size() * sizeof(void*))}};
  int64_t total = 0;
  for (const Part& p : parts) total += aligned(p.bytes);
  if (step_memory_.bytes() < total) {
    AUTOGLM_RETURN_IF_ERROR(queue_->finish());  // the old tables may still be read
    AUTOGLM_ASSIGN_OR_RETURN(step_memory_, DeviceMemory::allocate(device_, 2 * total));
  }
  step_host_.assign(size_t(total), 0);
  const uint8_t* device_part[7];
  int64_t offset = 0;
  for (size_t i = 0; i < 7; ++i) {
    if (parts[i].bytes > 0) std::memcpy(step_host_.data() + offset, parts[i].data, size_t(parts[i].bytes));
    device_part[i] = step_memory_.data() + offset;
    offset += aligned(parts[i].bytes);
  }
  AUTOGLM_RETURN_IF_ERROR(queue_->upload(step_memory_.data(), step_host_.data(), total));
  ids_ = reinterpret_cast<const int32_t*>(device_part[0]);
  kv_.positions = reinterpret_cast<const int32_t*>(device_part[1]);
  kv_.token_slot = reinterpret_cast<const int32_t*>(device_part[2]);
  logit_rows_ = reinterpret_cast<const int32_t*>(device_part[3]);
  kv_.slot_info = reinterpret_cast<const int64_t*>(device_part[4]);
  kv_.k_spans = reinterpret_cast<const uint8_t* const*>(device_part[5]);
  kv_.v_spans = reinterpret_cast<const uint8_t* const*>(device_part[6]);
  kv_.type = kv_type;
  return Status::ok();
}

const double* CudaBackend::inv_freq(const RopeTable& rope) {
  if (inv_freq_of_ != rope.inv_freq) {
    const int64_t bytes = rope.n_rot / 2 * int64_t(sizeof(double));
    auto memory = DeviceMemory::allocate(device_, bytes);
    AUTOGLM_CHECK(memory.is_ok());  // a few hundred bytes
    inv_freq_ = std::move(memory).value();
    AUTOGLM_CHECK(cuda::copy_to_device(device_.index, inv_freq_.data(), rope.inv_freq, bytes).is_ok());
    inv_freq_of_ = rope.inv_freq;
  }
  return reinterpret_cast<const double*>(inv_freq_.data());
}

}  // namespace

Result<std::unique_ptr<PlacedWeights>> place_weights_on_cuda(int index, const ModelWeights& weights) {
  std::vector<HostBlock> blocks;
  AUTOGLM_RETURN_IF_ERROR(collect(weights, blocks));
  int64_t total = 0;
  for (const HostBlock& b : blocks) total += aligned(b.bytes);
  auto placed = std::make_unique<CudaWeights>();
  AUTOGLM_ASSIGN_OR_RETURN(placed->memory, DeviceMemory::allocate(Device{DeviceKind::kCuda, index}, total));
  int64_t offset = 0;
  for (const HostBlock& b : blocks) {
    uint8_t* dst = placed->memory.data() + offset;
    AUTOGLM_RETURN_IF_ERROR(cuda::copy_to_device(index, dst, b.data, b.bytes));
    placed->where[b.data] = dst;
    offset += aligned(b.bytes);
  }
  return std::unique_ptr<PlacedWeights>(std::move(placed));
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const Model& model) {
  const auto* weights = dynamic_cast<const CudaWeights*>(model.placed_weights());
  if (!weights) return invalid_argument("device " + device_name(model.device()) + ": the weights were not placed");
  AUTOGLM_ASSIGN_OR_RETURN(auto queue, cuda::Queue::create(model.device().index));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(model, *weights, std::move(queue)));
}

}  // namespace autoglm
