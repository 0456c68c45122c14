// The device seam: device names, device memory, the errors of a missing GPU, and (where a
// CUDA build meets a GPU) every op of the CUDA backend against the CPU's. Without a GPU the
// CUDA cases skip, saying so; scripts/cuda-check.sh runs them on a GPU machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "autoglm/runtime.h"
#include "kernels/cuda/cuda_api.h"
#include "kernels/ref/block_decode.h"
#include "model/device_memory.h"
#include "model/lora.h"
#include "model_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

bool gpu_present() {
  return available_devices().size() > 1;
}

#define REQUIRE_GPU() \
  if (!gpu_present()) GTEST_SKIP() << "no CUDA GPU here (cuda_built: " << cuda_built() << "): scripts/cuda-check.sh"

TEST(Device, ParsesTheAcceptedForms) {
  EXPECT_EQ(*parse_device("cpu"), Device{});
  EXPECT_EQ(*parse_device("cuda"), (Device{DeviceKind::kCuda, 0}));
  EXPECT_EQ(*parse_device("cuda:3"), (Device{DeviceKind::kCuda, 3}));
  EXPECT_EQ(device_name(Device{DeviceKind::kCuda, 3}), "cuda:3");
  EXPECT_EQ(device_name(Device{}), "cpu");
}

TEST(Device, OtherNamesAreErrorsNamingTheText) {
  for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:-1", "cuda:1x", "cuda:0 ", "cuda0", ""}) {
    auto d = parse_device(bad);
    ASSERT_FALSE(d.is_ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(d.status().message(), "device: '" + std::string(bad) + "' is not a device (cpu, cuda or cuda:N)");
  }
}

TEST(DeviceMemory, CpuMemoryIsZeroedAlignedAndMoves) {
  auto m = DeviceMemory::allocate(Device{}, 1000);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 64, 0u);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(m->data()[i], 0);
  uint8_t* p = m->data();
  DeviceMemory moved = std::move(*m);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(m->data(), nullptr);
  EXPECT_EQ(moved.bytes(), 1000);
}

TEST(DeviceMemory, CudaMemoryWithoutAGpuIsAnError) {
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  auto m = DeviceMemory::allocate(Device{DeviceKind::kCuda, 0}, 1000);
  ASSERT_FALSE(m.is_ok());
  EXPECT_FALSE(m.status().message().empty());
}

TEST(Device, TheCpuIsAlwaysAvailable) {
  const auto devices = available_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0], "cpu");
  EXPECT_EQ(cuda_built(), cuda::built());
  if (!cuda_built()) {
    EXPECT_EQ(devices.size(), 1u);
  }
}

// Without a GPU (or a CUDA build), asking for one is an error of the `device` option that says
// why; the runtime opens nothing half-way.
TEST(Device, AMissingGpuIsAnErrorOfTheDeviceOption) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  RuntimeOptions o;
  o.device = *parse_device("cuda");
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = rt.status().message();
  EXPECT_EQ(m.rfind("device: cuda:0: ", 0), 0u) << m;
  if (!cuda_built()) {
    EXPECT_NE(m.find("-DAUTOGLM_CUDA=ON"), std::string::npos) << m;
  }
  const auto tpu = parse_device("tpu");  // the one parse of a device's name
  ASSERT_FALSE(tpu.is_ok());
  EXPECT_EQ(tpu.status().message(), "device: 'tpu' is not a device (cpu, cuda or cuda:N)");
}

TEST(Device, TheRuntimeReportsWhereItRuns) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.kv_memory_mib = 4;
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_TRUE(rt.is_ok()) << rt.status().message();
  const ModelInfo info = (*rt)->info();
  EXPECT_EQ(info.device, "cpu");
  EXPECT_EQ(info.device_weight_bytes, 0);
  EXPECT_GT(info.kv_bytes, 0);
  EXPECT_LE(info.kv_bytes, 4 << 20);
}

// --- Mixture-of-experts placement (--cpu-moe, --n-cpu-moe N) ---------------------------------

ModelSpec moe_spec() {
  ModelSpec s;
  s.arch = "qwen3moe";
  s.n_layer = 4;
  s.moe.n_expert = 8;
  s.moe.n_expert_used = 2;
  s.moe.n_leading_dense = 1;  // layer 0 has no experts
  return s;
}

