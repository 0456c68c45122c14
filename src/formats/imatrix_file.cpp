#include "formats/imatrix_file.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "formats/gguf.h"

namespace autoglm {
namespace {

constexpr std::string_view kSums = ".in_sum2", kCounts = ".counts";

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<float> floats_of(const GgufTensorInfo& t) {
  std::vector<float> v(size_t(t.n_elements()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

Status check_entry(const std::string& path, const std::string& name, const ImatrixEntry& e) {
  if (e.n_cols <= 0 || e.counts.empty() || int64_t(e.sums.size()) != e.n_cols * e.n_mat())
    return corrupt(path + ": entry '" + name + "': " + std::to_string(e.sums.size()) + " sums for " +
                   std::to_string(e.counts.size()) + " counts");
  for (float v : e.sums)
    if (!std::isfinite(v)) return corrupt(path + ": entry '" + name + "' has a non-finite sum");
  for (float c : e.counts)
    if (!std::isfinite(c) || c < 0) return corrupt(path + ": entry '" + name + "' has a bad count");
  return Status::ok();
}

Result<Imatrix> read_gguf(const GgufFile& file, const std::string& path) {
  Imatrix m;
  if (const GgufValue* d = file.find("imatrix.datasets")) m.datasets = d->strs;
  m.chunk_count = file.get_int("imatrix.chunk_count").value_or(0);
  m.chunk_size = file.get_int("imatrix.chunk_size").value_or(0);
  std::map<std::string, const GgufTensorInfo*> sums, counts;
  for (const auto& t : file.tensors()) {
    const bool is_sum = ends_with(t.name, kSums), is_count = ends_with(t.name, kCounts);
    if (!is_sum && !is_count) continue;
    if (t.type != DType::F32) return corrupt(path + ": tensor '" + t.name + "' is not F32");
    const std::string base = t.name.substr(0, t.name.size() - (is_sum ? kSums : kCounts).size());
    (is_sum ? sums : counts)[base] = &t;
  }
  if (sums.empty()) return corrupt(path + ": no importance entries (no <weight>.in_sum2 tensors)");
  for (const auto& [name, s] : sums) {
    const auto c = counts.find(name);
    if (c == counts.end()) return corrupt(path + ": entry '" + name + "' has sums but no counts");
    ImatrixEntry e;
    e.n_cols = s->dims.empty() ? 0 : s->dims[0];
    e.sums = floats_of(*s);
    e.counts = floats_of(*c->second);
    AUTOGLM_RETURN_IF_ERROR(check_entry(path, name, e));
    m.entries[name] = std::move(e);
  }
  if (counts.size() != sums.size()) return corrupt(path + ": counts without sums");
  return m;
}

// The .dat form: int32 entry count; per entry an int32-prefixed name, int32 ncall, int32 nval and
// nval floats (mean * ncall); optionally int32 chunk count and an int32-prefixed dataset name.
class DatReader {
 public:
  DatReader(FILE* f, const std::string& path) : f_(f), path_(path) {}
  Result<Imatrix> read() {
    Imatrix m;
    AUTOGLM_ASSIGN_OR_RETURN(const int32_t n, int32());
    if (n < 1 || n > (1 << 20)) return corrupt(path_ + ": not an importance matrix (GGUF or .dat)");
    for (int32_t i = 0; i < n; ++i) {
      AUTOGLM_ASSIGN_OR_RETURN(const std::string name, string());
      AUTOGLM_ASSIGN_OR_RETURN(const int32_t ncall, int32());
      AUTOGLM_ASSIGN_OR_RETURN(const int32_t nval, int32());
      if (nval < 1 || nval > (1 << 28))
        return corrupt(path_ + ": entry '" + name + "' has " + std::to_string(nval) + " values");
      ImatrixEntry e;
      e.n_cols = nval;
      e.sums.resize(size_t(nval));
      if (std::fread(e.sums.data(), 4, e.sums.size(), f_) != e.sums.size()) return cut(name);
      e.counts = {float(std::max(ncall, 0))};  // the values are means times ncall: sums over ncall
      AUTOGLM_RETURN_IF_ERROR(check_entry(path_, name, e));
      m.entries[name] = std::move(e);
    }
    if (auto chunks = int32(); chunks) {
      m.chunk_count = *chunks;
      if (auto dataset = string(); dataset && !dataset->empty()) m.datasets = {*dataset};
    }
    return m;
  }

 private:
  Status cut(const std::string& what) { return corrupt(path_ + ": cut short in '" + what + "'"); }
  Result<int32_t> int32() {
    int32_t v;
    if (std::fread(&v, 4, 1, f_) != 1) return cut("a count");
    return v;
  }
  Result<std::string> string() {
    AUTOGLM_ASSIGN_OR_RETURN(const int32_t len, int32());
    if (len < 0 || len > 4096) return corrupt(path_ + ": a name of " + std::to_string(len) + " bytes");
    std::string s(size_t(len), '\0');
    if (len > 0 && std::fread(s.data(), 1, s.size(), f_) != s.size()) return cut("a name");
    return s;
  }
  FILE* f_;
  std::string path_;
};

}  // namespace

std::optional<std::vector<float>> Imatrix::weights(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end()) return std::nullopt;
  const ImatrixEntry& e = it->second;
  std::vector<float> w(e.sums.size(), 1.0f);
  for (int64_t m = 0; m < e.n_mat(); ++m)
    if (e.counts[size_t(m)] > 0)
      for (int64_t c = 0; c < e.n_cols; ++c)
        w[size_t(m * e.n_cols + c)] = e.sums[size_t(m * e.n_cols + c)] / e.counts[size_t(m)];
  return w;
}

Result<Imatrix> read_imatrix(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return not_found(path + ": cannot open the importance matrix");
  char magic[4] = {};
  const bool gguf = std::fread(magic, 1, 4, f.get()) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  if (gguf) {
    f.reset();
    AUTOGLM_ASSIGN_OR_RETURN(const auto file, GgufFile::open(path));
    return read_gguf(*file, path);
  }
  std::rewind(f.get());
  return DatReader(f.get(), path).read();
}

Status write_imatrix(const Imatrix& m, const std::string& path) {
  GgufWriter w;
  w.set("general.type", GgufValue::string("imatrix"));
  w.set("imatrix.datasets", GgufValue::string_array(m.datasets));
  w.set("imatrix.chunk_count", GgufValue::u32(uint32_t(m.chunk_count)));
  w.set("imatrix.chunk_size", GgufValue::u32(uint32_t(m.chunk_size)));
  for (const auto& [name, e] : m.entries) {  // std::map: sorted by name, as llama-imatrix writes
    std::vector<uint8_t> sums(e.sums.size() * 4), counts(e.counts.size() * 4);
    std::memcpy(sums.data(), e.sums.data(), sums.size());
    std::memcpy(counts.data(), e.counts.data(), counts.size());
    AUTOGLM_RETURN_IF_ERROR(
        w.add_tensor(name + std::string(kSums), DType::F32, {e.n_cols, e.n_mat()}, std::move(sums)));
    AUTOGLM_RETURN_IF_ERROR(w.add_tensor(name + std::string(kCounts), DType::F32, {1, e.n_mat()}, std::move(counts)));
  }
  return w.write(path);
}

}  // namespace autoglm
