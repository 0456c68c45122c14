// Hugging Face safetensors files, memory-mapped: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the data. The header is
// validated whole at open (known dtype, offsets inside the data, byte counts matching dtype x
// shape, no overlaps); every error names the file and the tensor or field.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/mapped_file.h"

namespace autoglm {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // as in the header: "F32", "F16", "BF16", "I8", "U8", ...
  int64_t element_bytes = 0;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;
  int64_t n_elements() const;
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Parses an in-memory image (tests); `bytes` must outlive the result.
  static Result<std::unique_ptr<SafetensorsFile>> parse(const uint8_t* bytes, size_t size, const std::string& name);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status parse_all(const uint8_t* bytes, size_t size);

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// The weights of a Hugging Face folder: model.safetensors, or the shards that
// model.safetensors.index.json maps every tensor name to.
class SafetensorsCheckpoint {
 public:
  static Result<std::unique_ptr<SafetensorsCheckpoint>> open_folder(const std::string& dir);
  const SafetensorsTensor* find(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*> by_name_;
};

}  // namespace autoglm