// llama.cpp's meaning: N counts layers (a dense one too), not MoE layers; past the last, all.
TEST(CpuMoe, MarksTheRoutedExpertsOfTheFirstLayers) {
  using Layers = std::vector<bool>;
  ModelSpec s = moe_spec();
  EXPECT_EQ(host_expert_layers(s, 0), Layers(4, false));
  EXPECT_EQ(host_expert_layers(s, 1), Layers(4, false));
  EXPECT_EQ(host_expert_layers(s, 3), (Layers{false, true, true, false}));
  EXPECT_EQ(host_expert_layers(s, 4), (Layers{false, true, true, true}));
  EXPECT_EQ(host_expert_layers(s, 100), (Layers{false, true, true, true}));
  EXPECT_EQ(host_expert_layers(s, kCpuMoeAllLayers), (Layers{false, true, true, true}));
  s.moe.n_expert = 0;  // a dense model: nothing to keep
  EXPECT_EQ(host_expert_layers(s, kCpuMoeAllLayers), Layers(4, false));
}

// A plain MoE model runs on CUDA (its experts on either side); what no CUDA kernel has is
// still refused by name.
TEST(CpuMoe, CudaTakesPlainMixtureOfExpertsModels) {
  const Device gpu{DeviceKind::kCuda, 0};
  ModelSpec s = moe_spec();
  EXPECT_TRUE(device_runs_spec(gpu, s).is_ok());
  s.arch = "glm4moe";
  s.moe.gating = ExpertGating::kSigmoid;
  s.moe.n_group = 2;
  s.moe.n_group_used = 1;
  s.moe.n_ff_shexp = 16;
  EXPECT_TRUE(device_runs_spec(gpu, s).is_ok());
  s.mla.kv_lora_rank = 16;
  const Status mla = device_runs_spec(gpu, s);
  EXPECT_EQ(mla.message(),
            "architecture glm4moe: multi-head latent attention run on the cpu only in this build, not on "
            "cuda:0");
  s = moe_spec();
  s.activation = FfnActivation::kClampedSwiglu;
  EXPECT_NE(device_runs_spec(gpu, s).message().find("a clamped SwiGLU"), std::string::npos);
}

// On the cpu the placement is accepted and changes nothing: every expert is in host memory.
TEST(CpuMoe, TheCpuIgnoresThePlacement) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  std::vector<int32_t> tokens;
  for (int i = 0; i < 9; ++i) tokens.push_back(1 + (i * 37) % 200);
  std::vector<std::vector<float>> logits;
  for (const int64_t n : {int64_t(0), int64_t(1), kCpuMoeAllLayers}) {
    ModelLoadOptions o;
    o.n_cpu_moe = n;
    auto m = Model::load(test::shared_path("models/random/rand-qwen3moe.gguf"), o);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    logits.push_back(test::forward_all_positions(**m, tokens));
  }
  ASSERT_FALSE(logits[0].empty());
  EXPECT_EQ(logits[1], logits[0]);
  EXPECT_EQ(logits[2], logits[0]);
}

TEST(CpuMoe, ANegativeLayerCountIsAnErrorNamingTheOption) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  RuntimeOptions o;
  o.n_cpu_moe = -2;
  auto rt = Runtime::open(test::shared_path("models/random/rand-qwen3moe.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.status().message(), "n_cpu_moe: -2 is negative");
  ModelLoadOptions load;
  load.n_cpu_moe = -1;
  auto m = Model::load(test::shared_path("models/random/rand-qwen3moe.gguf"), load);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().message(), "n_cpu_moe: -1 is negative (0: no layer)");
}

// A MoE model is no longer refused on cuda for its experts: without a GPU, the error is the
// device option's, as for a dense model, with or without --cpu-moe.
TEST(CpuMoe, AMoeModelOnAMissingGpuIsAnErrorOfTheDeviceOption) {
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  if (gpu_present()) GTEST_SKIP() << "a GPU is present";
  for (const bool cpu_moe : {false, true}) {
    RuntimeOptions o;
    o.device = *parse_device("cuda");
    o.cpu_moe = cpu_moe;
    o.n_cpu_moe = 1;
    auto rt = Runtime::open(test::shared_path("models/random/rand-qwen3moe.gguf"), o);
    ASSERT_FALSE(rt.is_ok());
    EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(rt.status().message().rfind("device: cuda:0: ", 0), 0u) << rt.status().message();
  }
}

