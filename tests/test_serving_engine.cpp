// The continuous-batching engine: batch invariance, preemption, prefix reuse,
// cancellation, admission limits and priorities.
#include <gtest/gtest.h>

#include "core/turn_queue.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "engine/speculative.h"
#include "model/create_model.h"
#include "stream_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using test::collect;
using test::Collected;

class ServingEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    model = std::move(Model::load(test::shared_path("models/stories260K.gguf"))).value();
    tok = std::move(Tokenizer::from_gguf(model->file())).value();
  }

  GenerationRequest greedy(const std::string& prompt, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = tok->encode(prompt, true);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    return r;
  }

  // The same request generated alone by the single-sequence generator.
  std::vector<int32_t> alone(const GenerationRequest& r) {
    Generator gen(*model, *tok, pool, 512);
    GenerationRequest o;
    o.prompt = r.prompt;
    o.max_tokens = r.max_tokens;
    o.sampling = r.sampling;
    return gen.generate(o)->tokens;
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  ThreadPool pool{2};
};

const char* kPrompts[16] = {
    "Once upon a time", "Lily and Ben",  "The sun was",    "One day, a little",  "Tom had a big",
    "The cat",          "In the park",   "Mom said",       "There was a dog",    "The bird sang",
    "A girl named Sue", "Max wanted to", "The little boy", "It was a sunny day", "Sam and Amy",
    "The big red ball"};

TEST_F(ServingEngine, SixteenConcurrentRequestsEqualEachAlone) {
  EngineConfig cfg;
  cfg.kv_blocks = 256;
  cfg.max_running = 16;
  cfg.max_batch_tokens = 64;
  Engine engine(*model, *tok, pool, cfg);
  std::vector<std::shared_ptr<StreamHandle>> handles;
  std::vector<GenerationRequest> requests;
  for (const char* p : kPrompts) {
    requests.push_back(greedy(p, 48));
    handles.push_back(*engine.submit(requests.back()));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    const Collected c = collect(handles[i]);
    EXPECT_EQ(c.tokens, alone(requests[i])) << kPrompts[i];
    EXPECT_EQ(c.last.finish_reason, FinishReason::kLength);
    EXPECT_EQ(c.last.completion_tokens, 48);
  }
  EXPECT_GT(engine.stats().steps.load(), 48);
}

// Planning steps by time (a step target much smaller than the token budget) changes only how
// prompts are chunked: every request's tokens equal it alone, and the chunks were small.
TEST_F(ServingEngine, StepsPlannedByTimeKeepEveryOutput) {
  EngineConfig cfg;
  cfg.kv_blocks = 256;
  cfg.max_running = 16;
  cfg.max_batch_tokens = 512;
  cfg.max_step_ms = -1;  // auto: three times the decodes' predicted time
  Engine engine(*model, *tok, pool, cfg);
  std::vector<std::shared_ptr<StreamHandle>> handles;
  std::vector<GenerationRequest> requests;
  for (const char* p : kPrompts) {
    requests.push_back(greedy(p, 24));
    handles.push_back(*engine.submit(requests.back()));
  }
  for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(collect(handles[i]).tokens, alone(requests[i])) << kPrompts[i];
  int64_t chunks = 0;
  for (const auto& b : engine.stats().prefill_chunks) chunks += b.load();
  EXPECT_GE(chunks, 16);
}

