// What only `autoglm bench` shares among its files: it measures the model, the kernels and
// the sampler below the public API, so it alone includes their headers.
#pragma once

#include <string>

#include "cli/common.h"
#include "core/dtype.h"
#include "kernels/cpu/matmul.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "sample/grammar.h"
#include "tokenizer/tokenizer.h"

namespace autoglm::cli {

// The KV type named on the command line, checked against the model.
Result<DType> resolve_kv_type(const std::string& name, const ModelSpec& spec);

}  // namespace autoglm::cli
