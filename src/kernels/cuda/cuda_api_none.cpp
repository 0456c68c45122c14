// The CUDA entry points of a build without the CUDA backend: each says how to get one.
#include "kernels/cuda/cuda_api.h"

namespace autoglm::cuda {
namespace {

Status not_built() {
  return unsupported(
      "this build has no CUDA backend (configure with -DAUTOGLM_CUDA=ON where the CUDA toolkit's nvcc is installed)");
}

}  // namespace

bool built() {
  return false;
}
Result<int> device_count() {
  return not_built();
}
Result<DeviceInfo> device_info(int) {
  return not_built();
}
Result<void*> allocate_zeroed(int, int64_t) {
  return not_built();
}
void free(int, void*) {}
Status copy_to_device(int, void*, const void*, int64_t) {
  return not_built();
}
Status copy_to_host(int, void*, const void*, int64_t) {
  return not_built();
}
bool is_device_pointer(int, const void*) {
  return false;
}

}  // namespace autoglm::cuda