// Quantized weights take the integer-dot path; batching must not change its arithmetic either.
TEST_F(ServingEngine, QuantizedModelIsBatchInvariantToo) {
  CreateModelOptions o;
  o.type = DType::Q4_0;
  const std::string path = test::temp_path("q4_0.gguf");
  ASSERT_TRUE(create_random_model(o, path).is_ok());
  auto qmodel = std::move(Model::load(path)).value();
  auto qtok = std::move(Tokenizer::from_gguf(qmodel->file())).value();
  EngineConfig cfg;
  cfg.max_batch_tokens = 32;
  Engine engine(*qmodel, *qtok, pool, cfg);
  std::vector<GenerationRequest> requests;
  std::vector<std::shared_ptr<StreamHandle>> handles;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest r;
    r.prompt = qtok->encode(kPrompts[i], true);
    r.max_tokens = 24;
    r.sampling.temperature = 0;
    requests.push_back(r);
    handles.push_back(*engine.submit(r));
  }
  for (size_t i = 0; i < handles.size(); ++i) {
    Generator gen(*qmodel, *qtok, pool, 256);
    GenerationRequest opt;
    opt.prompt = requests[i].prompt;
    opt.max_tokens = 24;
    opt.sampling.temperature = 0;
    EXPECT_EQ(collect(handles[i]).tokens, gen.generate(opt)->tokens) << kPrompts[i];
  }
  std::remove(path.c_str());
}

TEST_F(ServingEngine, PreemptionUnderPressureKeepsOutputsExact) {
  EngineConfig cfg;
  cfg.kv_blocks = 10;  // 160 positions for 6 requests of ~70 tokens each
  cfg.block_size = 16;
  cfg.max_running = 6;
  Engine engine(*model, *tok, pool, cfg);
  std::vector<GenerationRequest> requests;
  std::vector<std::shared_ptr<StreamHandle>> handles;
  {
    // No step runs until all six are queued, so they overlap however the threads are scheduled.
    TurnQueue::Seat seat(pool.turns());
    const TurnQueue::Turn hold = seat.take();
    for (int i = 0; i < 6; ++i) {
      requests.push_back(greedy(kPrompts[i], 64));
      handles.push_back(*engine.submit(requests.back()));
    }
  }
  int preempted = 0;
  for (size_t i = 0; i < handles.size(); ++i) {
    const Collected c = collect(handles[i]);
    EXPECT_EQ(c.tokens, alone(requests[i])) << kPrompts[i];
    preempted += c.last.preemptions;
  }
  EXPECT_GT(engine.stats().preemptions.load(), 0);
  EXPECT_GT(preempted, 0);
  // The gauge is updated at the engine's next step: the last event may come first.
  EXPECT_TRUE(test::wait_until([&] { return engine.stats().kv_blocks_used.load() == 0; }))
      << "blocks still held: " << engine.stats().kv_blocks_used.load();
}

TEST_F(ServingEngine, SecondTurnReusesTheFirstTurnsKv) {
  EngineConfig cfg;
  cfg.kv_blocks = 64;
  Engine engine(*model, *tok, pool, cfg);
  GenerationRequest turn1 = greedy("Once upon a time, there was a little girl named Lily. She", 40);
  const Collected c1 = collect(*engine.submit(turn1));
  EXPECT_EQ(c1.last.cached_tokens, 0);
  GenerationRequest turn2 = turn1;
  turn2.prompt.insert(turn2.prompt.end(), c1.tokens.begin(), c1.tokens.end());
  const auto more = tok->encode(" Then she said", false);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  const Collected c2 = collect(*engine.submit(turn2));
  const int64_t turn1_tokens = int64_t(turn1.prompt.size() + c1.tokens.size());
  EXPECT_GE(c2.last.cached_tokens, turn1_tokens - cfg.block_size);
  EXPECT_EQ(c2.tokens, alone(turn2));  // reused KV gives the same continuation
  EXPECT_GE(engine.stats().prefix_hit_tokens.load(), c2.last.cached_tokens);

  // With the prefix cache off nothing is reused.
  cfg.prefix_cache = false;
  Engine cold(*model, *tok, pool, cfg);
  collect(*cold.submit(turn1));
  EXPECT_EQ(collect(*cold.submit(turn2)).last.cached_tokens, 0);
}

