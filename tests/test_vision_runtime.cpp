// Images through the public Runtime API on random vision-language models that create-model
// writes (GLM-4.1V and Qwen2.5-VL shapes, the projector found beside the model): a chat with
// an image generates what a hand-made pass (the vision tower's rows at the placeholders, M-RoPE
// positions, greedy) generates; a resent image costs no encoding and reuses its KV, another
// image of the same size does not; bad images, paths and hosts are refused naming the part.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "autoglm/model_tools.h"
#include "autoglm/runtime.h"
#include "core/base64.h"
#include "image_test_util.h"
#include "loopback_http_server.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"
#include "model/kv_cache.h"
#include "model/mrope.h"
#include "model/runner.h"
#include "runtime/runtime_parts.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::json;

std::string vlm_path(const std::string& arch) {
  const std::string path = test::temp_path("vlm-" + arch + ".gguf");
  RandomModelOptions o;
  o.arch = arch;
  o.type = "f16";
  EXPECT_TRUE(write_random_model(o, path).is_ok());
  return path;
}

std::unique_ptr<Runtime> open_vlm(const std::string& path, RuntimeOptions o = {}) {
  o.threads = 2;
  o.kv_memory_mib = 32;
  o.context_window = 2048;
  auto rt = Runtime::open(path, o);
  EXPECT_TRUE(rt.is_ok()) << rt.status().message();
  return rt.is_ok() ? std::move(rt).value() : nullptr;
}

// A w x h picture; `seed` changes its colours.
std::string png_of(int w, int h, int seed) {
  std::vector<uint8_t> rgba = test_card(w, h);
  for (size_t i = 0; i < rgba.size(); i += 4) rgba[i] = uint8_t(rgba[i] + 53 * seed);
  return encode_png(rgba, w, h);
}

std::string data_url(const std::string& png) {
  return "data:image/png;base64," + base64_encode(png.data(), png.size());
}

Request image_chat(const std::vector<std::string>& urls, const std::string& text = "Describe it.") {
  json content = json::array();
  for (const std::string& url : urls) content.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
  content.push_back({{"type", "text"}, {"text", text}});
  Conversation c;
  c.messages_json = json::array({{{"role", "user"}, {"content", content}}}).dump();
  Request r;
  r.chat = c;
  r.max_tokens = 6;
  r.sampling.temperature = 0;
  return r;
}

struct Reply {
  std::vector<int32_t> tokens;
  StreamEvent last;
};

Reply generate(Runtime& rt, const Request& r) {
  Reply out;
  auto handle = rt.submit(r);
  EXPECT_TRUE(handle.is_ok()) << handle.status().message();
  if (!handle.is_ok()) return out;
  StreamEvent ev;
  while ((*handle)->next(ev)) {
    out.tokens.insert(out.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.finished) break;
  }
  EXPECT_NE(ev.finish_reason, FinishReason::kError) << ev.error;
  out.last = ev;
  return out;
}

