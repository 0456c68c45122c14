// create-model --arch glm4v | qwen25vl: a random vision-language model as llama.cpp splits one,
// the text GGUF (glm4 or qwen2vl with rope.dimension_sections; a vocabulary holding the chat
// and image markers; the model's chat template) and its projector beside it (X.mmproj.gguf).
#pragma once

#include <string>

#include "autoglm/status.h"
#include "model/create_model_options.h"

namespace autoglm {

bool is_vision_arch(const std::string& arch);  // glm4v, qwen25vl

// Writes `path` and projector_path_beside(path); presets tiny and 9b (GLM-4.1V-9B's shape;
// Qwen2.5-VL: the 7B's).
Status create_random_vision_model(const CreateModelOptions& options, const std::string& path);

}  // namespace autoglm