// Speculation in continuous batching: n-gram drafts verified in the ragged batch give every
// request the tokens it gets alone (greedy and seeded sampling), with drafts and rejections
// along the way, and the blocks published for the prefix cache hold accepted tokens only.
EngineConfig speculating(int64_t max_running, SpecMethod method = SpecMethod::kNgram) {
  EngineConfig cfg;
  cfg.kv_blocks = 128;
  cfg.max_running = max_running;
  cfg.spec.method = method;
  cfg.spec.exit_layer = 4;  // of 5: early exit then agrees often enough to draft along the way
  return cfg;
}

const char* kRepetitive = "Lily went to the park. She saw a big dog. Lily went to the park. She saw a big";

TEST_F(ServingEngine, SpeculativeRequestsEqualEachAlone) {
  // The model drafters draft for all four sequences in one batch per position: a q4_0
  // self-draft (in the sequences' own caches, or in a KV pool of its own) and the first four
  // layers (in the sequences' own caches).
  auto draft = load_draft_model({"", "q4_0"}, test::shared_path("models/stories260K.gguf"), tok->vocab());
  ASSERT_TRUE(draft.is_ok()) << draft.status().message();
  for (auto [method, own_cache] : {std::pair{SpecMethod::kNgram, false}, std::pair{SpecMethod::kDraft, false},
                                   std::pair{SpecMethod::kDraft, true}, std::pair{SpecMethod::kEarlyExit, false}}) {
    SCOPED_TRACE(std::string(spec_method_name(method)) + (own_cache ? " (own cache)" : ""));
    EngineConfig cfg = speculating(4, method);
    cfg.spec.share_target_cache = !own_cache;
    Engine engine(*model, *tok, pool, cfg, draft->get());
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 4; ++i) {
      GenerationRequest r = greedy(i % 2 ? kRepetitive : kPrompts[i], 48);
      if (i >= 2) r.sampling.temperature = 0.8f, r.sampling.seed = uint64_t(i);
      requests.push_back(r);
    }
    std::vector<std::shared_ptr<StreamHandle>> handles;
    for (const auto& r : requests) handles.push_back(*engine.submit(r));
    for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(collect(handles[i]).tokens, alone(requests[i])) << i;
    const EngineStats& st = engine.stats();
    EXPECT_GT(st.spec_drafted.load(), 0);
    EXPECT_GT(st.spec_accepted.load(), 0);
    EXPECT_LT(st.spec_accepted.load(), st.spec_drafted.load()) << "no rejection: the test checks less";
    int64_t finished_with_drafts = 0;
    for (const auto& bucket : st.spec_acceptance) finished_with_drafts += bucket.load();
    EXPECT_GT(finished_with_drafts, 0);
    // The gauge is updated at the engine's next step: the last event may come first.
    EXPECT_TRUE(test::wait_until([&] { return st.kv_blocks_used.load() == 0; }))
        << "blocks still held: " << st.kv_blocks_used.load();
  }
}

TEST_F(ServingEngine, SpeculationPublishesOnlyAcceptedTokens) {
  // The second turn reuses the first turn's blocks, drafted and verified along the way: its
  // continuation must be the one computed from scratch.
  Engine engine(*model, *tok, pool, speculating(4));
  GenerationRequest turn1 = greedy(kRepetitive, 40);
  const Collected c1 = collect(*engine.submit(turn1));
  ASSERT_GT(engine.stats().spec_drafted.load(), 0);
  GenerationRequest turn2 = turn1;
  turn2.prompt.insert(turn2.prompt.end(), c1.tokens.begin(), c1.tokens.end());
  const auto more = tok->encode(" Then she said", false);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  const Collected c2 = collect(*engine.submit(turn2));
  EXPECT_GE(c2.last.cached_tokens, int64_t(turn1.prompt.size() + c1.tokens.size()) - 16);
  EXPECT_EQ(c2.tokens, alone(turn2));
}

TEST_F(ServingEngine, ARequestCanTurnSpeculationOff) {
  Engine engine(*model, *tok, pool, speculating(4));
  GenerationRequest r = greedy(kRepetitive, 32);
  r.speculative = false;
  EXPECT_EQ(collect(*engine.submit(r)).tokens, alone(r));
  EXPECT_EQ(engine.stats().spec_drafted.load(), 0);
}

