// The library's side of a StreamHandle: opening one and publishing events into it. The engine
// publishes a request's events; the server's relays (a cascade, a cached reply, a task) use
// the same writer, so a reader never knows where events came from.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "autoglm/engine.h"

namespace autoglm {

// Turns an event's text into its typed parts as the reader takes it. One per stream: it may
// hold state (a tool call half parsed).
using EventShaper = std::function<void(StreamEvent&)>;

// Every event's text as one kText part (the shaper of a request without a reply format).
void plain_text_parts(StreamEvent& event);

struct StreamWriter {
  // A new stream; `shaper`, when set, runs on each event as it is taken (none: events go out as pushed).
  static std::shared_ptr<StreamHandle> open(EventShaper shaper = {});
  // A stream that already holds these events (a cached reply).
  static std::shared_ptr<StreamHandle> replay(const std::vector<StreamEvent>& events);
  static void push(StreamHandle& handle, StreamEvent event);
};

}  // namespace autoglm
