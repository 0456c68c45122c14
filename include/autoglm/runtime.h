// The engine as a library. Runtime::open loads a model (a GGUF file or a Hugging Face
// folder) with its tokenizer and chat template, sizes the KV cache and starts the serving
// engine; requests (token ids, text or a chat) come back as stream handles. This header and
// the others in include/autoglm are all an embedding program (or a binding) needs.
//
//   auto rt = autoglm::Runtime::open("model.gguf", {});
//   autoglm::Request r;
//   r.text = "Once upon a time";
//   auto handle = (*rt)->submit(r);
//   autoglm::StreamEvent ev;
//   while ((*handle)->next(ev)) { std::cout << ev.text; if (ev.finished) break; }
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/engine.h"
#include "autoglm/limits.h"
#include "autoglm/log.h"
#include "autoglm/sampling_params.h"
#include "autoglm/settings.h"
#include "autoglm/status.h"
#include "autoglm/tool_call.h"

namespace autoglm {

// The library's version ("0.1.0").
const char* version();

// True in a build with the CUDA backend (whether or not this machine has a GPU).
bool cuda_built();
// The devices a model can run on here: "cpu", then "cuda:0", "cuda:1", ... for each GPU the
// driver sees (none without the CUDA backend, a driver or a GPU).
std::vector<std::string> available_devices();

// A LoRA adapter: a PEFT folder (adapter_config.json + adapter_model.safetensors) or a GGUF
// adapter, and a factor on its own scale (alpha / rank).
struct LoraOption {
  std::string path;
  float scale = 1.0f;
};

// Where a vision-language model's images may come from, and the pixel limits of its image
// processor (preprocessor_config.json's, unless set here or per request).
struct MediaOptions {
  // image_url parts may name files under these folders (absolute paths or file:// URLs); none: refused.
  std::vector<std::string> allowed_local_dirs;
  // Hosts whose http(s) image URLs may be fetched; none: every remote URL is refused.
  std::vector<std::string> allowed_hosts;
  int64_t min_pixels = 0, max_pixels = 0;  // 0: the processor's
  int64_t embedding_cache_mib = 256;       // image embeddings kept by content hash (a resent screenshot is free)
};

struct RuntimeOptions {
  // Where the forward pass runs: the cpu, or a GPU (parse_device("cuda:1")) in a build with the
  // CUDA backend (a missing GPU or a build without CUDA is an error naming the device).
  Device device;
  // Mixture-of-experts models on a GPU: the routed experts stay in host memory and run on the
  // CPU threads, the rest on the GPU, so experts larger than its memory still run (llama.cpp's
  // --cpu-moe: every layer; --n-cpu-moe N: layers [0, N)). Ignored on the cpu.
  bool cpu_moe = false;
  int64_t n_cpu_moe = 0;
  int threads = 0;                // 0: the physical cores
  bool pin_threads = false;       // worker i on the i-th allowed CPU
  std::string quantize;           // re-encode the weights at load: "q8_0", "q4_0", "q4_k", ... ("" keeps them)
  std::string architecture;       // run the file as another supported architecture (rarely needed)
  bool repack_weights = true;     // false: keep the file's layout (the per-row kernels run)
  bool use_mmap = true;           // false (--no-mmap): read the GGUF file into private memory instead of mapping it
  bool check_tensors = false;     // --check-tensors: decode every weight at load; NaN/Inf blocks are an error
  bool use_mlock = false;         // --mlock: lock the weights' pages in RAM (a refusal is logged, not fatal)
  int64_t context_window = 4096;  // capped by the model's trained context when that is larger
  KvType kv_type = KvType::kF16;  // f16, q8_0 or f32
  double kv_memory_mib = 1024;    // KV pool budget (0: room for max_running whole context windows)...
  double kv_memory_fraction = 0;  // ...or this share of the available memory (a GPU's free memory), when > 0
  int64_t kv_block_size = 16;
  bool prefix_cache = true;
  // Tiers below the pool for its prefix cache (the cpu only): blocks it evicts move to host RAM
  // (this many MiB; 0: none; llama-server's --cache-ram), and from there to files in
  // cache_disk_dir ("": none), at most cache_disk_mib, which outlive the process (keyed by the
  // model's content, the kernel set and the KV layout); a prompt whose prefix is in a tier copies
  // its blocks back instead of computing them.
  double cache_ram_mib = 0;
  std::string cache_disk_dir;
  double cache_disk_mib = 4096;
  std::string chat_template;  // "" the model's own; a built-in name (chatml, llama2, llama3, glm4) or a file
  // The tool-call format: "" read off the chat template; else hermes, llama3, glm4, glm45, glm47,
  // qwen3coder, deepseek_v3_1 or harmony (a template the detection misreads).
  std::string tool_call_format;
  int64_t max_running = 16;        // sequences decoding at once
  int64_t max_batch_tokens = 128;  // tokens per engine step (chunked prefill)
  int64_t max_queued = 256;        // waiting requests before submit answers kResourceExhausted
  // Each engine step is planned to take at most this long (decodes always run; prefill gets
  // the rest): 0 off (a token budget only), < 0 auto (3x the step's predicted decode time).
  // Off here (a program that generates alone gains nothing); the server's configuration
  // defaults to auto, which keeps inter-token latency flat when prompts arrive during decodes.
  double max_step_ms = 0;
  // Speculative decoding in the engine: none, draft (a draft model), ngram (prompt lookup),
  // early-exit (the first exit_layer layers draft) or mtp (the model's NextN block). A request
  // may opt out.
  SpecMethod speculative = SpecMethod::kNone;
  std::string draft_model;     // draft: a GGUF file or Hugging Face folder ("": the target's own weights)
  std::string draft_quantize;  // draft: its weights re-encoded at load (needed for a self-draft)
  int32_t draft_max = 8;       // most tokens drafted per pass
  int32_t draft_min = 0;       // fewer drafts than this: a plain decode
  float draft_p_min = 0.0f;    // drafting stops where the drafter's confidence falls below this
  int32_t exit_layer = 0;      // early-exit: the layers that draft (0: a quarter of the model)
  bool profile = false;        // per-op forward times
  // Adapters every request (and logits) runs with, stacked in this order (the CLI's --lora).
  std::vector<LoraOption> lora;
  // Named adapters (load_lora) kept loaded at once; past it the least recently used one no
  // request holds is unloaded, and read again when a request names it. <= 0: no bound.
  int max_loras = 8;
  bool start_engine = true;  // false: no engine or KV pool (tokenizer, chat and logits only)
  // A vision-language model's projector (llama.cpp's mmproj GGUF): "" finds it beside the model
  // (X.mmproj.gguf, or the one mmproj-*.gguf in its folder; a Hugging Face folder holds its own);
  // "none": none (text only).
  std::string mmproj;
  MediaOptions media;
  RequestLimits limits;
  LogSink log;  // where the library's log lines go (null: keep the current sink)
  // Once this is true, chat template renders in progress stop at their next step and fail (a
  // server shutting down); it must outlive the runtime. Null: never.
  const std::atomic<bool>* cancel_renders = nullptr;
  // Progress of long load steps (quantizing, repacking): step name, done, total.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

struct ChatMessage {
  std::string role;
  std::string content;
};

// A conversation for the model's chat template.
struct Conversation {
  std::vector<ChatMessage> messages;
  std::string messages_json;         // instead of `messages`: the OpenAI messages array as JSON text
  std::string tools_json;            // the OpenAI tools array as JSON text ("" for none)
  std::string template_kwargs_json;  // extra template variables, e.g. {"enable_thinking": false}
  bool add_generation_prompt = true;
  // With tools: whether they are shown and a call forced (kNamed: to `tool_name`); the reply
  // is read for calls in the model family's format (parts kToolCall*). Without: ignored.
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_name;
  bool parallel_tool_calls = true;  // false: calls after the first are dropped
  // Where the reasoning of a template that marks thinking (<think>) goes: reasoning parts
  // (kAuto, kDeepseek) or the answer text, byte for byte (kNone).
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  // A thinking model's thinking ends after this many tokens: the close marker (</think>) is
  // forced. -1: no limit.
  int32_t thinking_budget_tokens = -1;
  // Images (image_url parts of messages_json): the image processor's pixel limits for this
  // request (mm_processor_kwargs' min_pixels / max_pixels); 0: the runtime's.
  int64_t min_pixels = 0, max_pixels = 0;
};

enum class ConstraintKind {
  kNone,
  kJsonSchema,  // `text` is a JSON Schema
  kJsonObject,  // any JSON object (`text` unused)
  kGbnf,        // `text` is a GBNF grammar
};

class Grammar;  // a compiled constraint (opaque)

struct OutputConstraint {
  ConstraintKind kind = ConstraintKind::kNone;
  std::string text;    // the JSON Schema or the GBNF grammar
  std::string source;  // what its errors name (a file, a request field; "" for "constraint")
  // Set by compile_constraint; submit compiles a constraint that lacks it (once per submit).
  std::shared_ptr<const Grammar> compiled = nullptr;
};

// Checks a constraint and compiles it once (a request carrying it compiled is not compiled
// again). An error's field() is the constraint's source and its message the reason.
Status compile_constraint(OutputConstraint& constraint, const RequestLimits& limits = {});

struct Request {
  // The prompt: exactly one of token ids, plain text (BOS added) or a chat.
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<Conversation> chat;

