#include "model/make_backend.h"

#include "model/backend_cpu.h"
#include "model/model.h"
#ifdef AUTOGLM_HAVE_CUDA
#include "model/backend_cuda.h"
#endif

namespace autoglm {

Result<std::unique_ptr<Backend>> make_backend(const Model& model, ThreadPool& pool) {
  if (model.device().kind == DeviceKind::kCpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(pool));
#ifdef AUTOGLM_HAVE_CUDA
  return make_cuda_backend(model.device(), model.spec(), model.placed_weights(), pool);
#else
  return unsupported("device: " + device_name(model.device()) + ": this build has no CUDA backend");
#endif
}

}  // namespace autoglm
