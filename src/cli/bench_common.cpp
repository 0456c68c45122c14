#include "cli/bench_common.h"

namespace autoglm::cli {

Result<DType> resolve_kv_type(const std::string& name, const ModelSpec& spec) {
  AUTOGLM_ASSIGN_OR_RETURN(const KvType kv_type, kv_type_from_name(name));
  const DType type = kv_dtype(kv_type);
  AUTOGLM_RETURN_IF_ERROR(kv_format(spec, type).status());
  return type;
}

}  // namespace autoglm::cli
