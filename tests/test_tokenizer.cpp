// Tokenizers against llama.cpp's expectations for every vocabulary in ../shared/models/vocab.
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

std::vector<std::string> split_inputs(const std::string& data) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  for (size_t hit; (hit = data.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    out.push_back(data.substr(pos, hit - pos));
  return out;
}

std::vector<std::vector<int32_t>> parse_outputs(const std::string& data) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(data);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    for (int64_t id; ids >> id;) row.push_back(int32_t(id));
    out.push_back(row);
  }
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& rel) {
  auto file = GgufFile::open(test::shared_path(rel));
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file) return nullptr;
  auto tok = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return tok ? std::move(tok).value() : nullptr;
}

// Runs every .inp string of `vectors` through the tokenizer of `vocab_file`.
void check_vectors(const std::string& vocab_file, const std::string& vectors) {
  const std::string inp = "models/vocab/" + vectors + ".inp", out = "models/vocab/" + vectors + ".out";
  AUTOGLM_REQUIRE_SHARED(vocab_file);
  AUTOGLM_REQUIRE_SHARED(inp);
  auto tok = load_tokenizer(vocab_file);
  ASSERT_TRUE(tok);
  const auto inputs = split_inputs(test::read_file(test::shared_path(inp)));
  const auto expected = parse_outputs(test::read_file(test::shared_path(out)));
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_GT(inputs.size(), 40u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    if (ids != expected[i]) ++failures;
    EXPECT_EQ(ids, expected[i]) << vocab_file << " case " << i << ": '" << inputs[i] << "'";
    EXPECT_LE(tok->min_tokens(inputs[i].size()), ids.size()) << vocab_file << " case " << i << ": a bound too high";
  }
  EXPECT_EQ(failures, 0);
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchesReferenceTokenization) {
  const std::string name = std::string("ggml-vocab-") + GetParam() + ".gguf";
  check_vectors("models/vocab/" + name, name);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, VocabVectors,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                                           "falcon", "gpt-2", "mpt", "starcoder", "refact"),
                         [](const auto& info) { return test::param_name(info.param); });

// The R1-distill vectors use the Qwen2 vocabulary.
TEST(VocabVectors, DeepseekR1QwenOnQwen2Vocab) {
  check_vectors("models/vocab/ggml-vocab-qwen2.gguf", "ggml-vocab-deepseek-r1-qwen.gguf");
}

// The 32000-token Llama 2 vocabulary inside the tiny random model is the llama-spm one.
TEST(VocabVectors, Llama2TinyRandomModelVocab) {
  check_vectors("models/llama-2-tiny-random.gguf", "ggml-vocab-llama-spm.gguf");
}

TEST(Tokenizer, WordPieceVocabIsRejectedClearly) {
  AUTOGLM_REQUIRE_SHARED("models/vocab/ggml-vocab-bert-bge.gguf");
  auto file = GgufFile::open(test::shared_path("models/vocab/ggml-vocab-bert-bge.gguf"));
  ASSERT_TRUE(file.is_ok());
  auto tok = Tokenizer::from_gguf(**file);
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("'bert' is not supported"), std::string::npos) << tok.status().message();
}

TEST(Tokenizer, StoriesPromptWithBos) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto tok = load_tokenizer("models/stories260K.gguf");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->token_to_piece(403), " Once");
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
}

