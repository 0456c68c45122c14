// GGUF bytes -> the parsed header, metadata and tensor table; every value read back.
#include "formats/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = autoglm::GgufFile::parse(data, size, "fuzz.gguf");
  if (!file) return 0;
  size_t total = 0;
  for (const auto& [key, value] : (*file)->metadata()) total += key.size() + value.array_size();
  for (const auto& t : (*file)->tensors()) total += t.name.size();
  return total == size_t(-1);
}
