// The stream shaper of a request whose reply has a format (chat/reply_shaper.h): made once per
// submitted choice, so each parses its own text. The runtime and the server submit through it.
#pragma once

#include <functional>
#include <memory>

#include "chat/reply_shaper.h"
#include "engine/stream.h"

namespace autoglm {

// Null (plain answer text) when the format has neither tools nor reasoning.
inline std::function<EventShaper()> reply_shaper_factory(const ReplyFormat& format) {
  if (format.plain()) return nullptr;
  return [format]() -> EventShaper {
    return [shaper = std::make_shared<ReplyShaper>(format)](StreamEvent& ev) { shaper->shape(ev); };
  };
}

}  // namespace autoglm
