// llama-quantize's named mixes (Q4_K_M, Q3_K_S, IQ2_M, ...): the type each tensor of a model
// gets, by the same rules, so that a file we write is the one llama.cpp writes, type for type
// and within a hair in size. Facts of llama.cpp 2026-09's tensor-type choice: the layers that
// get more bits, the attention value and FFN down projections raised, the embeddings and the
// output projection kept higher, the fallbacks for rows that are not whole blocks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoglm/status.h"
#include "core/dtype.h"

namespace autoglm {

class GgufFile;

enum class QuantMix {
  kF32,
  kF16,
  kBF16,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ2_K,
  kQ2_K_S,
  kQ3_K_S,
  kQ3_K_M,
  kQ3_K_L,
  kQ4_K_S,
  kQ4_K_M,
  kQ5_K_S,
  kQ5_K_M,
  kQ6_K,
  kIQ4_NL,
  kIQ4_XS,
  kIQ3_XXS,
  kIQ3_XS,
  kIQ3_S,
  kIQ3_M,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ2_S,
  kIQ2_M,
  kIQ1_S,
  kIQ1_M,
  kTQ1_0,
  kTQ2_0,
  kMXFP4_MOE
};

struct QuantMixInfo {
  QuantMix mix;
  std::string_view name;  // llama-quantize's
  uint32_t file_type;     // general.file_type (llama_ftype)
  DType base;             // the type of the tensors no rule raises
};

// A mix by its name (any case; Q3_K, Q4_K and Q5_K are the _M mixes, as llama-quantize has it).
std::optional<QuantMix> quant_mix_from_name(std::string_view name);
const QuantMixInfo& quant_mix_info(QuantMix mix);
const std::vector<QuantMixInfo>& quant_mixes();

struct MixChoices {
  std::optional<DType> output_type, token_embedding_type;  // --output-tensor-type, --token-embedding-type
  bool pure = false;                                       // every tensor the mix's base type
  bool leave_output = false;                               // output.weight as it is
  bool has_imatrix = false;                                // some choices differ with one
};

struct TensorChoice {
  DType type;
  bool fallback = false;  // rows not whole blocks of the chosen type
};

// Whether llama.cpp refuses to write `type` for tensor `name` without an importance matrix: the
// very low-bit lattice types, and Q2_K in a Q2_K_S file; never the token embedding or the output.
// `mix`: the file's mix, or none (one type for every tensor).
bool tensor_needs_imatrix(DType type, std::optional<QuantMix> mix, const std::string& name);

// Whether llama-quantize would quantize the tensor at all (2-D and up, a .weight, not a norm,
// router or position table ...); the others keep their type.
bool mix_quantizes(const std::string& name, const std::vector<int64_t>& dims);

// The type of every tensor the mix quantizes, by name. Errors: an expert tensor without a layer
// number, a layer out of range.
Result<std::map<std::string, TensorChoice>> plan_quant_mix(const GgufFile& file, QuantMix mix,
                                                           const MixChoices& choices);

}  // namespace autoglm
