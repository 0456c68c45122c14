#include "runtime/projector.h"

#include <filesystem>

#include "model/hf_checkpoint.h"
#include "model/hf_vision.h"

namespace autoglm {
namespace {

namespace fs = std::filesystem;

// Each projector's text family and the marker its processor repeats per image token.
struct Family {
  ProjectorType projector;
  const char* text_arch;
  const char* marker;
};
constexpr Family kFamilies[] = {
    {ProjectorType::kGlm4v, "glm4", "<|image|>"},
    {ProjectorType::kQwen25vl, "qwen2vl", "<|image_pad|>"},
};

Status check_pairing(const std::string& path, const VisionSpec& v, const Model& model) {
  const ModelSpec& s = model.spec();
  const std::string what = path + ": the projector (" + projector_display_name(v.projector) + ") does not match " +
                           model.source_path() + ": ";
  if (v.n_out != s.n_embd)
    return invalid_argument(what + "its tokens are " + std::to_string(v.n_out) + " wide, the model's embeddings " +
                            std::to_string(s.n_embd));
  for (const Family& f : kFamilies)
    if (f.projector == v.projector && s.arch != f.text_arch)
      return invalid_argument(what + "it serves " + f.text_arch + " models, not " + s.arch);
  if (!s.mrope())
    return invalid_argument(what + "the model has no M-RoPE (rope.dimension_sections): it is not the text model of a " +
                            projector_display_name(v.projector));
  return Status::ok();
}

}  // namespace

Result<std::string> find_projector(const std::string& model_path) {
  std::error_code ec;
  if (is_hf_folder(model_path)) return hf_folder_has_vision(model_path) ? model_path : std::string();
  const std::string beside = projector_path_beside(model_path);
  if (fs::exists(beside, ec)) return beside;
  std::vector<std::string> found;
  const fs::path dir = fs::path(model_path).parent_path().empty() ? fs::path(".") : fs::path(model_path).parent_path();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("mmproj-", 0) == 0 && name.ends_with(".gguf")) found.push_back(entry.path().string());
  }
  if (found.size() > 1)
    return invalid_argument(dir.string() + " holds several projectors (" + found[0] + ", " + found[1] +
                            ", ...): name one with --mmproj (or mmproj: in the models entry)");
  return found.empty() ? std::string() : found[0];
}

Result<std::unique_ptr<Projector>> load_projector(const std::string& model_path, const RuntimeOptions& options,
                                                  const Model& model, const Tokenizer& tokenizer) {
  if (options.mmproj == "none") return std::unique_ptr<Projector>();
  std::string path = options.mmproj;
  if (path.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(path, find_projector(model_path));
    if (path.empty()) return std::unique_ptr<Projector>();
  }
  auto p = std::make_unique<Projector>();
  p->path = path;
  auto vision = VisionModel::load(path, options.repack_weights);
  if (!vision) return Status(vision.status().code(), "mmproj: " + vision.status().message());
  p->vision = std::move(vision).value();
  const VisionSpec& v = p->vision->spec();
  AUTOGLM_RETURN_IF_ERROR(check_pairing(path, v, model));
  for (const Family& f : kFamilies)
    if (f.projector == v.projector) {
      const std::vector<int32_t> ids = tokenizer.encode(f.marker, false, true);
      if (ids.size() != 1)
        return invalid_argument(model_path + ": the vocabulary has no token " + std::string(f.marker) + ", which the " +
                                projector_display_name(v.projector) + " projector's images stand on");
      p->image_token = ids[0];
    }
  return p;
}

}  // namespace autoglm
