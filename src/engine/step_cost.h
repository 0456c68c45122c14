// The predicted time of one engine step from its shape: a fixed part, a part per token
// computed, and a part per attended position (each token attends to its sequence's
// positions so far). Fitted online, by least squares over exponentially fading history,
// from the steps the engine times; the scheduler plans steps by it (scheduler.h).
#pragma once

#include <array>
#include <cstdint>

namespace autoglm {

struct StepShape {
  int64_t tokens = 0;    // tokens computed in the step
  int64_t attended = 0;  // sum over those tokens of the positions each attends to
};

class StepCostModel {
 public:
  StepCostModel() = default;
  StepCostModel(double base_ms, double per_token_ms, double per_position_ms)
      : params_{base_ms, per_token_ms, per_position_ms} {}

  double predict_ms(const StepShape& s) const {
    return params_[0] + params_[1] * double(s.tokens) + params_[2] * double(s.attended);
  }
  // One measured step: the fit moves toward it (older steps fade by `decay` per step).
  void observe(const StepShape& s, double ms);

  double base_ms() const { return params_[0]; }
  double per_token_ms() const { return params_[1]; }
  double per_position_ms() const { return params_[2]; }
  int64_t observations() const { return observations_; }

 private:
  static constexpr double kDecay = 0.98;
  std::array<double, 3> params_{0.0, 1.0, 0.0};
  std::array<std::array<double, 3>, 3> gram_{};  // faded sum of x x^T
  std::array<double, 3> moment_{};               // faded sum of x y
  int64_t observations_ = 0;
};

// The positions a chunk of n tokens attends to when `computed` positions precede it.
inline int64_t attended_positions(int64_t computed, int64_t n) {
  return n * computed + n * (n + 1) / 2;
}

}  // namespace autoglm
