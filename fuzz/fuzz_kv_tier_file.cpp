// KV tier file bytes -> the check that decides whether a disk tier file is loaded: any bytes
// (a damaged, cut or foreign file) are refused or accepted without reading past them. The first
// 32 bytes of the input give the keys the reader expects; the rest is the file.
#include <cstring>

#include "kv/kv_tiers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 32) return 0;
  uint64_t keys[4];
  std::memcpy(keys, data, sizeof(keys));
  const size_t bytes = size_t(keys[3] % 4096);
  const std::string why = autoglm::check_block_file(data + 32, size - 32, keys[0], keys[1], keys[2], bytes);
  // Accepted only when the file is exactly a head and the block's bytes.
  if (why.empty() && size - 32 != autoglm::block_file_head_bytes() + bytes) __builtin_trap();
  return 0;
}
