// GGUF bytes -> a projector's spec (the clip.* keys of llama.cpp's mmproj files) and its
// learned tables bound with their shapes checked. Errors are values; a spec that loads is
// self-consistent (heads split the width into rotary quarters, windows and pixel limits sane).
#include <cstdlib>

#include "formats/gguf.h"
#include "model/tensor_binder.h"
#include "model/vision_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = autoglm::GgufFile::parse(data, size, "fuzz.mmproj.gguf");
  if (!file) return 0;
  auto spec = autoglm::vision_spec_from_gguf(**file);
  if (!spec) return 0;
  const autoglm::VisionSpec& s = *spec;
  if (s.head_dim * s.n_head != s.n_embd || s.head_dim % 4 != 0 || s.n_out <= 0 || s.preprocess.min_pixels <= 0 ||
      s.preprocess.max_pixels < s.preprocess.min_pixels ||
      (s.projector == autoglm::ProjectorType::kQwen25vl && (s.window_units <= 0 || s.full_every <= 0)))
    std::abort();
  const autoglm::TensorBinder b(**file);
  const int64_t p = s.preprocess.patch_size;
  if (auto kernel = b.floats("v.patch_embd.weight", {p, p, 3, s.n_embd}))
    if (kernel->size() != size_t(p * p * 3 * s.n_embd)) std::abort();
  if (s.pos_grid > 0)
    if (auto table = b.floats("v.position_embd.weight", {s.n_embd, s.pos_grid * s.pos_grid}))
      if (table->size() != size_t(s.n_embd * s.pos_grid * s.pos_grid)) std::abort();
  return 0;
}
