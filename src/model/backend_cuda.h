// The forward pass's ops on one CUDA GPU (CUDA builds only): the kernels of kernels/cuda on
// one stream, the weights placed in device memory at load, the KV caches in device memory.
#pragma once

#include <memory>
#include <vector>

#include "model/backend.h"

namespace autoglm {

// Copies the matrices and vectors to device `index` (one allocation), all but the routed
// experts of the layers host_experts marks (empty: none); an error names a matrix whose
// weight type has no CUDA kernel, or the memory that is missing.
Result<std::unique_ptr<PlacedWeights>> place_weights_on_cuda(int index, const ModelWeights& weights,
                                                             const std::vector<bool>& host_experts);

// The ops of a model of `spec` whose weights place_weights_on_cuda put on `device` (`placed`);
// the experts left in host memory run on `pool`.
Result<std::unique_ptr<Backend>> make_cuda_backend(const Device& device, const ModelSpec& spec,
                                                   const PlacedWeights* placed, ThreadPool& pool);

}  // namespace autoglm
