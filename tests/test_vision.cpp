// The vision-language models (GLM-4.1V / AutoGLM-Phone-9B, Qwen2.5-VL) as small random Hugging
// Face folders written here: the engine's image embeddings, and the logits of prompts with one
// and two images (M-RoPE positions, embeddings in place of the placeholder tokens, decoding
// after them at n + delta), against the float64 vision tower and decoder written from the
// Hugging Face modelling code (hf_vision_reference.h, hf_reference.h).
#include <gtest/gtest.h>

#include <functional>

#include "autoglm/model_tools.h"
#include "core/thread_pool.h"
#include "hf_folder_builder.h"
#include "hf_reference.h"
#include "hf_vision_reference.h"
#include "media/image_preprocess.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/mrope.h"
#include "model/runner.h"
#include "model/vision_encoder.h"
#include "model/vision_model.h"
#include "test_util.h"

namespace autoglm {
namespace {

constexpr int32_t kImageStart = 150, kImageToken = 151, kImageEnd = 152;  // the tests' ids
constexpr int64_t kVocab = 160;

json text_config(const std::string& arch, json mrope_section) {
  return {{"architectures", {arch}},
          {"hidden_size", 128},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 32},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"vocab_size", kVocab},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"max_position_embeddings", 512},
          {"hidden_act", "silu"},
          {"rope_scaling", {{"type", "mrope"}, {"mrope_section", mrope_section}}}};
}

// The vision_config fields both towers have.
json vision_config(int64_t depth, int64_t hidden, int64_t ff, int64_t out) {
  return {{"depth", depth},          {"hidden_size", hidden},    {"num_heads", 2},
          {"intermediate_size", ff}, {"out_hidden_size", out},   {"patch_size", 14},
          {"spatial_merge_size", 2}, {"temporal_patch_size", 2}, {"hidden_act", "silu"}};
}

// GLM-4.1V as transformers 4.5x saves it: text_config, model.language_model.*, model.visual.*.
std::string glm4v_folder() {
  json text = text_config("Glm4vForConditionalGeneration", {2, 3, 3});  // 16 rotated dims of 32
  text["partial_rotary_factor"] = 0.5;
  FolderBuilder b(text, 41);
  b.add_decoder(/*biases=*/true, /*qk_norm=*/false, /*post_norms=*/true, /*fused_mlp=*/true);
  b.rename_prefix("model.", "model.language_model.");
  const int64_t c = 64, out = 128, ff = 80;
  const std::string V = "model.visual.";
  b.add(V + "patch_embed.proj.weight", {c, 3, 2, 14, 14}, 0.05);
  b.add(V + "patch_embed.proj.bias", {c}, 0.3);
  b.add(V + "post_conv_layernorm.weight", {c}, 0.2, 1.0);
  b.add(V + "embeddings.position_embedding.weight", {16, c}, 0.5);
  for (int il = 0; il < 2; ++il) {
    const std::string B = V + "blocks." + std::to_string(il) + ".";
    b.add(B + "norm1.weight", {c}, 0.2, 1.0);
    b.add(B + "norm2.weight", {c}, 0.2, 1.0);
    b.add(B + "attn.qkv.weight", {3 * c, c}, 2.0 / 8);
    b.add(B + "attn.proj.weight", {c, c}, 1.0 / 8);
    b.add(B + "mlp.gate_proj.weight", {out, c}, 1.0 / 8);
    b.add(B + "mlp.up_proj.weight", {out, c}, 1.0 / 8);
    b.add(B + "mlp.down_proj.weight", {c, out}, 1.0 / 11);
  }
  b.add(V + "post_layernorm.weight", {c}, 0.2, 1.0);
  b.add(V + "downsample.weight", {out, c, 2, 2}, 1.0 / 16);
  b.add(V + "downsample.bias", {out}, 0.2);
  b.add(V + "merger.proj.weight", {out, out}, 1.0 / 11);
  b.add(V + "merger.post_projection_norm.weight", {out}, 0.2, 1.0);
  b.add(V + "merger.post_projection_norm.bias", {out}, 0.2);
  b.add(V + "merger.gate_proj.weight", {ff, out}, 1.0 / 11);
  b.add(V + "merger.up_proj.weight", {ff, out}, 1.0 / 11);
  b.add(V + "merger.down_proj.weight", {out, ff}, 1.0 / 9);
  json config = {{"architectures", {"Glm4vForConditionalGeneration"}},
                 {"model_type", "glm4v"},
                 {"image_token_id", kImageToken},
                 {"image_start_token_id", kImageStart},
                 {"image_end_token_id", kImageEnd},
                 {"text_config", text},
                 {"vision_config", vision_config(2, c, ff, out)}};
  config["vision_config"]["image_size"] = 56;
  config["vision_config"]["rms_norm_eps"] = 1e-5;
  b.replace_config(config);
  return b.write("vlm_glm4v", false);
}

