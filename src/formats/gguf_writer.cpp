#include <cstdio>
#include <cstring>
#include <memory>

#include "formats/gguf.h"

namespace autoglm {
namespace {

class ByteSink {
 public:
  template <typename T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
  }
  std::vector<uint8_t> bytes;
};

void put_scalar(ByteSink& out, GgufValueType t, int64_t integer, double real) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool: out.put<uint8_t>(uint8_t(integer)); break;
    case GgufValueType::kInt8: out.put<int8_t>(int8_t(integer)); break;
    case GgufValueType::kUint16: out.put<uint16_t>(uint16_t(integer)); break;
    case GgufValueType::kInt16: out.put<int16_t>(int16_t(integer)); break;
    case GgufValueType::kUint32: out.put<uint32_t>(uint32_t(integer)); break;
    case GgufValueType::kInt32: out.put<int32_t>(int32_t(integer)); break;
    case GgufValueType::kUint64: out.put<uint64_t>(uint64_t(integer)); break;
    case GgufValueType::kInt64: out.put<int64_t>(integer); break;
    case GgufValueType::kFloat32: out.put<float>(float(real)); break;
    case GgufValueType::kFloat64: out.put<double>(real); break;
    default: break;
  }
}

void put_value(ByteSink& out, const GgufValue& v) {
  if (v.type == GgufValueType::kString) return out.put_string(v.str);
  if (v.type != GgufValueType::kArray) return put_scalar(out, v.type, v.integer, v.real);
  out.put<uint32_t>(uint32_t(v.elem_type));
  out.put<uint64_t>(v.array_size());
  for (const auto& s : v.strs) out.put_string(s);
  for (const auto& n : v.nested) put_value(out, n);
  for (double r : v.reals) put_scalar(out, v.elem_type, 0, r);
  for (int64_t i : v.ints) put_scalar(out, v.elem_type, i, 0);
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kv_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  kv_.emplace_back(key, std::move(value));
}

Status GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> dims,
                              std::vector<uint8_t> data) {
  AUTOGLM_RETURN_IF_ERROR(add_tensor_view(name, type, std::move(dims), data.data(), data.size()));
  tensors_.back().owned = std::move(data);  // the buffer moves, its bytes stay where they are
  return Status::ok();
}

Status GgufWriter::add_tensor_view(const std::string& name, DType type, std::vector<int64_t> dims, const uint8_t* data,
                                   size_t n_bytes) {
  if (dims.empty() || dims.size() > 4) return invalid_argument("tensor '" + name + "': needs 1..4 dimensions");
  int64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  const int64_t row_bytes = dtype_row_bytes(type, dims[0]);
  if (row_bytes < 0)
    return invalid_argument("tensor '" + name + "': first dimension " + std::to_string(dims[0]) +
                            " is not a multiple of the " + std::string(dtype_name(type)) + " block size");
  if (int64_t(n_bytes) != row_bytes * rows)
    return invalid_argument("tensor '" + name + "': " + std::to_string(n_bytes) + " data bytes, expected " +
                            std::to_string(row_bytes * rows));
  for (const auto& t : tensors_)
    if (t.name == name) return invalid_argument("tensor '" + name + "' added twice");
  tensors_.push_back({name, type, std::move(dims), {}, data, n_bytes, nullptr});
  return Status::ok();
}

Status GgufWriter::add_tensor_deferred(const std::string& name, DType type, std::vector<int64_t> dims, size_t n_bytes,
                                       Producer produce) {
  AUTOGLM_RETURN_IF_ERROR(add_tensor_view(name, type, std::move(dims), nullptr, n_bytes));
  tensors_.back().produce = std::move(produce);
  return Status::ok();
}

Status GgufWriter::write(const std::string& path, uint64_t alignment) const {
  ByteSink head;
  head.put<uint32_t>(0x46554747);
  head.put<uint32_t>(3);
  head.put<uint64_t>(tensors_.size());
  const bool has_alignment_key = alignment != 32;
  head.put<uint64_t>(kv_.size() + (has_alignment_key ? 1 : 0));
  for (const auto& [key, value] : kv_) {
    head.put_string(key);
    head.put<uint32_t>(uint32_t(value.type));
    put_value(head, value);
  }
  if (has_alignment_key) {
    head.put_string("general.alignment");
    head.put<uint32_t>(uint32_t(GgufValueType::kUint32));
    head.put<uint32_t>(uint32_t(alignment));
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    head.put_string(t.name);
    head.put<uint32_t>(uint32_t(t.dims.size()));
    for (auto d : t.dims) head.put<uint64_t>(uint64_t(d));
    head.put<uint32_t>(uint32_t(t.type));
    head.put<uint64_t>(offset);
    offset += (t.n_bytes + alignment - 1) / alignment * alignment;
  }
  head.pad_to(alignment);

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return io_error(path + ": cannot open for writing: " + std::strerror(errno));
  bool ok = std::fwrite(head.bytes.data(), 1, head.bytes.size(), f.get()) == head.bytes.size();
  static const uint8_t zeros[256] = {};
  for (const auto& t : tensors_) {
    const uint8_t* data = t.data;
    if (t.produce && ok) {
      auto made = t.produce();
      if (!made) return Status(made.status().code(), path + ": tensor '" + t.name + "': " + made.status().message());
      if (made->second != t.n_bytes)
        return Status(StatusCode::kInternal, path + ": tensor '" + t.name + "' came out at the wrong size");
      data = made->first;
    }
    ok = ok && std::fwrite(data, 1, t.n_bytes, f.get()) == t.n_bytes;
    const size_t pad = (alignment - t.n_bytes % alignment) % alignment;
    for (size_t left = pad; left > 0 && ok;) {
      const size_t n = std::min<size_t>(left, sizeof(zeros));
      ok = std::fwrite(zeros, 1, n, f.get()) == n;
      left -= n;
    }
  }
  if (!ok) return io_error(path + ": write failed: " + std::strerror(errno));
  if (std::fclose(f.release()) != 0) return io_error(path + ": close failed");
  return Status::ok();
}

}  // namespace autoglm