// The runtime's own pieces by hand: the image through the tower, its rows at the placeholder
// run, M-RoPE positions, then greedy decoding at n + delta. Returns the tokens, and (in
// `without`) the first token when the placeholders keep their own embeddings.
std::vector<int32_t> by_hand(Runtime& rt, const std::vector<int32_t>& prompt, const std::string& png, int n,
                             int32_t* without = nullptr) {
  Runtime::Parts& p = runtime_parts(rt);
  auto hold = rt.hold_steps();  // the engine's steps wait
  auto image = decode_image(png, 1 << 24);
  auto patches = preprocess_image(*image, p.projector->vision->spec().preprocess);
  auto e = VisionEncoder(*p.projector->vision, *p.pool).encode(*patches);
  EXPECT_TRUE(e.is_ok());
  const int32_t marker = p.projector->image_token;
  const int64_t first = std::find(prompt.begin(), prompt.end(), marker) - prompt.begin();
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), marker), e->n_tokens());
  const MropePositions rope = mrope_positions(int64_t(prompt.size()), {{first, e->rows, e->cols}});
  const auto run = [&](bool with_image, int steps) {
    ModelRunner runner(*p.model, *p.pool);
    ContiguousKvCache cache(p.model->spec(), int64_t(prompt.size()) + steps + 1, p.engine_config.kv_type,
                            p.model->device());
    Batch b;
    b.caches = {&cache};
    b.add_sequence_tokens(0, prompt.data(), int64_t(prompt.size()), 0, true);
    b.embeddings.assign(prompt.size(), nullptr);
    if (with_image)
      for (int64_t k = 0; k < e->n_tokens(); ++k) b.embeddings[size_t(first + k)] = e->token(k);
    b.rope_positions = rope.positions;
    std::vector<int32_t> out;
    std::vector<float> logits;
    for (int step = 0; step < steps; ++step) {
      EXPECT_TRUE(runner.forward(b, logits).is_ok());
      out.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      const int32_t pos = int32_t(prompt.size()) + step, at = int32_t(pos + rope.delta);
      b = Batch();
      b.caches = {&cache};
      b.add_sequence_tokens(0, &out.back(), 1, pos, true);
      b.rope_positions = {at, at, at};
    }
    return out;
  };
  if (without) *without = run(false, 1)[0];
  return run(true, n);
}

class VisionRuntime : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionRuntime, AChatWithAnImageGeneratesWhatTheHandMadePassDoes) {
  const std::string path = vlm_path(GetParam());
  auto rt = open_vlm(path);
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->info().projector_path, projector_path_for(path));
  const std::string png = png_of(112, 84, 1);
  const Request r = image_chat({data_url(png)});
  auto prepared = rt->prepare(r);
  ASSERT_TRUE(prepared.is_ok()) << prepared.status().message();
  const Reply reply = generate(*rt, r);
  int32_t first_without_image = -1;
  const auto want = by_hand(*rt, prepared->prompt(), png, int(reply.tokens.size()), &first_without_image);
  EXPECT_EQ(reply.tokens, want);
  EXPECT_EQ(reply.last.prompt_tokens, int32_t(prepared->prompt().size()));
  // The test sees images: one that the placeholders' own rows stand for does not all agree.
  std::printf("[vision runtime] %s: %zu prompt tokens, first token %d (%d without the image)\n", GetParam().c_str(),
              prepared->prompt().size(), want[0], first_without_image);
}

TEST_P(VisionRuntime, AResentImageIsNotEncodedAgainAndReusesItsKv) {
  auto rt = open_vlm(vlm_path(GetParam()));
  ASSERT_TRUE(rt);
  ImageCache& cache = *runtime_parts(*rt).image_cache;
  const std::string a = data_url(png_of(224, 168, 1)), b = data_url(png_of(224, 168, 2));
  const Reply first = generate(*rt, image_chat({a}));
  EXPECT_EQ(cache.hits(), 0);
  const Reply again = generate(*rt, image_chat({a}));
  EXPECT_EQ(cache.hits(), 1) << "the same image is found by its content";
  EXPECT_EQ(again.tokens, first.tokens);
  const int32_t marker = runtime_parts(*rt).projector->image_token;
  auto prepared = rt->prepare(image_chat({a}));  // finds it too
  ASSERT_TRUE(prepared.is_ok());
  EXPECT_EQ(cache.hits(), 2);
  const auto& prompt = prepared->prompt();
  const int64_t image_end = std::find(prompt.rbegin(), prompt.rend(), marker).base() - prompt.begin();
  const int64_t image_first = std::find(prompt.begin(), prompt.end(), marker) - prompt.begin();
  EXPECT_GE(again.last.cached_tokens, image_end - int64_t(runtime_parts(*rt).engine_config.block_size))
      << "the prompt's KV, the image's included, comes from the prefix cache";
  // Another picture of the same size has the same placeholder tokens: its KV is not the first's.
  const Reply other = generate(*rt, image_chat({b}));
  EXPECT_LE(other.last.cached_tokens, image_first);
  EXPECT_EQ(cache.hits(), 2);
}

