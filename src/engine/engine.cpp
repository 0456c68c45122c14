#include "engine/engine.h"

#include <optional>

#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "core/check.h"
#include "core/last_resort.h"
#include "core/log.h"
#include "engine/constrained.h"
#include "engine/make_drafter.h"
#include "engine/prompt_check.h"
#include "engine/request_limits.h"
#include "engine/scheduler.h"
#include "engine/stream.h"
#include "engine/text_stream.h"
#include "engine/thinking_gate.h"
#include "kv/paged_sequence.h"
#include "model/kv_cache.h"
#include "sample/logprobs.h"
#include "sample/sampler.h"

namespace autoglm {

using Clock = std::chrono::steady_clock;

// A request while the engine holds it.
struct Sequence {
  Sequence(const Tokenizer& tok, const VocabularyTrie& trie, BlockPool& pool, const SpecConfig& spec,
           double draft_token_cost, GenerationRequest r)
      : request(std::move(r)),
        sampler(request.sampling),
        matcher(trie.make_matcher(request.grammar, request.visible_control_tokens)),
        thinking(request.thinking),
        text(tok, request.stop, !request.ignore_eos, request.visible_control_tokens),
        kv(pool),
        draft_length(spec.draft_max, spec.draft_min, draft_token_cost) {}

  uint64_t id = 0;
  GenerationRequest request;
  std::shared_ptr<StreamHandle> handle;
  std::vector<int32_t> tokens;  // prompt, then generated
  int32_t n_prompt = 0;
  int32_t n_generated = 0;
  int64_t n_computed = 0;  // tokens whose KV is in the cache
  int64_t n_hashed = 0;    // leading blocks published to the prefix cache
  uint64_t chain = 0;      // hash of those blocks
  int32_t cached_tokens = 0;
  int32_t preemptions = 0;
  uint64_t admit_order = 0;
  bool finished = false;
  bool running = false;  // in the running set (not waiting)
  Sampler sampler;
  std::unique_ptr<GrammarMatcher> matcher;  // when the request has a grammar
  ThinkingGate thinking;                    // a thinking model's reasoning phase (budget, constraint after)
  TextStream text;
  PagedSequenceKv kv;
  // Speculation: the drafts after the pending token, appended to `tokens` from before a step
  // is planned until it is verified (never there between steps).
  std::vector<int32_t> drafts;
  DraftLength draft_length;
  SpecStats spec;
  Clock::time_point arrival = Clock::now();
  std::optional<Clock::time_point> first_scheduled, first_token;

  int64_t pending() const { return int64_t(tokens.size()) - n_computed; }
  bool decoding() const { return n_computed >= n_prompt; }
};

namespace {

SeqView view_of(const Sequence& s) {
  SeqView v;
  v.id = s.id;
  v.priority = s.request.priority;
  v.admit_order = s.admit_order;
  v.n_tokens = int64_t(s.tokens.size());
  v.n_prompt = s.n_prompt;
  v.n_computed = s.n_computed;
  return v;
}

// Keeps `list` in the scheduler's waiting order.
void insert_sorted(std::list<std::unique_ptr<Sequence>>& list, std::unique_ptr<Sequence> seq) {
  const SeqView v = view_of(*seq);
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& other) { return runs_before(v, view_of(*other)); });
  list.insert(it, std::move(seq));
}

// Takes a sequence's unverified drafts back out of its tokens.
void drop_drafts(Sequence& s) {
  s.tokens.resize(s.tokens.size() - s.drafts.size());
  s.drafts.clear();
}

// Beyond this many decoding sequences a step is compute-bound: drafts would cost more than
// they save, so nobody drafts.
constexpr int64_t kMostSpeculatingDecodes = 4;

// A draft model's KV pool: the target's block count, at most what that many sequences fill.
DraftPool draft_pool(const EngineConfig& c) {
  const int64_t per_sequence = (c.n_ctx + c.block_size - 1) / c.block_size;
  return {std::min(c.kv_blocks, kMostSpeculatingDecodes * per_sequence), c.block_size, c.kv_type};
}

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

