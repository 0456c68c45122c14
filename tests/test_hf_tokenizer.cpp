// Hugging Face tokenizer.json files (../shared/models/hf-tokenizers) against the ids and
// decoded texts of an independent implementation (../shared/golden/tokenizers).
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

using nlohmann::json;

std::vector<int32_t> ids_of(const json& j) {
  return j.get<std::vector<int32_t>>();
}

// Where the golden file records that the oracle's regex engine disagrees with Unicode
// White_Space (U+0085, U+FEFF), the Hugging Face library gives llama.cpp's ids; elsewhere
// (NFC, BOS) the oracle's ids are the Hugging Face ones.
std::vector<int32_t> expected_ids(const json& c) {
  if (c.contains("oracle_disagreement") && c["oracle_disagreement"].contains("ids") &&
      c["oracle_disagreement"].value("explanation", "").rfind("JS regex", 0) == 0)
    return ids_of(c["oracle_disagreement"]["ids"]["llama_cpp"]);
  return ids_of(c["ids"]);
}

void check_golden(const std::string& name) {
  const std::string dir = "models/hf-tokenizers/" + name, golden = "golden/tokenizers/" + name + ".json";
  AUTOGLM_REQUIRE_SHARED(dir + "/tokenizer.json");
  AUTOGLM_REQUIRE_SHARED(golden);
  auto tok = load_hf_tokenizer(test::shared_path(dir));
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const json cases = json::parse(test::read_file(test::shared_path(golden)))["cases"];
  ASSERT_EQ(cases.size(), 137u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& c = cases[i];
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = expected_ids(c);
    // What the post-processor adds around the ids, as the oracle saw it.
    std::vector<int32_t> want_special = ids_of(c["ids_with_special"]);
    const size_t added = want_special.size() - ids_of(c["ids"]).size();
    want_special.resize(added);
    want_special.insert(want_special.end(), want.begin(), want.end());

    const auto ids = (*tok)->encode(text, /*add_special=*/false, /*parse_special=*/true);
    const auto ids_special = (*tok)->encode(text, /*add_special=*/true, /*parse_special=*/true);
    const std::string decoded = (*tok)->decode(ids_of(c["ids"]), /*special=*/true);
    const bool ok = ids == want && ids_special == want_special && decoded == c["decoded"].get<std::string>();
    failures += !ok;
    EXPECT_EQ(ids, want) << name << " case " << i << ": '" << text << "'";
    EXPECT_EQ(ids_special, want_special) << name << " case " << i;
    EXPECT_EQ(decoded, c["decoded"].get<std::string>()) << name << " case " << i;
    EXPECT_LE((*tok)->min_tokens(text.size()), ids.size()) << name << " case " << i << ": a bound too high";
  }
  EXPECT_EQ(failures, 0) << name;
}

TEST(HfTokenizer, Qwen3GoldenCases) {
  check_golden("qwen3");
}
TEST(HfTokenizer, Llama3GoldenCases) {
  check_golden("llama3");
}
TEST(HfTokenizer, MistralSentencePieceStyleGoldenCases) {
  check_golden("llama2");
}

