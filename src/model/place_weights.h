// The model's weights placed on its device at load (Model::load): nothing for the CPU, copies
// in device memory for a GPU (backend_cuda.h).
#pragma once

#include <memory>
#include <vector>

#include "autoglm/status.h"
#include "core/device.h"
#include "model/backend.h"
#include "model/weights.h"

namespace autoglm {

// Checks the device (a missing one is an error naming it and what exists) and places the
// weights there, all but the routed experts of the layers host_experts marks; null for the
// CPU. Errors name the tensor a device cannot run.
Result<std::unique_ptr<PlacedWeights>> place_weights(const Device& device, const ModelWeights& weights,
                                                     const std::vector<bool>& host_experts = {});

}  // namespace autoglm
