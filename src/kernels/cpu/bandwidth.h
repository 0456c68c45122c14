// A STREAM-style read probe: how many bytes per second the pool's threads can read from memory.
#pragma once

#include "core/thread_pool.h"

namespace autoglm::cpu {

// Best of `repeats` passes over a 1 GiB buffer, every thread reading its own part with
// software prefetch (as the matmul kernels do), in bytes per second.
double measure_read_bandwidth(ThreadPool& pool, int repeats = 5);

}  // namespace autoglm::cpu
