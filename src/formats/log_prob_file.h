// llama-perplexity's saved log-probabilities (--kl-divergence-base): a header (the magic
// "_logits_", n_ctx, n_vocab, n_chunk as int32, then the n_chunk * n_ctx tokens), then per
// scored position the log-softmax of its logits as uint16 steps between a floor 16 below the
// largest logit and that logit (two float32 fields first: the step and the floor's log-prob;
// the record padded to an even count of values).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct LogProbHeader {
  int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;  // n_chunk * n_ctx
};

// uint16 values in one position's record: the two floats, n_vocab values rounded up to even.
int64_t log_prob_record_values(int32_t n_vocab);

// A position's logits as the record's values; decode_log_probs undoes it (to within half a step,
// everything below the floor at the floor).
std::vector<uint16_t> encode_log_probs(const float* logits, int32_t n_vocab);
void decode_log_probs(const uint16_t* record, int32_t n_vocab, float* log_probs);

class LogProbWriter {
 public:
  static Result<LogProbWriter> create(const std::string& path, const LogProbHeader& header);
  Status append(const float* logits);  // one scored position's n_vocab logits

 private:
  std::string path_;
  int32_t n_vocab_ = 0;
  std::unique_ptr<FILE, int (*)(FILE*)> file_{nullptr, &std::fclose};
};

class LogProbReader {
 public:
  // Errors name the file: not this format (the magic), a header out of range, tokens cut short.
  static Result<LogProbReader> open(const std::string& path);
  const LogProbHeader& header() const { return header_; }
  // The next position's log-probabilities (n_vocab); an error names the file when it ends early.
  Status next(std::vector<float>& log_probs);

 private:
  std::string path_;
  LogProbHeader header_;
  std::vector<uint16_t> record_;
  std::unique_ptr<FILE, int (*)(FILE*)> file_{nullptr, &std::fclose};
};

}  // namespace autoglm
