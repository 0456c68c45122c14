// Instruction-set extensions of the running CPU, probed once.
#pragma once

#include <string>

namespace autoglm {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;  // read only where AVX2 is (the kernels use it with AVX2): false on AVX-only CPUs
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avxvnni = false;
  bool avx512vbmi = false;  // byte permutes over two registers, vpmultishiftqb
  bool gfni = false;        // affine maps of bytes over GF(2)
  // Gathers load a lane per cycle or so: Intel cores, unless the Gather Data Sampling microcode
  // mitigation slowed them. AMD's Zen 3-5 microcode them (scalar loads were 1.3-3x faster there).
  bool fast_gathers = false;
  // One- and two-token decodes read two packed groups at once as two streams, in 512-bit
  // registers where the CPU has them (one token in two 256-bit sets where it has not): faster on
  // Intel (Emerald Rapids: tg128 8-18% up with neighbouring groups; AVX2 one-token matvec 7-15% up
  // with two streams), slower on AMD, where Zen 5 read one group at a time 13-40% faster than
  // neighbouring pairs (two streams not measured there).
  bool decode_group_pairs = false;
  // The super-block kernels of the 16-register sets (AVX2, AVX-VNNI) request weight bytes nearer
  // ahead: on Intel the far distance measured slower there (kernels/cpu/vec_impl.inc,
  // kNearPrefetchBytes). AMD keeps the far one, which it was measured with.
  bool near_prefetch = false;
};

const CpuFeatures& cpu_features();
std::string cpu_features_string();

}  // namespace autoglm
