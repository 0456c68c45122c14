// GGUF reader and writer: round trips, every documented error, and corruption of
// every header and tensor-table byte (this file is also built under ASan+UBSan).
#include <gtest/gtest.h>

#include <cstring>

#include "formats/gguf.h"
#include "test_util.h"

namespace autoglm {
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  const std::string s = test::read_file(path);
  return std::vector<uint8_t>(s.begin(), s.end());
}

Result<std::unique_ptr<GgufFile>> parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "image.gguf");
}

// A small file with a value of every metadata type, a nested array and three tensors.
std::vector<uint8_t> sample_file() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  GgufValue v;
  v.type = GgufValueType::kUint8;
  v.integer = 200;
  w.set("t.u8", v);
  v.type = GgufValueType::kInt8;
  v.integer = -100;
  w.set("t.i8", v);
  v.type = GgufValueType::kUint16;
  v.integer = 60000;
  w.set("t.u16", v);
  v.type = GgufValueType::kInt16;
  v.integer = -30000;
  w.set("t.i16", v);
  w.set("t.u32", GgufValue::u32(4000000000u));
  w.set("t.i32", GgufValue::i32(-2000000000));
  w.set("t.u64", GgufValue::u64(1ull << 40));
  v.type = GgufValueType::kInt64;
  v.integer = -(1ll << 40);
  w.set("t.i64", v);
  w.set("t.f32", GgufValue::f32(1.5f));
  v = GgufValue();
  v.type = GgufValueType::kFloat64;
  v.real = -2.25;
  w.set("t.f64", v);
  w.set("t.bool", GgufValue::boolean(true));
  w.set("t.strs", GgufValue::string_array({"a", "", "ccc"}));
  w.set("t.f32s", GgufValue::f32_array({1, 2, 3}));
  GgufValue nested;
  nested.type = GgufValueType::kArray;
  nested.elem_type = GgufValueType::kArray;
  nested.nested = {GgufValue::i32_array({1, 2}), GgufValue::i32_array({3})};
  w.set("t.nested", nested);
  std::vector<uint8_t> f32(4 * 8 * 2);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = uint8_t(i);
  EXPECT_TRUE(w.add_tensor("tensor.a", DType::F32, {8, 2}, f32).is_ok());
  EXPECT_TRUE(w.add_tensor("tensor.b", DType::Q8_0, {32}, std::vector<uint8_t>(34, 1)).is_ok());
  EXPECT_TRUE(w.add_tensor("tensor.c", DType::F16, {3}, std::vector<uint8_t>(6, 2)).is_ok());
  const std::string path = test::temp_path("sample.gguf");
  EXPECT_TRUE(w.write(path).is_ok());
  auto bytes = file_bytes(path);
  std::remove(path.c_str());
  return bytes;
}

TEST(GgufReader, ReadsStories260K) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  auto f = GgufFile::open(test::shared_path("models/stories260K.gguf"));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->tensors().size(), 48u);
  EXPECT_EQ((*f)->metadata().size(), 19u);
  EXPECT_EQ((*f)->data_offset(), 14176u);
  EXPECT_EQ((*f)->get_string("general.architecture"), "llama");
  EXPECT_EQ((*f)->get_int("llama.block_count"), 5);
  EXPECT_NEAR(*(*f)->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  const GgufTensorInfo* t = (*f)->find_tensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(t->type, DType::F32);
  EXPECT_EQ(t->n_bytes, 64u * 512 * 4);
  EXPECT_EQ((*f)->find("tokenizer.ggml.tokens")->strs.size(), 512u);
}

TEST(GgufReader, RejectsVersion1Clearly) {
  AUTOGLM_REQUIRE_SHARED("models/legacy/tinyllamas-stories-260k-f32.gguf");
  auto f = GgufFile::open(test::shared_path("models/legacy/tinyllamas-stories-260k-f32.gguf"));
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("GGUF v1 is not supported"), std::string::npos);
  EXPECT_NE(f.status().message().find("tinyllamas-stories-260k-f32.gguf"), std::string::npos);
}

