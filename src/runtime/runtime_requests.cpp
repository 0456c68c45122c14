// A public Request on its way to the engine: prepared (prompt rendered, constraint compiled,
// limits checked, adapters held), then submitted once per choice; and what the engine
// reports back (its statistics, embeddings).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>

#include "autoglm/runtime.h"
#include "core/json_request.h"
#include "engine/embeddings.h"
#include "engine/request_limits.h"
#include "model/mrope.h"
#include "runtime/chat_images.h"
#include "runtime/prepared_request.h"
#include "runtime/reply_events.h"
#include "runtime/runtime_parts.h"

namespace autoglm {
namespace {

using nlohmann::ordered_json;

Result<ordered_json> parse_json_field(const std::string& text, const std::string& field, const RequestLimits& limits) {
  auto j = parse_json_request(text, limits.json_depth, limits.json_object_keys);
  if (!j) return Status(StatusCode::kInvalidArgument, field + ": " + j.status().message(), field);
  return j;
}

// The most tokens a prompt may have: limits.prompt_tokens, or the context window less one
// generated token. (The same words as check_request_limits and the engine's check.)
TokenCap prompt_cap(int64_t n_ctx, const RequestLimits& limits) {
  const int64_t room = n_ctx - 1;
  if (limits.prompt_tokens > 0 && limits.prompt_tokens <= room)
    return {size_t(limits.prompt_tokens),
            "over the limit of " + std::to_string(limits.prompt_tokens) + " (limit prompt_tokens)"};
  return {size_t(std::max<int64_t>(room, 0)), "which does not fit the context window of " + std::to_string(n_ctx) +
                                                  " tokens (with room for one generated token)"};
}

Status with_field(const Status& st, const std::string& field) {
  return Status(st.code(), st.message(), st.field().empty() ? field : st.field());
}

// A thinking model's reasoning phase (thinking_gate.h): <think>...</think> where the template
// marks it, harmony's analysis message for gpt-oss; none for other models.
std::optional<ThinkingSpec> thinking_spec(const ReplyMarkers& m, ToolCallFamily family, const std::string& prompt_text,
                                          int32_t budget) {
  if (family != ToolCallFamily::kHarmony && !m.template_thinks) return std::nullopt;
  ThinkingSpec s;
  s.open = m.think_open;
  s.close = m.think_close;
  if (family != ToolCallFamily::kHarmony) {
    s.starts_inside = prompt_opens_thinking(prompt_text);
    s.starts_closed = prompt_closes_thinking(prompt_text);
  }
  s.budget = budget;
  return s;
}

// The prompt's ids (and, for a chat, how its reply is read and a forced call's grammar).
// The images' rows at their markers, each marker repeated for its tokens, and the prompt's
// M-RoPE positions; the prompt must still fit the context.
Status place_images(const Runtime::Parts& p, const std::vector<ChatImage>& images, GenerationRequest& g) {
  AUTOGLM_RETURN_IF_ERROR(expand_image_markers(g.prompt, p.projector->image_token, images, g.images));
  const int64_t n = int64_t(g.prompt.size());
  const int64_t cap = p.options.limits.prompt_tokens > 0
                          ? std::min<int64_t>(p.options.limits.prompt_tokens, p.engine_config.n_ctx - 1)
                          : p.engine_config.n_ctx - 1;
  if (n > cap)
    return Status(StatusCode::kOutOfRange,
                  "the prompt with its images has " + std::to_string(n) + " tokens, more than the " +
                      std::to_string(cap) + " the context (or limits.prompt_tokens) leaves (lower max_pixels?)",
                  "messages");
  std::vector<ImageSpan> spans;
  for (const PromptImage& image : g.images) spans.push_back({image.first, image.rows, image.cols});
  MropePositions rope = mrope_positions(n, spans);
  g.rope_positions = std::move(rope.positions);
  g.rope_delta = rope.delta;
  return Status::ok();
}

void show_tokens(GenerationRequest& g, const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens)
    if (std::find(g.visible_control_tokens.begin(), g.visible_control_tokens.end(), t) ==
        g.visible_control_tokens.end())
      g.visible_control_tokens.push_back(t);
}

Status render_prompt(const Runtime::Parts& p, const Request& request, PreparedRequest::State& out,
                     std::shared_ptr<const Grammar>& forced_call) {
  const TokenCap cap = prompt_cap(p.engine_config.n_ctx, p.options.limits);
  if (request.chat) {
    auto conversation = prompt_request(*request.chat, p.options.limits);
    if (!conversation) return with_field(conversation.status(), "messages");
    conversation->cap = cap;
    const ImageContext images_from{p.projector.get(),       p.pool.get(),      p.image_cache.get(),
                                   &p.options.media,        &p.options.limits, request.chat->min_pixels,
                                   request.chat->max_pixels};
    AUTOGLM_ASSIGN_OR_RETURN(const std::vector<ChatImage> images,
                             take_chat_images(conversation->messages, images_from));
    std::string error_field;
    auto built = p.prompts->build(*conversation, &error_field);
    if (!built) return Status(built.status().code(), built.status().message(), error_field);
    out.request.prompt = std::move(built->ids);
    if (!images.empty()) AUTOGLM_RETURN_IF_ERROR(place_images(p, images, out.request));
    forced_call = built->forced_call;
    const ToolCallFamily family = p.prompts->family();
    out.format = reply_format(*conversation, family, request.chat->parallel_tool_calls);
    const bool split = request.chat->reasoning_format != ReasoningFormat::kNone;
    if (family == ToolCallFamily::kHarmony && (split || out.format.tools)) {
      out.format.harmony = true;
      out.format.reasoning = split;
    }
    // A harmony reply shows its markers always (under reasoning_format none too: raw is raw).
    if (out.format.tools || family == ToolCallFamily::kHarmony)
      out.request.visible_control_tokens = p.reply_markers.visible_control;
    if (p.reply_markers.template_thinks && split && family != ToolCallFamily::kHarmony) {
      out.format.reasoning = true;
      out.format.starts_thinking = prompt_opens_thinking(built->text);
      show_tokens(out.request, p.reply_markers.think_control);  // the splitter reads them
    }
    out.request.thinking = thinking_spec(p.reply_markers, family, built->text, request.chat->thinking_budget_tokens);
    return Status::ok();
  }
  if (!request.text.empty()) {
    auto encoded = p.prompts->encode_text(request.text, cap);
    if (!encoded) return with_field(encoded.status(), "prompt");
    out.request.prompt = std::move(encoded).value();
    return Status::ok();
  }
  out.request.prompt = request.tokens;
  return Status::ok();
}

Status check_logit_bias(const SamplingParams& sampling, int64_t n_vocab) {
  for (const auto& [token, bias] : sampling.logit_bias)
    if (token < 0 || token >= n_vocab) {
      const std::string field = "logit_bias." + std::to_string(token);
      return Status(
          StatusCode::kInvalidArgument,
          "token id " + std::to_string(token) + " is outside the vocabulary (" + std::to_string(n_vocab) + " tokens)",
          field);
    }
  return Status::ok();
}

nlohmann::json sampling_json(const SamplingParams& s) {
  return {s.temperature,
          s.top_k,
          s.top_p,
          s.min_p,
          s.repetition_penalty,
          s.frequency_penalty,
          s.presence_penalty,
          s.penalty_last_n,
          s.seed ? nlohmann::json(*s.seed) : nlohmann::json(nullptr),
          s.logit_bias};
}

}  // namespace