// Qwen2.5-VL as Qwen's hub files hold it: decoder fields at the top, model.*, visual.*.
std::string qwen25vl_folder() {
  json config = text_config("Qwen2_5_VLForConditionalGeneration", {4, 6, 6});  // 32 rotated dims
  FolderBuilder b(config, 43);
  b.add_decoder(/*biases=*/true, false, false, false);
  const int64_t c = 64, out = 128, ff = 96;
  const std::string V = "visual.";
  b.add(V + "patch_embed.proj.weight", {c, 3, 2, 14, 14}, 0.05);
  for (int il = 0; il < 4; ++il) {
    const std::string B = V + "blocks." + std::to_string(il) + ".";
    b.add(B + "norm1.weight", {c}, 0.2, 1.0);
    b.add(B + "norm2.weight", {c}, 0.2, 1.0);
    b.add(B + "attn.qkv.weight", {3 * c, c}, 2.0 / 8);
    b.add(B + "attn.qkv.bias", {3 * c}, 0.3);
    b.add(B + "attn.proj.weight", {c, c}, 1.0 / 8);
    b.add(B + "attn.proj.bias", {c}, 0.2);
    for (const char* p : {"gate_proj", "up_proj"}) {
      b.add(B + "mlp." + p + ".weight", {ff, c}, 1.0 / 8);
      b.add(B + "mlp." + p + ".bias", {ff}, 0.2);
    }
    b.add(B + "mlp.down_proj.weight", {c, ff}, 1.0 / 10);
    b.add(B + "mlp.down_proj.bias", {c}, 0.2);
  }
  b.add(V + "merger.ln_q.weight", {c}, 0.2, 1.0);
  b.add(V + "merger.mlp.0.weight", {4 * c, 4 * c}, 1.0 / 16);
  b.add(V + "merger.mlp.0.bias", {4 * c}, 0.2);
  b.add(V + "merger.mlp.2.weight", {out, 4 * c}, 1.0 / 16);
  b.add(V + "merger.mlp.2.bias", {out}, 0.2);
  config["vision_start_token_id"] = kImageStart;
  config["image_token_id"] = kImageToken;
  config["vision_end_token_id"] = kImageEnd;
  config["vision_config"] = vision_config(4, c, ff, out);
  config["vision_config"]["window_size"] = 112;
  config["vision_config"]["fullatt_block_indexes"] = {1, 3};
  b.replace_config(config);
  return b.write("vlm_qwen25vl", false);
}

// A w x h picture with smooth gradients and a sharp edge (RGBA).
Image picture(int32_t w, int32_t h, uint32_t seed) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 4, 255)};
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x) {
      uint8_t* p = img.rgba.data() + (size_t(y) * size_t(w) + size_t(x)) * 4;
      p[0] = uint8_t((x * 255 / w + seed * 37) % 256);
      p[1] = uint8_t((y * 255 / h + seed * 91) % 256);
      p[2] = uint8_t(x > w / 2 ? 230 : (x * y + seed) % 200);
    }
  return img;
}

double max_abs_diff(const float* mine, const std::vector<double>& ref, double& max_ref) {
  double worst = 0;
  max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::fabs(double(mine[i]) - ref[i]));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  return worst;
}

struct EncodedImage {
  ImageEmbedding mine;
  std::vector<double> ref;
};