// --- On a GPU: the CUDA backend against the CPU's -------------------------------------------

// Logits of a 40-token prompt (prompt matmuls past cuBLAS's threshold) on both devices.
struct BothDevices {
  std::vector<float> cpu, cuda;
  int64_t n_vocab = 0;
};

BothDevices logits_on_both(const std::string& model, DType kv_type = DType::F16) {
  BothDevices r;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(1 + (i * 37) % 200);
  for (const Device device : {Device{}, Device{DeviceKind::kCuda, 0}}) {
    ModelLoadOptions o;
    o.device = device;
    auto m = Model::load(test::shared_path(model), o);
    EXPECT_TRUE(m.is_ok()) << model << ": " << m.status().message();
    if (!m) return r;
    r.n_vocab = (*m)->spec().n_vocab;
    (device.kind == DeviceKind::kCpu ? r.cpu : r.cuda) = test::forward_all_positions(**m, tokens, kv_type);
  }
  return r;
}

// Relative rms of the difference, and how often the argmax agrees.
void expect_close(const BothDevices& b, const std::string& what, double most_relative_rms) {
  ASSERT_EQ(b.cpu.size(), b.cuda.size()) << what;
  ASSERT_FALSE(b.cpu.empty()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < b.cpu.size(); ++i) {
    diff += double(b.cpu[i] - b.cuda[i]) * double(b.cpu[i] - b.cuda[i]);
    norm += double(b.cpu[i]) * double(b.cpu[i]);
  }
  int64_t agree = 0;
  const int64_t rows = int64_t(b.cpu.size()) / b.n_vocab;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* c = &b.cpu[size_t(r * b.n_vocab)];
    const auto* g = &b.cuda[size_t(r * b.n_vocab)];
    agree += std::max_element(c, c + b.n_vocab) - c == std::max_element(g, g + b.n_vocab) - g;
  }
  const double relative = std::sqrt(diff / std::max(norm, 1e-30));
  std::printf("[cuda vs cpu] %s: relative rms %.3g, argmax agreement %lld/%lld\n", what.c_str(), relative,
              static_cast<long long>(agree), static_cast<long long>(rows));
  EXPECT_LE(relative, most_relative_rms) << what;
  EXPECT_GE(double(agree), 0.95 * double(rows)) << what;
}

// One case per weight type, so that a GPU run can pick the cases whose files it carries
// (scripts/cuda-check.sh). Float weights: the GPU equals the CPU within float rounding. Block
// types: the devices round the activations differently (the CPU to int8 blocks; the GPU's
// prompts to F16 for the cuBLAS GEMM, its decode steps to int8 for Q8_0/Q4_0/Q4_K only), and
// an int8 code flips on the smallest difference upstream, which these random models amplify.
// So the GPU must stay about as close to the float master the file was quantized from as the
// CPU is: its difference from the CPU at most 3/4 of the CPU's own distance from the master,
// and its argmax as often the master's as the CPU's, less 10% of the rows. (Seen on an H200,
// 2026-12-04, 40-token prompts: 0.66 of that distance for Q8_0, whose weights add the least
// error of their own, 0.04 to 0.35 for the others; argmax at least the CPU's for every type.)
struct WeightTypeCase {
  const char* file;
  double most_relative_rms;  // against the CPU, before any allowance for quantization
  const char* master;        // the F32 file it was quantized from, or null
};

// For gtest's "GetParam() = ...": the file, not a dump of the struct's bytes.
void PrintTo(const WeightTypeCase& c, std::ostream* os) {
  *os << c.file;
  if (c.master) *os << " (from " << c.master << ")";
}

// "rand-llama-gqa-q4_k.gguf" -> "rand_llama_gqa_q4_k"
std::string case_name(const char* file) {
  std::string n = file;
  if (n.ends_with(".gguf")) n.resize(n.size() - 5);
  return test::param_name(n);
}

class CudaWeightType : public ::testing::TestWithParam<WeightTypeCase> {};

