#include "model/backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace autoglm {
namespace {

// A programming error: Model::load refuses the models that need these ops off the CPU.
[[noreturn]] void refused_at_load(const char* op) {
  std::fprintf(stderr, "backend op '%s' has no kernel on this device; Model::load should have refused\n", op);
  std::abort();
}

}  // namespace

void Backend::activation(const ModelSpec& spec, float* gate, const float* up, int64_t n) {
  if (spec.activation != FfnActivation::kSiluGlu) refused_at_load("activation");
  silu_mul(gate, up, n);
}

void Backend::experts(const ExpertWeights&, const ModelSpec&, float*, const float*, float*) {
  refused_at_load("experts");
}

void Backend::copy_rows(const float*, int64_t, float*, int64_t, int64_t, int64_t) {
  refused_at_load("copy_rows");
}

std::vector<bool> host_expert_layers(const ModelSpec& spec, int64_t n_cpu_moe) {
  std::vector<bool> host(size_t(std::max<int64_t>(spec.n_layer, 0)), false);
  for (int64_t il = 0; il < spec.n_layer; ++il) host[size_t(il)] = spec.moe.is_moe_layer(il) && il < n_cpu_moe;
  return host;
}

// Mixture-of-experts layers run on CUDA with their experts on either side (CudaBackend::experts),
// so only the features no CUDA kernel has are refused.
Status device_runs_spec(const Device& device, const ModelSpec& s) {
  if (device.kind == DeviceKind::kCpu) return Status::ok();
  std::string what;
  if (s.mla.enabled())
    what = "multi-head latent attention";
  else if (s.attn_sinks)
    what = "attention sinks";
  else if (s.swa_even_layers)
    what = "alternating sliding-window layers";
  else if (s.rope_mscale != 1.0f)
    what = "YaRN rotary scaling";
  else if (s.activation != FfnActivation::kSiluGlu)
    what = "a clamped SwiGLU";
  if (what.empty()) return Status::ok();
  return unsupported("architecture " + s.arch + ": " + what + " run on the cpu only in this build, not on " +
                     device_name(device));
}

}  // namespace autoglm