// The engine's and the reference's embeddings of one picture.
EncodedImage encode_both(const std::string& dir, const VisionModel& vision, const Image& image, ThreadPool& pool) {
  auto patches = preprocess_image(image, vision.spec().preprocess);
  EXPECT_TRUE(patches.is_ok()) << patches.status().message();
  VisionEncoder encoder(vision, pool);
  auto mine = encoder.encode(*patches);
  EXPECT_TRUE(mine.is_ok()) << mine.status().message();
  EncodedImage e{std::move(*mine),
                 test::HfVisionReference(dir).embed(patches->values, size_t(patches->grid_h), size_t(patches->grid_w))};
  EXPECT_EQ(e.mine.values.size(), e.ref.size());
  double max_ref = 0;
  const double err = max_abs_diff(e.mine.values.data(), e.ref, max_ref);
  std::printf("[vision] %s %dx%d: %lld tokens, max_abs %.3g (values up to %.3g)\n", dir.c_str(), image.width,
              image.height, static_cast<long long>(e.mine.n_tokens()), err, max_ref);
  EXPECT_GT(max_ref, 0.5);  // not degenerate
  EXPECT_LE(err, 2e-4 * max_ref);
  return e;
}

// A prompt: text, then per image <start> rows x cols placeholders <end> and more text.
struct Prompt {
  std::vector<int32_t> tokens;
  std::vector<ImageSpan> spans;
  std::vector<std::array<size_t, 2>> grids;
};

Prompt prompt_with(const std::vector<ImageEmbedding>& images) {
  Prompt p;
  p.tokens = {5, 7};
  for (const ImageEmbedding& e : images) {
    p.tokens.push_back(kImageStart);
    p.spans.push_back({int64_t(p.tokens.size()), e.rows, e.cols});
    p.grids.push_back({size_t(e.rows), size_t(e.cols)});
    p.tokens.insert(p.tokens.end(), size_t(e.n_tokens()), kImageToken);
    p.tokens.insert(p.tokens.end(), {kImageEnd, 9, 11});
  }
  p.tokens.insert(p.tokens.end(), {13, 17});
  return p;
}

// Each token's image row (null for text) in order.
template <typename Row>
std::vector<Row> image_rows(const Prompt& p, const std::function<Row(size_t image, int64_t k)>& row) {
  std::vector<Row> rows(p.tokens.size(), nullptr);
  for (size_t i = 0; i < p.spans.size(); ++i)
    for (int64_t k = 0; k < p.spans[i].n_tokens(); ++k) rows[size_t(p.spans[i].first + k)] = row(i, k);
  return rows;
}

// The engine's logits of every position: the whole prompt but its last token in one pass
// (M-RoPE grid positions), the last as a decode step at n + delta.
std::vector<float> engine_logits(const Model& model, const Prompt& p, const std::vector<ImageEmbedding>& images,
                                 ThreadPool& pool) {
  const int64_t n = int64_t(p.tokens.size());
  const auto rows =
      image_rows<const float*>(p, [&](size_t i, int64_t k) -> const float* { return images[i].token(k); });
  ModelRunner runner(model, pool);
  ContiguousKvCache cache(model.spec(), n + 1, DType::F32, model.device());
  Batch prefill;
  prefill.caches = {&cache};
  prefill.add_sequence_tokens(0, p.tokens.data(), n - 1, 0, false, true);
  prefill.embeddings.assign(rows.begin(), rows.end() - 1);
  const MropePositions rope = mrope_positions(n - 1, p.spans);
  EXPECT_LT(rope.delta, 0);  // an image takes fewer positions than tokens
  prefill.rope_positions = rope.positions;
  std::vector<float> logits, last;
  EXPECT_TRUE(runner.forward(prefill, logits).is_ok());
  Batch decode;
  decode.caches = {&cache};
  decode.add_sequence_tokens(0, p.tokens.data() + n - 1, 1, int32_t(n - 1), true);
  const int32_t at = int32_t(n - 1 + rope.delta);
  decode.rope_positions = {at, at, at};
  EXPECT_TRUE(runner.forward(decode, last).is_ok());
  logits.insert(logits.end(), last.begin(), last.end());
  return logits;
}

