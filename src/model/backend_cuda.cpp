#include "model/backend_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/cuda/cuda_ops.h"
#include "model/device_memory.h"
#include "model/expert_ffn.h"
#include "model/expert_routing.h"

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
  // False for the routed experts kept in host memory (--cpu-moe).
  bool placed(const void* host) const { return where.count(host) > 0; }

  DeviceMemory memory;
  std::unordered_map<const void*, const void*> where;
};

struct HostBlock {
  const void* data;
  int64_t bytes;
};

// Every matrix and vector of the model, named for errors; tied and fused weights appear once.
// The routed experts of the layers host_experts marks stay behind (the CPU runs them); the
// router and the shared expert go to the device, and the router's biases stay on the host,
// where the experts are picked.
Status collect(const ModelWeights& w, const std::vector<bool>& host_experts, std::vector<HostBlock>& blocks) {
  std::unordered_set<const void*> seen;
  const auto add = [&](const void* data, int64_t bytes) {
    if (data && bytes > 0 && seen.insert(data).second) blocks.push_back({data, bytes});
  };
  const auto matrix = [&](const cpu::WeightMatrix& m, const std::string& name, const char* hint) -> Status {
    if (!cuda::weight_type_supported(m.type))
      return unsupported(
          name + ": weight type " + std::string(dtype_name(m.type)) +
          " has no CUDA kernel (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K have; " + hint + ")");
    add(m.data, m.bytes());
    return Status::ok();
  };
  const char* requantize = "--quantize q8_0 re-encodes";
  const char* keep_on_host = "--quantize q8_0 re-encodes, --cpu-moe keeps the experts on the cpu";
  const auto vec = [&](const Vec& v) { add(v.data(), int64_t(v.size() * sizeof(float))); };
  AUTOGLM_RETURN_IF_ERROR(matrix(w.token_embd, "token_embd", requantize));
  AUTOGLM_RETURN_IF_ERROR(matrix(w.output, "output", requantize));
  vec(w.output_norm);
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const LayerWeights& l = w.layers[il];
    const std::string layer = "layer " + std::to_string(il) + " ";
    const std::pair<const cpu::WeightMatrix*, const char*> matrices[] = {
        {&l.wq, "attn_q"},     {&l.wk, "attn_k"}, {&l.wv, "attn_v"},    {&l.wo, "attn_output"},
        {&l.gate, "ffn_gate"}, {&l.up, "ffn_up"}, {&l.down, "ffn_down"}};
    for (const auto& [m, name] : matrices) AUTOGLM_RETURN_IF_ERROR(matrix(*m, layer + name, requantize));
    for (const Vec* v :
         {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.attn_post_norm, &l.ffn_post_norm, &l.q_norm, &l.k_norm})
      vec(*v);
    const ExpertWeights& e = l.experts;
    const std::pair<const cpu::WeightMatrix*, const char*> expert_matrices[] = {
        {&e.router, "ffn_gate_inp"},
        {&e.shared_gate, "ffn_gate_shexp"},
        {&e.shared_up, "ffn_up_shexp"},
        {&e.shared_down, "ffn_down_shexp"},
        {&e.shared_gate_inp, "ffn_gate_inp_shexp"}};
    for (const auto& [m, name] : expert_matrices) AUTOGLM_RETURN_IF_ERROR(matrix(*m, layer + name, requantize));
    if (il < host_experts.size() && host_experts[il]) continue;
    const std::pair<const std::vector<cpu::WeightMatrix>*, const char*> routed[] = {
        {&e.gate, "ffn_gate_exps"}, {&e.up, "ffn_up_exps"}, {&e.down, "ffn_down_exps"}};
    for (const auto& [experts, name] : routed)
      for (const cpu::WeightMatrix& m : *experts) AUTOGLM_RETURN_IF_ERROR(matrix(m, layer + name, keep_on_host));
  }
  return Status::ok();
}

