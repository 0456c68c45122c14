// A model described as `autoglm info` prints it (Runtime::describe), and what a GGUF file
// says of itself when the runtime cannot open it (describe_model_file).
#pragma once

#include <string>

#include "model/model.h"
#include "tokenizer/vocab.h"

namespace autoglm {

std::string describe_model(const std::string& path, const Model& model, const Vocab& vocab);

}  // namespace autoglm
