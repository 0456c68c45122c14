#include "core/cpu_features.h"

#include <fstream>

namespace autoglm {
namespace {

// Linux reports "Mitigation: Microcode" where the GDS fix slows every gather.
bool gathers_mitigated() {
  std::ifstream status("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling");
  std::string line;
  return std::getline(status, line) && line.rfind("Mitigation", 0) == 0;
}

}  // namespace

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
    const bool intel = __builtin_cpu_is("intel");
    f.fast_gathers = f.avx2 && intel && !gathers_mitigated();
    f.decode_group_pairs = f.avx2 && intel;
    f.near_prefetch = intel;
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
  if (f.fast_gathers) s += "FAST_GATHERS ";
  if (f.decode_group_pairs) s += "DECODE_GROUP_PAIRS ";
  if (f.near_prefetch) s += "NEAR_PREFETCH ";
  if (s.empty()) return "baseline";
  s.pop_back();
  return s;
}

}  // namespace autoglm