// The prompt's logits against the reference, from the folder and from the GGUF and projector
// `convert` writes of it.
void expect_prompt_logits_match(const std::string& dir, const std::vector<Image>& pictures) {
  ThreadPool pool(2);
  auto vision = VisionModel::load(dir);
  ASSERT_TRUE(vision.is_ok()) << vision.status().message();
  std::vector<EncodedImage> encoded;
  std::vector<ImageEmbedding> mine;
  for (const Image& picture : pictures) {
    encoded.push_back(encode_both(dir, **vision, picture, pool));
    mine.push_back(encoded.back().mine);
  }
  const Prompt p = prompt_with(mine);
  test::HfReference ref(dir);
  const int64_t width = int64_t(encoded[0].ref.size()) / encoded[0].mine.n_tokens();
  ref.set_multimodal(image_rows<const double*>(
                         p, [&](size_t i, int64_t k) -> const double* { return encoded[i].ref.data() + k * width; }),
                     test::HfVisionReference::rope_index(p.tokens, kImageToken, p.grids));
  const auto want = ref.forward(p.tokens);

  ConvertModelOptions options;
  options.type = "f32";
  const std::string gguf = dir + ".gguf";
  auto converted = convert_hf_model(dir, gguf, options);
  ASSERT_TRUE(converted.is_ok()) << converted.status().message();
  EXPECT_EQ(converted->mmproj_path, dir + ".mmproj.gguf");
  for (const auto& [model_path, vision_path] : {std::pair{dir, dir}, {gguf, converted->mmproj_path}}) {
    auto model = Model::load(model_path);
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    ASSERT_TRUE((*model)->spec().mrope());
    auto tower = VisionModel::load(vision_path);
    ASSERT_TRUE(tower.is_ok()) << tower.status().message();
    std::vector<ImageEmbedding> images;
    for (const Image& picture : pictures) {
      auto patches = preprocess_image(picture, (*tower)->spec().preprocess);
      ASSERT_TRUE(patches.is_ok());
      auto e = VisionEncoder(**tower, pool).encode(*patches);
      ASSERT_TRUE(e.is_ok()) << e.status().message();
      images.push_back(std::move(*e));
    }
    const auto logits = engine_logits(**model, p, images, pool);
    ASSERT_EQ(logits.size(), want.size());
    double max_ref = 0;
    const double err = max_abs_diff(logits.data(), want, max_ref);
    std::printf("[vision] %s (+ %s), %zu images, %zu tokens: logits max_abs %.3g (up to %.3g)\n", model_path.c_str(),
                vision_path.c_str(), pictures.size(), p.tokens.size(), err, max_ref);
    EXPECT_GT(max_ref, 1.0);
    EXPECT_LE(err, 2e-4 * max_ref) << model_path;
  }
}

TEST(Vision, Glm4vOneImageMatchesFloat64Reference) {
  expect_prompt_logits_match(glm4v_folder(), {picture(112, 84, 1)});
}

TEST(Vision, Glm4vTwoImagesMatchFloat64Reference) {
  expect_prompt_logits_match(glm4v_folder(), {picture(112, 84, 1), picture(100, 150, 2)});
}

TEST(Vision, Qwen25vlWindowsMatchFloat64Reference) {
  // 168 x 140: a 6 x 5 merged grid, so the 4 x 4 windows are cut at the edges.
  expect_prompt_logits_match(qwen25vl_folder(), {picture(168, 140, 3)});
}

TEST(Vision, Qwen25vlTwoImagesMatchFloat64Reference) {
  expect_prompt_logits_match(qwen25vl_folder(), {picture(168, 140, 3), picture(112, 224, 4)});
}

// Images of at least 512 patches attend on the matmul kernels (GLM's every layer, Qwen's
// full-attention layers; Qwen's windows stay small blocks): the same embeddings.
TEST(Vision, LongImagesMatchFloat64ReferenceOnTheMatmulPath) {
  ThreadPool pool(2);
  for (const std::string& dir : {glm4v_folder(), qwen25vl_folder()}) {
    auto vision = VisionModel::load(dir);
    ASSERT_TRUE(vision.is_ok()) << vision.status().message();
    const EncodedImage e = encode_both(dir, **vision, picture(392, 336, 5), pool);  // 28 x 24 patches
    EXPECT_EQ(e.mine.n_tokens(), 14 * 12);
  }
}

TEST(Vision, MropePositionsFollowGetRopeIndex) {
  // text, a 2 x 3 image, text: the text after it resumes at start + max(2, 3).
  const MropePositions p = mrope_positions(9, {{1, 2, 3}});
  const std::vector<int32_t> want = {0, 0, 0, 1, 1, 1, 1, 1, 2, 1, 1, 3, 1, 2, 1, 1, 2, 2, 1, 2, 3, 4, 4, 4, 5, 5, 5};
  EXPECT_EQ(p.positions, want);
  EXPECT_EQ(p.delta, 6 - 9);
}

}  // namespace
}  // namespace autoglm
