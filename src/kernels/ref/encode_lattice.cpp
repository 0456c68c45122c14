// Encoders of the lattice types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, the
// inverses of block_decode.h's layouts. Each run of values sharing a scale gets the scale at which
// the grid fits it best (candidates about the one that puts its largest magnitude on the top
// level, each refit by least squares for the entries it chose); the runs' scales are rounded to
// the type's scale codes against one fp16 block scale, and the entries are chosen again at the
// scales as they decode. The IQ2/IQ3 grids hold magnitudes, with a sign per value; where only 7
// sign bits are stored, a group with an odd count of negatives flips the value that costs least.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "core/half.h"
#include "kernels/ref/block_decode.h"
#include "kernels/ref/encoders.h"
#include "kernels/ref/iq_grids.h"
#include "kernels/ref/lattice_index.h"

namespace autoglm::ref {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

const LatticeIndex& iq2_xxs_lattice() {
  static const LatticeIndex index(iq_grids::kIq2XxsGrid, 256, 8, false);
  return index;
}
const LatticeIndex& iq2_xs_lattice() {
  static const LatticeIndex index(iq_grids::kIq2XsGrid, 512, 8, false);
  return index;
}
const LatticeIndex& iq2_s_lattice() {
  static const LatticeIndex index(iq_grids::kIq2SGrid, 1024, 8, false);
  return index;
}
const LatticeIndex& iq3_xxs_lattice() {
  static const LatticeIndex index(iq_grids::kIq3XxsGrid, 256, 4);
  return index;
}
const LatticeIndex& iq3_s_lattice() {
  static const LatticeIndex index(iq_grids::kIq3SGrid, 512, 4);
  return index;
}
const LatticeIndex& iq1_lattice() {
  static const LatticeIndex index(iq_grids::kIq1SGrid, 2048, 8, true);
  return index;
}

// The weighted error of a run at one scale, and the sums whose ratio is the least-squares scale
// for the entries chosen: sum w x g / sum w g^2.
struct LatticeFit {
  double error = 0, sxg = 0, sgg = 0;
};

// Run scale = d * (base + step * code), code in [0, max_code].
struct ScaleCode {
  float base, step;
  int max_code;
};

int scale_code(float run_scale, float d, ScaleCode c) {
  return d > 0 ? std::clamp(int(std::lround((run_scale / d - c.base) / c.step)), 0, c.max_code) : 0;
}

float decoded_scale(int code, float d, ScaleCode c) {
  return d * (c.base + c.step * float(code));
}

// The scale for a run: candidates put its largest magnitude on one of `tops` (grid levels), times
// `steps` factors f spread over [lo, hi]; each candidate's entries then give their least-squares
// scale. assign(scale, fit) chooses the run's entries at a scale and fills fit.
struct RunFit {
  float scale = 0;
  double error = kInfinity;
  double curvature = 0;  // near the scale, the error grows about as curvature * (change)^2
};

template <typename Assign>
RunFit search_scale(float amax, std::span<const float> tops, float lo, float hi, int steps, Assign assign) {
  RunFit best;
  if (amax <= 0) return {0, 0, 0};
  auto consider = [&](float s, LatticeFit* fit) {
    *fit = {};
    assign(s, fit);
    if (fit->error < best.error) best = {s, fit->error, fit->sgg};
  };
  for (const float top : tops)
    for (int k = 0; k < steps; ++k) {
      const float f = lo + (hi - lo) * float(k) / float(steps - 1);
      LatticeFit fit, refit;
      consider(amax / (top * f), &fit);
      if (fit.sgg > 0 && fit.sxg > 0) consider(float(fit.sxg / fit.sgg), &refit);
    }
  return best;
}

// The block scale whose rounded run scales lose least. The candidates are the largest run's
// scale on the top code and every block scale at which some run's scale decodes exactly.
float block_scale(const RunFit* runs, int n, ScaleCode c) {
  auto loss = [&](float d) {
    double sum = 0;
    for (int r = 0; r < n; ++r) {
      const double change = decoded_scale(scale_code(runs[r].scale, d, c), d, c) - runs[r].scale;
      sum += runs[r].curvature * change * change;
    }
    return sum;
  };
  float top = 0;
  for (int r = 0; r < n; ++r) top = std::max(top, runs[r].scale);
  float best_d = top / (c.base + c.step * float(c.max_code));
  double best = loss(best_d);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q <= c.max_code && runs[r].scale > 0; ++q) {
      const float d = runs[r].scale / (c.base + c.step * float(q));
      const double l = loss(d);
      if (l < best) best = l, best_d = d;
    }
  return best_d;
}

