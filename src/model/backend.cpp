#include "model/backend.h"

#include "kernels/cuda/cuda_api.h"
#include "model/backend_cpu.h"
#include "model/model.h"
#ifdef AUTOGLM_HAVE_CUDA
#include "model/backend_cuda.h"
#endif

namespace autoglm {
namespace {

// The device exists: an error (an invalid `device` option) names it and the devices there are.
Status check_cuda_device(const Device& device) {
  const std::string name = "device: " + device_name(device) + ": ";
  auto count = cuda::device_count();
  if (!count) return invalid_argument(name + count.status().message());
  if (device.index >= *count)
    return invalid_argument(name + "no such GPU (" + std::to_string(*count) + " CUDA device" +
                            (*count == 1 ? "" : "s") + " found: cuda:0" +
                            (*count > 1 ? "..cuda:" + std::to_string(*count - 1) : "") + ")");
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<PlacedWeights>> place_weights(const Device& device, const ModelWeights& weights) {
  if (device.kind == DeviceKind::kCpu) return std::unique_ptr<PlacedWeights>();
  AUTOGLM_RETURN_IF_ERROR(check_cuda_device(device));
#ifdef AUTOGLM_HAVE_CUDA
  return place_weights_on_cuda(device.index, weights);
#else
  (void)weights;
  return unsupported("device: " + device_name(device) + ": unreachable without a CUDA build");
#endif
}

Result<std::unique_ptr<Backend>> make_backend(const Model& model, ThreadPool& pool) {
  if (model.device().kind == DeviceKind::kCpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(pool));
#ifdef AUTOGLM_HAVE_CUDA
  return make_cuda_backend(model);
#else
  return unsupported("device: " + device_name(model.device()) + ": this build has no CUDA backend");
#endif
}

}  // namespace autoglm
