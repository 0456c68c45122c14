// What the response cache keeps of one generation (response_cache.h), and what its SQLite file
// stores (response_cache_file.h).
#pragma once

#include <cstdint>
#include <vector>

#include "autoglm/engine.h"

namespace autoglm {

// The events of each choice of one finished generation.
struct CachedGeneration {
  std::vector<std::vector<StreamEvent>> choices;
  int64_t bytes = 0;  // what it holds, roughly (the byte bound counts this)
};

}  // namespace autoglm