  int32_t max_tokens = 256;  // < 0: as many as the context leaves room for
  SamplingParams sampling;
  std::vector<std::string> stop;
  OutputConstraint constraint;
  int32_t priority = 0;                              // higher first; FCFS within a priority
  std::optional<std::chrono::milliseconds> timeout;  // still waiting then: FinishReason::kTimeout
  int32_t top_logprobs = -1;                         // -1: none; 0..20 alternatives per token
  bool ignore_eos = false;                           // generate past end-of-generation tokens
  bool speculative = true;                           // false: no drafts for this request
  // false: the reply shows the special (control) tokens the model writes, as vLLM's
  // skip_special_tokens = false does (GLM-4.1V's <think> and <answer> tags, for a client that
  // parses them); true, the default: they are dropped from the text (a reply format's markers
  // are read either way).
  bool skip_special_tokens = true;
  std::string lora;  // a named adapter (Runtime::load_lora); "" none
  // Requests share cached prompt prefixes only with the same salt (vLLM's cache_salt; a
  // server gives each API key its own, so no key can probe another's prompts). "": shared.
  std::string cache_salt;
};

// A request made ready for one runtime (Runtime::prepare): its prompt rendered to token ids,
// its constraint compiled (or a forced tool call's grammar made), max_tokens fitted to the
// context, its adapters held and its limits checked. Look at it (the prompt's length, its
// output key) before submitting; submit it once per choice.
class PreparedRequest {
 public:
  const std::vector<int32_t>& prompt() const;
  int32_t max_tokens() const;
  // Its reply is read for tool calls (a chat with tools offered).
  bool reads_tool_calls() const;
  // The same output every time: greedy, or sampled with a seed.
  bool deterministic() const;
  // Everything that decides its output, as bytes (the prompt, sampling, stop strings, the
  // constraint's text, logprobs, how the reply is read, the adapters as loaded, the cache
  // salt): two prepared requests with equal keys generate the same. A response cache's key.
  std::string output_key() const;