// The KV layout a tier file must have been written in: type, row sizes, layers and block size.
uint64_t kv_layout_key(const BlockPool& blocks) {
  const KvFormat& f = blocks.format();
  const int64_t fields[] = {int64_t(f.type),
                            f.k_row_bytes,
                            f.v_row_bytes,
                            int64_t(f.values_in_keys),
                            blocks.block_key_bytes(),
                            blocks.block_value_bytes(),
                            blocks.block_size()};
  return BlockPool::chain_hash(0, reinterpret_cast<const int32_t*>(fields), int64_t(sizeof(fields) / 4));
}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, EngineConfig config,
               const Model* draft)
    : model_(model),
      tokenizer_(tokenizer),
      trie_(tokenizer),
      config_(config),
      blocks_(model.spec(), config.kv_blocks, config.block_size, *kv_format(model.spec(), config.kv_type),
              model.device()),
      runner_(model, pool),
      turn_seat_(pool.turns()) {
  blocks_.set_prefix_caching(config.prefix_cache);
  KvTierOptions tiers = config.kv_tiers;
  tiers.format_key = kv_layout_key(blocks_);
  if (config.prefix_cache && model.device().kind == DeviceKind::kCpu &&
      (tiers.ram_bytes > 0 || !tiers.disk_dir.empty())) {
    tiers_ = open_kv_tiers(tiers);
    blocks_.set_tiers(tiers_.get());
  }
  runner_.profile().set_enabled(config.profile);
  auto drafter = make_drafter(config.spec, model, draft, pool, draft_pool(config));
  AUTOGLM_CHECK(drafter.is_ok());  // the runtime checks the options first (engine_config_for, the draft's KV)
  drafter_ = std::move(drafter).value();
  if (drafter_ && drafter_->profile()) drafter_->profile()->set_enabled(config.profile);
  stats_.kv_blocks_total = config.kv_blocks;
  stats_.loop_alive = true;  // from here until the loop ends (set before the thread runs: no gap)
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    stopping_ = true;
  }
  submit_ready_.notify_all();
  thread_.join();
  if (tiers_ && tiers_->has_disk()) save_cache_to_disk();
}

// The pool's cached prefixes and RAM's to the disk tier as the engine ends (a graceful stop, an
// unload or idle sleep), so that the next start or wake copies them back.
void Engine::save_cache_to_disk() {
  const auto began = std::chrono::steady_clock::now();
  blocks_.save_to_disk_tier();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  char line[160];
  std::snprintf(line, sizeof(line), "kv cache disk tier: the cached prefixes saved (%.1f MiB on disk) in %.2f s",
                double(tiers_->stats().disk_bytes) / (1 << 20), seconds);
  log_line(LogLevel::kInfo, line);
}

Result<std::shared_ptr<StreamHandle>> Engine::submit(GenerationRequest request) {
  AUTOGLM_RETURN_IF_ERROR(validate_sampling_params(request.sampling));
  for (const auto& [token, bias] : request.sampling.logit_bias)
    if (token >= model_.spec().n_vocab)
      return invalid_argument("logit_bias: token id " + std::to_string(token) + " is outside the vocabulary");
  if (request.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  AUTOGLM_RETURN_IF_ERROR(check_token_ids(request.prompt, "prompt: "));
  if (auto over = check_request_limits(request, config_.limits)) return invalid_argument(over->message);
  const int64_t n = int64_t(request.prompt.size());
  AUTOGLM_RETURN_IF_ERROR(check_prompt_fits(n, config_.n_ctx));
  if ((n + 1 + config_.block_size - 1) / config_.block_size > config_.kv_blocks)
    return out_of_range("the prompt has " + std::to_string(n) + " tokens; the KV cache holds " +
                        std::to_string(config_.kv_blocks * config_.block_size));
  AUTOGLM_RETURN_IF_ERROR(check_images(request));
  if (!request.images.empty()) request.speculative = false;  // drafters read no images
  request.cache_salt = salt_with_lora(request.cache_salt, request.lora.get());
  auto seq = std::make_unique<Sequence>(tokenizer_, trie_, blocks_, config_.spec, drafter_ ? drafter_->token_cost() : 0,
                                        std::move(request));
  seq->handle = StreamWriter::open(seq->request.make_shaper ? seq->request.make_shaper() : plain_text_parts);
  seq->tokens = seq->request.prompt;
  seq->n_prompt = int32_t(n);
  auto handle = seq->handle;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    if (queued_ >= config_.max_queued)
      return Status(StatusCode::kResourceExhausted,
                    "the queue is full (" + std::to_string(config_.max_queued) + " waiting)");
    seq->id = next_id_++;
    ++queued_;
    submitted_.push_back(std::move(seq));
    ++n_submitted_;
  }
  submit_ready_.notify_one();
  return handle;
}

