// A generation request as the engine (and the single-sequence generator) takes it: prompt
// ids, limits, sampling, stop strings, priority, deadline, logprobs and a parsed grammar.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/sampling_params.h"
#include "engine/stream.h"
#include "engine/thinking_gate.h"
#include "model/lora.h"
#include "model/vision_encoder.h"
#include "sample/grammar.h"

namespace autoglm {

// An image in a prompt: its embedding rows stand for the placeholder tokens
// [first, first + rows * cols) (the merged grid, raster order).
struct PromptImage {
  int64_t first = 0;
  int32_t rows = 0, cols = 0;
  uint64_t hash = 0;  // of its content: the prefix cache tells images apart by it
  std::shared_ptr<const ImageEmbedding> embedding;
  int64_t end() const { return first + int64_t(rows) * cols; }
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  // A vision-language model's prompt: its images (ascending, not overlapping), and every prompt
  // token's M-RoPE position (3 each, model/mrope.h); a later token at index n is at n + rope_delta.
  // Empty: text, each token at its index.
  std::vector<PromptImage> images;
  std::vector<int32_t> rope_positions;
  int64_t rope_delta = 0;
  int32_t max_tokens = 256;
  SamplingParams sampling;
  std::vector<std::string> stop;
  int32_t priority = 0;                                           // higher runs first; FCFS within a priority
  std::optional<std::chrono::steady_clock::time_point> deadline;  // waiting past it: finish_reason "timeout"
  int32_t top_logprobs = -1;  // -1: no logprobs; 0..20: the chosen token's logprob and this many alternatives
  bool ignore_eos = false;    // generate past EOS/EOT (benchmarks, tests), as vLLM's and llama.cpp's servers allow
  std::shared_ptr<const Grammar> grammar;  // constrained decoding: only text this grammar admits
  std::optional<ThinkingSpec> thinking;    // a thinking model's reasoning phase (thinking_gate.h)
  // Control tokens whose text the reply shows: a reply format's markers (harmony's <|channel|>),
  // which its parser reads. Other control tokens show nothing.
  std::vector<int32_t> visible_control_tokens;
  bool speculative = true;  // false: no drafts for this request (when the engine speculates)
  // The root of the prefix cache's hash chain: only requests with the same salt share cached
  // blocks (the server gives each API key its own, so no key can probe another's prompts).
  uint64_t cache_salt = 0;
  // LoRA adapters this request runs with (null or empty: the base model). Its KV is cached
  // under them: another adapter never reuses it.
  std::shared_ptr<const LoraSet> lora;
  std::string lora_name;  // what the adapter is called, for metrics ("" for the base)
  // Makes the stream's shaper (events' text into typed parts: tool calls, reasoning), once per
  // submit, so each choice parses its own text. Unset: the text is answer text.
  std::function<EventShaper()> make_shaper;
};

// The cache_salt of a scope (an API key; "" for none) and a request's own salt: 0, the shared
// chain, when both are empty.
inline uint64_t prefix_cache_salt(const std::string& scope, const std::string& request_salt) {
  if (scope.empty() && request_salt.empty()) return 0;
  std::string material = scope;
  material += '\0';
  material += request_salt;
  return std::hash<std::string>{}(material) | 1;  // never 0
}

// The prefix cache chain of a request under its adapters: `salt` mixed with their ids.
inline uint64_t salt_with_lora(uint64_t salt, const LoraSet* lora) {
  if (!lora || lora->empty()) return salt;
  std::string material = std::to_string(salt);
  for (const auto& a : *lora) {
    material += '/';
    material += std::to_string(a->id);
  }
  return std::hash<std::string>{}(material) | 1;
}

}  // namespace autoglm
