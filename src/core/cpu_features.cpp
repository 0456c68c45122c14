#include "core/cpu_features.h"

namespace autoglm {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    f.avxvnni = __builtin_cpu_supports("avxvnni");
#endif
    return f;
  }();
  return features;
}

std::string cpu_features_string() {
  const auto& f = cpu_features();
  std::string s;
  if (f.avx2) s += "AVX2 ";
  if (f.fma) s += "FMA ";
  if (f.f16c) s += "F16C ";
  if (f.avx512f) s += "AVX512F ";
  if (f.avx512vnni) s += "AVX512_VNNI ";
  if (f.avx512bf16) s += "AVX512_BF16 ";
  if (f.avxvnni) s += "AVX_VNNI ";
  if (s.empty()) return "baseline";
  s.pop_back();
  return s;
}

}  // namespace autoglm
