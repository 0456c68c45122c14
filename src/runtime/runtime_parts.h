// What a Runtime assembles, for the layers above it (server, CLI) that need more than the
// public face: the model, tokenizer, chat template and prompt builder, the thread pool, and
// the engine with the KV sizing it was given.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "chat/chat_template.h"
#include "chat/prompt_builder.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/model.h"
#include "runtime/image_cache.h"
#include "runtime/lora_registry.h"
#include "runtime/projector.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

// What every chat reply of a model is read with, the same for each request: made once with the
// prompt builder (not per request).
struct ReplyMarkers {
  bool template_thinks = false;                  // the template marks <think>
  std::vector<int32_t> visible_control;          // the tool-call format's markers that are control tokens
  std::vector<int32_t> think_open, think_close;  // the thinking phase's markers as tokens (harmony's analysis)
  // <think> and </think> where they are control tokens (GLM-4.1V's): shown to the reply's
  // reader when it splits the reasoning off, else hidden like other special tokens.
  std::vector<int32_t> think_control;
  // Every control token but the end-of-generation ones: what skip_special_tokens = false shows.
  std::vector<int32_t> all_control;
};

struct Runtime::Parts {
  std::string model_path;
  std::string template_origin;  // where the chat template came from, for messages
  RuntimeOptions options;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;
  std::unique_ptr<PromptBuilder> prompts;
  ReplyMarkers reply_markers;                   // made with `prompts`
  std::shared_ptr<ThreadPool> pool;             // shared with the runtimes opened beside this one
  EngineConfig engine_config;                   // context, KV type and blocks, limits
  std::unique_ptr<Model> draft;                 // the draft model of speculative = "draft"
  std::unique_ptr<Engine> engine;               // null with start_engine = false
  std::shared_ptr<const LoraSet> default_lora;  // options.lora, for every request (null: none)
  std::unique_ptr<LoraRegistry> loras;          // the named adapters
  Pooling pooling = Pooling::kLast;             // the model's own for embeddings
  std::unique_ptr<Projector> projector;         // a vision-language model's (null: text only)
  std::unique_ptr<ImageCache> image_cache;      // its images' embeddings by content hash
};

// A runtime's internals, for bench's kernel micro-paths (nothing else above the runtime).
Runtime::Parts& runtime_parts(Runtime& runtime);

// A request's constraint (JSON Schema or GBNF text) as a grammar; errors name its source.
Result<std::shared_ptr<const Grammar>> constraint_grammar(const OutputConstraint& constraint,
                                                          const RequestLimits& limits);

// The adapters a request runs with: the options' stacked with the named one ("": none).
Result<std::shared_ptr<const LoraSet>> lora_for(Runtime::Parts& parts, const std::string& name);

// The engine configuration for a model under these options: the context (the window, capped
// by the trained context when that is larger), the KV type checked against the model, and
// the number of KV blocks the memory budget holds.
// Bytes of the engine's KV pool.
int64_t kv_pool_bytes(const ModelSpec& spec, const EngineConfig& config);
// available_bytes: what options.kv_memory_fraction shares (available_bytes(device) in runtime.cpp).
Result<EngineConfig> engine_config_for(const ModelSpec& spec, const RuntimeOptions& options, double available_bytes);

}  // namespace autoglm
