// safetensors bytes -> the parsed JSON header, metadata and tensor table.
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = autoglm::SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!file) return 0;
  size_t total = 0;
  for (const auto& t : (*file)->tensors()) total += t.name.size();
  for (const auto& [k, v] : (*file)->metadata()) total += k.size() + v.size();
  return total == size_t(-1);
}
