// The vision tower of a Hugging Face vision-language folder (GLM-4.1V, Qwen2.5-VL) read as an
// in-memory projector GGUF: the clip.* keys and v.* / mm.* tensor names llama.cpp's
// `convert_hf_to_gguf.py --mmproj` writes (docs/vision-glm4v.md, docs/vision-qwen25vl.md), so
// that a folder and a converted projector load through one path, and `autoglm convert
// --mmproj` writes what llama.cpp loads. preprocessor_config.json's pixel limits, mean and std
// go into the keys too.
#pragma once

#include <memory>
#include <string>

#include "autoglm/status.h"
#include "formats/gguf.h"

namespace autoglm {

// Whether the folder's config.json describes a vision-language model (a vision_config).
bool hf_folder_has_vision(const std::string& dir);

// Where a model's projector lies beside it: X.mmproj.gguf for X.gguf (or X).
std::string projector_path_beside(const std::string& model_path);

// Errors name the file and the field or tensor.
Result<std::unique_ptr<GgufFile>> open_hf_projector(const std::string& dir);

}  // namespace autoglm