// A prompt's images: within it, in order, of the model's width; M-RoPE positions for every
// prompt token of a model that has them.
Status Engine::check_images(const GenerationRequest& r) const {
  const ModelSpec& spec = model_.spec();
  const int64_t n = int64_t(r.prompt.size());
  if (!r.rope_positions.empty() && (!spec.mrope() || int64_t(r.rope_positions.size()) != 3 * n))
    return invalid_argument("prompt: M-RoPE positions need a model with rope sections and 3 per prompt token");
  if (r.images.empty()) return Status::ok();
  if (!spec.mrope() || r.rope_positions.empty())
    return invalid_argument("prompt: images need a vision-language model (M-RoPE) and their positions");
  if (model_.device().kind != DeviceKind::kCpu)
    return unsupported("prompt: images run on the cpu only, not on " + device_name(model_.device()));
  int64_t end = 0;
  for (const PromptImage& image : r.images) {
    const ImageEmbedding* e = image.embedding.get();
    if (!e || image.first < end || image.end() > n || e->rows != image.rows || e->cols != image.cols ||
        e->width != spec.n_embd || int64_t(e->values.size()) != e->n_tokens() * e->width)
      return invalid_argument("prompt: an image's rows do not fit its placeholder tokens or the model's width");
    end = image.end();
  }
  return Status::ok();
}

std::future<Result<std::vector<std::vector<float>>>> Engine::embed(EmbeddingJob job) {
  PendingEmbedding pending;
  auto future = pending.done.get_future();
  Status bad = Status::ok();
  if (job.inputs.empty()) bad = invalid_argument("input: no inputs");
  for (size_t i = 0; i < job.inputs.size() && bad.is_ok(); ++i) {
    const std::string where = "input[" + std::to_string(i) + "]: ";
    bad = check_token_ids(job.inputs[i], where);
    if (bad.is_ok()) {
      if (auto fits = check_prompt_fits(int64_t(job.inputs[i].size()), config_.n_ctx); !fits.is_ok())
        bad = invalid_argument(where + fits.message());
    }
  }
  if (!bad.is_ok()) {
    pending.done.set_value(bad);
    return future;
  }
  pending.job = std::move(job);
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    embeddings_.push_back(std::move(pending));
  }
  submit_ready_.notify_one();
  return future;
}

Status Engine::check_token_ids(const std::vector<int32_t>& tokens, const std::string& where) const {
  if (tokens.empty()) return invalid_argument(where + "no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= model_.spec().n_vocab)
      return invalid_argument(where + "token id " + std::to_string(t) + " is out of range");
  return Status::ok();
}

// One waiting embedding job, between generation steps.
void Engine::run_one_embedding() {
  PendingEmbedding pending;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    if (embeddings_.empty()) return;
    pending = std::move(embeddings_.front());
    embeddings_.pop_front();
  }
  Result<std::vector<std::vector<float>>> result = Status(StatusCode::kInternal, "the embedding job did not run");
  run_guarded(
      "engine embeddings",
      [&] {
        result = compute_embeddings(runner_, model_.spec(), config_.kv_type, pending.job, config_.max_batch_tokens);
      },
      [&](const std::string& what) { result = Status(StatusCode::kInternal, "internal error: " + what); });
  pending.done.set_value(std::move(result));
}

void Engine::loop() {
  // On this thread, before the first step: the engine is ready (requests queue) while the
  // step cost is measured, so start-up waits for none of it.
  {
    auto calibrating = turn_seat_.take();
    calibrate_step_cost();
  }
  // The pool's turn, held from step to step while there is work (other models' engines on
  // this pool take their steps in between: yield hands it over when they are owed time).
  std::optional<TurnQueue::Turn> turn;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(submit_mutex_);
      if (stopping_) break;
      if (submitted_.empty() && waiting_.empty() && running_.empty() && embeddings_.empty()) {
        turn.reset();
        turn_seat_.idle();  // the other models' engines owe this one nothing for the time it waits
        submit_ready_.wait(lock, [this] { return stopping_ || !submitted_.empty() || !embeddings_.empty(); });
      }
      if (stopping_) break;
    }
    if (turn)
      turn->yield();
    else
      turn.emplace(turn_seat_.take());
    bool progressed = true;
    stats_.step_began_ms = steady_milliseconds();
    run_one_embedding();
    run_guarded(
        "engine", [&] { progressed = step(); },
        [this](const std::string& what) { fail_running("internal error: " + what); });
    stats_.step_began_ms = 0;
    if (!progressed) {
      // Nothing could run (e.g. waiting for blocks): avoid spinning, and let the others run.
      turn.reset();
      std::unique_lock<std::mutex> lock(submit_mutex_);
      submit_ready_.wait_for(lock, std::chrono::milliseconds(5));
    }
  }
  turn.reset();
  stats_.loop_alive = false;
  for (auto* list : {&running_, &waiting_})
    while (!list->empty()) {
      finish(*list->front(), FinishReason::kCancelled, "the engine stopped");
      list->pop_front();
    }
  for (auto& seq : submitted_) finish(*seq, FinishReason::kCancelled, "the engine stopped");
  std::lock_guard<std::mutex> lock(submit_mutex_);
  for (auto& pending : embeddings_)
    pending.done.set_value(Status(StatusCode::kResourceExhausted, "the engine stopped"));
  embeddings_.clear();
}