TEST_F(ServingEngine, ManyStreamsDoNotSpeculate) {
  // Past four decoding sequences, or while prompts wait or are read, a step is compute-bound:
  // nobody drafts. Sixteen at once draft only as the last stragglers finish; four at a time
  // draft once the queue has emptied (the last four requests, all along).
  auto drafted_with = [&](int64_t max_running) {
    EngineConfig cfg = speculating(max_running);
    cfg.max_batch_tokens = 512;
    Engine engine(*model, *tok, pool, cfg);
    std::vector<std::shared_ptr<StreamHandle>> handles;
    std::vector<GenerationRequest> requests;
    {
      // All sixteen are queued before the engine's first step (it steps on the pool's turns):
      // otherwise a loaded machine lets it start on the first few, which draft.
      TurnQueue::Seat seat(pool.turns());
      auto turn = seat.take();
      for (int i = 0; i < 16; ++i) {
        requests.push_back(greedy(kRepetitive, 16));
        handles.push_back(*engine.submit(requests.back()));
      }
    }
    for (size_t i = 0; i < handles.size(); ++i) EXPECT_EQ(collect(handles[i]).tokens, alone(requests[i]));
    return engine.stats().spec_drafted.load();
  };
  const int64_t four_at_a_time = drafted_with(4), sixteen = drafted_with(16);
  EXPECT_GE(four_at_a_time, 16);
  EXPECT_LT(2 * sixteen, four_at_a_time);  // only while admission or the last stragglers leave few decodes
}

TEST_F(ServingEngine, CancelledRequestFreesItsBlocks) {
  EngineConfig cfg;
  Engine engine(*model, *tok, pool, cfg);
  // Thousands of steps long: a stalled test thread cannot let it end on its own before the cancel.
  GenerationRequest r = greedy("Once upon a time", 4000);
  r.ignore_eos = true;
  auto h = *engine.submit(r);
  StreamEvent ev;
  ASSERT_TRUE(h->next(ev, std::chrono::seconds(30)));
  h->cancel();
  const Collected rest = collect(h);
  EXPECT_EQ(rest.last.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(test::wait_until([&] { return engine.stats().kv_blocks_used.load() == 0; }))
      << "the cancelled request's blocks never came back";
}

TEST_F(ServingEngine, AdmissionLimitsAndErrors) {
  EngineConfig cfg;
  cfg.max_queued = 2;
  cfg.n_ctx = 512;
  Engine engine(*model, *tok, pool, cfg);
  // The two queued requests must still be unfinished at the third submit: a whole context each, past EOS
  // (a short one can finish on a fast machine between two submits).
  GenerationRequest endless = greedy("Once upon a time", 510);
  endless.ignore_eos = true;
  auto a = engine.submit(endless);
  auto b = engine.submit(endless);
  auto c = engine.submit(endless);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  (*a)->cancel();
  (*b)->cancel();
  collect(*a);
  collect(*b);
  GenerationRequest long_prompt = greedy("a", 1);
  long_prompt.prompt.assign(512, 300);
  auto d = engine.submit(long_prompt);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("context window"), std::string::npos);
  GenerationRequest bad = greedy("a", 1);
  bad.sampling.top_p = 2;
  EXPECT_NE(engine.submit(bad).status().message().find("top_p"), std::string::npos);
}

