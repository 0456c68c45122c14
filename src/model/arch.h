// Architecture mappings: GGUF metadata keys onto ModelSpec switches.
#pragma once

#include <string>
#include <vector>

#include "autoglm/status.h"
#include "formats/gguf.h"
#include "model/model_spec.h"

namespace autoglm {

// Architectures this build can run.
const std::vector<std::string>& supported_architectures();

// Reads general.architecture and the hyper-parameters under its prefix.
// n_vocab is left 0 when the file does not say; the loader fills it from tensors.
// `arch_override` (if not empty) picks the architecture's switches instead of the
// file's; the hyper-parameters are still read under the file's own prefix.
Result<ModelSpec> spec_from_gguf(const GgufFile& file, const std::string& arch_override = "");

// Checks that a spec is internally consistent (positive sizes, divisibility).
Status validate_spec(const ModelSpec& spec, const std::string& where);

}  // namespace autoglm