// After an exception out of a step: the sequences it was working on end with an error
// (their KV goes back to the pool); waiting ones are untouched.
void Engine::fail_running(const std::string& error) {
  for (auto& s : running_) finish(*s, FinishReason::kError, error);
  running_.clear();
  update_gauges();
}

void Engine::take_submissions() {
  std::vector<std::unique_ptr<Sequence>> fresh;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    fresh.swap(submitted_);
    n_submitted_ -= int64_t(fresh.size());
  }
  for (auto& seq : fresh) insert_sorted(waiting_, std::move(seq));
}

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  if (seq.finished) return;
  seq.finished = true;
  drop_drafts(seq);
  if (drafter_) drafter_->forget(seq.id);
  ++stats_.finished[size_t(reason)];
  if (seq.spec.drafted > 0) {
    ++stats_.spec_acceptance[size_t(
        std::min<int64_t>(EngineStats::kAcceptanceBuckets - 1, int64_t(seq.spec.acceptance() * 10)))];
    stats_.spec_acceptance_milli += int64_t(seq.spec.acceptance() * 1000);
  }
  StreamEvent ev;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    ev.text = seq.text.flush();
    ev.stop_sequence = seq.text.stop_sequence();
  }
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = seq.n_prompt;
  ev.cached_tokens = seq.cached_tokens;
  ev.completion_tokens = seq.n_generated;
  ev.preemptions = seq.preemptions;
  ev.spec_drafted = seq.spec.drafted;
  ev.spec_accepted = seq.spec.accepted;
  const auto now = Clock::now();
  ev.queue_seconds = seconds_between(seq.arrival, seq.first_scheduled.value_or(now));
  ev.prefill_seconds = seq.first_scheduled ? seconds_between(*seq.first_scheduled, seq.first_token.value_or(now)) : 0;
  publish_full_blocks(seq);
  seq.kv.release_all();
  StreamWriter::push(*seq.handle, std::move(ev));
  std::lock_guard<std::mutex> lock(submit_mutex_);
  --queued_;
}

const OpProfile* Engine::draft_profile() const {
  return drafter_ ? drafter_->profile() : nullptr;
}

void Engine::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  for (auto* list : {&waiting_, &running_})
    for (auto it = list->begin(); it != list->end();) {
      Sequence& s = **it;
      const bool expired = list == &waiting_ && s.request.deadline && now > *s.request.deadline;
      if (s.handle->cancelled() || expired) {
        finish(s, expired ? FinishReason::kTimeout : FinishReason::kCancelled);
        it = list->erase(it);
      } else {
        ++it;
      }
    }
}

// Block b's key in the prefix cache after `parent`: its tokens, and the content of the images
// whose placeholders it holds (two images of one size have the same placeholder tokens).
uint64_t Engine::block_hash(const Sequence& seq, uint64_t parent, int64_t b) const {
  const int64_t bs = blocks_.block_size();
  uint64_t h = BlockPool::chain_hash(parent, seq.tokens.data() + b * bs, bs);
  for (const PromptImage& image : seq.request.images)
    if (image.first < (b + 1) * bs && image.end() > b * bs)
      h = BlockPool::chain_hash(h, reinterpret_cast<const int32_t*>(&image.hash), 2);
  return h;
}

void Engine::publish_full_blocks(Sequence& seq) {
  const int64_t bs = blocks_.block_size();
  while ((seq.n_hashed + 1) * bs <= seq.n_computed && seq.n_hashed < int64_t(seq.kv.blocks().size())) {
    seq.chain = block_hash(seq, seq.chain, seq.n_hashed);
    blocks_.publish(seq.kv.blocks()[size_t(seq.n_hashed)], seq.chain);
    ++seq.n_hashed;
  }
}

// Reuses the longest cached prefix; the last token is always computed, for its logits.
int64_t Engine::reuse_prefix(Sequence& seq) {
  const int64_t bs = blocks_.block_size();
  const int64_t reusable = (int64_t(seq.tokens.size()) - 1) / bs;
  uint64_t chain = seq.request.cache_salt;
  int64_t matched = 0;
  for (; matched < reusable; ++matched) {
    const uint64_t h = block_hash(seq, chain, matched);
    auto block = blocks_.acquire_cached(h);
    if (!block) break;
    seq.kv.append_block(*block);
    chain = h;
  }
  seq.n_computed = seq.n_hashed = matched;
  seq.n_computed *= bs;
  seq.chain = chain;
  return seq.n_computed;
}