TEST(Tokenizer, ControlTokensParsedOnlyWhenAsked) {
  AUTOGLM_REQUIRE_SHARED("models/vocab/ggml-vocab-qwen2.gguf");
  auto tok = load_tokenizer("models/vocab/ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(tok);
  const int32_t im_start = tok->vocab().find("<|im_start|>");
  ASSERT_GE(im_start, 0);
  const auto parsed = tok->encode("<|im_start|>user", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed[0], im_start);
  const auto plain = tok->encode("<|im_start|>user", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>user");
}

// A prompt over its cap is known to be so without encoding all of it: encoding stops between
// words once past the cap (what is out is the full encoding's start), and a text whose length
// alone passes it is bounded from below.
TEST(Tokenizer, EncodingStopsOncePastItsCap) {
  AUTOGLM_REQUIRE_SHARED("models/vocab/ggml-vocab-qwen2.gguf");
  auto tok = load_tokenizer("models/vocab/ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(tok);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "word" + std::to_string(i) + " ";
  const auto full = tok->encode(text, false);
  const auto capped = tok->encode(text, false, false, {}, 100);
  EXPECT_GT(capped.size(), 100u);
  EXPECT_LT(capped.size(), 200u) << "encoding went on past the cap";
  EXPECT_TRUE(std::equal(capped.begin(), capped.end(), full.begin()));
  EXPECT_LE(tok->min_tokens(text.size()), full.size());
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto spm = load_tokenizer("models/stories260K.gguf");
  ASSERT_TRUE(spm);
  EXPECT_GT(spm->min_tokens(text.size()), 100u) << "an SPM vocabulary with unk and byte tokens has a bound";
  EXPECT_LE(spm->min_tokens(text.size()), spm->encode(text, false).size());
}

TEST(Tokenizer, BpeRoundTripsBytes) {
  AUTOGLM_REQUIRE_SHARED("models/vocab/ggml-vocab-llama-bpe.gguf");
  auto tok = load_tokenizer("models/vocab/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(tok);
  const std::string text = "Hello, wörld! 你好 🦙\n\tcode: x += 1;";
  EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
}

TEST(IncrementalDetokenizer, NeverSplitsACharacter) {
  AUTOGLM_REQUIRE_SHARED("models/llama-2-tiny-random.gguf");
  auto tok = load_tokenizer("models/llama-2-tiny-random.gguf");
  ASSERT_TRUE(tok);
  const std::string text = "a 🦙 é 你好";
  const auto ids = tok->encode(text, false);
  IncrementalDetokenizer detok(*tok);
  std::string streamed;
  bool saw_partial = false;
  for (int32_t id : ids) {
    const std::string piece = detok.push(id);
    if (piece.empty()) saw_partial = true;
    // Every emitted chunk is whole UTF-8 on its own.
    for (size_t i = 0; i < piece.size();) {
      const auto b = static_cast<unsigned char>(piece[i]);
      const size_t n = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
      ASSERT_LE(i + n, piece.size()) << "split character in chunk";
      i += n;
    }
    streamed += piece;
  }
  streamed += detok.flush();
  EXPECT_TRUE(saw_partial) << "the emoji should arrive as byte tokens";
  EXPECT_EQ(streamed, " " + text);  // SPM adds the leading space
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// A vocabulary of named tokens only (what apply_harmony_ends reads).
Vocab named_vocab(const std::vector<std::string>& pieces) {
  Vocab v;
  v.pieces = pieces;
  for (size_t i = 0; i < pieces.size(); ++i) {
    v.index[pieces[i]] = int32_t(i);
    v.types.push_back(TokenType::kControl);
  }
  return v;
}

// gpt-oss: <|end|> ends a harmony message, not the generation; <|return|> and <|call|> do.
TEST(HarmonyVocab, EndIsNoEndOfGenerationReturnAndCallAre) {
  Vocab v = named_vocab({"a", "<|end|>", "<|return|>", "<|call|>", "<|start|>"});
  v.eos = 1;  // a converter that named <|end|>
  v.eot = guess_end_of_turn(v);
  apply_harmony_ends(v);
  EXPECT_FALSE(v.is_eog(1));
  EXPECT_TRUE(v.is_eog(2));
  EXPECT_TRUE(v.is_eog(3));
  EXPECT_EQ(v.eos, 2);
  Vocab other = named_vocab({"a", "<|end|>"});  // Phi-3's <|end|> (no <|return|>) stays an end of turn
  other.eot = guess_end_of_turn(other);
  apply_harmony_ends(other);
  EXPECT_TRUE(other.is_eog(1));
}

}  // namespace
}  // namespace autoglm
