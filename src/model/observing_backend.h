// A backend that shows every weight matmul's input to an observer before running it on the
// backend it wraps (autoglm imatrix: the activation statistics of each input column). Routed
// experts are shown per expert: the tokens routed to it, and for its down projection the
// hidden activations they make (computed here again on the CPU: the wrapped op keeps its
// results and speed). The CPU only.
#pragma once

#include <memory>

#include "core/thread_pool.h"
#include "model/backend.h"

namespace autoglm {

class MatmulObserver {
 public:
  virtual ~MatmulObserver() = default;
  // n_rows inputs of w.cols floats (rows w.cols apart) multiplied by w: a matrix, a view of one
  // (a fused projection's rows), or one expert of a stack.
  virtual void on_matmul(const cpu::WeightMatrix& w, const float* x, int64_t n_rows) = 0;
};

std::unique_ptr<Backend> observing_backend(std::unique_ptr<Backend> inner, MatmulObserver& observer, ThreadPool& pool);

}  // namespace autoglm
