// Where a forward pass spends its time, per op class: counted when enabled, read from any
// thread (the server exports it in /metrics), printed by `run`/`bench --profile`.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace autoglm {

enum class Op {
  kEmbedding,
  kQkvProjection,
  kAttentionCore,
  kOutputProjection,
  kFfn,
  kLogits,
  kSampling,
  kOther,
  kCount
};

const char* op_name(Op op);
// Short name for labels ("qkv_projection").
const char* op_key(Op op);

class OpProfile {
 public:
  void set_enabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void add(Op op, int64_t nanoseconds) { ns_[size_t(op)].fetch_add(nanoseconds, std::memory_order_relaxed); }
  void add_tokens(int64_t n) { tokens_.fetch_add(n, std::memory_order_relaxed); }
  double seconds(Op op) const { return double(ns_[size_t(op)].load(std::memory_order_relaxed)) * 1e-9; }
  int64_t tokens() const { return tokens_.load(std::memory_order_relaxed); }
  void reset();
  // A table of ms per token and percent for each op.
  std::string table() const;

 private:
  bool enabled_ = false;
  std::array<std::atomic<int64_t>, size_t(Op::kCount)> ns_{};
  std::atomic<int64_t> tokens_{0};
};

// Adds the time from construction to destruction (or to the next mark) to an op, if enabled.
class OpTimer {
 public:
  OpTimer(OpProfile& p, Op op) : p_(p), op_(op), start_(p.enabled() ? now() : 0) {}
  ~OpTimer() { mark(op_); }
  // Charges the time so far to the timer's op and goes on timing `next`.
  void mark(Op next) {
    if (!p_.enabled()) return;
    const int64_t t = now();
    p_.add(op_, t - start_);
    start_ = t;
    op_ = next;
  }

 private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  OpProfile& p_;
  Op op_;
  int64_t start_;
};

}  // namespace autoglm