Result<PromptRequest> prompt_request(const Conversation& chat, const RequestLimits& limits) {
  PromptRequest r;
  r.add_generation_prompt = chat.add_generation_prompt;
  if (!chat.messages_json.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(r.messages, parse_json_field(chat.messages_json, "messages_json", limits));
    if (!r.messages.is_array())
      return Status(StatusCode::kInvalidArgument, "messages_json: must be an array of messages", "messages");
  } else {
    for (const ChatMessage& m : chat.messages) r.messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  if (!chat.tools_json.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(r.tools, parse_json_field(chat.tools_json, "tools_json", limits));
    if (!r.tools.is_array())
      return Status(StatusCode::kInvalidArgument, "tools_json: must be an array of tools", "tools");
    r.tool_choice = r.tools.empty() ? ToolChoice::kNone : chat.tool_choice;
    r.tool_name = chat.tool_name;
    if (r.tool_choice == ToolChoice::kNone) r.tools = ordered_json();  // not shown to the model
  }
  if (!chat.template_kwargs_json.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(r.template_kwargs,
                             parse_json_field(chat.template_kwargs_json, "template_kwargs_json", limits));
    if (!r.template_kwargs.is_object())
      return Status(StatusCode::kInvalidArgument, "template_kwargs_json: must be an object", "chat_template_kwargs");
  }
  return r;
}

namespace {

// The images by content (the prompt holds only their markers).
nlohmann::json images_key(const std::vector<PromptImage>& images) {
  nlohmann::json out = nlohmann::json::array();
  for (const PromptImage& image : images) out.push_back({image.first, image.hash});
  return out;
}

}  // namespace

PreparedRequest::PreparedRequest(std::shared_ptr<const State> state) : state_(std::move(state)) {}

const std::vector<int32_t>& PreparedRequest::prompt() const {
  return state_->request.prompt;
}

int32_t PreparedRequest::max_tokens() const {
  return state_->request.max_tokens;
}

bool PreparedRequest::reads_tool_calls() const {
  return state_->format.tools;
}

bool PreparedRequest::deterministic() const {
  const SamplingParams& s = state_->request.sampling;
  return s.temperature <= 0 || s.seed.has_value();
}

std::string PreparedRequest::output_key() const {
  const GenerationRequest& g = state_->request;
  const ReplyFormat& f = state_->format;
  nlohmann::json adapters = nlohmann::json::array();
  if (g.lora)
    for (const auto& a : *g.lora) adapters.push_back(a->id);  // its content: a changed file is another
  const nlohmann::json what = {
      {"sampling", sampling_json(g.sampling)},
      {"max_tokens", g.max_tokens},
      {"stop", g.stop},
      {"grammar", g.grammar ? nlohmann::json(g.grammar->source()) : nullptr},
      {"top_logprobs", g.top_logprobs},
      {"ignore_eos", g.ignore_eos},
      {"speculative", g.speculative},
      {"tools", f.tools ? nlohmann::json{f.tool_objects, int(f.family), f.parallel_tool_calls} : nullptr},
      {"reasoning", f.reasoning ? nlohmann::json{f.starts_thinking} : nullptr},
      {"harmony", f.harmony},
      {"shown", g.visible_control_tokens},
      {"thinking", g.thinking ? nlohmann::json{g.thinking->budget, g.thinking->constraint_after} : nullptr},
      {"lora", adapters},
      {"images", images_key(g.images)}};
  std::string key = std::to_string(g.cache_salt) + '\n';  // the prefix cache's scope
  key.append(reinterpret_cast<const char*>(g.prompt.data()), g.prompt.size() * sizeof(int32_t));
  key += '\n';
  key += what.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return key;
}

Result<PreparedRequest> Runtime::prepare(const Request& request) {
  Parts& p = *parts_;
  if (!p.engine) return unsupported("the runtime was opened with start_engine = false: no engine");
  const int sources = int(!request.tokens.empty()) + int(!request.text.empty()) + int(request.chat.has_value());
  if (sources != 1) return invalid_argument("request: give exactly one of tokens, text and chat");
  auto state = std::make_shared<PreparedRequest::State>();
  state->owner = &p;
  state->prompt_field = request.chat ? "messages" : "prompt";
  std::shared_ptr<const Grammar> forced_call;
  AUTOGLM_RETURN_IF_ERROR(render_prompt(p, request, *state, forced_call));
  GenerationRequest& g = state->request;
  const int64_t room = std::max<int64_t>(1, p.engine_config.n_ctx - int64_t(g.prompt.size()));
  g.max_tokens = int32_t(request.max_tokens < 0 ? room : std::min<int64_t>(request.max_tokens, room));
  g.sampling = request.sampling;
  AUTOGLM_RETURN_IF_ERROR(check_logit_bias(g.sampling, p.tokenizer->n_vocab()));
  g.stop = request.stop;
  OutputConstraint constraint = request.constraint;
  if (forced_call && constraint.kind != ConstraintKind::kNone)
    return Status(StatusCode::kInvalidArgument, "a forced tool call cannot be combined with response_format or grammar",
                  "tool_choice");
  if (Status st = compile_constraint(constraint, p.options.limits); !st.is_ok())
    return Status(st.code(), st.field() + ": " + st.message(), st.field());
  g.grammar = forced_call ? forced_call : constraint.compiled;
  if (g.thinking && !forced_call && constraint.kind == ConstraintKind::kGbnf) {
    // A GBNF grammar is the whole text, as it is everywhere: the reply starts where it does.
    g.thinking.reset();
    state->format.starts_thinking = false;
  } else if (g.thinking) {
    g.thinking->constraint_after = g.grammar != nullptr;           // response_format, a forced call: the answer only
    if (!g.grammar && g.thinking->budget < 0) g.thinking.reset();  // nothing to steer
  }
  g.priority = request.priority;
  if (request.timeout) g.deadline = std::chrono::steady_clock::now() + *request.timeout;
  g.top_logprobs = request.top_logprobs;
  g.ignore_eos = request.ignore_eos;
  g.speculative = request.speculative;
  if (!request.skip_special_tokens) show_tokens(g, p.reply_markers.all_control);
  g.cache_salt = request.cache_salt.empty() ? 0 : prefix_cache_salt(request.cache_salt, "");
  g.make_shaper = reply_shaper_factory(state->format);
  if (auto over = check_request_limits(g, p.options.limits))
    return Status(StatusCode::kInvalidArgument, over->message,
                  over->param == "prompt" ? state->prompt_field : over->param);
  auto adapters = lora_for(p, request.lora);
  if (!adapters) return with_field(adapters.status(), "lora");
  g.lora = std::move(adapters).value();
  g.lora_name = request.lora;
  return PreparedRequest(std::move(state));
}

Result<std::shared_ptr<StreamHandle>> Runtime::submit(const PreparedRequest& prepared, int32_t choice) {
  const PreparedRequest::State& state = *prepared.state_;
  if (state.owner != parts_.get()) return invalid_argument("submit: the request was prepared by another runtime");
  GenerationRequest g = state.request;
  if (choice > 0 && g.sampling.seed) g.sampling.seed = *g.sampling.seed + uint64_t(choice);
  auto handle = parts_->engine->submit(std::move(g));
  if (!handle && handle.status().code() != StatusCode::kResourceExhausted)
    return with_field(handle.status(), state.prompt_field);
  return handle;
}

Result<std::shared_ptr<StreamHandle>> Runtime::submit(const Request& request) {
  AUTOGLM_ASSIGN_OR_RETURN(PreparedRequest prepared, prepare(request));
  return submit(prepared);
}

Result<std::string> Runtime::generate_text(const Request& request) {
  AUTOGLM_ASSIGN_OR_RETURN(auto handle, submit(request));
  std::string text;
  StreamEvent ev;
  while (handle->next(ev)) {
    text += ev.text;
    if (!ev.finished) continue;
    if (ev.finish_reason == FinishReason::kError) return Status(StatusCode::kInternal, ev.error);
    return text;
  }
  return Status(StatusCode::kInternal, "the engine did not finish the request");
}

std::vector<int32_t> Runtime::prompt_tokens(const std::string& text) const {
  return parts_->prompts->encode_text(text);
}

Result<std::vector<std::vector<float>>> Runtime::embed(const std::vector<std::vector<int32_t>>& inputs, Pooling pooling,
                                                       size_t dimensions) {
  if (!parts_->engine) return unsupported("embed: the runtime was opened with start_engine = false: no engine");
  AUTOGLM_ASSIGN_OR_RETURN(auto vectors, parts_->engine->embed({inputs, pooling}).get());
  for (std::vector<float>& v : vectors)
    if (dimensions > 0 && dimensions < v.size()) {  // Matryoshka: the first components, unit length again
      v.resize(dimensions);
      normalize_l2(v);
    }
  return vectors;
}

namespace {

template <size_t N>
std::vector<int64_t> counts(const std::array<std::atomic<int64_t>, N>& buckets) {
  std::vector<int64_t> out;
  for (const auto& b : buckets) out.push_back(b.load());
  return out;
}

void add_op_profile(const OpProfile& profile, RuntimeStats& s) {
  if (!profile.enabled()) return;
  for (int i = 0; i < int(Op::kCount); ++i) s.op_seconds.emplace_back(op_key(Op(i)), profile.seconds(Op(i)));
  s.profiled_tokens = profile.tokens();
}

}  // namespace

std::shared_ptr<void> Runtime::hold_steps() {
  struct Hold {
    explicit Hold(TurnQueue& turns) : seat(turns), turn(seat.take()) {}
    TurnQueue::Seat seat;
    TurnQueue::Turn turn;
  };
  return std::make_shared<Hold>(parts_->pool->turns());
}

RuntimeStats Runtime::stats() const {
  RuntimeStats s;
  if (!parts_->engine) return s;
  const EngineStats& e = parts_->engine->stats();
  s.prompt_tokens = e.prompt_tokens;
  s.generated_tokens = e.generated_tokens;
  s.prefix_hit_tokens = e.prefix_hit_tokens;
  s.prefix_queried_tokens = e.prefix_queried_tokens;
  s.preemptions = e.preemptions;
  s.steps = e.steps;
  s.running = e.running;
  s.waiting = e.waiting + parts_->engine->submitted_not_taken();  // waiting from its submission on
  s.kv_blocks_used = e.kv_blocks_used;
  s.kv_blocks_total = e.kv_blocks_total;
  s.loop_alive = e.loop_alive;
  const int64_t began = e.step_began_ms;
  s.step_running_seconds = began == 0 ? 0.0 : double(steady_milliseconds() - began) / 1000.0;
  s.step_target_seconds = double(e.step_target_us.load()) / 1e6;
  s.prefill_chunks = counts(e.prefill_chunks);
  s.prefill_chunk_tokens = e.prefill_chunk_tokens;
  s.spec_drafted = e.spec_drafted;
  s.spec_accepted = e.spec_accepted;
  s.spec_passes = e.spec_passes;
  s.spec_acceptance = counts(e.spec_acceptance);
  s.spec_acceptance_sum = double(e.spec_acceptance_milli.load()) / 1000.0;
  s.finished = counts(e.finished);
  const LoraActivity lora = e.lora_activity();
  s.lora_running = lora.running;
  s.lora_waiting = lora.waiting;
  s.lora_changed_at = lora.changed_at;
  add_op_profile(parts_->engine->op_profile(), s);
  const KvTierStats tiers = parts_->engine->kv_tier_stats();
  s.kv_tier_ram_hits = tiers.ram_hits;
  s.kv_tier_disk_hits = tiers.disk_hits;
  s.kv_tier_misses = tiers.misses;
  s.kv_tier_ram_bytes = tiers.ram_bytes;
  s.kv_tier_disk_bytes = tiers.disk_bytes;
  s.kv_tier_bytes_in = tiers.bytes_in;
  s.kv_tier_bytes_out = tiers.bytes_out;
  s.kv_tier_disk_rejected = tiers.disk_rejected;
  s.kv_tier_copy_seconds = tiers.copy_seconds;
  return s;
}

}  // namespace autoglm