INSTANTIATE_TEST_SUITE_P(Vlm, VisionRuntime, ::testing::Values("glm4v", "qwen25vl"));

// GLM-4.1V's <answer> tag is a special token: dropped from the text by default (the phone
// agent's parser needs it so, as vLLM's skip_special_tokens gives it), shown when asked.
TEST(VisionRuntimeText, SpecialTokensAreShownOnlyWhenAskedFor) {
  auto rt = open_vlm(vlm_path("glm4v"));
  ASSERT_TRUE(rt);
  const std::vector<int32_t> answer = rt->encode("<answer>", false, true);
  ASSERT_EQ(answer.size(), 1u);
  Request r = image_chat({data_url(png_of(56, 56, 1))});
  r.sampling.logit_bias = {{answer[0], 100.0f}};  // the model writes it every time
  r.max_tokens = 3;
  const auto text = [&](bool skip) {
    r.skip_special_tokens = skip;
    auto out = rt->generate_text(r);
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    return out.is_ok() ? *out : std::string();
  };
  EXPECT_EQ(text(true), "");
  EXPECT_EQ(text(false), "<answer><answer><answer>");
}

// The refusals: each names the part (or the limit, the config key).
TEST(VisionRuntimeErrors, BadImagesNameThePart) {
  const std::string path = vlm_path("glm4v");
  RuntimeOptions o;
  o.limits.images_per_request = 2;
  o.limits.image_bytes = 4096;
  auto rt = open_vlm(path, o);
  ASSERT_TRUE(rt);
  const auto refused = [&](const Request& r) {
    auto p = rt->prepare(r);
    EXPECT_FALSE(p.is_ok());
    return p.is_ok() ? std::string("(accepted)") : p.status().field() + " | " + p.status().message();
  };
  const std::string ok = data_url(png_of(56, 56, 1));
  const std::string picture = refused(image_chat({"data:image/png;base64,AAAA"}));
  EXPECT_NE(picture.find("messages[0].content[0] |"), std::string::npos) << picture;
  const std::string base64 = refused(image_chat({"data:image/png;base64,@@@"}));
  EXPECT_NE(base64.find("messages[0].content[0] |"), std::string::npos) << base64;
  const std::string three = refused(image_chat({ok, ok, ok}));
  EXPECT_NE(three.find("messages[0].content[2] |"), std::string::npos) << three;
  EXPECT_NE(three.find("limits.images_per_request"), std::string::npos) << three;
  const std::string big = refused(
      image_chat({data_url(encode_png(std::vector<uint8_t>(256 * 256 * 4, 7), 256, 256)) + std::string(8000, 'A')}));
  EXPECT_NE(big.find("limits.image_bytes"), std::string::npos) << big;
  const std::string file = refused(image_chat({"/etc/passwd"}));
  EXPECT_NE(file.find("media.allowed_local_dirs"), std::string::npos) << file;
  const std::string host = refused(image_chat({"https://example.com/a.png"}));
  EXPECT_NE(host.find("media.allowed_hosts"), std::string::npos) << host;
  EXPECT_NE(host.find("'example.com'"), std::string::npos) << host;
  // The runtime keeps serving.
  EXPECT_FALSE(generate(*rt, image_chat({ok})).tokens.empty());
}