double relative_rms(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += double(a[i] - ref[i]) * double(a[i] - ref[i]);
    norm += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

int64_t argmax_agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t n_vocab) {
  int64_t agree = 0;
  for (size_t r = 0; r + size_t(n_vocab) <= a.size(); r += size_t(n_vocab))
    agree += std::max_element(&a[r], &a[r] + n_vocab) - &a[r] == std::max_element(&b[r], &b[r] + n_vocab) - &b[r];
  return agree;
}

TEST_P(CudaWeightType, MatchesTheCpu) {
  REQUIRE_GPU();
  const WeightTypeCase& c = GetParam();
  const std::string path = std::string("models/random/") + c.file;
  AUTOGLM_REQUIRE_SHARED(path);
  const BothDevices both = logits_on_both(path);
  if (!c.master) return expect_close(both, c.file, c.most_relative_rms);
  const std::string master_path = std::string("models/random/") + c.master;
  AUTOGLM_REQUIRE_SHARED(master_path);
  const std::vector<float> master = logits_on_both(master_path).cpu;
  ASSERT_EQ(master.size(), both.cpu.size());
  ASSERT_EQ(both.cuda.size(), both.cpu.size());
  const double quantization = relative_rms(both.cpu, master), devices = relative_rms(both.cuda, both.cpu);
  const int64_t rows = int64_t(master.size()) / both.n_vocab;
  const int64_t cpu_agree = argmax_agreement(both.cpu, master, both.n_vocab);
  const int64_t cuda_agree = argmax_agreement(both.cuda, master, both.n_vocab);
  std::printf(
      "[cuda vs cpu] %s: relative rms %.3g (the cpu's from the f32 master: %.3g); argmax as the master's: "
      "cpu %lld/%lld, cuda %lld/%lld\n",
      c.file, devices, quantization, static_cast<long long>(cpu_agree), static_cast<long long>(rows),
      static_cast<long long>(cuda_agree), static_cast<long long>(rows));
  EXPECT_LE(devices, std::max(c.most_relative_rms, 0.75 * quantization)) << c.file;
  EXPECT_GE(double(cuda_agree), double(cpu_agree) - 0.1 * double(rows)) << c.file;
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaWeightType,
                         ::testing::Values(WeightTypeCase{"rand-llama-gqa.gguf", 1e-4, nullptr},
                                           WeightTypeCase{"rand-llama-gqa-f16.gguf", 2e-3, nullptr},
                                           WeightTypeCase{"rand-llama-gqa-bf16.gguf", 1e-2, nullptr},
                                           WeightTypeCase{"rand-llama-gqa-q8_0.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q4_0.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q4_k.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q4_1.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q5_0.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q5_1.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q5_k.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-llama-gqa-q6_k.gguf", 1e-3, "rand-llama-gqa.gguf"},
                                           WeightTypeCase{"rand-qwen2.gguf", 1e-4, nullptr},
                                           WeightTypeCase{"rand-chatglm.gguf", 1e-4, nullptr},
                                           WeightTypeCase{"rand-llama-headdim.gguf", 1e-4, nullptr},
                                           WeightTypeCase{"rand-llama-tied.gguf", 1e-4, nullptr}),
                         [](const auto& info) { return case_name(info.param.file); });

// The KV rows of a prompt on one device, as bytes in host memory: [layer][position] keys, then values.
struct KvBytes {
  std::vector<uint8_t> keys, values;
  int64_t k_row_bytes = 0, v_row_bytes = 0;
};

KvBytes kv_rows_after_prompt(const std::string& model, const Device& device, DType kv_type,
                             const std::vector<int32_t>& tokens) {
  KvBytes r;
  ModelLoadOptions o;
  o.device = device;
  auto m = Model::load(test::shared_path(model), o);
  EXPECT_TRUE(m.is_ok()) << model << ": " << m.status().message();
  if (!m) return r;
  const int64_t n_ctx = int64_t(tokens.size()), n_layer = (*m)->spec().n_layer;
  ContiguousKvCache cache((*m)->spec(), n_ctx, kv_type, device);
  ThreadPool pool(2);
  ModelRunner runner(**m, pool);
  Batch b;
  b.caches = {&cache};
  b.add_sequence_tokens(0, tokens.data(), n_ctx, 0, false, true);
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(b, logits).is_ok());
  r.k_row_bytes = cache.format().k_row_bytes;
  r.v_row_bytes = cache.format().v_row_bytes;
  r.keys.resize(size_t(n_layer * n_ctx * r.k_row_bytes));
  r.values.resize(size_t(n_layer * n_ctx * r.v_row_bytes));
  const auto copy = [&](std::vector<uint8_t>& dst, const uint8_t* src) {
    if (device.kind == DeviceKind::kCpu) return std::memcpy(dst.data(), src, dst.size()), void();
    EXPECT_TRUE(cuda::copy_to_host(device.index, dst.data(), src, int64_t(dst.size())).is_ok());
  };
  copy(r.keys, cache.key_span(0, 0));
  copy(r.values, cache.value_span(0, 0));
  return r;
}

