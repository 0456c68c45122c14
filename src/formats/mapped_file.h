// A read-only memory mapping of a whole file (GGUF and safetensors weights are read in place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "autoglm/status.h"

namespace autoglm {

// How a file's bytes come into memory (llama.cpp's --no-mmap and --mlock).
struct FileLoad {
  bool mmap = true;    // map the file (pages shared with other processes); false: read into private memory
  bool mlock = false;  // lock the pages in RAM (never swapped or dropped); a refusal is not fatal (lock_failure)
};

// Asks the kernel to read the file pages under [p, p + bytes) into the page cache in the
// background (weights used in place, such as the token embedding table, which decoding would
// otherwise fault in from disk a row at a time). Advice only: nothing fails.
void read_ahead(const void* p, size_t bytes);

class MappedFile {
 public:
  // Errors name the file: missing, not a regular file, not mappable or not readable.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path, const FileLoad& load = {});
  // Why FileLoad::mlock could not be honoured (empty: locked, or not asked).
  const std::string& lock_failure() const { return lock_failure_; }
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string lock_failure_;
};

}  // namespace autoglm
