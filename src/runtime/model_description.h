// A model described as `autoglm info` prints it (Runtime::describe), and what a GGUF file
// says of itself when the runtime cannot open it (describe_model_file).
#pragma once

#include <string>

#include "model/model.h"
#include "model/vision_model.h"
#include "tokenizer/vocab.h"

namespace autoglm {

std::string describe_model(const std::string& path, const Model& model, const Vocab& vocab);
// The projector's lines of `autoglm info`: its type, tower, parameters, pixel limits and what a
// phone screenshot costs in tokens.
std::string describe_projector(const std::string& path, const VisionModel& vision);

}  // namespace autoglm