// Of one layer's q8_0 rows on both devices, the share of blocks whose decoded elements differ by
// more than one code step of the larger scale.
double q8_blocks_apart(const uint8_t* a, const uint8_t* b, int64_t n_blocks) {
  int64_t apart = 0;
  for (int64_t i = 0; i < n_blocks; ++i, a += 34, b += 34) {
    const float da = read_half(a), db = read_half(b), step = std::max(std::fabs(da), std::fabs(db));
    for (int j = 0; j < 32; ++j)
      if (std::fabs(da * float(int8_t(a[2 + j])) - db * float(int8_t(b[2 + j]))) > 1.01f * step + 1e-12f) {
        ++apart;
        break;
      }
  }
  return double(apart) / double(std::max<int64_t>(n_blocks, 1));
}

// The q8_0 rows the GPU writes are the CPU's encoding of the same keys and values, layer by
// layer: layer 0's rows do not depend on attention, so a difference there is the encoder's; one
// that starts at a later layer is attention reading the rows.
TEST(Cuda, DISABLED_Q8KvRowsAreTheCpusEncoding) {
  REQUIRE_GPU();
  const std::string model = "models/random/rand-llama-gqa.gguf";
  AUTOGLM_REQUIRE_SHARED(model);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(1 + (i * 37) % 200);
  const KvBytes cpu = kv_rows_after_prompt(model, Device{}, DType::Q8_0, tokens);
  const KvBytes gpu = kv_rows_after_prompt(model, Device{DeviceKind::kCuda, 0}, DType::Q8_0, tokens);
  ASSERT_EQ(cpu.keys.size(), gpu.keys.size());
  ASSERT_EQ(cpu.values.size(), gpu.values.size());
  ASSERT_FALSE(cpu.keys.empty());
  const int64_t n_ctx = int64_t(tokens.size()), n_layer = int64_t(cpu.keys.size()) / (n_ctx * cpu.k_row_bytes);
  for (int64_t l = 0; l < n_layer; ++l) {
    const double keys = q8_blocks_apart(&cpu.keys[size_t(l * n_ctx * cpu.k_row_bytes)],
                                        &gpu.keys[size_t(l * n_ctx * cpu.k_row_bytes)], n_ctx * cpu.k_row_bytes / 34);
    const double values =
        q8_blocks_apart(&cpu.values[size_t(l * n_ctx * cpu.v_row_bytes)],
                        &gpu.values[size_t(l * n_ctx * cpu.v_row_bytes)], n_ctx * cpu.v_row_bytes / 34);
    std::printf("[q8 kv] layer %lld: blocks more than a code step apart: keys %.1f%%, values %.1f%%\n",
                static_cast<long long>(l), 100 * keys, 100 * values);
    EXPECT_LE(keys, 0.02) << "layer " << l << " keys";
    EXPECT_LE(values, 0.02) << "layer " << l << " values";
  }
}

// q8_0 KV on the GPU is refused (model/kv_cache.h): an H200 showed its rows differing from the
// CPU's encoding from layer 0 on (Q8KvRowsAreTheCpusEncoding: 95% of blocks) and logits 15% off.
// The two tests below come back with the fix (run them with --gtest_also_run_disabled_tests once
// kv_type_runs_on lets q8_0 through).
TEST(Cuda, DISABLED_Q8KvCacheMatchesTheCpus) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/random/rand-llama-gqa.gguf");
  expect_close(logits_on_both("models/random/rand-llama-gqa.gguf", DType::Q8_0), "q8_0 KV", 1e-3);
}

