// Hugging Face folders (../shared/models/hf) against the reference engine's logits and greedy
// continuations (../shared/golden/hf-*): the folder itself, and the GGUF `convert` writes
// from it, each tokenize the prompts, render the chat template and reproduce the logits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "float_activations.h"
#include "golden_util.h"
#include "model/convert.h"
#include "model/model.h"
#include "model/runner.h"
#include "model_test_util.h"
#include "test_util.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Greedy continuation, one token per forward pass, with an f32 KV cache.
std::vector<int32_t> greedy(const Model& m, const std::vector<int32_t>& prompt, int n_predict) {
  ThreadPool pool(2);
  ModelRunner runner(m, pool);
  ContiguousKvCache cache(m.spec(), int64_t(prompt.size()) + n_predict + 1, DType::F32);
  Batch b;
  b.caches = {&cache};
  b.add_sequence_tokens(0, prompt.data(), int64_t(prompt.size()), 0, true);
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(b, logits).is_ok());
  std::vector<int32_t> out;
  for (int step = 0; step < n_predict; ++step) {
    int32_t next = int32_t(argmax(logits.data(), m.spec().n_vocab));
    out.push_back(next);
    Batch one;
    one.caches = {&cache};
    one.add_sequence_tokens(0, &next, 1, int32_t(prompt.size()) + step, true);
    EXPECT_TRUE(runner.forward(one, logits).is_ok());
  }
  return out;
}

// The prompt as the model's tokenizer (and, for chat, its own template) turns it into ids.
std::vector<int32_t> tokenize_prompt(const Tokenizer& tok, const json& c) {
  std::string text = c["prompt_text"];
  if (c.contains("messages")) {
    auto tmpl = ChatTemplate::parse(tok.vocab().chat_template);
    EXPECT_TRUE(tmpl.is_ok()) << tmpl.status().message();
    if (!tmpl) return {};
    const Vocab& v = tok.vocab();
    ordered_json vars = {{"bos_token", v.bos >= 0 ? v.pieces[size_t(v.bos)] : ""},
                         {"eos_token", v.eos >= 0 ? v.pieces[size_t(v.eos)] : ""}};
    auto rendered = tmpl->render(ordered_json(c["messages"]), nullptr, true, vars);
    EXPECT_TRUE(rendered.is_ok()) << rendered.status().message();
    if (!rendered) return {};
    EXPECT_EQ(*rendered, c["rendered_prompt"].get<std::string>());
    return tok.encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  }
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

// Every prompt of the case: tokens, logits at the stored rows, 16 greedy tokens.
void check_against_golden(const Model& m, const Tokenizer& tok, const json& golden, const std::string& dir,
                          const std::string& label) {
  const int64_t n_vocab = golden["n_vocab"];
  ASSERT_EQ(m.spec().n_vocab, n_vocab) << label;
  for (const json& c : golden["cases"]) {
    const std::string id = label + "/" + c["id"].get<std::string>();
    const std::vector<int32_t> input = c["input_tokens"];
    EXPECT_EQ(tokenize_prompt(tok, c), input) << id;

    const auto all = test::forward_all_positions(m, input, DType::F32);
    std::vector<float> mine;
    for (int64_t pos : c["logit_positions"].get<std::vector<int64_t>>())
      mine.insert(mine.end(), all.begin() + pos * n_vocab, all.begin() + (pos + 1) * n_vocab);
    const auto ref = read_f32(test::shared_path(dir + "/" + c["logits_file"].get<std::string>()));
    ASSERT_EQ(mine.size(), ref.size()) << id;
    const Comparison cmp = compare(mine, ref, n_vocab);
    const json& tol = c["tolerance"];
    EXPECT_LE(cmp.max_abs, tol["max_abs"].get<double>()) << id << " rms " << cmp.rms << " top1 " << cmp.top1;
    EXPECT_LE(cmp.rms, tol["rms"].get<double>()) << id << " max_abs " << cmp.max_abs;
    // Top-1 must agree wherever the reference's margin exceeds twice the tolerance.
    const auto margins = c["top1_margin_at_positions"].get<std::vector<double>>();
    for (size_t r = 0; r < margins.size(); ++r)
      if (margins[r] > 2 * tol["max_abs"].get<double>()) {
        EXPECT_EQ(argmax(&mine[r * size_t(n_vocab)], n_vocab), argmax(&ref[r * size_t(n_vocab)], n_vocab))
            << id << " row " << r;
      }
    std::printf("[hf golden] %-28s max_abs %.3g rms %.3g top1 %.3f\n", id.c_str(), cmp.max_abs, cmp.rms, cmp.top1);

    const json& g = c["greedy"];
    const std::vector<int32_t> expected = g["output_tokens"];
    EXPECT_EQ(greedy(m, input, int(g["n_predict"])), expected) << id;
  }
}

class HfGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGolden, FolderMatchesReference) {
  const std::string dir = "golden/hf-" + GetParam();
  AUTOGLM_REQUIRE_SHARED(dir + "/case.json");
  const json golden = json::parse(test::read_file(test::shared_path(dir + "/case.json")));
  auto m = Model::load(test::shared_path("models/hf/" + GetParam()));
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto tok = (*m)->load_tokenizer();
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  check_against_golden(**m, **tok, golden, dir, GetParam() + "(folder)");
}

