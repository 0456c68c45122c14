// A read-only memory mapping of a whole file (GGUF and safetensors weights are read in place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "autoglm/status.h"

namespace autoglm {

class MappedFile {
 public:
  // Errors name the file: missing, not a regular file, or not mappable.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace autoglm