TEST(VisionRuntimeErrors, LocalFilesUnderAnAllowedFolderAreRead) {
  const std::string dir = test::temp_path("vlm-images");
  std::filesystem::create_directories(dir);
  const std::string png = png_of(56, 56, 3);
  std::ofstream(dir + "/shot.png", std::ios::binary) << png;
  RuntimeOptions o;
  o.media.allowed_local_dirs = {dir};
  auto rt = open_vlm(vlm_path("qwen25vl"), o);
  ASSERT_TRUE(rt);
  const Reply by_file = generate(*rt, image_chat({"file://" + dir + "/shot.png"}));
  const Reply by_data = generate(*rt, image_chat({data_url(png)}));
  EXPECT_EQ(by_file.tokens, by_data.tokens);
  auto escape = rt->prepare(image_chat({dir + "/../vlm-qwen25vl.gguf"}));
  ASSERT_FALSE(escape.is_ok());
  EXPECT_NE(escape.status().message().find("media.allowed_local_dirs"), std::string::npos);
}

TEST(VisionRuntimeErrors, ImagesOfAnAllowedHostAreFetched) {
  const std::string png = png_of(56, 84, 4);
  // Serves the picture at /shot.png, anything else 404.
  test::LoopbackHttpServer host(
      [&](const test::LoopbackHttpServer::Request& req, test::LoopbackHttpServer::Response& res) {
        const bool found = req.target() == "/shot.png";
        res.result(found ? boost::beast::http::status::ok : boost::beast::http::status::not_found);
        res.body() = found ? png : "no";
      });
  RuntimeOptions o;
  o.media.allowed_hosts = {"127.0.0.1"};
  auto rt = open_vlm(vlm_path("glm4v"), o);
  ASSERT_TRUE(rt);
  const std::string base = "http://127.0.0.1:" + std::to_string(host.port());
  EXPECT_EQ(generate(*rt, image_chat({base + "/shot.png"})).tokens, generate(*rt, image_chat({data_url(png)})).tokens);
  auto missing = rt->prepare(image_chat({base + "/gone.png"}));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().field(), "messages[0].content[0]");
  EXPECT_NE(missing.status().message().find("404"), std::string::npos) << missing.status().message();
  auto tls = rt->prepare(image_chat({"https://127.0.0.1/shot.png"}));
  ASSERT_FALSE(tls.is_ok());
  EXPECT_NE(tls.status().message().find("data: URL"), std::string::npos) << tls.status().message();
}

TEST(VisionRuntimeErrors, ATextOnlyRuntimeNamesTheImagePart) {
  RuntimeOptions o;
  o.mmproj = "none";
  auto rt = open_vlm(vlm_path("glm4v"), o);
  ASSERT_TRUE(rt);
  Request r = image_chat({data_url(png_of(56, 56, 1))});
  auto p = rt->prepare(r);
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().field(), "messages[0].content[0]");
  EXPECT_NE(p.status().message().find("reads text only"), std::string::npos) << p.status().message();
}

TEST(VisionRuntimeErrors, AProjectorThatDoesNotMatchIsAStartUpError) {
  const std::string glm = vlm_path("glm4v"), qwen = vlm_path("qwen25vl");
  RuntimeOptions o;
  o.mmproj = projector_path_for(qwen);
  auto rt = Runtime::open(glm, o);
  ASSERT_FALSE(rt.is_ok());
  EXPECT_NE(rt.status().message().find(projector_path_for(qwen)), std::string::npos) << rt.status().message();
  EXPECT_NE(rt.status().message().find("does not match"), std::string::npos) << rt.status().message();
}

TEST(VisionRuntimeErrors, ATemplateWithoutImageMarkersIsNamed) {
  RuntimeOptions o;
  o.chat_template = test::temp_path("text-parts.jinja");  // renders the parts' text only
  std::ofstream(o.chat_template) << "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
                                    "{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}"
                                    "{% endfor %}{% endif %}{% endfor %}";
  auto rt = open_vlm(vlm_path("glm4v"), o);
  ASSERT_TRUE(rt);
  auto p = rt->prepare(image_chat({data_url(png_of(56, 56, 1))}));
  ASSERT_FALSE(p.is_ok());
  EXPECT_EQ(p.status().field(), "messages");
  EXPECT_NE(p.status().message().find("image markers"), std::string::npos)
      << p.status().field() << " | " << p.status().message();
}

}  // namespace
}  // namespace autoglm