TEST(HfTokenizer, ConfigGivesSpecialTokensAndTemplate) {
  AUTOGLM_REQUIRE_SHARED("models/hf-tokenizers/qwen3/tokenizer.json");
  auto tok = load_hf_tokenizer(test::shared_path("models/hf-tokenizers/qwen3"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const Vocab& v = (*tok)->vocab();
  EXPECT_EQ(v.eos, v.find("<|im_end|>"));
  EXPECT_EQ(v.pad, v.find("<|endoftext|>"));
  EXPECT_EQ(v.bos, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_NE(v.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(v.pre, "qwen2");
  // Non-special added tokens are matched even without parse_special.
  const auto ids = (*tok)->encode("<think>x</think>", false, false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), v.find("<think>"));
  EXPECT_EQ(ids.back(), v.find("</think>"));
}

// Text dense with markers costs its length times the number of added tokens, not the square
// of its length: 40 000 markers in 480 kB (each one scanned the rest of the text before).
TEST(HfTokenizer, MarkerDenseTextIsLinear) {
  AUTOGLM_REQUIRE_SHARED("models/hf-tokenizers/qwen3/tokenizer.json");
  auto tok = load_hf_tokenizer(test::shared_path("models/hf-tokenizers/qwen3"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const Vocab& v = (*tok)->vocab();
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "<|im_start|>x";
  const auto ids = (*tok)->encode(text, false, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.find("<|im_start|>")), 40000);
  const auto plain = (*tok)->encode(text, false, false);  // not parsed: ordinary text tokens
  EXPECT_EQ(std::count(plain.begin(), plain.end(), v.find("<|im_start|>")), 0);
}

TEST(HfTokenizer, StreamingPiecesJoinToTheDecodedText) {
  AUTOGLM_REQUIRE_SHARED("models/hf-tokenizers/llama2/tokenizer.json");
  auto tok = load_hf_tokenizer(test::shared_path("models/hf-tokenizers/llama2"));
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const std::string text = "Hello wörld, 你好 🦙!";
  const auto ids = (*tok)->encode(text, false, false);
  IncrementalDetokenizer stream(**tok);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  EXPECT_EQ(streamed, " " + text);  // the Strip decoder only trims a whole text's start
  EXPECT_EQ((*tok)->decode(ids), text);
}

// The components the three real files do not use, on a small hand-made vocabulary.
std::unique_ptr<Tokenizer> tiny(const json& extra) {
  json t = {{"model",
             {{"type", "BPE"},
              {"vocab",
               {{"<unk>", 0},
                {"a", 1},
                {"b", 2},
                {"\u2581", 3},
                {"\u2581a", 4},
                {"ab", 5},
                {"1", 6},
                {"2", 7},
                {"\u2581ab", 8},
                {"12", 9},
                {"x", 10}}},
              {"merges", {"\u2581 a", "a b", "\u2581a b", "1 2"}},
              {"unk_token", "<unk>"},
              {"fuse_unk", true}}},
            {"added_tokens",
             {{{"id", 11}, {"content", "<m>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
              {{"id", 12}, {"content", "xx"}, {"special", false}, {"single_word", true}}}}};
  if (extra.is_object()) t.update(extra);
  auto tok = parse_hf_tokenizer(t.dump(), "", "tiny");
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  return tok ? std::move(tok).value() : nullptr;
}

TEST(HfTokenizer, MetaspaceDigitsAndUnknownRuns) {
  auto tok =
      tiny({{"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}}},
            {"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}},
                {{"type", "Digits"}, {"individual_digits", true}}}}}},
            {"decoder", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}}}});
  ASSERT_TRUE(tok);
  // NFKC folds the full-width letters, Lowercase the capitals; Metaspace prepends and splits
  // on the marker; Digits keeps "12" from merging; unknown "zz" is one fused <unk>.
  EXPECT_EQ(tok->encode("ＡB ab 12 zzb", false, true), (std::vector<int32_t>{8, 8, 3, 6, 7, 3, 0, 2}));
  EXPECT_EQ(tok->decode({8, 8, 3, 6, 7}), "ab ab 12");  // the leading marker is dropped
}

TEST(HfTokenizer, AddedTokenStripAndSingleWordRules) {
  auto tok = tiny(json::object());
  ASSERT_TRUE(tok);
  // lstrip/rstrip: the spaces around <m> belong to it; single_word: "xx" inside a word stays text.
  EXPECT_EQ(tok->encode("ab <m> ab", false, true), (std::vector<int32_t>{5, 11, 5}));
  EXPECT_EQ(tok->encode("axx", false, true), (std::vector<int32_t>{1, 10, 10}));
  EXPECT_EQ(tok->encode("a xx b", false, true), (std::vector<int32_t>{1, 0, 12, 0, 2}));
  // Special tokens are matched only when asked; non-special added tokens always.
  EXPECT_EQ(tok->encode("<m>", false, false).front(), 0);
}

// Corrupt files: each error names the file and the field.
void expect_error(const std::string& tokenizer_json, const std::string& config_json, const std::string& needle) {
  auto tok = parse_hf_tokenizer(tokenizer_json, config_json, "dir");
  ASSERT_FALSE(tok.is_ok()) << "accepted: " << tokenizer_json;
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
}

TEST(HfTokenizer, CorruptFilesNameFileAndField) {
  const std::string ok_model = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  ASSERT_TRUE(parse_hf_tokenizer("{" + ok_model + "}", "", "dir").is_ok());
  expect_error("{not json", "", "dir/tokenizer.json: not valid JSON");
  expect_error("{}", "", "dir/tokenizer.json: no \"model\"");
  expect_error(R"({"model": {"type": "WordPiece", "vocab": {}}})", "", "model.type 'WordPiece'");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "", "model.vocab[\"a\"]");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})", "", "model.merges[0]");
  expect_error("{" + ok_model + R"(, "added_tokens": [{"id": -5, "content": "x"}]})", "", "added_tokens[0]");
  expect_error("{" + ok_model + R"(, "normalizer": {"type": "Bogus"}})", "", "normalizer (Bogus)");
  expect_error("{" + ok_model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}}})", "",
               "pre_tokenizer (Split)");
  expect_error("{" + ok_model + R"(, "decoder": {"type": "Sequence", "decoders": [{"type": "Nope"}]}})", "",
               "decoder.decoders[0] (Nope)");
  expect_error("{" + ok_model + "}", "[1]", "dir/tokenizer_config.json: expected a JSON object");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "ignore_merges": "yes"}})", "",
               "has a value of the wrong type");
  expect_error("{" + ok_model + "}", R"({"eos_token": "</s>"})", "eos_token '</s>'");
}

TEST(HfTokenizer, MissingFolderNamesThePath) {
  auto tok = load_hf_tokenizer("/nonexistent/folder");
  ASSERT_FALSE(tok.is_ok());
  EXPECT_NE(tok.status().message().find("/nonexistent/folder/tokenizer.json"), std::string::npos);
}

}  // namespace
}  // namespace autoglm
