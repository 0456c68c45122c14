#include "model/place_weights.h"

#include <string>

#include "kernels/cuda/cuda_api.h"
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

Result<std::unique_ptr<PlacedWeights>> place_weights(const Device& device, const ModelWeights& weights,
                                                     const std::vector<bool>& host_experts) {
  if (device.kind == DeviceKind::kCpu) return std::unique_ptr<PlacedWeights>();
  AUTOGLM_RETURN_IF_ERROR(check_cuda_device(device));
#ifdef AUTOGLM_HAVE_CUDA
  return place_weights_on_cuda(device.index, weights, host_experts);
#else
  (void)weights;
  (void)host_experts;
  return unsupported("device: " + device_name(device) + ": unreachable without a CUDA build");
#endif
}

}  // namespace autoglm
