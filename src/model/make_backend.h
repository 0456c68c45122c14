// The backend factory: the ops of a loaded model's device (backend_cpu.h, backend_cuda.h).
#pragma once

#include <memory>

#include "autoglm/status.h"
#include "core/thread_pool.h"
#include "model/backend.h"

namespace autoglm {

class Model;

// The ops of the model's device (Model::device); the CPU's run on `pool`, and so do a GPU's
// experts that stay in host memory.
Result<std::unique_ptr<Backend>> make_backend(const Model& model, ThreadPool& pool);

}  // namespace autoglm