// The serving engine on the GPU (paged KV, continuous batching): greedy texts of several
// requests at once equal the CPU's.
TEST(Cuda, GreedyTextsOfConcurrentRequestsEqualTheCpus) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  std::vector<std::string> texts[2];
  for (int d = 0; d < 2; ++d) {
    RuntimeOptions o;
    o.device = d == 0 ? Device{} : Device{DeviceKind::kCuda, 0};
    o.kv_memory_mib = 16;
    auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
    ASSERT_TRUE(rt.is_ok()) << rt.status().message();
    std::vector<std::shared_ptr<StreamHandle>> handles;
    for (const char* prompt : {"Once upon a time", "Lily wanted", "The cat sat", "One day, a big"}) {
      Request r;
      r.text = prompt;
      r.max_tokens = 96;
      r.sampling.temperature = 0;
      auto h = (*rt)->submit(r);
      ASSERT_TRUE(h.is_ok()) << h.status().message();
      handles.push_back(*h);
    }
    for (auto& h : handles) {
      std::string text;
      StreamEvent ev;
      while (h->next(ev)) {
        text += ev.text;
        if (ev.finished) break;
      }
      texts[d].push_back(text);
    }
  }
  EXPECT_EQ(texts[0], texts[1]);
}

TEST(Cuda, AMissingOrdinalNamesTheGpusThereAre) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.device = *parse_device("cuda:99");
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rt.status().message().find("device: cuda:99: no such GPU"), std::string::npos) << rt.status().message();
}

TEST(Cuda, AKvPoolLargerThanTheGpuIsAnErrorNotACrash) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.device = *parse_device("cuda");
  o.kv_memory_mib = 1 << 30;  // a petabyte
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(rt.status().message().find("kv_cache: a pool of"), std::string::npos) << rt.status().message();
}

// One token through a runner of `model` into `cache` (with `lora`, when given).
Status forward_one_token(const Model& model, KvCache& cache, const LoraSet* lora = nullptr) {
  ThreadPool pool(1);
  ModelRunner runner(model, pool);
  Batch b;
  b.caches = {&cache};
  if (lora) b.loras = {lora};
  const int32_t token = 1;
  b.add_sequence_tokens(0, &token, 1, 0, true);
  std::vector<float> logits;
  return runner.forward(b, logits);
}

Result<std::unique_ptr<Model>> stories_on_cuda() {
  ModelLoadOptions o;
  o.device = Device{DeviceKind::kCuda, 0};
  return Model::load(test::shared_path("models/stories260K.gguf"), o);
}

TEST(Cuda, Q8KvCacheIsRefusedNamingTheType) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.device = *parse_device("cuda");
  o.kv_type = KvType::kQ8_0;
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(rt.status().message().find("kv_cache.dtype: KV cache type q8_0 does not run on cuda:0"), std::string::npos)
      << rt.status().message();
  auto m = stories_on_cuda();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ContiguousKvCache cache((*m)->spec(), 16, DType::Q8_0, (*m)->device());
  const Status s = forward_one_token(**m, cache);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
}

TEST(Cuda, ACacheInHostMemoryIsRefusedNotRead) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto m = stories_on_cuda();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ContiguousKvCache host_cache((*m)->spec(), 16);  // cpu memory
  const Status s = forward_one_token(**m, host_cache);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not in the memory of cuda:0"), std::string::npos) << s.message();
}

TEST(Cuda, LoraAdaptersAreRefusedByName) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto m = stories_on_cuda();
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  ContiguousKvCache cache((*m)->spec(), 16, DType::F16, (*m)->device());
  const LoraSet adapters;  // a batch that carries adapters at all (the engine leaves them out when none apply)
  const Status s = forward_one_token(**m, cache, &adapters);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "batch: LoRA adapters run on the cpu only, not on cuda:0");
}

// --- On a GPU: mixture-of-experts layers, their experts on the GPU, on the host, or split -----