float max_magnitude(const float* x, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

// ---- IQ2 and IQ3: magnitudes on the grid, a sign per value ----

struct SignedLattice {
  const LatticeIndex* index;
  bool parity;  // 7 sign bits stored a group of 8: the 8th makes the count of negatives even
};

// One group of 8 values: one entry of 8 values or two of 4, and the 8 sign bits.
struct SignedGroup {
  uint16_t entry[2] = {0, 0};
  uint8_t signs = 0;
};

float group_value(const LatticeIndex& index, const SignedGroup& g, int j) {
  return index.dims() == 8 ? index.entry(g.entry[0])[j] : index.entry(g.entry[j / 4])[j % 4];
}

// The entry nearest magnitudes m at scale s. When `odd`, the cost of flipping one value's sign
// (4 w m s g: its error goes from (m - s g)^2 to (m + s g)^2) joins the error, and the value
// that costs least goes to *flip.
double best_entry(const LatticeIndex& index, const float* m, const float* w, float s, bool odd, uint16_t* entry,
                  int* flip) {
  const int dims = index.dims();
  float t[8];
  for (int j = 0; j < dims; ++j) t[j] = m[j] / s;
  double best = kInfinity;
  for (const uint16_t c : index.candidates(t, !odd)) {
    const float* g = index.entry(c);
    double e = 0, cheapest = kInfinity;
    int cheapest_j = -1;
    for (int j = 0; j < dims; ++j) {
      const double diff = double(m[j]) - double(s) * g[j];
      e += w[j] * diff * diff;
      const double cost = 4.0 * w[j] * m[j] * s * g[j];
      if (odd && cost < cheapest) cheapest = cost, cheapest_j = j;
    }
    if (odd) e += cheapest;
    if (e < best) best = e, *entry = c, *flip = cheapest_j;
  }
  return best;
}

// The value of the 8 whose sign flip costs least, for the entries chosen.
int cheapest_flip(const LatticeIndex& index, const SignedGroup& g, const float* m, const float* w, float s) {
  int best = 0;
  double cheapest = kInfinity;
  for (int j = 0; j < 8; ++j) {
    const double cost = double(w[j]) * m[j] * s * group_value(index, g, j);
    if (cost < cheapest) cheapest = cost, best = j;
  }
  return best;
}

void assign_signed_group(const SignedLattice& lattice, const float* x, const float* w, float s, SignedGroup* g,
                         LatticeFit* fit) {
  *g = {};
  float m[8];
  for (int j = 0; j < 8; ++j) {
    m[j] = std::fabs(x[j]);
    if (x[j] < 0) g->signs = uint8_t(g->signs | (1 << j));
  }
  if (s <= 0) {
    for (int j = 0; j < 8; ++j) fit->error += double(w[j]) * m[j] * m[j];
    g->signs = 0;
    return;
  }
  const LatticeIndex& index = *lattice.index;
  const bool odd = lattice.parity && (std::popcount(g->signs) & 1);
  int flip = -1;
  if (index.dims() == 8) {
    best_entry(index, m, w, s, odd, &g->entry[0], &flip);
  } else {
    best_entry(index, m, w, s, false, &g->entry[0], &flip);
    best_entry(index, m + 4, w + 4, s, false, &g->entry[1], &flip);
    flip = odd ? cheapest_flip(index, *g, m, w, s) : -1;
  }
  if (flip >= 0) g->signs = uint8_t(g->signs ^ (1 << flip));
  for (int j = 0; j < 8; ++j) {
    const double v = group_value(index, *g, j), sign = j == flip ? -1.0 : 1.0;
    const double diff = m[j] - sign * s * v;
    fit->error += w[j] * diff * diff;
    fit->sxg += w[j] * m[j] * sign * v;
    fit->sgg += w[j] * v * v;
  }
}

RunFit fit_signed_run(const SignedLattice& lattice, const float* x, const float* w, int n) {
  // 13 scales from 20% below to 20% above the one that maps the largest magnitude onto the top
  // level, or, for runs of 16 (which often hold no value of the top level), onto the next too.
  constexpr float kSpread = 0.2f;
  constexpr int kSteps = 13;
  SignedGroup g;
  const LatticeIndex& index = *lattice.index;
  const float tops[2] = {index.top_level(), index.second_level()};
  return search_scale(max_magnitude(x, n), std::span(tops, n <= 16 ? 2 : 1), 1 - kSpread, 1 + kSpread, kSteps,
                      [&](float s, LatticeFit* fit) {
                        for (int i = 0; i < n; i += 8) assign_signed_group(lattice, x + i, w + i, s, &g, fit);
                      });
}

// Fits every run of `run` values and rounds their scales against one block scale, written as fp16
// at b; then calls put(run index, scale code, decoded scale) to choose and store the entries.
template <typename Put>
void encode_runs(const SignedLattice& lattice, ScaleCode code, int run, const float* x, const float* w, uint8_t* b,
                 Put put) {
  const int runs = 256 / run;
  RunFit fits[16];
  for (int r = 0; r < runs; ++r) fits[r] = fit_signed_run(lattice, x + run * r, w + run * r, run);
  write_half(b, block_scale(fits, runs, code));
  const float d = read_half(b);
  for (int r = 0; r < runs; ++r) {
    const int q = scale_code(fits[r].scale, d, code);
    put(r, q, decoded_scale(q, d, code));
  }
}

void assign(const SignedLattice& lattice, const float* x, const float* w, float s, SignedGroup* g) {
  LatticeFit unused;
  assign_signed_group(lattice, x, w, s, g, &unused);
}

constexpr ScaleCode kIq2Scales{0.125f, 0.25f, 15};  // d (0.5 + q) / 4

void encode_iq2_xxs(const float* x, const float* w, uint8_t* b) {
  const SignedLattice lattice{&iq2_xxs_lattice(), true};
  encode_runs(lattice, kIq2Scales, 32, x, w, b, [&](int r, int q, float s) {
    uint32_t words[2] = {0, uint32_t(q) << 28};
    for (int l = 0; l < 4; ++l) {
      SignedGroup g;
      assign(lattice, x + 32 * r + 8 * l, w + 32 * r + 8 * l, s, &g);
      words[0] |= uint32_t(g.entry[0]) << (8 * l);
      words[1] |= uint32_t(g.signs & 127) << (7 * l);
    }
    std::memcpy(b + 2 + 8 * r, words, 8);
  });
}

// IQ2_XS and IQ2_S: a scale per half run of 16; the scale bytes hold two 4-bit codes.
void put_half_run_scale(uint8_t* scales, int half, int q) {
  scales[half / 2] = uint8_t(scales[half / 2] | (q << (4 * (half % 2))));
}

void encode_iq2_xs(const float* x, const float* w, uint8_t* b) {
  const SignedLattice lattice{&iq2_xs_lattice(), true};
  std::memset(b + 66, 0, 8);
  encode_runs(lattice, kIq2Scales, 16, x, w, b, [&](int h, int q, float s) {
    put_half_run_scale(b + 66, h, q);
    for (int l = 0; l < 2; ++l) {
      SignedGroup g;
      assign(lattice, x + 16 * h + 8 * l, w + 16 * h + 8 * l, s, &g);
      const auto code = uint16_t(g.entry[0] | ((g.signs & 127) << 9));
      std::memcpy(b + 2 + 2 * (2 * h + l), &code, 2);
    }
  });
}

void encode_iq2_s(const float* x, const float* w, uint8_t* b) {
  const SignedLattice lattice{&iq2_s_lattice(), false};
  std::memset(b + 66, 0, 16);
  encode_runs(lattice, kIq2Scales, 16, x, w, b, [&](int h, int q, float s) {
    put_half_run_scale(b + 74, h, q);
    for (int l = 0; l < 2; ++l) {
      SignedGroup g;
      assign(lattice, x + 16 * h + 8 * l, w + 16 * h + 8 * l, s, &g);
      const int group = 2 * h + l;  // run group / 4, group % 4 within it
      b[2 + group] = uint8_t(g.entry[0]);
      b[34 + group] = g.signs;
      b[66 + group / 4] = uint8_t(b[66 + group / 4] | ((g.entry[0] >> 8) << (2 * (group % 4))));
    }
  });
}

void encode_iq3_xxs(const float* x, const float* w, uint8_t* b) {
  const SignedLattice lattice{&iq3_xxs_lattice(), true};
  encode_runs(lattice, {0.25f, 0.5f, 15}, 32, x, w, b, [&](int r, int q, float s) {  // d (0.5 + q) / 2
    uint32_t word = uint32_t(q) << 28;
    for (int l = 0; l < 4; ++l) {
      SignedGroup g;
      assign(lattice, x + 32 * r + 8 * l, w + 32 * r + 8 * l, s, &g);
      b[2 + 8 * r + 2 * l] = uint8_t(g.entry[0]);
      b[2 + 8 * r + 2 * l + 1] = uint8_t(g.entry[1]);
      word |= uint32_t(g.signs & 127) << (7 * l);
    }
    std::memcpy(b + 66 + 4 * r, &word, 4);
  });
}

void encode_iq3_s(const float* x, const float* w, uint8_t* b) {
  const SignedLattice lattice{&iq3_s_lattice(), false};
  std::memset(b + 66, 0, 8);
  std::memset(b + 106, 0, 4);
  encode_runs(lattice, {1.0f, 2.0f, 15}, 32, x, w, b, [&](int r, int q, float s) {  // d (1 + 2 q)
    b[106 + r / 2] = uint8_t(b[106 + r / 2] | (q << (4 * (r % 2))));
    for (int l = 0; l < 4; ++l) {
      SignedGroup g;
      assign(lattice, x + 32 * r + 8 * l, w + 32 * r + 8 * l, s, &g);
      b[2 + 8 * r + 2 * l] = uint8_t(g.entry[0]);
      b[2 + 8 * r + 2 * l + 1] = uint8_t(g.entry[1]);
      b[66 + r] = uint8_t(b[66 + r] | ((g.entry[0] >> 8) << (2 * l)) | ((g.entry[1] >> 8) << (2 * l + 1)));
      b[74 + 4 * r + l] = g.signs;
    }
  });
}

// ---- IQ1: values dl (g + delta), g in {-1, 0, 1} from the grid, delta +-1/8 ----

struct Iq1Group {
  uint16_t entry = 0;
  bool negative_delta = false;
};

// The entry for 8 values at scale dl with the given delta; its error, and the LS sums, into fit.
double iq1_entry(const float* x, const float* w, float dl, float delta, uint16_t* entry, LatticeFit* fit) {
  const LatticeIndex& index = iq1_lattice();
  float t[8];
  for (int j = 0; j < 8; ++j) t[j] = x[j] / dl - delta;
  double best = kInfinity;
  for (const uint16_t c : index.candidates(t)) {
    const float* g = index.entry(c);
    double e = 0;
    for (int j = 0; j < 8; ++j) {
      const double diff = double(x[j]) - double(dl) * (g[j] + delta);
      e += w[j] * diff * diff;
    }
    if (e < best) best = e, *entry = c;
  }
  const float* g = index.entry(*entry);
  for (int j = 0; j < 8; ++j) {
    const double v = g[j] + delta;
    fit->sxg += w[j] * x[j] * v;
    fit->sgg += w[j] * v * v;
  }
  fit->error += best;
  return best;
}

// delta_sign: +1 or -1 fixes the delta; 0 takes the better for the group (IQ1_M).
void assign_iq1_group(const float* x, const float* w, float dl, int delta_sign, Iq1Group* g, LatticeFit* fit) {
  if (dl <= 0) {
    *g = {};
    for (int j = 0; j < 8; ++j) fit->error += double(w[j]) * x[j] * x[j];
    return;
  }
  if (delta_sign != 0) {
    g->negative_delta = delta_sign < 0;
    iq1_entry(x, w, dl, float(delta_sign) * kIq1Delta, &g->entry, fit);
    return;
  }
  LatticeFit plus, minus;
  uint16_t entry_plus = 0, entry_minus = 0;
  const double e_plus = iq1_entry(x, w, dl, kIq1Delta, &entry_plus, &plus);
  const double e_minus = iq1_entry(x, w, dl, -kIq1Delta, &entry_minus, &minus);
  const bool negative = e_minus < e_plus;
  *g = {negative ? entry_minus : entry_plus, negative};
  const LatticeFit& chosen = negative ? minus : plus;
  fit->error += chosen.error, fit->sxg += chosen.sxg, fit->sgg += chosen.sgg;
}

// A ternary grid's best scale lies well inside the largest magnitude: dl from amax / 3 to amax.
RunFit fit_iq1_run(const float* x, const float* w, int n, int delta_sign) {
  constexpr int kSteps = 16;
  Iq1Group g;
  const float top = 1.0f;
  return search_scale(max_magnitude(x, n), std::span(&top, 1), 1.0f, 3.0f, kSteps, [&](float dl, LatticeFit* fit) {
    for (int i = 0; i < n; i += 8) assign_iq1_group(x + i, w + i, dl, delta_sign, &g, fit);
  });
}

constexpr ScaleCode kIq1Scales{1.0f, 2.0f, 7};  // d (2 q + 1)

void encode_iq1_s(const float* x, const float* w, uint8_t* b) {
  RunFit fits[8];
  int delta_sign[8];
  for (int r = 0; r < 8; ++r) {
    const RunFit plus = fit_iq1_run(x + 32 * r, w + 32 * r, 32, 1), minus = fit_iq1_run(x + 32 * r, w + 32 * r, 32, -1);
    delta_sign[r] = minus.error < plus.error ? -1 : 1;
    fits[r] = delta_sign[r] < 0 ? minus : plus;
  }
  write_half(b, block_scale(fits, 8, kIq1Scales));
  const float d = read_half(b);
  for (int r = 0; r < 8; ++r) {
    const int q = scale_code(fits[r].scale, d, kIq1Scales);
    const float dl = decoded_scale(q, d, kIq1Scales);
    auto h = uint16_t((q << 12) | (delta_sign[r] < 0 ? 0x8000 : 0));
    for (int l = 0; l < 4; ++l) {
      Iq1Group g;
      LatticeFit unused;
      assign_iq1_group(x + 32 * r + 8 * l, w + 32 * r + 8 * l, dl, delta_sign[r], &g, &unused);
      b[2 + 4 * r + l] = uint8_t(g.entry);
      h = uint16_t(h | ((g.entry >> 8) << (3 * l)));
    }
    std::memcpy(b + 34 + 2 * r, &h, 2);
  }
}

// IQ1_M: a scale per half run, a delta per group, the fp16 block scale in the scale words' top nibbles.
void encode_iq1_m(const float* x, const float* w, uint8_t* b) {
  RunFit fits[16];
  for (int h = 0; h < 16; ++h) fits[h] = fit_iq1_run(x + 16 * h, w + 16 * h, 16, 0);
  const uint16_t d_bits = float_to_fp16(block_scale(fits, 16, kIq1Scales));
  const float d = fp16_to_float(d_bits);
  uint16_t sc[4] = {0, 0, 0, 0};
  std::memset(b + 32, 0, 16);
  for (int h = 0; h < 16; ++h) {
    const int q = scale_code(fits[h].scale, d, kIq1Scales);
    sc[h / 4] = uint16_t(sc[h / 4] | (q << (3 * (h % 4))));
    const float dl = decoded_scale(q, d, kIq1Scales);
    for (int l = 0; l < 2; ++l) {
      const int group = 2 * h + l;
      Iq1Group g;
      LatticeFit unused;
      assign_iq1_group(x + 8 * group, w + 8 * group, dl, 0, &g, &unused);
      b[group] = uint8_t(g.entry);
      const int nibble = (g.entry >> 8) | (g.negative_delta ? 8 : 0);
      b[32 + group / 2] = uint8_t(b[32 + group / 2] | (nibble << (4 * (group % 2))));
    }
  }
  for (int k = 0; k < 4; ++k) sc[k] = uint16_t(sc[k] | (((d_bits >> (4 * k)) & 0xf) << 12));
  std::memcpy(b + 48, sc, 8);
}

}  // namespace

BlockEncoder lattice_encoder(DType t) {
  switch (t) {
    case DType::IQ2_XXS: return encode_iq2_xxs;
    case DType::IQ2_XS: return encode_iq2_xs;
    case DType::IQ2_S: return encode_iq2_s;
    case DType::IQ3_XXS: return encode_iq3_xxs;
    case DType::IQ3_S: return encode_iq3_s;
    case DType::IQ1_S: return encode_iq1_s;
    case DType::IQ1_M: return encode_iq1_m;
    default: return nullptr;
  }
}

}  // namespace autoglm::ref