  struct State;  // src/runtime/prepared_request.h

 private:
  explicit PreparedRequest(std::shared_ptr<const State> state);
  friend class Runtime;
  std::shared_ptr<const State> state_;
};

struct LoraInfo {
  std::string name, path;
  float scale = 1.0f;
  bool resident = false;  // loaded now (else read again when named)
  bool in_use = false;    // a request holds it
  int64_t bytes = 0;      // of its matrices, when resident
};

// The engine's counters and gauges at one moment (what a server's /metrics and /health show).
struct RuntimeStats {
  int64_t prompt_tokens = 0, generated_tokens = 0, prefix_hit_tokens = 0, preemptions = 0, steps = 0;
  int64_t running = 0, waiting = 0, kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t prefix_queried_tokens = 0;  // prompt tokens looked up in the prefix cache
  // The prefix cache's tiers (cache_ram_mib, cache_disk_dir): blocks the pool missed and found in
  // RAM, on disk, or in neither; bytes held; bytes copied into them and back; copy time; disk
  // files skipped as corrupt or foreign.
  int64_t kv_tier_ram_hits = 0, kv_tier_disk_hits = 0, kv_tier_misses = 0;
  int64_t kv_tier_ram_bytes = 0, kv_tier_disk_bytes = 0, kv_tier_bytes_in = 0, kv_tier_bytes_out = 0;
  int64_t kv_tier_disk_rejected = 0;
  double kv_tier_copy_seconds = 0;
  // Liveness: the engine thread is in its loop, and how long its current step has run (0
  // between steps).
  bool loop_alive = false;
  double step_running_seconds = 0;
  double step_target_seconds = 0;  // the step time target in use (0: planning by tokens only)
  // Prefill chunks the scheduler chose, counted by upper bound 8, 16, ..., 512, more; their sum.
  std::vector<int64_t> prefill_chunks;
  int64_t prefill_chunk_tokens = 0;
  // Speculative decoding: tokens drafted and accepted, verifying passes, and finished requests
  // that drafted by acceptance rate (tenths: [0, 0.1), ..., [0.9, 1]) with the rates' sum.
  int64_t spec_drafted = 0, spec_accepted = 0, spec_passes = 0;
  std::vector<int64_t> spec_acceptance;
  double spec_acceptance_sum = 0;
  std::vector<int64_t> finished;  // finished requests by FinishReason (indexed by its value)
  // The adapters of running and waiting requests, and when that last changed (Unix seconds).
  std::string lora_running, lora_waiting;
  double lora_changed_at = 0;
  // With options.profile: forward time by op ({op key, seconds}) and the tokens it covers.
  std::vector<std::pair<std::string, double>> op_seconds;
  int64_t profiled_tokens = 0;
};

// What the model's generation_config.json sets (unset: the caller's own default).
struct SamplingDefaults {
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<int64_t> top_k;
  bool greedy = false;  // do_sample: false
};

struct ModelInfo {
  std::string path, architecture;
  std::string device;               // "cpu" or "cuda:N"
  int64_t device_weight_bytes = 0;  // the weights' copy in GPU memory (0 on the cpu: the mapped file)
  int64_t kv_bytes = 0;             // the KV pool
  int64_t n_params = 0, n_vocab = 0, n_ctx_train = 0, n_ctx = 0;
  int32_t n_layer = 0, n_embd = 0;
  bool has_chat_template = false;
  SamplingDefaults sampling_defaults;
  // How the model pools embeddings: a GGUF's `<arch>.pooling_type`, a folder's
  // 1_Pooling/config.json (sentence-transformers), else the last token.
  Pooling pooling = Pooling::kLast;
  // A vision-language model's projector (its file, llama.cpp's clip.projector_type); "": text only.
  std::string projector_path, projector_type;
};

struct SpecialTokens {
  int32_t bos = -1, eos = -1;
  std::vector<int32_t> end_of_generation;
};

// What a GGUF file says of itself (file, architecture, parameters per token), for one the
// runtime cannot open (an architecture it lacks); "" when it is no readable GGUF file.
std::string describe_model_file(const std::string& path);

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> open(const std::string& model_path, const RuntimeOptions& options = {});
  // Another model on `other`'s threads (options.threads and pin_threads are not used): the
  // engines' steps take turns, fairly by time (the one that has held the threads least goes
  // next), so several models in one process share the cores without oversubscribing them,
  // and a long prompt of one (prefilled in chunks, one per step) holds the other's decodes
  // back by one step at most.
  static Result<std::unique_ptr<Runtime>> open_beside(const Runtime& other, const std::string& model_path,
                                                      const RuntimeOptions& options = {});
  // The tokenizer and chat template alone: of a model file, or of a folder with tokenizer.json
  // (and tokenizer_config.json), weights or not. encode, decode and render_chat work; submit
  // and logits answer kUnsupported.
  static Result<std::unique_ptr<Runtime>> open_tokenizer(const std::string& path, const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Queues a request; errors name the field (a prompt over the context, a bad constraint,
  // bad sampling values) or say the queue is full (kResourceExhausted).
  Result<std::shared_ptr<StreamHandle>> submit(const Request& request);
  // The request made ready: submit's errors but a full queue, each with field() naming the
  // request field at fault ("messages", "tools", "tool_choice", "prompt", "max_tokens", ...).
  Result<PreparedRequest> prepare(const Request& request);
  // Queues a prepared request (of this runtime). `choice` > 0: another choice of it, seeded
  // with seed + choice when it has a seed.
  Result<std::shared_ptr<StreamHandle>> submit(const PreparedRequest& request, int32_t choice = 0);
  // submit, then the whole text (blocking); an error event becomes the error.
  Result<std::string> generate_text(const Request& request);
  RuntimeStats stats() const;
  // Keeps every engine on this runtime's threads (those opened beside it too) between steps
  // until the returned hold is dropped; blocks until the step in progress ends. For a caller
  // that must see the engines still (a test ordering events by what they have done).
  std::shared_ptr<void> hold_steps();

  std::vector<int32_t> encode(const std::string& text, bool add_special = true, bool parse_special = false) const;
  // Text as a completion prompt (Request::text): BOS added unless the text starts with it.
  std::vector<int32_t> prompt_tokens(const std::string& text) const;
  // `special`: control tokens (BOS, <|im_end|>, ...) written as their text; otherwise left out.
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;
  std::string token_piece(int32_t id) const;
  int32_t vocab_size() const;
  SpecialTokens special_tokens() const;

  // The chat template's text for a conversation, and its token ids (BOS unless the template wrote it).
  Result<std::string> render_chat(const Conversation& chat) const;
  Result<std::vector<int32_t>> chat_tokens(const Conversation& chat) const;
  // A reply generated for `chat`, split into content and the tool calls written in the model
  // family's format (all content when the conversation has no tools). `cut_short`: generation
  // stopped at max_tokens (an unfinished call is dropped rather than shown as text).
  Result<AssistantMessage> parse_reply(const Conversation& chat, const std::string& text, bool cut_short = false) const;

  // One pass from position 0: logits as [positions][vocab] rows (all positions, or the last),
  // under the options' adapters and, when named, a loaded one.
  Result<std::vector<float>> logits(const std::vector<int32_t>& tokens, bool all_positions = true,
                                    const std::string& lora = "");
  // One unit-length vector per input (token ids), pooled over its positions, computed on the
  // engine thread between generation steps. `dimensions` > 0: the first that many components,
  // normalised again (Matryoshka truncation). Errors: an input empty, past the context, or a
  // bad token id (naming input[i]).
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs,
                                                Pooling pooling = Pooling::kLast, size_t dimensions = 0);

  // Named LoRA adapters over this model: a request names one in Request::lora. load_lora
  // reads it at once (errors name the file and tensor; a name in use is an error);
  // unload_lora forgets it (requests running with it finish with it).
  Status load_lora(const std::string& name, const std::string& path, float scale = 1.0f);
  Status unload_lora(const std::string& name);
  std::vector<LoraInfo> loras() const;

  ModelInfo info() const;
  // The model as `autoglm info` prints it: file, architecture, shapes, weight types, size,
  // vocabulary, kernels (one "name: value" line each).
  std::string describe() const;
  // With options.profile: the per-op time tables of the model's passes and of the drafter's
  // (per token they ran); "" when profiling is off or there is no drafter.
  std::string op_profile_table() const;
  std::string draft_op_profile_table() const;

  struct Parts;  // the assembled internals (src/runtime/runtime_parts.h)

 private:
  friend Parts& runtime_parts(Runtime& runtime);  // for bench's kernel paths only
  Runtime();
  std::unique_ptr<Parts> parts_;
};

}  // namespace autoglm