TEST_P(HfGolden, ConvertedGgufMatchesReference) {
  const std::string dir = "golden/hf-" + GetParam();
  AUTOGLM_REQUIRE_SHARED(dir + "/case.json");
  const json golden = json::parse(test::read_file(test::shared_path(dir + "/case.json")));
  const std::string out = test::temp_path(GetParam() + ".gguf");
  ThreadPool pool(2);
  auto report = convert_hf_folder(test::shared_path("models/hf/" + GetParam()), out, DType::F32, pool);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  auto m = Model::load(out);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  auto tok = (*m)->load_tokenizer();
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  check_against_golden(**m, **tok, golden, dir, GetParam() + "(gguf)");
}

// The tokenizer.* metadata convert writes, read back by the GGUF tokenizer, against the
// tokenizer.json it came from on the golden corpus (texts already in NFC: GGUF has no
// normalizer, as in llama.cpp).
TEST(ConvertedTokenizer, EncodesLikeTokenizerJson) {
  for (const std::string name : {"qwen3", "llama3", "llama2"}) {
    const std::string dir = "models/hf-tokenizers/" + name;
    AUTOGLM_REQUIRE_SHARED(dir + "/tokenizer.json");
    auto hf = load_hf_tokenizer(test::shared_path(dir));
    ASSERT_TRUE(hf.is_ok()) << hf.status().message();
    auto gguf = GgufFile::from_parts(name, tokenizer_metadata(**hf), {}, nullptr);
    ASSERT_TRUE(gguf.is_ok()) << gguf.status().message();
    auto back = Tokenizer::from_gguf(**gguf);
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    const json cases = json::parse(test::read_file(test::shared_path("golden/tokenizers/" + name + ".json")))["cases"];
    int compared = 0, differ = 0;
    for (const json& c : cases) {
      const std::string text = c["text"];
      if (c.contains("oracle_disagreement") && c["oracle_disagreement"].contains("ids")) continue;  // NFC, regex engine
      const auto want = (*hf)->encode(text, true, true);
      const auto got = (*back)->encode(text, true, true);
      ++compared;
      differ += got != want;
      EXPECT_EQ(got, want) << name << ": '" << text << "'";
      EXPECT_EQ((*back)->decode(got, true), (*hf)->decode(want, true)) << name << ": '" << text << "'";
    }
    std::printf("[converted tokenizer] %s: %d/%d cases identical\n", name.c_str(), compared - differ, compared);
    EXPECT_GT(compared, 120);
  }
}

TEST(HfFolder, GenerationConfigAndEndOfGenerationIds) {
  AUTOGLM_REQUIRE_SHARED("models/hf/llama3-tiny/generation_config.json");
  auto m = Model::load(test::shared_path("models/hf/llama3-tiny"));
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const GenerationDefaults& d = (*m)->generation_defaults();
  EXPECT_FALSE(d.greedy);
  EXPECT_DOUBLE_EQ(d.temperature.value_or(-1), 0.6);
  EXPECT_DOUBLE_EQ(d.top_p.value_or(-1), 0.9);
  EXPECT_EQ(d.eos_ids, (std::vector<int32_t>{128001, 128009}));
  auto tok = (*m)->load_tokenizer();
  ASSERT_TRUE(tok.is_ok());
  EXPECT_TRUE((*tok)->vocab().is_eog(128001));
  EXPECT_TRUE((*tok)->vocab().is_eog(128009));  // <|eot_id|>, from generation_config.json
  EXPECT_FALSE((*tok)->vocab().is_eog(128000));
}

TEST(HfFolder, BadGenerationConfigNamesTheField) {
  const std::string dir = test::temp_path("bad-genconfig");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/generation_config.json") << R"({"temperature": "hot"})";
  auto d = read_generation_config(dir);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("generation_config.json: field 'temperature'"), std::string::npos)
      << d.status().message();
}

INSTANTIATE_TEST_SUITE_P(Reference, HfGolden, ::testing::Values("qwen2-tiny", "llama3-tiny", "chatglm-tiny"),
                         [](const auto& info) { return test::param_name(info.param); });

}  // namespace
}  // namespace autoglm
