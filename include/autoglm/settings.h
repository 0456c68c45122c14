// The closed sets among the settings, as types from the moment they are parsed: where the
// model runs, the KV cache's element type, the speculative-decoding method and the pooling of
// embeddings. Each set is read from its name in one place, the function here: the CLI, the
// Python bindings and the server's YAML reader all call it (a caller may put its own words,
// naming its flag or key, around a refusal).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "autoglm/status.h"

namespace autoglm {

// Where the forward pass runs: the CPU, or one CUDA GPU ("cuda:N").
enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // the CUDA ordinal
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (= cuda:0) or "cuda:N"; an error names the text and the accepted forms
// ("device: 'gpu' is not a device (cpu, cuda or cuda:N)"). Whether the GPU exists is checked
// when a model loads.
Result<Device> parse_device(std::string_view text);
// "cpu" or "cuda:N".
std::string device_name(const Device& device);

// The KV cache's element type: f16, q8_0 (half the memory) or f32.
enum class KvType { kF16, kQ8_0, kF32 };

// "f16", "q8_0", "f32" (any case); an error says "KV cache type 'x' is not one of f32, f16, q8_0".
Result<KvType> kv_type_from_name(std::string_view name);
const char* kv_type_name(KvType type);

// Speculative decoding: none, a draft model, n-gram prompt lookup, early exit (the model's
// first layers draft) or mtp (the model's own NextN block drafts).
enum class SpecMethod { kNone, kDraft, kNgram, kEarlyExit, kMtp };

// "none", "draft", "ngram", "early-exit", "mtp"; an error says "spec: 'x' is not a speculation
// method (none, draft, ngram, early-exit, mtp)".
Result<SpecMethod> spec_method_from_name(std::string_view name);
const char* spec_method_name(SpecMethod method);

// How an embedding is made from a sequence's final hidden states (then L2-normalised).
enum class Pooling {
  kLast,  // the last token's (decoder embedding models: Qwen3-Embedding, e5-mistral)
  kMean,  // the mean over the tokens
};

// The pooling setting: "last", "mean", or "auto" (nullopt: the model's own, from its file);
// an error says "embeddings_pooling: 'x' is not auto, last or mean".
Result<std::optional<Pooling>> pooling_from_name(std::string_view name);
// "last", "mean", or "auto" for nullopt.
const char* pooling_name(std::optional<Pooling> pooling);

// Where a thinking model's reasoning goes: kAuto splits it from the answer where the chat
// template marks thinking (<think>...</think>), into reasoning parts (reasoning_content);
// kNone leaves every byte in the answer text (a client that parses <think> itself); kDeepseek
// splits as kAuto does (llama.cpp's name for it).
enum class ReasoningFormat { kAuto, kNone, kDeepseek };

// "auto", "none", "deepseek"; an error says "reasoning_format: 'x' is not auto, none or deepseek".
Result<ReasoningFormat> reasoning_format_from_name(std::string_view name);
const char* reasoning_format_name(ReasoningFormat format);

}  // namespace autoglm