TEST(GgufReader, MissingFileNamesThePath) {
  auto f = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  const auto bytes = sample_file();
  auto f = parse(bytes);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.get_int("t.u8"), 200);
  EXPECT_EQ(g.get_int("t.i8"), -100);
  EXPECT_EQ(g.get_int("t.u16"), 60000);
  EXPECT_EQ(g.get_int("t.i16"), -30000);
  EXPECT_EQ(g.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(g.get_int("t.i32"), -2000000000);
  EXPECT_EQ(g.get_int("t.u64"), 1ll << 40);
  EXPECT_EQ(g.get_int("t.i64"), -(1ll << 40));
  EXPECT_EQ(g.get_float("t.f32"), 1.5);
  EXPECT_EQ(g.get_float("t.f64"), -2.25);
  EXPECT_EQ(g.get_bool("t.bool"), true);
  EXPECT_EQ(g.find("t.strs")->strs, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(g.find("t.f32s")->reals, (std::vector<double>{1, 2, 3}));
  const GgufValue* nested = g.find("t.nested");
  ASSERT_EQ(nested->nested.size(), 2u);
  EXPECT_EQ(nested->nested[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested->nested[1].ints, (std::vector<int64_t>{3}));
  ASSERT_EQ(g.tensors().size(), 3u);
  const GgufTensorInfo* a = g.find_tensor("tensor.a");
  EXPECT_EQ(a->dims, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(a->data[5], 5);
  EXPECT_EQ(g.find_tensor("tensor.b")->n_bytes, 34u);
  EXPECT_EQ(g.find_tensor("tensor.c")->offset % 32, 0u);
}

TEST(GgufReader, ReadsVersion2) {
  auto bytes = sample_file();
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);  // v2 and v3 share the layout (64-bit counts)
  auto f = parse(bytes);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ((*f)->tensors().size(), 3u);
}

TEST(GgufWriter, RejectsWrongDataSize) {
  GgufWriter w;
  EXPECT_FALSE(w.add_tensor("x", DType::Q4_0, {32}, std::vector<uint8_t>(17)).is_ok());
  EXPECT_FALSE(w.add_tensor("x", DType::Q4_0, {31}, std::vector<uint8_t>(18)).is_ok());
  EXPECT_TRUE(w.add_tensor("x", DType::Q4_0, {32}, std::vector<uint8_t>(18)).is_ok());
  EXPECT_FALSE(w.add_tensor("x", DType::Q4_0, {32}, std::vector<uint8_t>(18)).is_ok());
}

// Byte offset of the tensor table: after the last metadata value.
size_t tensor_table_offset(const std::vector<uint8_t>& bytes) {
  auto f = parse(bytes);
  const auto& first = (*f)->tensors().front();
  // Search for the first tensor's name record (length + bytes).
  std::vector<uint8_t> needle(8);
  const uint64_t len = first.name.size();
  std::memcpy(needle.data(), &len, 8);
  needle.insert(needle.end(), first.name.begin(), first.name.end());
  return size_t(std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()) - bytes.begin());
}

void expect_error(std::vector<uint8_t> bytes, const std::string& fragment) {
  auto f = parse(bytes);
  ASSERT_FALSE(f.is_ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(f.status().message().find(fragment), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("image.gguf"), std::string::npos) << f.status().message();
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

TEST(GgufReader, NamesEachKindOfCorruption) {
  const auto good = sample_file();
  auto b = good;
  poke<uint32_t>(b, 0, 0x12345678);
  expect_error(b, "bad magic");
  b = good;
  poke<uint32_t>(b, 4, 4);
  expect_error(b, "unsupported GGUF version 4");
  b = good;
  poke<uint64_t>(b, 8, 1ull << 40);
  expect_error(b, "tensor count");
  b = good;
  poke<uint64_t>(b, 16, 1ull << 40);
  expect_error(b, "metadata count");
  b = good;
  poke<uint64_t>(b, 24, 1ull << 40);  // first key's length
  expect_error(b, "runs past the end");

  // Tensor "tensor.a": name length (8), name (8), n_dims (4), ne (8, 8), type (4), offset (8).
  const size_t table = tensor_table_offset(good);
  b = good;
  poke<uint32_t>(b, table + 16, 5);
  expect_error(b, "dimension count 5");
  b = good;
  poke<uint64_t>(b, table + 20, 1ull << 62);
  poke<uint64_t>(b, table + 28, 1ull << 62);
  expect_error(b, "overflows");
  b = good;
  poke<uint32_t>(b, table + 36, 99);
  expect_error(b, "tensor 'tensor.a': unknown or unsupported tensor type 99");
  EXPECT_EQ(parse(b).status().code(), StatusCode::kUnsupported);  // well-formed, of a type this build lacks
  b = good;
  poke<uint64_t>(b, table + 40, 1ull << 30);
  expect_error(b, "outside the data section");
  b = good;
  poke<uint64_t>(b, table + 40, 3);
  expect_error(b, "not aligned");
  b = good;
  b[table + 15] = 'b';  // "tensor.a" renamed "tensor.b": a duplicate
  expect_error(b, "duplicate tensor name 'tensor.b'");
  b = good;
  b.erase(b.end() - 27, b.end());  // the last tensor's 6 bytes are padded to 32
  expect_error(b, "outside the data section");
}

TEST(GgufReader, DuplicateKeyIsAnError) {
  auto good = sample_file();
  // Rename "t.u8" to "t.i8" (same length): the second occurrence is a duplicate.
  const std::string from = "t.u8", to = "t.i8";
  auto it = std::search(good.begin(), good.end(), from.begin(), from.end());
  ASSERT_NE(it, good.end());
  std::copy(to.begin(), to.end(), it);
  expect_error(good, "duplicate metadata key 't.i8'");
}

// Every byte of the header and tensor table, overwritten in turn, and every
// truncation: an error or a valid parse, never a crash (ASan/UBSan would see it).
void fuzz_every_byte(const std::vector<uint8_t>& good, size_t end) {
  size_t errors = 0;
  for (size_t at = 0; at < end; ++at)
    for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(good[at] ^ 0x80), uint8_t(good[at] + 1)}) {
      auto b = good;
      b[at] = value;
      auto f = parse(b);
      if (!f.is_ok()) {
        ++errors;
        EXPECT_FALSE(f.status().message().empty());
      }
    }
  EXPECT_GT(errors, end);  // most corruptions are detected
  for (size_t len = 0; len < good.size(); len += (len < end ? 1 : 97)) {
    std::vector<uint8_t> b(good.begin(), good.begin() + long(len));
    auto f = parse(b);
    EXPECT_FALSE(f.is_ok()) << "truncated to " << len << " bytes parsed";
  }
}

TEST(GgufReader, SurvivesCorruptionOfEveryHeaderByte) {
  const auto good = sample_file();
  auto f = parse(good);
  ASSERT_TRUE(f.is_ok());
  fuzz_every_byte(good, size_t((*f)->data_offset()));
}

TEST(GgufReader, SurvivesCorruptionOfStoriesTensorTable) {
  AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
  const auto good = file_bytes(test::shared_path("models/stories260K.gguf"));
  const size_t table = tensor_table_offset(good);
  // The whole tensor table and the fixed header, byte by byte; the long vocabulary in between is covered by the
  // synthetic file's arrays.
  std::vector<uint8_t> b;
  size_t errors = 0;
  for (size_t at = 0; at < 14176; at = (at == 23 ? table : at + 1))
    for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(good[at] ^ 0x40)}) {
      b = good;
      b[at] = value;
      if (!parse(b).is_ok()) ++errors;
    }
  EXPECT_GT(errors, 0u);
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// Deferred tensors are produced one at a time while the file is written; a producer's
// error (or a wrong size) stops the write with the tensor's name.
TEST(GgufWriterDeferred, ProducesTensorsWhileWriting) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  std::vector<float> values = {1, 2, 3, 4};
  int calls = 0;
  ASSERT_TRUE(w.add_tensor_deferred("a", DType::F32, {4}, 16, [&]() -> Result<std::pair<const uint8_t*, size_t>> {
                 ++calls;
                 return std::make_pair(reinterpret_cast<const uint8_t*>(values.data()), size_t(16));
               }).is_ok());
  const std::string path = test::temp_path("deferred.gguf");
  ASSERT_TRUE(w.write(path).is_ok());
  EXPECT_EQ(calls, 1);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  ASSERT_NE((*f)->find_tensor("a"), nullptr);
  EXPECT_EQ(std::memcmp((*f)->find_tensor("a")->data, values.data(), 16), 0);

  GgufWriter bad;
  ASSERT_TRUE(bad.add_tensor_deferred("b", DType::F32, {4}, 16,
                                      []() -> Result<std::pair<const uint8_t*, size_t>> {
                                        return invalid_argument("out of memory, pretend");
                                      })
                  .is_ok());
  const Status s = bad.write(path);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("tensor 'b': out of memory, pretend"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace autoglm