TEST_F(ServingEngine, WaitingPastTheDeadlineTimesOut) {
  EngineConfig cfg;
  cfg.max_running = 1;
  Engine engine(*model, *tok, pool, cfg);
  std::shared_ptr<StreamHandle> busy, late_h;
  {
    // Both are queued before the engine's first step, which comes once the deadline has passed.
    TurnQueue::Seat seat(pool.turns());
    auto turn = seat.take();
    busy = *engine.submit(greedy("Once upon a time", 300));
    GenerationRequest late = greedy("Lily", 5);
    late.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    late_h = *engine.submit(late);
    ASSERT_TRUE(test::wait_until([&] { return std::chrono::steady_clock::now() > *late.deadline; }));
  }
  const Collected c = collect(late_h);
  EXPECT_EQ(c.last.finish_reason, FinishReason::kTimeout);
  EXPECT_TRUE(c.tokens.empty());
  busy->cancel();
  collect(busy);
  EXPECT_EQ(engine.stats().finished_with(FinishReason::kTimeout), 1);
}

TEST_F(ServingEngine, HigherPriorityWaitingRequestRunsFirst) {
  EngineConfig cfg;
  cfg.max_running = 1;
  Engine engine(*model, *tok, pool, cfg);
  GenerationRequest low = greedy("Lily", 5), high = greedy("Ben", 5);
  high.priority = 5;
  std::shared_ptr<StreamHandle> first, low_h, high_h;
  {
    // All three wait before the engine's first step (else a loaded machine may finish the first
    // and admit the low one before the high one is submitted): priority alone orders them.
    TurnQueue::Seat seat(pool.turns());
    auto turn = seat.take();
    first = *engine.submit(greedy("Once upon a time", 200));
    low_h = *engine.submit(low);
    high_h = *engine.submit(high);
  }
  const Collected f = collect(first);
  // One slot, given by priority, then arrival: the high one first, the low one after both.
  // (Queue times come from the engine, so thread scheduling in this test cannot reorder them.)
  const Collected l = collect(low_h), h = collect(high_h);
  EXPECT_LT(h.last.queue_seconds, f.last.queue_seconds);
  EXPECT_LT(f.last.queue_seconds, l.last.queue_seconds);
  EXPECT_EQ(l.last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.last.finish_reason, FinishReason::kLength);
}

// A sliding-window model (stories260K given a 24-token window): the engine hands back the
// blocks the window has left behind, holding a few blocks however long the sequence, and
// still generates what the single-sequence generator (contiguous cache, nothing released) does.
TEST_F(ServingEngine, SlidingWindowReleasesBlocksBehindTheWindow) {
  auto file = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(file.is_ok());
  auto metadata = (*file)->metadata();
  metadata.emplace_back("llama.attention.sliding_window", GgufValue::u32(24));
  auto tensors = (*file)->tensors();
  auto windowed = GgufFile::from_parts("stories-swa", std::move(metadata), std::move(tensors),
                                       std::shared_ptr<const GgufFile>(std::move(file).value()));
  ASSERT_TRUE(windowed.is_ok());
  auto swa = Model::from_gguf(std::move(windowed).value());
  ASSERT_TRUE(swa.is_ok()) << swa.status().message();
  ASSERT_EQ((*swa)->spec().sliding_window, 24);

  EngineConfig cfg;
  cfg.kv_blocks = 64;
  cfg.block_size = 16;
  Engine engine(**swa, *tok, pool, cfg);
  const GenerationRequest r = greedy("Once upon a time", 300);
  auto h = *engine.submit(r);
  std::vector<int32_t> tokens;
  int64_t most_blocks = 0;
  StreamEvent ev;
  while (h->next(ev, std::chrono::seconds(60))) {
    tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
    most_blocks = std::max(most_blocks, engine.stats().kv_blocks_used.load());
    if (ev.finished) break;
  }
  ASSERT_EQ(tokens.size(), 300u);
  EXPECT_LE(most_blocks, 4) << "a 24-token window needs at most 3 blocks of 16, plus the one being filled";

  Generator gen(**swa, *tok, pool, 512);
  GenerationRequest o;
  o.prompt = r.prompt;
  o.max_tokens = r.max_tokens;
  o.sampling = r.sampling;
  EXPECT_EQ(tokens, gen.generate(o)->tokens);
  EXPECT_NE(tokens, alone(r)) << "the window made no difference: is it applied?";
}

}  // namespace
}  // namespace autoglm
