// The rows `bench --spec` adds: the same greedy output generated plainly and with
// speculation, alternated repetition by repetition, with the speedup, the acceptance rate
// and the tokens per target pass.
#pragma once

#include "cli/spec_options.h"
#include "core/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace autoglm::cli {

Status bench_speculation(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const Speculation& spec,
                         int32_t n_gen, int32_t reps, DType kv_type);

}  // namespace autoglm::cli