constexpr int64_t kAlignment = 256;

int64_t aligned(int64_t n) {
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const Device& device, int64_t n_layer, const CudaWeights& weights, std::unique_ptr<cuda::Queue> queue,
              ThreadPool& pool)
      : device_(device), n_layer_(n_layer), weights_(weights), queue_(std::move(queue)), pool_(pool) {}

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
  // The experts are picked on the host, as the CPU picks them (one token at a time, the same
  // ties), then run where their weights are. An op cannot return an error: the pass's
  // read_back reports it.
  void experts(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x, float* y) override {
    if (deferred_.is_ok()) deferred_ = run_experts_step(w, spec, router_logits, x, y);
  }
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
    const Status s = queue_->download(dst, src, n * int64_t(sizeof(float)));
    if (!deferred_.is_ok()) return std::exchange(deferred_, Status::ok());
    return s;
  }

 private:
  const uint8_t* matrix(const cpu::WeightMatrix& w) const { return static_cast<const uint8_t*>(weights_.find(w.data)); }
  const float* vector(const Vec& v) const { return static_cast<const float*>(weights_.find(v.data())); }
  const double* inv_freq(const RopeTable& rope);
  Status check_cache(KvCache& cache, int64_t (&layer_strides)[2]);
  Status run_experts_step(const ExpertWeights& w, const ModelSpec& spec, float* router_logits, const float* x,
                          float* y);
  Status grow(DeviceMemory& memory, int64_t floats);
  void queue_shared_expert(const ExpertWeights& w, const ModelSpec& spec, const float* x);
  Status route_on_host(const ExpertWeights& w, const MoeSpec& moe, const float* router_logits);
  Status routed_experts_on_device(const ExpertWeights& w, const ModelSpec& spec);
  const ExpertWeights& routed_only(const ExpertWeights& w);
  Status add_shared_output(const ExpertWeights& w, const ModelSpec& spec);

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
  // experts(): the experts kept in host memory run on pool_; host copies of the step's
  // rows; device scratch for the experts placed here and for the shared expert.
  ThreadPool& pool_;
  Status deferred_;  // the first failure of experts() in this pass
  std::vector<float> host_logits_, host_x_, host_y_, host_shared_;
  std::vector<int32_t> expert_ids_;  // [T, n_expert_used]
  std::vector<float> expert_weights_;
  ExpertScratch expert_scratch_;
  DeviceMemory routed_memory_, shared_memory_;
  std::unordered_map<const ExpertWeights*, ExpertWeights> routed_only_;  // without the shared expert
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
  deferred_ = Status::ok();
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

// Device memory of at least `floats` floats (grows, never shrinks).
Status CudaBackend::grow(DeviceMemory& memory, int64_t floats) {
  const int64_t bytes = floats * int64_t(sizeof(float));
  if (memory.bytes() >= bytes) return Status::ok();
  AUTOGLM_RETURN_IF_ERROR(queue_->finish());  // the old scratch may still be read
  AUTOGLM_ASSIGN_OR_RETURN(memory, DeviceMemory::allocate(device_, bytes));
  return Status::ok();
}

// The shared expert over every token, into shared_memory_ [gate | up | out | gate_inp scale]:
// queued first, so the GPU runs it while the host picks the routed experts.
void CudaBackend::queue_shared_expert(const ExpertWeights& w, const ModelSpec& spec, const float* x) {
  const int64_t T = n_tokens_, d = spec.n_embd, fs = w.shared_gate.rows;
  float* gate = shared_memory_.floats();
  float* up = gate + T * fs;
  float* out = up + T * fs;
  matmul(w.shared_gate, x, T, gate);
  matmul(w.shared_up, x, T, up);
  cuda::silu_mul(*queue_, gate, up, T * fs);
  matmul(w.shared_down, gate, T, out);
  if (w.shared_gate_inp.rows > 0) matmul(w.shared_gate_inp, x, T, out + T * d);
}

