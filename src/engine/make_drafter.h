// The drafter of a speculation method: one place for the generator and the serving engine.
#pragma once

#include <memory>

#include "core/thread_pool.h"
#include "engine/draft_pool.h"
#include "engine/speculative.h"
#include "model/model.h"

namespace autoglm {

// A draft of the target's KV shape (typically its own weights in another type) drafts in the
// target's cache: it reads the target's rows of the history, close to what it would compute,
// and needs no prefill of its own; its rows past the history are rewritten by the verifying
// pass before anything reads them.
bool same_kv_shape(const ModelSpec& a, const ModelSpec& b);

// Null for SpecMethod::kNone. kDraft needs `draft` (a model with the target's vocabulary,
// load_draft_model), which must outlive the drafter; kMtp a target with a NextN block, whose
// rows take draft_pool's blocks. Errors name the option.
Result<std::unique_ptr<Drafter>> make_drafter(const SpecConfig& config, const Model& target, const Model* draft,
                                              ThreadPool& pool, const DraftPool& draft_pool);

}  // namespace autoglm