// The sequence's KV goes back to the pool; full blocks stay findable by prefix.
void Engine::release_kv(Sequence& seq) {
  publish_full_blocks(seq);
  seq.kv.release_all();
  seq.n_computed = 0;
  seq.n_hashed = 0;
  seq.chain = seq.request.cache_salt;
}

// The scheduler's view of the engine's sequences and pool.
class Engine::Planner : public KvPlanner {
 public:
  explicit Planner(Engine& engine) : engine_(engine) {
    for (auto* list : {&engine.running_, &engine.waiting_})
      for (auto& s : *list) by_id_[s->id] = s.get();
  }
  bool reserve(SeqId id, int64_t n) override { return seq(id).kv.reserve(n); }
  int64_t blocks_held(SeqId id) const override { return by_id_.at(id)->kv.n_held(); }
  void release(SeqId id) override { engine_.release_kv(seq(id)); }
  int64_t reuse_prefix(SeqId id) override { return engine_.reuse_prefix(seq(id)); }
  Sequence& seq(SeqId id) { return *by_id_.at(id); }

 private:
  Engine& engine_;
  std::unordered_map<SeqId, Sequence*> by_id_;
};

namespace {

// Moves the sequence `id` out of `list`.
std::unique_ptr<Sequence> take(std::list<std::unique_ptr<Sequence>>& list, SeqId id) {
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& s) { return s->id == id; });
  auto seq = std::move(*it);
  list.erase(it);
  return seq;
}

}  // namespace

void Engine::apply(const ScheduleOutput& plan, Planner& planner) {
  for (SeqId id : plan.preempted) {
    auto victim = take(running_, id);
    drop_drafts(*victim);
    log_line(LogLevel::kInfo, "engine: preempting request " + std::to_string(victim->id) + " (priority " +
                                  std::to_string(victim->request.priority) + ", " +
                                  std::to_string(victim->tokens.size()) + " tokens) to free KV blocks");
    victim->running = false;
    ++victim->preemptions;
    ++stats_.preemptions;
    insert_sorted(waiting_, std::move(victim));
  }
  for (SeqId id : plan.too_long) finish(planner.seq(id), FinishReason::kLength);
  for (SeqId id : plan.admitted) {
    auto s = take(waiting_, id);
    s->admit_order = admissions_++;
    if (s->preemptions == 0) {  // first admission: account the prompt and its cache hits
      s->cached_tokens = int32_t(std::min<int64_t>(s->n_computed, s->n_prompt));
      stats_.prefix_hit_tokens += s->cached_tokens;
      stats_.prefix_queried_tokens += s->n_prompt;
      stats_.prompt_tokens += s->n_prompt;
    }
    s->running = true;
    running_.push_back(std::move(s));
  }
}

