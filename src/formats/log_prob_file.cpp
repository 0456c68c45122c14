#include "formats/log_prob_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace autoglm {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr float kFloorBelowMax = 16.0f;  // logits further below the largest share the floor
constexpr int32_t kMaxVocab = 1 << 24;

void put_float(uint16_t* at, float v) {
  std::memcpy(at, &v, 4);
}

float get_float(const uint16_t* at) {
  float v;
  std::memcpy(&v, at, 4);
  return v;
}

}  // namespace

int64_t log_prob_record_values(int32_t n_vocab) {
  return 4 + 2 * ((int64_t(n_vocab) + 1) / 2);
}

std::vector<uint16_t> encode_log_probs(const float* logits, int32_t n_vocab) {
  std::vector<uint16_t> record(size_t(log_prob_record_values(n_vocab)), 0);
  const float top = *std::max_element(logits, logits + n_vocab);
  const float floor = std::max(*std::min_element(logits, logits + n_vocab), top - kFloorBelowMax);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i] - top));
  const float log_sum = float(std::log(sum));
  const float step = (top - floor) / 65535.0f;
  put_float(&record[0], step);
  put_float(&record[2], floor - top - log_sum);
  if (step == 0) return record;
  const float inv = 1.0f / step;
  for (int32_t i = 0; i < n_vocab; ++i)
    if (logits[i] > floor)
      record[size_t(4 + i)] = uint16_t(std::nearbyint(std::min(65535.0f, (logits[i] - floor) * inv)));
  return record;
}

void decode_log_probs(const uint16_t* record, int32_t n_vocab, float* log_probs) {
  const float step = get_float(record), floor = get_float(record + 2);
  for (int32_t i = 0; i < n_vocab; ++i) log_probs[i] = step * float(record[4 + i]) + floor;
}

Result<LogProbWriter> LogProbWriter::create(const std::string& path, const LogProbHeader& header) {
  LogProbWriter w;
  w.path_ = path;
  w.n_vocab_ = header.n_vocab;
  w.file_.reset(std::fopen(path.c_str(), "wb"));
  if (!w.file_) return io_error(path + ": cannot create the log-probability file");
  const int32_t fields[3] = {header.n_ctx, header.n_vocab, header.n_chunk};
  if (std::fwrite(kMagic, 1, 8, w.file_.get()) != 8 || std::fwrite(fields, 4, 3, w.file_.get()) != 3 ||
      std::fwrite(header.tokens.data(), 4, header.tokens.size(), w.file_.get()) != header.tokens.size())
    return io_error(path + ": write failed");
  return w;
}

Status LogProbWriter::append(const float* logits) {
  const auto record = encode_log_probs(logits, n_vocab_);
  if (std::fwrite(record.data(), 2, record.size(), file_.get()) != record.size())
    return io_error(path_ + ": write failed");
  return Status::ok();
}

Result<LogProbReader> LogProbReader::open(const std::string& path) {
  LogProbReader r;
  r.path_ = path;
  r.file_.reset(std::fopen(path.c_str(), "rb"));
  if (!r.file_) return not_found(path + ": cannot open the log-probability file");
  char magic[8];
  int32_t fields[3];
  if (std::fread(magic, 1, 8, r.file_.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0)
    return corrupt(path + ": not a file of log-probabilities (no '_logits_' magic)");
  if (std::fread(fields, 4, 3, r.file_.get()) != 3) return corrupt(path + ": the header is cut short");
  auto& h = r.header_;
  h.n_ctx = fields[0], h.n_vocab = fields[1], h.n_chunk = fields[2];
  if (h.n_ctx < 2 || h.n_ctx > (1 << 24) || h.n_vocab < 1 || h.n_vocab > kMaxVocab || h.n_chunk < 1 ||
      int64_t(h.n_chunk) * h.n_ctx > (int64_t(1) << 30))
    return corrupt(path + ": header out of range (n_ctx " + std::to_string(h.n_ctx) + ", n_vocab " +
                   std::to_string(h.n_vocab) + ", n_chunk " + std::to_string(h.n_chunk) + ")");
  h.tokens.resize(size_t(int64_t(h.n_chunk) * h.n_ctx));
  if (std::fread(h.tokens.data(), 4, h.tokens.size(), r.file_.get()) != h.tokens.size())
    return corrupt(path + ": the tokens are cut short");
  for (int32_t t : h.tokens)
    if (t < 0 || t >= h.n_vocab) return corrupt(path + ": token " + std::to_string(t) + " is outside the vocabulary");
  r.record_.resize(size_t(log_prob_record_values(h.n_vocab)));
  return r;
}

Status LogProbReader::next(std::vector<float>& log_probs) {
  if (std::fread(record_.data(), 2, record_.size(), file_.get()) != record_.size())
    return corrupt(path_ + ": the log-probabilities end early");
  log_probs.resize(size_t(header_.n_vocab));
  decode_log_probs(record_.data(), header_.n_vocab, log_probs.data());
  return Status::ok();
}

}  // namespace autoglm
