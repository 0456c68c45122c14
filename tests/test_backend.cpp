// The device seam: device names, device memory, the errors of a missing GPU, and (where a
// CUDA build meets a GPU) every op of the CUDA backend against the CPU's. Without a GPU the
// CUDA cases skip, saying so; scripts/cuda-check.sh runs them on a GPU machine.
#include <gtest/gtest.h>

#include <cmath>

#include "autoglm/runtime.h"
#include "kernels/cuda/cuda_api.h"
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
  o.device = "cuda";
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = rt.status().message();
  EXPECT_EQ(m.rfind("device: cuda:0: ", 0), 0u) << m;
  if (!cuda_built()) {
    EXPECT_NE(m.find("-DAUTOGLM_CUDA=ON"), std::string::npos) << m;
  }
  o.device = "tpu";
  rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().message(), "device: 'tpu' is not a device (cpu, cuda or cuda:N)");
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

TEST(Cuda, EveryWeightTypeMatchesTheCpu) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/random/rand-llama-gqa.gguf");
  // int8 activations on both sides (Q8_0, Q4_0, Q4_K) or float ones: within float rounding;
  // the other block types meet float activations on the GPU, int8 ones on the CPU.
  const std::pair<const char*, double> cases[] = {
      {"rand-llama-gqa.gguf", 1e-4},      {"rand-llama-gqa-f16.gguf", 2e-3},  {"rand-llama-gqa-bf16.gguf", 1e-2},
      {"rand-llama-gqa-q8_0.gguf", 1e-3}, {"rand-llama-gqa-q4_0.gguf", 1e-3}, {"rand-llama-gqa-q4_k.gguf", 1e-3},
      {"rand-llama-gqa-q4_1.gguf", 2e-2}, {"rand-llama-gqa-q5_0.gguf", 2e-2}, {"rand-llama-gqa-q5_1.gguf", 2e-2},
      {"rand-llama-gqa-q5_k.gguf", 2e-2}, {"rand-llama-gqa-q6_k.gguf", 2e-2}, {"rand-qwen2.gguf", 1e-4},
      {"rand-chatglm.gguf", 1e-4},        {"rand-llama-headdim.gguf", 1e-4},  {"rand-llama-tied.gguf", 1e-4}};
  for (const auto& [file, tolerance] : cases)
    expect_close(logits_on_both(std::string("models/random/") + file), file, tolerance);
}

TEST(Cuda, Q8KvCacheMatchesTheCpus) {
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
    o.device = d == 0 ? "cpu" : "cuda";
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
  o.device = "cuda:99";
  auto rt = Runtime::open(test::shared_path("models/stories260K.gguf"), o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rt.status().message().find("device: cuda:99: no such GPU"), std::string::npos) << rt.status().message();
}

TEST(Cuda, AKvPoolLargerThanTheGpuIsAnErrorNotACrash) {
  REQUIRE_GPU();
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  RuntimeOptions o;
  o.device = "cuda";
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

}  // namespace
}  // namespace autoglm
