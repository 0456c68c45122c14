#include "formats/gguf.h"

#include <cstring>
#include <limits>

namespace autoglm {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxNesting = 4;

// Bounds-checked little-endian reader over the file image.
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size, const std::string& file) : base_(base), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status fail(const std::string& what) const {
    return corrupt(file_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  Status unsupported_here(const std::string& what) const {
    return unsupported(file_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  template <typename T>
  Status read(T& out, const char* what) {
    if (remaining() < sizeof(T)) return fail(std::string("truncated file while reading ") + what);
    std::memcpy(&out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  Status read_string(std::string& out, const char* what) {
    uint64_t len = 0;
    AUTOGLM_RETURN_IF_ERROR(read(len, what));
    if (len > remaining())
      return fail(std::string(what) + ": string length " + std::to_string(len) + " runs past the end of the file");
    out.assign(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& file_;
};

bool is_valid_value_type(uint32_t t) {
  return t <= uint32_t(GgufValueType::kFloat64);
}

// Smallest encoded size of one element, used to reject absurd counts early.
size_t min_encoded_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kString:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kArray: return 12;
  }
  return 1;
}

template <typename T, typename Out>
Status read_as(Cursor& c, Out& out, const char* what) {
  T v{};
  AUTOGLM_RETURN_IF_ERROR(c.read(v, what));
  out = Out(v);
  return Status::ok();
}

Status read_scalar(Cursor& c, GgufValueType t, int64_t& integer, double& real, const char* what) {
  switch (t) {
    case GgufValueType::kUint8: return read_as<uint8_t>(c, integer, what);
    case GgufValueType::kInt8: return read_as<int8_t>(c, integer, what);
    case GgufValueType::kUint16: return read_as<uint16_t>(c, integer, what);
    case GgufValueType::kInt16: return read_as<int16_t>(c, integer, what);
    case GgufValueType::kUint32: return read_as<uint32_t>(c, integer, what);
    case GgufValueType::kInt32: return read_as<int32_t>(c, integer, what);
    case GgufValueType::kUint64: return read_as<uint64_t>(c, integer, what);  // keeps the bits above INT64_MAX
    case GgufValueType::kInt64: return read_as<int64_t>(c, integer, what);
    case GgufValueType::kFloat32: return read_as<float>(c, real, what);
    case GgufValueType::kFloat64: return read_as<double>(c, real, what);
    case GgufValueType::kBool: {
      AUTOGLM_RETURN_IF_ERROR(read_as<uint8_t>(c, integer, what));
      if (integer > 1) return c.fail(std::string(what) + ": bool value " + std::to_string(integer) + " is not 0 or 1");
      return Status::ok();
    }
    default: return c.fail(std::string(what) + ": not a scalar type");
  }
}

Status read_value(Cursor& c, GgufValueType t, GgufValue& out, const std::string& key, int depth) {
  out.type = t;
  if (t == GgufValueType::kString) return c.read_string(out.str, key.c_str());
  if (t != GgufValueType::kArray) return read_scalar(c, t, out.integer, out.real, key.c_str());

  if (depth >= kMaxNesting) return c.fail("key '" + key + "': arrays nested too deeply");
  uint32_t elem = 0;
  uint64_t count = 0;
  AUTOGLM_RETURN_IF_ERROR(c.read(elem, "array element type"));
  if (!is_valid_value_type(elem))
    return c.fail("key '" + key + "': unknown array element type " + std::to_string(elem));
  AUTOGLM_RETURN_IF_ERROR(c.read(count, "array length"));
  out.elem_type = GgufValueType(elem);
  if (count > c.remaining() / min_encoded_size(out.elem_type))
    return c.fail("key '" + key + "': array length " + std::to_string(count) + " runs past the end of the file");
  switch (out.elem_type) {
    case GgufValueType::kString:
      out.strs.resize(count);
      for (auto& s : out.strs) AUTOGLM_RETURN_IF_ERROR(c.read_string(s, key.c_str()));
      return Status::ok();
    case GgufValueType::kArray:
      out.nested.resize(count);
      for (auto& v : out.nested) AUTOGLM_RETURN_IF_ERROR(read_value(c, GgufValueType::kArray, v, key, depth + 1));
      return Status::ok();
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      out.reals.resize(count);
      for (auto& r : out.reals) {
        int64_t unused = 0;
        AUTOGLM_RETURN_IF_ERROR(read_scalar(c, out.elem_type, unused, r, key.c_str()));
      }
      return Status::ok();
    default:
      out.ints.resize(count);
      for (auto& i : out.ints) {
        double unused = 0;
        AUTOGLM_RETURN_IF_ERROR(read_scalar(c, out.elem_type, i, unused, key.c_str()));
      }
      return Status::ok();
  }
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return is_valid_value_type(uint32_t(t)) ? names[uint32_t(t)] : "unknown";
}

bool GgufValue::is_integer() const {
  return type != GgufValueType::kFloat32 && type != GgufValueType::kFloat64 && type != GgufValueType::kString &&
         type != GgufValueType::kArray;
}
bool GgufValue::is_float() const {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}
size_t GgufValue::array_size() const {
  return ints.size() + reals.size() + strs.size() + nested.size();
}

namespace {

GgufValue scalar(GgufValueType type, int64_t integer, double real = 0) {
  GgufValue r;
  r.type = type;
  r.integer = integer;
  r.real = real;
  return r;
}

}  // namespace

GgufValue GgufValue::u32(uint32_t v) {
  return scalar(GgufValueType::kUint32, v);
}
GgufValue GgufValue::i32(int32_t v) {
  return scalar(GgufValueType::kInt32, v);
}
GgufValue GgufValue::u64(uint64_t v) {
  return scalar(GgufValueType::kUint64, int64_t(v));
}
GgufValue GgufValue::f32(float v) {
  return scalar(GgufValueType::kFloat32, 0, v);
}
GgufValue GgufValue::boolean(bool v) {
  return scalar(GgufValueType::kBool, v);
}
GgufValue GgufValue::string(std::string v) {
  GgufValue r;
  r.type = GgufValueType::kString;
  r.str = std::move(v);
  return r;
}
GgufValue GgufValue::string_array(std::vector<std::string> v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kString;
  r.strs = std::move(v);
  return r;
}
GgufValue GgufValue::f32_array(std::vector<float> v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kFloat32;
  r.reals.assign(v.begin(), v.end());
  return r;
}
GgufValue GgufValue::i32_array(std::vector<int32_t> v) {
  GgufValue r;
  r.type = GgufValueType::kArray;
  r.elem_type = GgufValueType::kInt32;
  r.ints.assign(v.begin(), v.end());
  return r;
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}
int64_t GgufTensorInfo::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, const FileLoad& load) {
  AUTOGLM_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path, load));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->base_ = mapping->data();
  file->size_ = mapping->size();
  file->mapping_ = std::move(mapping);
  AUTOGLM_RETURN_IF_ERROR(file->parse_all());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* bytes, size_t size, const std::string& name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = name;
  file->base_ = bytes;
  file->size_ = size;
  AUTOGLM_RETURN_IF_ERROR(file->parse_all());
  return file;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_parts(std::string name,
                                                       std::vector<std::pair<std::string, GgufValue>> metadata,
                                                       std::vector<GgufTensorInfo> tensors,
                                                       std::shared_ptr<const void> keepalive) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  file->version_ = 3;
  file->keepalive_ = std::move(keepalive);
  for (auto& [key, value] : metadata) {
    if (file->kv_index_.count(key)) return corrupt(file->path_ + ": duplicate metadata key '" + key + "'");
    file->kv_index_[key] = file->kv_.size();
    file->kv_.emplace_back(std::move(key), std::move(value));
  }
  for (auto& t : tensors) {
    if (file->tensor_index_.count(t.name)) return corrupt(file->path_ + ": duplicate tensor name '" + t.name + "'");
    int64_t rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
    if (t.dims.empty() || dtype_row_bytes(t.type, t.dims[0]) < 0 ||
        uint64_t(dtype_row_bytes(t.type, t.dims[0]) * rows) != t.n_bytes)
      return corrupt(file->path_ + ": tensor '" + t.name + "' has a byte count that does not fit its type and shape");
    file->tensor_index_[t.name] = file->tensors_.size();
    file->tensors_.push_back(std::move(t));
  }
  return file;
}

GgufFile::~GgufFile() = default;

Status GgufFile::parse_all() {
  Cursor c(base_, size_, path_);
  uint32_t magic = 0;
  AUTOGLM_RETURN_IF_ERROR(c.read(magic, "magic"));
  if (magic != kMagic) return corrupt(path_ + ": not a GGUF file (bad magic)");
  AUTOGLM_RETURN_IF_ERROR(c.read(version_, "version"));
  if (version_ == 1) return unsupported(path_ + ": GGUF v1 is not supported (re-convert the model to GGUF v3)");
  if (version_ != 2 && version_ != 3)
    return unsupported(path_ + ": unsupported GGUF version " + std::to_string(version_));

  uint64_t n_tensors = 0, n_kv = 0;
  AUTOGLM_RETURN_IF_ERROR(c.read(n_tensors, "tensor count"));
  AUTOGLM_RETURN_IF_ERROR(c.read(n_kv, "metadata count"));
  // Each entry takes at least 12 bytes (key length + type) / 24 bytes (tensor info).
  if (n_kv > c.remaining() / 12) return c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file");
  if (n_tensors > c.remaining() / 24)
    return c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file");

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    AUTOGLM_RETURN_IF_ERROR(c.read_string(key, "metadata key"));
    uint32_t type = 0;
    AUTOGLM_RETURN_IF_ERROR(c.read(type, "metadata value type"));
    if (!is_valid_value_type(type)) return c.fail("key '" + key + "': unknown value type " + std::to_string(type));
    GgufValue value;
    AUTOGLM_RETURN_IF_ERROR(read_value(c, GgufValueType(type), value, key, 0));
    if (kv_index_.count(key)) return c.fail("duplicate metadata key '" + key + "'");
    kv_index_[key] = kv_.size();
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufValueType::kUint32)
      return corrupt(path_ + ": general.alignment must be uint32, found " + gguf_value_type_name(a->type));
    if (a->integer == 0 || (a->integer & (a->integer - 1)) != 0)
      return corrupt(path_ + ": general.alignment " + std::to_string(a->integer) + " is not a power of two");
    alignment_ = uint64_t(a->integer);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    AUTOGLM_RETURN_IF_ERROR(c.read_string(t.name, "tensor name"));
    const std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    AUTOGLM_RETURN_IF_ERROR(c.read(n_dims, "tensor dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return c.fail(what + ": dimension count " + std::to_string(n_dims) + " is not in 1..4");
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      AUTOGLM_RETURN_IF_ERROR(c.read(ne, "tensor dimension"));
      if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
        return c.fail(what + ": dimension " + std::to_string(d) + " has invalid size " + std::to_string(ne));
      if (int64_t(ne) > std::numeric_limits<int64_t>::max() / n_elements)
        return c.fail(what + ": shape overflows 64 bits");
      n_elements *= int64_t(ne);
      t.dims.push_back(int64_t(ne));
    }
    uint32_t type = 0;
    AUTOGLM_RETURN_IF_ERROR(c.read(type, "tensor type"));
    const auto info = dtype_info(type);
    // A well-formed file of a type this build does not know: unsupported, not corrupt.
    if (!info) return c.unsupported_here(what + ": unknown or unsupported tensor type " + std::to_string(type));
    t.type = info->type;
    if (t.dims[0] % info->block_elems != 0)
      return c.fail(what + ": first dimension " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                    std::string(info->name) + " block size " + std::to_string(info->block_elems));
    const int64_t blocks = n_elements / info->block_elems;
    if (blocks > std::numeric_limits<int64_t>::max() / info->block_bytes)
      return c.fail(what + ": byte size overflows 64 bits");
    t.n_bytes = uint64_t(blocks * info->block_bytes);
    AUTOGLM_RETURN_IF_ERROR(c.read(t.offset, "tensor data offset"));
    if (t.offset % alignment_ != 0)
      return c.fail(what + ": data offset " + std::to_string(t.offset) + " is not aligned to " +
                    std::to_string(alignment_));
    if (tensor_index_.count(t.name)) return c.fail("duplicate tensor name '" + t.name + "'");
    tensor_index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }

  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_) return corrupt(path_ + ": truncated file: tensor data section missing");
  const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      return corrupt(path_ + ": tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", +" +
                     std::to_string(t.n_bytes) + ") lies outside the data section of " + std::to_string(data_size) +
                     " bytes (truncated file?)");
    t.data = base_ + data_offset_ + t.offset;
  }
  return Status::ok();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kString) return std::nullopt;
  return v->str;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_integer()) return std::nullopt;
  return v->integer;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->real;
  if (v->is_integer()) return double(v->integer);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v || !v->is_integer()) return std::nullopt;
  return v->integer != 0;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace autoglm
