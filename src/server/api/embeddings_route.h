// POST /v1/embeddings (OpenAI's shape): `input` as a string, a list of strings, a list of
// token ids or a list of such lists; `encoding_format` float or base64 (little-endian
// float32); `dimensions` keeps the first N components and normalises again (Matryoshka
// truncation). Vectors come from the runtime, pooled as the model says (ModelInfo::pooling) unless the
// configuration says otherwise.
#pragma once

#include <optional>
#include <string>

#include "autoglm/engine.h"
#include "autoglm/runtime.h"
#include "server/api/reply.h"
#include "server/api/request_params.h"

namespace autoglm {

struct EmbeddingsContext {
  Runtime& runtime;
  int64_t n_embd;
  Pooling pooling;
  std::string model_name;
};

Reply embeddings_reply(const json& body, const EmbeddingsContext& ctx);

}  // namespace autoglm
