// Helpers for the tests that read an engine request's stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace autoglm::test {

// What a request's stream gave until it finished (60 s at most between events).
struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  StreamEvent last;  // the finishing event
};

inline Collected collect(StreamHandle& h) {
  Collected c;
  StreamEvent ev;
  while (h.next(ev, std::chrono::seconds(60))) {
    c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    c.text += ev.text;
    if (ev.finished) {
      c.last = ev;
      break;
    }
  }
  return c;
}

inline Collected collect(const std::shared_ptr<StreamHandle>& h) {
  return collect(*h);
}

}  // namespace autoglm::test