bool Engine::step() {
  take_submissions();
  drop_cancelled_and_expired();
  propose_drafts();
  std::vector<SeqView> running, waiting;
  for (const auto& s : running_) running.push_back(view_of(*s));
  for (const auto& s : waiting_) waiting.push_back(view_of(*s));
  Planner planner(*this);
  SchedulerLimits limits{config_.max_batch_tokens, config_.max_running};
  limits.max_step_ms = max_step_ms_;
  limits.cost = &step_cost_;
  const ScheduleOutput plan = schedule_step(running, waiting, limits, planner);
  stats_.step_target_us = int64_t(plan.target_ms * 1000);
  apply(plan, planner);
  update_gauges();
  if (plan.work.empty()) return false;

  Batch batch;
  const auto now = Clock::now();
  for (size_t i = 0; i < plan.work.size(); ++i) {
    Sequence& s = planner.seq(plan.work[i].id);
    if (!s.first_scheduled) s.first_scheduled = now;
    batch.caches.push_back(&s.kv);
    batch.loras.push_back(s.request.lora.get());
    const bool completes = s.n_computed + plan.work[i].n_tokens == int64_t(s.tokens.size());
    batch.add_sequence_tokens(int32_t(i), s.tokens.data() + s.n_computed, plan.work[i].n_tokens, int32_t(s.n_computed),
                              completes, /*logits_for_all=*/!s.drafts.empty());
  }
  if (std::all_of(batch.loras.begin(), batch.loras.end(), [](const LoraSet* l) { return !l || l->empty(); }))
    batch.loras.clear();  // the base alone: no grouping
  add_image_inputs(plan, planner, batch);
  StepShape shape;  // what ran, for the cost model (kept only when it plans the steps)
  shape.tokens = int64_t(batch.tokens.size());
  if (max_step_ms_ != 0)
    for (int32_t p : batch.positions) shape.attended += p + 1;
  for (const ScheduledChunk& w : plan.work)
    if (!planner.seq(w.id).decoding()) record_prefill_chunk(w.n_tokens);
  const auto started = Clock::now();
  const Status st = runner_.forward(batch, logits_);
  if (max_step_ms_ != 0)
    step_cost_.observe(shape, std::chrono::duration<double, std::milli>(Clock::now() - started).count());
  ++stats_.steps;
  if (st) show_drafter(plan, planner);
  size_t row = 0;
  const int64_t n_vocab = model_.spec().n_vocab;
  for (const ScheduledChunk& w : plan.work) {
    if (!st) break;
    Sequence& s = planner.seq(w.id);
    if (!s.drafts.empty()) {  // a row per token run
      after_verifying(s, w.n_tokens, logits_.data() + row * size_t(n_vocab));
      row += size_t(w.n_tokens);
      continue;
    }
    const bool completes = s.n_computed + w.n_tokens == int64_t(s.tokens.size());
    after_forward(s, w.n_tokens, completes ? logits_.data() + (row++) * size_t(n_vocab) : nullptr);
  }
  for (auto& s : running_) drop_drafts(*s);  // the plan did not run them
  if (!st)
    for (auto& s : running_) finish(*s, FinishReason::kError, st.message());
  std::erase_if(running_, [](const auto& s) { return s->finished; });
  update_gauges();
  return true;
}

// Images in the step: each token's image row (at its placeholder) and M-RoPE position; none
// when no sequence of the step has an image (text positions serve a text prompt).
void Engine::add_image_inputs(const ScheduleOutput& plan, Planner& planner, Batch& batch) const {
  const bool any = std::any_of(plan.work.begin(), plan.work.end(),
                               [&](const ScheduledChunk& w) { return !planner.seq(w.id).request.images.empty(); });
  if (!any) return;
  batch.embeddings.assign(batch.tokens.size(), nullptr);
  batch.rope_positions.resize(3 * batch.tokens.size());
  size_t t = 0;
  for (const ScheduledChunk& w : plan.work) {
    const Sequence& s = planner.seq(w.id);
    const GenerationRequest& r = s.request;
    const int64_t given = int64_t(r.rope_positions.size() / 3);
    for (int64_t i = s.n_computed; i < s.n_computed + w.n_tokens; ++i, ++t) {
      for (int axis = 0; axis < 3; ++axis)
        batch.rope_positions[3 * t + size_t(axis)] =
            i < given ? r.rope_positions[size_t(3 * i + axis)] : int32_t(i + r.rope_delta);
      for (const PromptImage& image : r.images)
        if (i >= image.first && i < image.end()) batch.embeddings[t] = image.embedding->token(i - image.first);
    }
  }
}

void Engine::record_prefill_chunk(int64_t n) {
  int bucket = 0;
  for (int64_t bound = 8; bucket + 1 < EngineStats::kChunkBuckets && n > bound; bound *= 2) ++bucket;
  ++stats_.prefill_chunks[size_t(bucket)];
  stats_.prefill_chunk_tokens += n;
}

