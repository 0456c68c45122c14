// The prefix cache's tiers below the KV pool: blocks the pool evicts move to RAM and from there to
// disk; a conversation that returns copies them back and continues bit for bit as when computed;
// the disk tier serves a new process; a damaged or foreign file is skipped, never loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/engine.h"
#include "kv/kv_tiers.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + 7 * i);
  return v;
}

class KvTierFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_path("kv_tiers_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  KvTierOptions options(int64_t ram_bytes, uint64_t model_key = 1) const {
    return {ram_bytes, dir, 1 << 20, model_key, 2};
  }
  // The one block file of model_key 1.
  fs::path only_file() const {
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".kv") files.push_back(e.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? fs::path() : files.front();
  }
  std::string dir;
  const std::vector<uint8_t> keys = pattern(3000, 1), values = pattern(2000, 9);
};

TEST_F(KvTierFiles, BlocksGoToRamThenDiskAndComeBackAcrossARestart) {
  std::vector<uint8_t> k(keys.size()), v(values.size());
  {
    KvTiers tiers(options(6000));  // room for one block in RAM
    tiers.put(11, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
    EXPECT_EQ(tiers.stats().ram_bytes, 5000);
    EXPECT_EQ(tiers.stats().disk_bytes, 0);
    ASSERT_TRUE(tiers.take(11, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
    EXPECT_EQ(k, keys);
    EXPECT_EQ(v, values);
    EXPECT_EQ(tiers.stats().ram_hits, 1);
    EXPECT_EQ(tiers.stats().ram_bytes, 0);  // back in the pool: no second copy
    tiers.put(11, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));  // evicted again
    tiers.put(12, values.data(), int64_t(values.size()), keys.data(), int64_t(keys.size()));  // 11 spills
    EXPECT_EQ(tiers.stats().ram_bytes, 5000);
    EXPECT_GT(tiers.stats().disk_bytes, 5000);
    EXPECT_FALSE(tiers.take(13, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
    EXPECT_EQ(tiers.stats().misses, 1);
  }
  KvTiers again(options(6000));  // a new process: its RAM is empty, the disk is not
  std::fill(k.begin(), k.end(), 0);
  ASSERT_TRUE(again.take(11, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_EQ(k, keys);
  EXPECT_EQ(v, values);
  EXPECT_EQ(again.stats().disk_hits, 1);
  // A block of another size under the same hash is no match.
  std::vector<uint8_t> small(10);
  EXPECT_FALSE(again.take(11, small.data(), 5, small.data() + 5, 5));
}

// A conversation coming back from a full RAM tier: each block copied back evicts another from the
// pool into RAM; the blocks still to come back must not be pushed out by them.
TEST_F(KvTierFiles, CopyingBackMakesRoomForWhatThePoolEvictsMeanwhile) {
  KvTiers tiers(KvTierOptions{10000, "", 0, 1, 2});  // two blocks of 5000 bytes
  std::vector<uint8_t> k(keys.size()), v(values.size());
  tiers.put(1, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  tiers.put(2, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  ASSERT_TRUE(tiers.take(1, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  tiers.put(3, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));  // evicted for block 1
  EXPECT_TRUE(tiers.take(2, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
}

// Past disk_bytes the least recently used file goes: a block read back counts as used.
TEST_F(KvTierFiles, TheDiskTierKeepsTheBlocksReadBackPastItsBudget) {
  KvTiers tiers(KvTierOptions{0, dir, 10200, 1, 2});  // two files of 5000 bytes and a head
  std::vector<uint8_t> k(keys.size()), v(values.size());
  tiers.put(1, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  tiers.put(2, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  ASSERT_TRUE(tiers.take(1, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  tiers.put(3, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  EXPECT_TRUE(tiers.take(1, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_FALSE(tiers.take(2, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_TRUE(tiers.take(3, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
}

TEST_F(KvTierFiles, AFlippedByteIsDetectedAndTheFileSkipped) {
  {
    KvTiers tiers(options(0));  // straight to disk
    tiers.put(21, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  }
  const fs::path file = only_file();
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(1000);
    f.write(&c, 1);
  }
  KvTiers tiers(options(0));
  std::vector<uint8_t> k(keys.size()), v(values.size());
  EXPECT_FALSE(tiers.take(21, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_EQ(tiers.stats().disk_rejected, 1);
  EXPECT_FALSE(fs::exists(file)) << "a damaged file stays to be read again";
}

TEST_F(KvTierFiles, AnotherModelsFileIsNeverLoaded) {
  {
    KvTiers tiers(options(0, 1));
    tiers.put(31, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  }
  const fs::path file = only_file();
  { KvTiers other(options(0, 2)); }  // another model: its own folder, where the file is copied by hand
  fs::path foreign;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path() != file.parent_path()) foreign = e.path() / file.filename();
  ASSERT_FALSE(foreign.empty());
  fs::copy_file(file, foreign);
  KvTiers reopened(options(0, 2));
  std::vector<uint8_t> k(keys.size()), v(values.size());
  EXPECT_FALSE(reopened.take(31, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_EQ(reopened.stats().disk_rejected, 1);
}

// Two processes (or engines) on one model's folder: the first keeps it, so that its budget holds;
// the other runs without the disk tier (RAM still works) until the first lets go.
TEST_F(KvTierFiles, OneUserAtATimeKeepsAModelsFolder) {
  std::vector<uint8_t> k(keys.size()), v(values.size());
  auto first = std::make_unique<KvTiers>(options(6000));
  EXPECT_TRUE(first->has_disk());
  KvTiers second(options(6000));
  EXPECT_FALSE(second.has_disk());
  EXPECT_TRUE(second.enabled());  // its RAM tier
  second.put(41, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  second.flush_ram_to_disk();
  EXPECT_EQ(second.stats().disk_bytes, 0);
  first->save(42, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
  first.reset();
  KvTiers third(options(6000));
  EXPECT_TRUE(third.has_disk());
  EXPECT_TRUE(third.take(42, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_EQ(k, keys);
  EXPECT_FALSE(third.take(41, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
}

// At the end RAM's blocks go to disk, oldest first, within the disk budget.
TEST_F(KvTierFiles, FlushingRamKeepsTheNewestWithinTheDiskBudget) {
  std::vector<uint8_t> k(keys.size()), v(values.size());
  {
    KvTiers tiers(KvTierOptions{1 << 20, dir, 10200, 1, 2});  // room on disk for two
    for (uint64_t h = 1; h <= 3; ++h)
      tiers.put(h, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
    EXPECT_EQ(tiers.stats().disk_bytes, 0);
    tiers.flush_ram_to_disk();
    EXPECT_EQ(tiers.stats().ram_bytes, 0);
  }
  KvTiers again(KvTierOptions{0, dir, 10200, 1, 2});
  EXPECT_FALSE(again.take(1, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_TRUE(again.take(2, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_TRUE(again.take(3, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
}

// Within a process the engines of one model share its folder's tiers (one lock, one budget).
TEST_F(KvTierFiles, EnginesOfOneModelInAProcessShareItsTiers) {
  const std::shared_ptr<KvTiers> first = open_kv_tiers(options(6000));
  const std::shared_ptr<KvTiers> second = open_kv_tiers(options(6000));
  EXPECT_EQ(first, second);
  EXPECT_TRUE(second->has_disk());
  EXPECT_NE(open_kv_tiers(options(6000, 2)), first);  // another model: its own
  EXPECT_NE(open_kv_tiers(KvTierOptions{6000, "", 0, 1, 2}), open_kv_tiers(KvTierOptions{6000, "", 0, 1, 2}));
}

// Files still to come (the pool's) leave RAM's oldest unwritten: only what fits is written.
TEST_F(KvTierFiles, FlushingRamLeavesRoomForThePoolsNewerBlocks) {
  std::vector<uint8_t> k(keys.size()), v(values.size());
  {
    KvTiers tiers(KvTierOptions{1 << 20, dir, 10200, 1, 2});  // room on disk for two
    for (uint64_t h = 1; h <= 3; ++h)
      tiers.put(h, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
    const int64_t file = tiers.file_bytes(int64_t(keys.size() + values.size()));
    tiers.flush_ram_to_disk(file);  // one newer block to come
    EXPECT_EQ(tiers.stats().disk_bytes, file);
    tiers.save(4, keys.data(), int64_t(keys.size()), values.data(), int64_t(values.size()));
    EXPECT_EQ(tiers.stats().disk_bytes, 2 * file);
  }
  KvTiers again(KvTierOptions{0, dir, 10200, 1, 2});
  EXPECT_FALSE(again.take(2, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_TRUE(again.take(3, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
  EXPECT_TRUE(again.take(4, k.data(), int64_t(k.size()), v.data(), int64_t(v.size())));
}

// An engine over stories260K with a pool of 24 blocks: a conversation, then others that evict
// its blocks, then the conversation again.
class KvTierEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    model = std::move(Model::load(test::shared_path("models/stories260K.gguf"))).value();
    tok = std::move(Tokenizer::from_gguf(model->file())).value();
    dir = test::temp_path("kv_tier_engine_" +
                          std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  EngineConfig config(int64_t ram_bytes, bool disk) const {
    EngineConfig cfg;
    cfg.kv_blocks = 24;
    cfg.max_running = 1;
    cfg.kv_tiers.ram_bytes = ram_bytes;
    if (disk) cfg.kv_tiers.disk_dir = dir;
    cfg.kv_tiers.disk_bytes = 64 << 20;
    cfg.kv_tiers.model_key = 7;
    return cfg;
  }
  GenerationRequest story(int i) const {
    std::string text = "Once upon a time there was a little " + std::string(i % 2 ? "girl" : "boy") + " number " +
                       std::to_string(i) + ".";
    for (int s = 0; s < 9; ++s)
      text += " She went to the park with her mom and saw a big red ball " + std::to_string(s + i) + ".";
    GenerationRequest r;
    r.prompt = tok->encode(text, true);
    r.max_tokens = 12;
    r.sampling.temperature = 0;
    r.top_logprobs = 0;  // the chosen token's logprob: its logits' bits show
    return r;
  }
  struct Run {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    int32_t cached = 0;
  };
  static Run run(Engine& engine, const GenerationRequest& r) {
    Run out;
    auto handle = engine.submit(r);
    EXPECT_TRUE(handle.is_ok());
    StreamEvent ev;
    while ((*handle)->next(ev, std::chrono::seconds(60))) {
      out.tokens.insert(out.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      for (const TokenLogprob& lp : ev.logprobs) out.logprobs.push_back(lp.logprob);
      if (ev.finished) {
        out.cached = ev.cached_tokens;
        break;
      }
    }
    return out;
  }
  // The conversation, then four others that need every block of the pool.
  Run first_then_evict(Engine& engine) {
    const Run first = run(engine, story(0));
    for (int i = 1; i <= 4; ++i) run(engine, story(i));
    return first;
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  ThreadPool pool{2};
  std::string dir;
};

TEST_F(KvTierEngine, AnEvictedConversationComesBackFromRamBitForBit) {
  ASSERT_GT(story(0).prompt.size(), 6u * 16) << "the story is too short to fill blocks";
  Engine engine(*model, *tok, pool, config(64 << 20, false));
  const Run first = first_then_evict(engine);
  ASSERT_GT(engine.kv_tier_stats().bytes_in, 0) << "nothing was evicted: the test needs a smaller pool";
  const Run again = run(engine, story(0));
  EXPECT_GE(again.cached, 6 * 16);
  EXPECT_GT(engine.kv_tier_stats().ram_hits, 0);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.logprobs, first.logprobs);  // exactly: the KV copied back is the KV computed

  // Without tiers the same eviction leaves nothing: the prompt is computed again.
  Engine plain(*model, *tok, pool, config(0, false));
  first_then_evict(plain);
  const Run recomputed = run(plain, story(0));
  EXPECT_LT(recomputed.cached, again.cached);
  EXPECT_EQ(recomputed.logprobs, again.logprobs);
}

TEST_F(KvTierEngine, TheDiskTierServesTheSamePrefixToANewEngine) {
  Run first;
  {
    Engine engine(*model, *tok, pool, config(0, true));  // evicted blocks go straight to disk
    first = first_then_evict(engine);
    ASSERT_GT(engine.kv_tier_stats().disk_bytes, 0);
  }
  Engine restarted(*model, *tok, pool, config(0, true));
  const Run again = run(restarted, story(0));
  EXPECT_GE(again.cached, 6 * 16);
  EXPECT_GT(restarted.kv_tier_stats().disk_hits, 0);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.logprobs, first.logprobs);
  // Another model's key finds none of them.
  EngineConfig other = config(0, true);
  other.kv_tiers.model_key = 8;
  Engine foreign(*model, *tok, pool, other);
  EXPECT_EQ(run(foreign, story(0)).cached, 0);
}

// A graceful stop (or unload) leaves the pool's cached prefixes and RAM's on disk: none was
// evicted to disk while the engine ran, and a new engine finds both conversations there.
TEST_F(KvTierEngine, AnEngineThatEndsLeavesItsCachedPrefixesOnDisk) {
  Run first, last;
  {
    Engine engine(*model, *tok, pool, config(64 << 20, true));  // evicted blocks stay in RAM
    first = first_then_evict(engine);
    last = run(engine, story(5));
    ASSERT_GT(engine.kv_tier_stats().ram_bytes, 0);
    ASSERT_EQ(engine.kv_tier_stats().disk_bytes, 0);
  }
  Engine restarted(*model, *tok, pool, config(0, true));
  const Run again = run(restarted, story(0));  // it was in RAM
  EXPECT_GE(again.cached, 6 * 16);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.logprobs, first.logprobs);
  const Run last_again = run(restarted, story(5));  // it was in the pool
  EXPECT_GE(last_again.cached, 6 * 16);
  EXPECT_EQ(last_again.logprobs, last.logprobs);
  EXPECT_GE(restarted.kv_tier_stats().disk_hits, 12);
}

}  // namespace
}  // namespace autoglm
