// GGUF files (versions 2 and 3): a memory-mapped, zero-copy reader and a writer.
// Format: magic "GGUF", version, tensor and key/value counts, the key/value
// metadata, the tensor table, then tensor data aligned to general.alignment.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"
#include "formats/mapped_file.h"

namespace autoglm {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Integers of any width are held as int64 (uint64 values
// above INT64_MAX keep their bits); floats as double. Arrays keep their element
// type and hold their elements in the member that fits it.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint32;
  int64_t integer = 0;
  double real = 0;
  std::string str;
  GgufValueType elem_type = GgufValueType::kUint32;  // arrays only
  std::vector<int64_t> ints;                         // integer and bool arrays
  std::vector<double> reals;                         // float arrays
  std::vector<std::string> strs;                     // string arrays
  std::vector<GgufValue> nested;                     // arrays of arrays

  bool is_integer() const;
  bool is_float() const;
  size_t array_size() const;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue u64(uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue f32_array(std::vector<float> v);
  static GgufValue i32_array(std::vector<int32_t> v);
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the contiguous dimension
  uint64_t offset = 0;        // from the start of the data section
  const uint8_t* data = nullptr;
  uint64_t n_bytes = 0;

  int64_t n_elements() const;
  int64_t rows() const;  // product of dims[1..]
};

class GgufFile {
 public:
  // Maps (or reads, see FileLoad) and validates the whole file; every error names the file.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, const FileLoad& load = {});
  // Parses an in-memory image (tests and fuzzing); `bytes` must outlive the result.
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* bytes, size_t size, const std::string& name);
  // A file assembled in memory (a Hugging Face folder read as GGUF, a re-quantized model):
  // tensors point into storage that `keepalive` owns. Names must be unique.
  static Result<std::unique_ptr<GgufFile>> from_parts(std::string name,
                                                      std::vector<std::pair<std::string, GgufValue>> metadata,
                                                      std::vector<GgufTensorInfo> tensors,
                                                      std::shared_ptr<const void> keepalive);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;  // accepts integers too
  std::optional<bool> get_bool(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  // Why FileLoad::mlock was not honoured (empty: locked, not asked, or not a mapped file).
  std::string lock_failure() const { return mapping_ ? mapping_->lock_failure() : std::string(); }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  Status parse_all();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> mapping_;    // null for in-memory images
  std::shared_ptr<const void> keepalive_;  // storage of assembled files
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Writes GGUF v3 files with the standard key and tensor names.
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);  // replaces an existing key
  // `data` is copied; its size must match type and dims.
  Status add_tensor(const std::string& name, DType type, std::vector<int64_t> dims, std::vector<uint8_t> data);
  // Not copied: `data` must stay valid until write() returns.
  Status add_tensor_view(const std::string& name, DType type, std::vector<int64_t> dims, const uint8_t* data,
                         size_t n_bytes);
  // Bytes made only while the file is written, one tensor at a time, so a whole model never
  // sits in memory: `produce` returns them (valid until its next call); they must be n_bytes.
  using Producer = std::function<Result<std::pair<const uint8_t*, size_t>>()>;
  Status add_tensor_deferred(const std::string& name, DType type, std::vector<int64_t> dims, size_t n_bytes,
                             Producer produce);
  Status write(const std::string& path, uint64_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> owned;
    const uint8_t* data;
    size_t n_bytes;
    Producer produce;  // deferred tensors
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace autoglm
