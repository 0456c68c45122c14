// The ternary types' codes in element order: 0, 1, 2 for the values -1, 0, 1 (times the block's
// fp16 d). The integer kernels repack them; block_decode.h reads the same layouts as floats.
#pragma once

#include <cstdint>

namespace autoglm::ref {

constexpr int kTq1ScaleOffset = 52, kTq2ScaleOffset = 64;  // where each block keeps its fp16 d

// TQ2_0: 2-bit codes; byte l of half h holds elements 128 h + 32 s + l in its bit pairs s.
inline void tq2_0_codes(const uint8_t* b, uint8_t* codes) {
  for (int e = 0; e < 256; ++e) codes[e] = uint8_t((b[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3);
}

// The inverse: 256 codes (0..3) into TQ2_0's 64 code bytes.
inline void tq2_0_pack(const uint8_t* codes, uint8_t* b) {
  for (int e = 0; e < 64; ++e) b[e] = 0;
  for (int e = 0; e < 256; ++e) b[32 * (e / 128) + e % 32] |= uint8_t((codes[e] & 3) << (2 * ((e / 32) % 4)));
}

// TQ1_0: digit n of byte q, a fixed-point fraction of 3^5, is the top of (q * 3^n mod 256) * 3.
// Bytes 0..31 give elements in runs of 32 per digit, 32..47 runs of 16, the last 4 runs of 4.
inline void tq1_0_codes(const uint8_t* b, uint8_t* codes) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto digit = [](uint8_t q, int n) { return uint8_t((uint16_t(uint8_t(q * kPow3[n])) * 3) >> 8); };
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) *codes++ = digit(b[m], n);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) *codes++ = digit(b[32 + m], n);
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 4; ++m) *codes++ = digit(b[48 + m], n);
}

}  // namespace autoglm::ref
