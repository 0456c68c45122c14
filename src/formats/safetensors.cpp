#include "formats/safetensors.h"

#include "formats/json_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

namespace autoglm {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the Hugging Face library's limit

int64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4},  {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool non_negative_integer(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// One tensor entry of the header, checked against the data region of `data_size` bytes.
Result<SafetensorsTensor> parse_tensor(const std::string& file, const std::string& name, const json& entry,
                                       const uint8_t* data, uint64_t data_size) {
  const std::string where = file + ": tensor '" + name + "'";
  if (!entry.is_object()) return corrupt(where + ": entry is not an object");
  SafetensorsTensor t;
  t.name = name;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return corrupt(where + ": 'dtype' is missing or not a string");
  t.dtype = dtype->get<std::string>();
  t.element_bytes = dtype_bytes(t.dtype);
  if (t.element_bytes == 0) return corrupt(where + ": unknown dtype '" + t.dtype + "'");
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array() || shape->size() > 8)
    return corrupt(where + ": 'shape' is missing or not an array of at most 8 sizes");
  uint64_t n_elements = 1;
  for (const auto& d : *shape) {
    if (!non_negative_integer(d)) return corrupt(where + ": 'shape' holds " + d.dump() + ", not a size");
    const uint64_t v = d.get<uint64_t>();
    if (v != 0 && n_elements > std::numeric_limits<uint64_t>::max() / 8 / v)
      return corrupt(where + ": 'shape' is too large");
    n_elements *= v;
    t.shape.push_back(int64_t(v));
  }
  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !non_negative_integer((*offsets)[0]) ||
      !non_negative_integer((*offsets)[1]))
    return corrupt(where + ": 'data_offsets' is not a pair of byte offsets");
  const uint64_t begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    return corrupt(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   "] fall outside the " + std::to_string(data_size) + " data bytes");
  const uint64_t need = n_elements * uint64_t(t.element_bytes);
  if (end - begin != need)
    return corrupt(where + ": data_offsets hold " + std::to_string(end - begin) + " bytes; " + t.dtype + " x " +
                   shape_text(t.shape) + " needs " + std::to_string(need));
  t.data = data + begin;
  t.n_bytes = need;
  return t;
}

}  // namespace

int64_t SafetensorsTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  AUTOGLM_RETURN_IF_ERROR(file->parse_all(mapping->data(), mapping->size()));
  file->mapping_ = std::move(mapping);
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                                const std::string& name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = name;
  AUTOGLM_RETURN_IF_ERROR(file->parse_all(bytes, size));
  return file;
}

Status SafetensorsFile::parse_all(const uint8_t* bytes, size_t size) {
  if (size < 8) return corrupt(path_ + ": " + std::to_string(size) + " bytes is too short for a safetensors file");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];
  if (header_bytes > kMaxHeaderBytes || header_bytes > size - 8)
    return corrupt(path_ + ": header length " + std::to_string(header_bytes) + " does not fit the file of " +
                   std::to_string(size) + " bytes");
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_bytes);
  } catch (const json::exception& e) {
    return corrupt(path_ + ": the header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return corrupt(path_ + ": the header is not a JSON object");
  const uint8_t* data = bytes + 8 + header_bytes;
  const uint64_t data_size = size - 8 - header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return corrupt(path_ + ": '__metadata__' is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return corrupt(path_ + ": __metadata__ '" + key + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    AUTOGLM_ASSIGN_OR_RETURN(SafetensorsTensor t, parse_tensor(path_, name, entry, data, data_size));
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  // No two tensors may share bytes.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const auto& t : tensors_)
    if (t.n_bytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->data < by_offset[i - 1]->data + by_offset[i - 1]->n_bytes)
      return corrupt(path_ + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                     "' overlap in the data");
  return Status::ok();
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::open_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ck = std::make_unique<SafetensorsCheckpoint>();
  const fs::path single = fs::path(dir) / "model.safetensors", index = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> expected;  // tensor -> shard, from the index
  if (fs::exists(index)) {
    AUTOGLM_ASSIGN_OR_RETURN(const json j, read_json_file(index.string()));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      return corrupt(index.string() + ": 'weight_map' is missing or not an object");
    std::vector<std::string> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string()) return corrupt(index.string() + ": weight_map '" + name + "' is not a file name");
      const std::string file = shard.get<std::string>();
      if (file.find('/') != std::string::npos || file == "..")
        return corrupt(index.string() + ": weight_map '" + name + "' names '" + file + "' outside the folder");
      expected[name] = file;
      if (std::find(shards.begin(), shards.end(), file) == shards.end()) shards.push_back(file);
    }
    for (const auto& shard : shards) {
      AUTOGLM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open((fs::path(dir) / shard).string()));
      ck->files_.push_back(std::move(f));
    }
  } else if (fs::exists(single)) {
    AUTOGLM_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(single.string()));
    ck->files_.push_back(std::move(f));
  } else {
    return not_found(dir + ": neither model.safetensors nor model.safetensors.index.json");
  }
  for (const auto& f : ck->files_)
    for (const auto& t : f->tensors()) {
      if (ck->by_name_.count(t.name)) return corrupt(f->path() + ": tensor '" + t.name + "' is also in another shard");
      const auto want = expected.find(t.name);
      if (!expected.empty() && (want == expected.end() || fs::path(f->path()).filename() != want->second))
        return corrupt(f->path() + ": tensor '" + t.name + "' is not where model.safetensors.index.json puts it");
      ck->by_name_[t.name] = &t;
    }
  for (const auto& [name, shard] : expected)
    if (!ck->by_name_.count(name))
      return corrupt((fs::path(dir) / shard).string() + ": tensor '" + name + "' listed in the index is missing");
  return ck;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace autoglm