// Logits of a 40-token prompt, then of 6 decode steps one token at a time, on `device`.
std::vector<float> moe_logits(const std::string& model, const Device& device, int64_t n_cpu_moe) {
  ModelLoadOptions o;
  o.device = device;
  o.n_cpu_moe = n_cpu_moe;
  auto m = Model::load(test::shared_path(model), o);
  EXPECT_TRUE(m.is_ok()) << model << ": " << m.status().message();
  if (!m) return {};
  std::vector<int32_t> tokens;
  for (int i = 0; i < 46; ++i) tokens.push_back(1 + (i * 37) % 200);
  ThreadPool pool(2);
  ModelRunner runner(**m, pool);
  ContiguousKvCache cache((*m)->spec(), int64_t(tokens.size()) + 1, DType::F16, device);
  std::vector<float> all, logits;
  for (int64_t start = 0; start < int64_t(tokens.size()); start += start < 40 ? 40 : 1) {
    const int64_t n = start < 40 ? 40 : 1;
    Batch b;
    b.caches = {&cache};
    b.add_sequence_tokens(0, tokens.data() + start, n, start, false, true);
    EXPECT_TRUE(runner.forward(b, logits).is_ok()) << model << " at " << start;
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

struct CpuMoeCase {
  const char* file;
  int64_t n_cpu_moe;
};

void PrintTo(const CpuMoeCase& c, std::ostream* os) {
  *os << c.file << ", n_cpu_moe " << (c.n_cpu_moe == kCpuMoeAllLayers ? "all" : std::to_string(c.n_cpu_moe));
}

class CudaMoe : public ::testing::TestWithParam<CpuMoeCase> {};

// The experts are picked on the host from the GPU's router logits; those on the GPU run its
// matmuls, those kept in host memory the CPU's, the shared expert (glm4moe) the GPU's. The
// logits must stay as close to the CPU's as a dense F32 model's (a choice of experts that
// flips on a rounding difference would show as a large difference).
TEST_P(CudaMoe, MatchesTheCpu) {
  REQUIRE_GPU();
  const CpuMoeCase& c = GetParam();
  const std::string path = std::string("models/random/") + c.file;
  AUTOGLM_REQUIRE_SHARED(path);
  BothDevices both;
  both.cpu = moe_logits(path, Device{}, 0);
  both.cuda = moe_logits(path, Device{DeviceKind::kCuda, 0}, c.n_cpu_moe);
  auto m = Model::load(test::shared_path(path));
  ASSERT_TRUE(m.is_ok());
  both.n_vocab = (*m)->spec().n_vocab;
  expect_close(both, std::string(c.file) + " n_cpu_moe " + std::to_string(c.n_cpu_moe), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaMoe,
                         ::testing::Values(CpuMoeCase{"rand-qwen3moe.gguf", 0}, CpuMoeCase{"rand-qwen3moe.gguf", 1},
                                           CpuMoeCase{"rand-qwen3moe.gguf", kCpuMoeAllLayers},
                                           CpuMoeCase{"rand-glm4moe.gguf", 0}, CpuMoeCase{"rand-glm4moe.gguf", 2},
                                           CpuMoeCase{"rand-glm4moe.gguf", kCpuMoeAllLayers}),
                         [](const auto& info) {
                           const int64_t k = info.param.n_cpu_moe;
                           return case_name(info.param.file) +
                                  (k == kCpuMoeAllLayers ? "_all" : "_" + std::to_string(k));
                         });

// --cpu-moe leaves the routed experts out of GPU memory: the placed bytes shrink by theirs.
TEST(Cuda, CpuMoeKeepsTheExpertsOutOfGpuMemory) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/random/rand-qwen3moe.gguf");
  const std::string path = test::shared_path("models/random/rand-qwen3moe.gguf");
  int64_t placed[2] = {0, 0};
  for (int all = 0; all < 2; ++all) {
    ModelLoadOptions o;
    o.device = Device{DeviceKind::kCuda, 0};
    o.n_cpu_moe = all ? kCpuMoeAllLayers : 0;
    auto m = Model::load(path, o);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    placed[all] = (*m)->placed_weights()->bytes();
    if (!all) continue;
    int64_t experts = 0;
    for (const LayerWeights& l : (*m)->weights().layers)
      for (const auto* stack : {&l.experts.gate, &l.experts.up, &l.experts.down})
        for (const cpu::WeightMatrix& e : *stack) experts += e.rows * e.row_bytes;
    EXPECT_GT(experts, 0);
    EXPECT_LE(placed[1], placed[0] - experts);
  }
}

}  // namespace
}  // namespace autoglm