// Each token's experts and weights (expert_ids_, expert_weights_) from the router's logits.
Status CudaBackend::route_on_host(const ExpertWeights& w, const MoeSpec& moe, const float* router_logits) {
  const int64_t T = n_tokens_;
  host_logits_.resize(size_t(T * moe.n_expert));
  AUTOGLM_RETURN_IF_ERROR(
      queue_->download(host_logits_.data(), router_logits, int64_t(host_logits_.size() * sizeof(float))));
  route_layer(moe, host_logits_.data(), w.router_bias, w.selection_bias, T, expert_ids_, expert_weights_);
  return Status::ok();
}

// The routed experts whose weights are on this GPU: the tokens grouped by expert on the host
// (as the CPU groups them), each chosen expert's matmuls over its rows here, and each token's
// outputs summed on the host in its choice order (the CPU's order) into host_y_. Gathering
// and summing on the host costs two copies of the rows, but routing already waits for the
// GPU once per layer.
Status CudaBackend::routed_experts_on_device(const ExpertWeights& w, const ModelSpec& spec) {
  const int64_t T = n_tokens_, d = spec.n_embd, f = spec.moe.n_ff_exp, k = spec.moe.n_expert_used;
  const int64_t n_slots = T * k;
  ExpertScratch& s = expert_scratch_;
  group_by_expert(expert_ids_.data(), n_slots, spec.moe.n_expert, s);
  s.x.resize(size_t(n_slots * d));
  for (int64_t r = 0; r < n_slots; ++r) {
    const float* src = host_x_.data() + (s.slot_of[size_t(r)] / k) * d;
    std::copy(src, src + d, s.x.data() + r * d);
  }
  AUTOGLM_RETURN_IF_ERROR(grow(routed_memory_, n_slots * (2 * d + 2 * f)));
  float* x = routed_memory_.floats();
  float* gate = x + n_slots * d;
  float* up = gate + n_slots * f;
  float* out = up + n_slots * f;
  AUTOGLM_RETURN_IF_ERROR(queue_->upload(x, s.x.data(), n_slots * d * int64_t(sizeof(float))));
  for (int64_t e = 0; e < spec.moe.n_expert; ++e) {
    const int64_t r0 = s.first[size_t(e)], n = s.first[size_t(e + 1)] - r0;
    if (n == 0) continue;
    matmul(w.gate[size_t(e)], x + r0 * d, n, gate + r0 * f);
    matmul(w.up[size_t(e)], x + r0 * d, n, up + r0 * f);
  }
  cuda::silu_mul(*queue_, gate, up, n_slots * f);  // device_runs_spec refuses the other activations
  for (int64_t e = 0; e < spec.moe.n_expert; ++e) {
    const int64_t r0 = s.first[size_t(e)], n = s.first[size_t(e + 1)] - r0;
    if (n > 0) matmul(w.down[size_t(e)], gate + r0 * f, n, out + r0 * d);
  }
  s.out.resize(size_t(n_slots * d));
  AUTOGLM_RETURN_IF_ERROR(queue_->download(s.out.data(), out, n_slots * d * int64_t(sizeof(float))));
  for (int64_t t = 0; t < T; ++t) {
    float* yt = host_y_.data() + t * d;
    std::fill(yt, yt + d, 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      const float wt = expert_weights_[size_t(t * k + i)];
      const float* o = s.out.data() + s.row_of_slot[size_t(t * k + i)] * d;
      for (int64_t j = 0; j < d; ++j) yt[j] += wt * o[j];
    }
  }
  return Status::ok();
}

// The layer's weights without the shared expert, which runs on the GPU: what the CPU's
// run_experts gets for a layer kept in host memory (made once per layer).
const ExpertWeights& CudaBackend::routed_only(const ExpertWeights& w) {
  auto [it, made] = routed_only_.try_emplace(&w);
  if (made) {
    it->second = w;
    it->second.shared_gate = it->second.shared_up = it->second.shared_down = it->second.shared_gate_inp = {};
  }
  return it->second;
}

