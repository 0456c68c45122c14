#include "kernels/ref/fit.h"

#include <algorithm>
#include <cmath>

namespace autoglm::ref {
namespace {

// Candidate steps each side of the plain one, in units of kFitDelta code levels: runs are small
// (16 or 32 values), so the search is cheap next to the accuracy it buys.
constexpr int kFitSteps = 12;
constexpr float kFitDelta = 0.1f;

int nearest(float v) {
  return int(std::lround(v));
}

}  // namespace

float signed_absmax(const float* x, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  return best;
}

void fit_affine(const float* x, const float* w, int n, int levels, float* scale, float* offset) {
  const float lo = std::min(0.0f, *std::min_element(x, x + n)), hi = *std::max_element(x, x + n);
  *scale = (hi - lo) / float(levels);
  *offset = -lo;
  if (hi <= lo) return;
  auto error = [&](float sc, float off) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest((x[i] + off) / sc), 0, levels);
      const double d = double(sc) * q - off - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  double best = error(*scale, *offset);
  for (int k = -kFitSteps; k <= kFitSteps; ++k) {
    const float inv = (float(levels) + kFitDelta * float(k)) / (hi - lo);
    double sw = 0, sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest((x[i] - lo) * inv), 0, levels);
      sw += w[i], sq += w[i] * q, sqq += w[i] * double(q) * q, sx += w[i] * x[i], sxq += w[i] * double(x[i]) * q;
    }
    const double det = sw * sqq - sq * sq;
    if (det <= 0) continue;
    double sc = (sw * sxq - sx * sq) / det, m = (sx - sc * sq) / sw;  // x ~ sc * q + m
    if (m > 0) sc = sxq / sqq, m = 0;                                 // the offset may only lower values
    if (sc <= 0) continue;
    const double e = error(float(sc), float(-m));
    if (e < best) best = e, *scale = float(sc), *offset = float(-m);
  }
}

float fit_symmetric(const float* x, const float* w, int n, int half) {
  const float extreme = signed_absmax(x, n);
  float scale = extreme / float(-half);
  if (extreme == 0) return 0;
  auto error = [&](float sc) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest(x[i] / sc), -half, half - 1);
      const double d = double(sc) * q - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  double best = error(scale);
  for (int k = -kFitSteps; k <= kFitSteps; ++k) {
    const float inv = -(float(half) + kFitDelta * float(k)) / extreme;
    double sqq = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(nearest(x[i] * inv), -half, half - 1);
      sqq += w[i] * double(q) * q, sxq += w[i] * double(x[i]) * q;
    }
    if (sqq <= 0) continue;
    const float sc = float(sxq / sqq);
    if (sc == 0) continue;
    const double e = error(sc);
    if (e < best) best = e, scale = sc;
  }
  return scale;
}

int nearest_code(const signed char* values, float v) {
  // 16 sorted entries: a binary search for the first midpoint above v.
  int lo = 0, hi = 15;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (v > 0.5f * float(values[mid] + values[mid + 1]))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

float fit_codebook(const float* x, const float* w, int n, const signed char* values) {
  const float extreme = signed_absmax(x, n);
  if (extreme == 0) return 0;
  // The extreme on either end of the book, stretched or clipped by up to 18%; for the codes
  // each candidate picks, the least-squares scale, whose error is sum w x^2 - (sum w x v)^2 /
  // (sum w v^2): the candidate with the largest (sum w x v)^2 / (sum w v^2) wins.
  constexpr float kCodebookStep = 0.03f;
  constexpr int kCodebookSteps = 6;
  float scale = extreme / float(values[0]);
  double best = -1;
  for (const int end : {int(values[0]), int(values[15])})
    for (int k = -kCodebookSteps; k <= kCodebookSteps; ++k) {
      const float inv = float(end) * (1.0f + kCodebookStep * float(k)) / extreme;
      float svv = 0, sxv = 0;
      for (int i = 0; i < n; ++i) {
        const float v = values[nearest_code(values, x[i] * inv)];
        svv += w[i] * v * v, sxv += w[i] * x[i] * v;
      }
      if (svv <= 0 || sxv * sxv / svv <= best) continue;
      best = sxv * sxv / svv;
      scale = float(sxv / svv);
    }
  return scale;
}

}  // namespace autoglm::ref
