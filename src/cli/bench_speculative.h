// The rows `bench --spec` adds: the same greedy output generated plainly and with
// speculation, alternated repetition by repetition, with the speedup, the acceptance rate
// and the tokens per target pass.
#pragma once

#include <memory>

#include "cli/bench_common.h"
#include "cli/spec_options.h"
#include "core/thread_pool.h"
#include "engine/speculative.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace autoglm::cli {

// The options checked, and the draft model loaded where the method needs one.
struct Speculation {
  SpecConfig config;
  std::unique_ptr<Model> draft;
};
// `pool`: the threads --draft-quantize auto measures on.
Result<Speculation> prepare_speculation(const SpecOptions& options, const std::string& target_path, const Model& target,
                                        const Vocab& target_vocab, ThreadPool& pool);

Status bench_speculation(const Model& model, const Tokenizer& tokenizer, ThreadPool& pool, const Speculation& spec,
                         int32_t n_gen, int32_t reps, DType kv_type);

}  // namespace autoglm::cli
