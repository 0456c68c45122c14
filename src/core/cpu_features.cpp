#include "core/cpu_features.h"

#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace autoglm {
namespace {

// Linux reports "Mitigation: Microcode" where the GDS fix slows every gather.
bool gathers_mitigated() {
  std::ifstream status("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling");
  std::string line;
  return std::getline(status, line) && line.rfind("Mitigation", 0) == 0;
}

#if defined(__x86_64__) || defined(__i386__)
// CPUID bits that not every compiler's __builtin_cpu_supports names (clang 14 has neither):
// F16C is leaf 1 ECX bit 29, AVX-VNNI leaf 7 subleaf 1 EAX bit 4, AVX512-VBMI leaf 7 ECX bit 1,
// GFNI leaf 7 ECX bit 8.
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
constexpr int kEax = 0, kEcx = 2;
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = f.avx2 && cpuid_bit(1, 0, kEcx, 29);  // used with AVX2 only, whose OS support avx2 checked
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    f.avx512vnni = __builtin_cpu_supports("avx512vnni");
    f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    f.avxvnni = f.avx2 && cpuid_bit(7, 1, kEax, 4);
    f.avx512vbmi = f.avx512f && cpuid_bit(7, 0, kEcx, 1);  // avx512f checked the OS saves the registers
    f.gfni = cpuid_bit(7, 0, kEcx, 8);
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
  if (f.avx512vbmi) s += "AVX512_VBMI ";
  if (f.gfni) s += "GFNI ";
  if (f.fast_gathers) s += "FAST_GATHERS ";
  if (f.decode_group_pairs) s += "DECODE_GROUP_PAIRS ";
  if (f.near_prefetch) s += "NEAR_PREFETCH ";
  if (s.empty()) return "baseline";
  s.pop_back();
  return s;
}

}  // namespace autoglm
