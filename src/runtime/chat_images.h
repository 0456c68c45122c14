// A chat's images for a vision-language model: every image_url part of the messages (a data
// URL, or a file under media.allowed_local_dirs) read within the limits, decoded, preprocessed
// as the model's image processor does, and encoded by its vision tower (or found in the
// embedding cache by content hash); the part becomes {"type": "image"}, which the chat template
// turns into the model's image marker. Errors name the part: messages[i].content[j].
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autoglm/runtime.h"
#include "core/thread_pool.h"
#include "engine/request.h"
#include "runtime/image_cache.h"
#include "runtime/projector.h"

namespace autoglm {

struct ImageContext {
  const Projector* projector = nullptr;  // null: a text-only model (an image part is an error)
  ThreadPool* pool = nullptr;
  ImageCache* cache = nullptr;
  const MediaOptions* media = nullptr;
  const RequestLimits* limits = nullptr;
  int64_t min_pixels = 0, max_pixels = 0;  // the request's (0: the media options', then the processor's)
};

struct ChatImage {
  uint64_t hash = 0;
  std::shared_ptr<const ImageEmbedding> embedding;
};

// The images of `messages` in order (none: the messages are untouched).
Result<std::vector<ChatImage>> take_chat_images(nlohmann::ordered_json& messages, const ImageContext& context);

// The prompt with each image marker repeated for its image's tokens, and the images' spans in
// it; an error (naming "messages") when the template placed another number of markers.
Status expand_image_markers(std::vector<int32_t>& prompt, int32_t marker, const std::vector<ChatImage>& images,
                            std::vector<PromptImage>& placed);

}  // namespace autoglm