// host_y_ += the shared expert's output (qwen2moe: times sigmoid of its gate), as the CPU adds it.
Status CudaBackend::add_shared_output(const ExpertWeights& w, const ModelSpec& spec) {
  const int64_t T = n_tokens_, d = spec.n_embd, fs = w.shared_gate.rows;
  const bool gated = w.shared_gate_inp.rows > 0;
  host_shared_.resize(size_t(T * d + (gated ? T : 0)));
  AUTOGLM_RETURN_IF_ERROR(queue_->download(host_shared_.data(), shared_memory_.floats() + 2 * T * fs,
                                           int64_t(host_shared_.size() * sizeof(float))));
  for (int64_t t = 0; t < T; ++t) {
    const float gate = gated ? 1.0f / (1.0f + std::exp(-host_shared_[size_t(T * d + t)])) : 1.0f;
    for (int64_t j = 0; j < d; ++j) host_y_[size_t(t * d + j)] += gate * host_shared_[size_t(t * d + j)];
  }
  return Status::ok();
}

// One MoE layer: the shared expert queued on the GPU, the routing on the host, the routed
// experts where --cpu-moe left their weights (the CPU's run_experts on pool_ for a layer kept
// in host memory), and y uploaded. Every step waits for the GPU: experts() is a sync point.
Status CudaBackend::run_experts_step(const ExpertWeights& w, const ModelSpec& spec, float* router_logits,
                                     const float* x, float* y) {
  const int64_t T = n_tokens_, d = spec.n_embd;
  const bool shared = w.shared_gate.rows > 0;
  if (shared) {
    AUTOGLM_RETURN_IF_ERROR(grow(shared_memory_, T * (2 * w.shared_gate.rows + d + 1)));
    queue_shared_expert(w, spec, x);
  }
  AUTOGLM_RETURN_IF_ERROR(route_on_host(w, spec.moe, router_logits));
  host_x_.resize(size_t(T * d));
  AUTOGLM_RETURN_IF_ERROR(queue_->download(host_x_.data(), x, T * d * int64_t(sizeof(float))));
  host_y_.resize(size_t(T * d));
  if (!w.gate.empty() && weights_.placed(w.gate.front().data)) {
    AUTOGLM_RETURN_IF_ERROR(routed_experts_on_device(w, spec));
  } else {
    run_experts(pool_, shared ? routed_only(w) : w, spec, host_x_.data(), T, expert_ids_.data(), expert_weights_.data(),
                host_y_.data(), expert_scratch_);
  }
  if (shared) AUTOGLM_RETURN_IF_ERROR(add_shared_output(w, spec));
  // host_y_ must outlive the copy: the next experts() waits for the GPU before touching it.
  return queue_->upload(y, host_y_.data(), T * d * int64_t(sizeof(float)));
}

}  // namespace

Result<std::unique_ptr<PlacedWeights>> place_weights_on_cuda(int index, const ModelWeights& weights,
                                                             const std::vector<bool>& host_experts) {
  std::vector<HostBlock> blocks;
  AUTOGLM_RETURN_IF_ERROR(collect(weights, host_experts, blocks));
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

Result<std::unique_ptr<Backend>> make_cuda_backend(const Device& device, const ModelSpec& spec,
                                                   const PlacedWeights* placed, ThreadPool& pool) {
  const auto* weights = dynamic_cast<const CudaWeights*>(placed);
  if (!weights) return invalid_argument("device " + device_name(device) + ": the weights were not placed");
  AUTOGLM_ASSIGN_OR_RETURN(auto queue, cuda::Queue::create(device.index));
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(device, spec.n_layer, *weights, std::move(queue), pool));
}

}  // namespace autoglm
