#include "model/vision_model.h"

#include "model/hf_checkpoint.h"
#include "model/hf_vision.h"

namespace autoglm {
namespace {

Status bind_layer(const TensorBinder& b, const VisionSpec& s, int64_t il, VisionLayerWeights& l) {
  const std::string p = "v.blk." + std::to_string(il) + ".";
  const int64_t d = s.n_embd;
  AUTOGLM_ASSIGN_OR_RETURN(l.ln1, b.vector(p + "ln1.weight", d));
  AUTOGLM_ASSIGN_OR_RETURN(l.ln2, b.vector(p + "ln2.weight", d));
  if (b.find(p + "attn_qkv.weight")) {  // GLM: fused [q; k; v]
    AUTOGLM_ASSIGN_OR_RETURN(auto qkv, b.matrix(p + "attn_qkv.weight", 3 * d, d));
    l.wq = row_range(qkv, 0, d);
    l.wk = row_range(qkv, d, d);
    l.wv = row_range(qkv, 2 * d, d);
    AUTOGLM_ASSIGN_OR_RETURN(Vec bias, b.vector(p + "attn_qkv.bias", 3 * d, false));
    if (!bias.empty()) l.bq = slice(bias, 0, d), l.bk = slice(bias, d, d), l.bv = slice(bias, 2 * d, d);
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(l.wq, b.matrix(p + "attn_q.weight", d, d));
    AUTOGLM_ASSIGN_OR_RETURN(l.wk, b.matrix(p + "attn_k.weight", d, d));
    AUTOGLM_ASSIGN_OR_RETURN(l.wv, b.matrix(p + "attn_v.weight", d, d));
    AUTOGLM_ASSIGN_OR_RETURN(l.bq, b.vector(p + "attn_q.bias", d, false));
    AUTOGLM_ASSIGN_OR_RETURN(l.bk, b.vector(p + "attn_k.bias", d, false));
    AUTOGLM_ASSIGN_OR_RETURN(l.bv, b.vector(p + "attn_v.bias", d, false));
  }
  AUTOGLM_ASSIGN_OR_RETURN(l.wo, b.matrix(p + "attn_out.weight", d, d));
  AUTOGLM_ASSIGN_OR_RETURN(l.bo, b.vector(p + "attn_out.bias", d, false));
  AUTOGLM_ASSIGN_OR_RETURN(l.gate, b.matrix(p + "ffn_gate.weight", s.n_ff, d));
  AUTOGLM_ASSIGN_OR_RETURN(l.up, b.matrix(p + "ffn_up.weight", s.n_ff, d));
  AUTOGLM_ASSIGN_OR_RETURN(l.down, b.matrix(p + "ffn_down.weight", d, s.n_ff));
  AUTOGLM_ASSIGN_OR_RETURN(l.b_gate, b.vector(p + "ffn_gate.bias", s.n_ff, false));
  AUTOGLM_ASSIGN_OR_RETURN(l.b_up, b.vector(p + "ffn_up.bias", s.n_ff, false));
  AUTOGLM_ASSIGN_OR_RETURN(l.b_down, b.vector(p + "ffn_down.bias", d, false));
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<VisionModel>> VisionModel::load(const std::string& path, bool repack) {
  std::unique_ptr<GgufFile> file;
  if (is_hf_folder(path)) {
    AUTOGLM_ASSIGN_OR_RETURN(file, open_hf_projector(path));
  } else {
    AUTOGLM_ASSIGN_OR_RETURN(file, GgufFile::open(path));
  }
  return from_gguf(std::move(file), repack);
}

Result<std::unique_ptr<VisionModel>> VisionModel::from_gguf(std::unique_ptr<GgufFile> file, bool repack) {
  auto m = std::unique_ptr<VisionModel>(new VisionModel());
  m->file_ = std::move(file);
  AUTOGLM_ASSIGN_OR_RETURN(m->spec_, vision_spec_from_gguf(*m->file_));
  AUTOGLM_RETURN_IF_ERROR(m->bind());
  if (repack) AUTOGLM_RETURN_IF_ERROR(m->repack());
  return m;
}

// Every matrix of the tower interleaved for the packed kernels, as the text model's are.
Status VisionModel::repack() {
  VisionWeights& w = weights_;
  std::vector<cpu::WeightMatrix*> matrices = {&w.patch, &w.merge, &w.fc, &w.m_gate, &w.m_up, &w.m_down, &w.mm0, &w.mm2};
  for (VisionLayerWeights& l : w.layers)
    for (cpu::WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) matrices.push_back(m);
  std::erase_if(matrices, [](const cpu::WeightMatrix* m) { return m->rows == 0 || !cpu::packable(m->type); });
  if (matrices.empty()) return Status::ok();
  for (const cpu::WeightMatrix* m : matrices) repacked_bytes_ += cpu::packed_bytes(*m);
  ThreadPool pool(physical_core_count());
  packed_ = cpu::pack_matrices(pool, matrices, [](size_t) {});
  if (!packed_) return resource_exhausted("out of memory repacking the projector " + file_->path());
  return Status::ok();
}

cpu::WeightMatrix VisionModel::own(std::vector<float> values, int64_t rows, int64_t cols) {
  owned_.push_back(std::move(values));
  return {DType::F32, reinterpret_cast<const uint8_t*>(owned_.back().data()), rows, cols, cols * 4};
}

// The two frames' kernels (v.patch_embd.weight and .weight.1, each [C, 3, p, p]) into one
// matrix over the processor's columns ((c * 2 + t) * p + y) * p + x.
Status VisionModel::bind_patch_embedding(const TensorBinder& b) {
  const VisionSpec& s = spec_;
  const int64_t p = s.preprocess.patch_size, d = s.n_embd, per_frame = 3 * p * p;
  AUTOGLM_ASSIGN_OR_RETURN(const Vec f0, b.floats("v.patch_embd.weight", {p, p, 3, d}));
  AUTOGLM_ASSIGN_OR_RETURN(const Vec f1, b.floats("v.patch_embd.weight.1", {p, p, 3, d}));
  std::vector<float> w(size_t(d * 2 * per_frame));
  for (int64_t o = 0; o < d; ++o)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < 2; ++t) {
        const float* src = (t == 0 ? f0 : f1).data() + o * per_frame + c * p * p;
        std::copy(src, src + p * p, w.data() + o * 2 * per_frame + (c * 2 + t) * p * p);
      }
  weights_.patch = own(std::move(w), d, 2 * per_frame);
  if (s.projector == ProjectorType::kGlm4v) {
    AUTOGLM_ASSIGN_OR_RETURN(weights_.patch_bias, b.vector("v.patch_embd.bias", d));
  }
  return Status::ok();
}

// GLM: the 2x2 conv ([D, C, 2, 2]) as one matrix over [x0 | x1 | x2 | x3], token k of a merge
// block at kernel cell (k / 2, k % 2), then the merger.
Status VisionModel::bind_glm_merger(const TensorBinder& b) {
  const VisionSpec& s = spec_;
  const int64_t c = s.n_embd, d = s.n_out;
  AUTOGLM_ASSIGN_OR_RETURN(const Vec conv, b.floats("mm.patch_merger.weight", {2, 2, c, d}));
  std::vector<float> m(size_t(d * 4 * c));
  for (int64_t o = 0; o < d; ++o)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < 4; ++k) m[size_t(o * 4 * c + k * c + ch)] = conv[size_t((o * c + ch) * 4 + k)];
  VisionWeights& w = weights_;
  w.merge = own(std::move(m), d, 4 * c);
  AUTOGLM_ASSIGN_OR_RETURN(w.merge_bias, b.vector("mm.patch_merger.bias", d));
  AUTOGLM_ASSIGN_OR_RETURN(w.fc, b.matrix("mm.model.fc.weight", d, d));
  AUTOGLM_ASSIGN_OR_RETURN(w.post_norm_w, b.vector("mm.post_norm.weight", d));
  AUTOGLM_ASSIGN_OR_RETURN(w.post_norm_b, b.vector("mm.post_norm.bias", d));
  AUTOGLM_ASSIGN_OR_RETURN(w.m_gate, b.matrix("mm.gate.weight", s.n_merger_ff, d));
  AUTOGLM_ASSIGN_OR_RETURN(w.m_up, b.matrix("mm.up.weight", s.n_merger_ff, d));
  AUTOGLM_ASSIGN_OR_RETURN(w.m_down, b.matrix("mm.down.weight", d, s.n_merger_ff));
  return Status::ok();
}

Status VisionModel::bind() {
  const VisionSpec& s = spec_;
  const TensorBinder b(*file_);
  VisionWeights& w = weights_;
  AUTOGLM_RETURN_IF_ERROR(bind_patch_embedding(b));
  w.layers.resize(size_t(s.n_layer));
  for (int64_t il = 0; il < s.n_layer; ++il) AUTOGLM_RETURN_IF_ERROR(bind_layer(b, s, il, w.layers[size_t(il)]));
  AUTOGLM_ASSIGN_OR_RETURN(w.post_ln, b.vector("v.post_ln.weight", s.n_embd));
  if (s.projector == ProjectorType::kGlm4v) {
    AUTOGLM_ASSIGN_OR_RETURN(w.norm_embd, b.vector("v.norm_embd.weight", s.n_embd));
    AUTOGLM_ASSIGN_OR_RETURN(w.pos_embd, b.floats("v.position_embd.weight", {s.n_embd, s.pos_grid * s.pos_grid}));
    return bind_glm_merger(b);
  }
  const int64_t merged = 4 * s.n_embd;
  AUTOGLM_ASSIGN_OR_RETURN(w.mm0, b.matrix("mm.0.weight", merged, merged));
  AUTOGLM_ASSIGN_OR_RETURN(w.mm0_b, b.vector("mm.0.bias", merged));
  AUTOGLM_ASSIGN_OR_RETURN(w.mm2, b.matrix("mm.2.weight", s.n_out, merged));
  AUTOGLM_ASSIGN_OR_RETURN(w.mm2_b, b.vector("mm.2.bias", s.n_out));
  return Status::ok();
}

int64_t VisionModel::n_params() const {
  int64_t n = 0;
  for (const GgufTensorInfo& t : file_->tensors()) n += t.n_elements();
  return n;
}

}  // namespace autoglm
