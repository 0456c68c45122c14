// A vision-language model's projector (its vision tower): named by RuntimeOptions::mmproj or
// found beside the model, loaded, and checked against the model it serves.
#pragma once

#include <memory>
#include <string>

#include "autoglm/runtime.h"
#include "model/model.h"
#include "model/vision_model.h"
#include "tokenizer/tokenizer.h"

namespace autoglm {

struct Projector {
  std::string path;
  std::unique_ptr<VisionModel> vision;
  int32_t image_token = -1;  // the placeholder the chat template writes per image (<|image|>, <|image_pad|>)
};

// The projector that pairs with `model_path` when none is named: a Hugging Face folder with a
// vision_config itself, else X.mmproj.gguf beside X.gguf, else the one mmproj-*.gguf in its
// folder; "" for none. Several mmproj-*.gguf: an error asking for --mmproj.
Result<std::string> find_projector(const std::string& model_path);

// Null when there is none (options.mmproj "none", or nothing beside a model). Errors name the
// file: a projector that is not one, or that does not match the model (its width, its
// M-RoPE, the family, the vocabulary's image marker).
Result<std::unique_ptr<Projector>> load_projector(const std::string& model_path, const RuntimeOptions& options,
                                                  const Model& model, const Tokenizer& tokenizer);

}  // namespace autoglm