// Times a few forwards on a scratch cache (one token, then short prefills, after one that
// pages the weights in) to start the step cost model; every step refines it. Logs the fit.
void Engine::calibrate_step_cost() {
  if (config_.max_step_ms == 0) return;
  const auto began = Clock::now();
  ContiguousKvCache scratch(model_.spec(), 64, DType::F32, model_.device());
  std::vector<int32_t> ids(32, 1);
  std::vector<float> out;
  Batch warm;  // the first forward pages the weights in: not a step's time
  warm.caches = {&scratch};
  warm.add_sequence_tokens(0, ids.data(), 1, 0, true);
  if (!runner_.forward(warm, out).is_ok()) return;
  for (int round = 0; round < 2; ++round)
    for (int64_t n : {int64_t(1), int64_t(8), int64_t(32)}) {
      Batch b;
      b.caches = {&scratch};
      b.add_sequence_tokens(0, ids.data(), n, 0, true);
      const auto started = Clock::now();
      if (!runner_.forward(b, out).is_ok()) return;
      step_cost_.observe({n, attended_positions(0, n)},
                         std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    }
  max_step_ms_ = config_.max_step_ms;  // < 0: each step's target follows its decodes
  char line[200];
  std::snprintf(line, sizeof line,
                "engine: step cost measured in %.0f ms: %.2f ms + %.3f ms per token (1 token %.2f ms, 32 tokens "
                "%.2f ms)",
                std::chrono::duration<double, std::milli>(Clock::now() - began).count(), step_cost_.base_ms(),
                step_cost_.per_token_ms(), step_cost_.predict_ms({1, attended_positions(0, 1)}),
                step_cost_.predict_ms({32, attended_positions(0, 32)}));
  log_line(LogLevel::kInfo, line);
}

void Engine::after_forward(Sequence& s, int64_t n, const float* logits) {
  s.n_computed += n;
  publish_full_blocks(s);
  release_out_of_window(s);
  if (logits) emit_next_token(s, logits);
}

// With a sliding window, the next token sees only the latest `window` positions: blocks
// wholly before them go back to the pool (published ones stay findable by prefix).
void Engine::release_out_of_window(Sequence& s) {
  if (const int64_t window = model_.spec().window_of_every_layer(); window > 0)
    s.kv.release_before(s.n_computed + 1 - window);
}

// The step's hidden rows to a drafter that reads them (MTP), before the rows are accepted.
void Engine::show_drafter(const ScheduleOutput& plan, Planner& planner) {
  if (!drafter_ || !drafter_->wants_target_hidden()) return;
  if (const Status st = runner_.last_hidden(hidden_); !st.is_ok()) {
    log_line(LogLevel::kWarning, "engine: the step's hidden states for the drafter: " + st.message());
    return;
  }
  const int64_t n_embd = model_.spec().n_embd;
  int64_t token = 0;
  for (const ScheduledChunk& w : plan.work) {
    const Sequence& s = planner.seq(w.id);
    if (s.request.speculative)
      drafter_->observe_target(s.id, s.n_computed, hidden_.data() + token * n_embd, w.n_tokens);
    token += w.n_tokens;
  }
}

void Engine::propose_drafts() {
  if (!drafter_) return;
  // A step that reads a prompt is compute-bound already: drafts would only add to it.
  if (!waiting_.empty()) return;
  int64_t decodes = 0;
  for (const auto& s : running_) decodes += s->decoding();
  if (decodes > kMostSpeculatingDecodes || decodes < int64_t(running_.size())) return;
  std::vector<Sequence*> drafting;
  std::vector<DraftJob> jobs;
  for (auto& sp : running_) {
    Sequence& s = *sp;
    if (!s.request.speculative || !s.decoding() || s.pending() != 1) continue;
    const int64_t room =
        std::min<int64_t>(s.request.max_tokens - s.n_generated - 1, config_.n_ctx - int64_t(s.tokens.size()));
    const int32_t length = s.draft_length.next();
    if (length == 0) s.draft_length.record(0, 0);  // a pass it sits out
    const int32_t want = int32_t(std::min<int64_t>(length, room));
    if (want <= 0 || !reserve_for_drafts(s, want)) continue;
    DraftJob job;
    job.sequence = s.id;
    job.history = &s.tokens;
    job.max_tokens = want;
    job.target_cache = &s.kv;
    job.catch_up_limit = catch_up_limit(s.request.max_tokens - s.n_generated);
    jobs.push_back(std::move(job));
    drafting.push_back(&s);
  }
  if (jobs.empty()) return;
  if (const Status st = drafter_->propose(jobs); !st.is_ok()) {
    log_line(LogLevel::kWarning, "engine: drafting failed, decoding without drafts this step: " + st.message());
    return;
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Sequence& s = *drafting[i];
    std::vector<int32_t>& drafts = jobs[i].drafts;
    if (drafts.empty() || int32_t(drafts.size()) < config_.spec.draft_min) continue;
    s.tokens.insert(s.tokens.end(), drafts.begin(), drafts.end());
    s.drafts = std::move(drafts);
  }
}

// Blocks for the pending token and `n` drafts, only while the pool keeps one spare block per
// running sequence (drafts never take what plain decoding needs).
bool Engine::reserve_for_drafts(Sequence& s, int64_t n) {
  const int64_t bs = blocks_.block_size();
  const int64_t positions = s.n_computed + 1 + n;
  const int64_t more = std::max<int64_t>(0, (positions + bs - 1) / bs - int64_t(s.kv.blocks().size()));
  return blocks_.n_blocks() - blocks_.n_used() - more >= int64_t(running_.size()) && s.kv.reserve(positions);
}

// Rows j = 0..n-1 follow the pending token and the drafts that ran: each is sampled as plain
// decoding would, and the walk goes on only while the sample equals the draft (speculative.h).
void Engine::after_verifying(Sequence& s, int64_t n, const float* rows) {
  const std::vector<int32_t> ran(s.drafts.begin(), s.drafts.begin() + (n - 1));
  drop_drafts(s);
  s.n_computed += 1;  // the pending token; each accepted draft's row is kept below
  const int64_t n_vocab = model_.spec().n_vocab;
  const int32_t accepted = walk_verified_rows(n, ran, [&](int64_t j) -> std::optional<int32_t> {
    if (j > 0) ++s.n_computed;  // the draft before this row was accepted: its row stays
    if (!emit_next_token(s, rows + j * n_vocab)) return std::nullopt;
    return s.tokens.back();
  });
  s.draft_length.record(int32_t(ran.size()), accepted);
  s.spec.record_pass(int64_t(ran.size()), accepted);
  stats_.spec_drafted += int64_t(ran.size());
  stats_.spec_accepted += accepted;
  ++stats_.spec_passes;
  publish_full_blocks(s);
  release_out_of_window(s);
}

bool Engine::emit_next_token(Sequence& s, const float* logits) {
  const int32_t n_vocab = int32_t(model_.spec().n_vocab);
  OpTimer timer(runner_.profile(), Op::kSampling);
  sample_row_.assign(logits, logits + n_vocab);  // the sampler's penalties change its copy
  const int64_t budget =
      std::min<int64_t>(s.request.max_tokens - s.n_generated, config_.n_ctx - int64_t(s.tokens.size()));
  const std::optional<int32_t> forced = s.thinking.forced();
  const int32_t token = forced ? *forced
                               : sample_next(s.sampler, s.thinking.constrained() ? s.matcher.get() : nullptr,
                                             sample_row_.data(), n_vocab, s.tokens, budget, s.thinking.also_allowed());
  if (token >= 0)
    s.thinking.accept(token, s.thinking.before_start() && is_blank(tokenizer_.token_to_piece(token, true)));
  timer.mark(Op::kOther);
  if (token < 0) {  // the grammar admits nothing more and the vocabulary has no end token
    finish(s, FinishReason::kStop);
    return false;
  }
  StreamEvent ev;
  if (s.request.top_logprobs >= 0) {
    TokenLogprob lp;
    lp.token = token;
    lp.logprob = token_logprob(logits, n_vocab, token, s.request.top_logprobs, lp.top);
    ev.logprobs.push_back(std::move(lp));
  }
  if (!s.first_token) {  // the prompt's count comes with the first token too (a reply's head shows it)
    s.first_token = Clock::now();
    ev.prompt_tokens = s.n_prompt;
    ev.cached_tokens = s.cached_tokens;
  }
  s.tokens.push_back(token);
  ++s.n_generated;
  ++stats_.generated_tokens;
  ev.tokens.push_back(token);

  ev.text = s.text.push(token);
  FinishReason reason = s.text.ended() ? FinishReason::kStop : FinishReason::kNone;
  if (reason == FinishReason::kNone && s.n_generated >= s.request.max_tokens) reason = FinishReason::kLength;
  if (reason == FinishReason::kNone && int64_t(s.tokens.size()) >= config_.n_ctx) reason = FinishReason::kLength;
  StreamWriter::push(*s.handle, std::move(ev));
  if (reason == FinishReason::kNone) return true;
  finish(s, reason);
  return false;
}

namespace {

template <class List>
std::string lora_names(const List& sequences) {
  std::set<std::string> names;
  for (const auto& s : sequences)
    if (!s->request.lora_name.empty()) names.insert(s->request.lora_name);
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

}  // namespace

void EngineStats::set_lora_activity(std::string running, std::string waiting) {
  std::lock_guard<std::mutex> lock(lora_mutex);
  if (running == lora.running && waiting == lora.waiting && lora.changed_at > 0) return;
  lora.running = std::move(running);
  lora.waiting = std::move(waiting);
  lora.changed_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Engine::update_gauges() {
  stats_.running = int64_t(running_.size());
  stats_.waiting = int64_t(waiting_.size());
  stats_.kv_blocks_used = blocks_.n_used();
  std::string running = lora_names(running_), waiting = lora_names(waiting_);
  const bool listed = !running.empty() || !waiting.empty();
  // Without adapters in use the step takes no lock: only a change is recorded.
  if (listed || lora_listed_) stats_.set_lora_activity(std::move(running), std::move(waiting));
  lora_listed_ = listed;
}

}  // namespace autoglm
