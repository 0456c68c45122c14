#include "model/param_count.h"

#include <algorithm>
#include <cmath>

#include "formats/gguf.h"

namespace autoglm {
namespace {

// n * used / n_expert, rounded: the share of a routed-expert tensor one token uses.
int64_t expert_share(int64_t n, int64_t n_expert, int64_t n_expert_used) {
  return int64_t(std::llround(double(n) * double(n_expert_used) / double(n_expert)));
}

}  // namespace

bool is_routed_expert_tensor(const std::string& name) {
  return name.rfind("blk.", 0) == 0 && name.find("_exps.") != std::string::npos;
}

ParamCount count_params(const GgufFile& file, int64_t n_expert, int64_t n_expert_used) {
  const bool moe = n_expert > 0;
  n_expert_used = std::clamp<int64_t>(n_expert_used, 0, std::max<int64_t>(n_expert, 0));
  const bool tied = file.find_tensor("output.weight") == nullptr;
  ParamCount c;
  for (const GgufTensorInfo& t : file.tensors()) {
    const int64_t n = t.n_elements(), bytes = int64_t(t.n_bytes);
    c.params += n;
    c.bytes += bytes;
    if (moe && is_routed_expert_tensor(t.name)) {
      c.active_params += expert_share(n, n_expert, n_expert_used);
      c.active_bytes += expert_share(bytes, n_expert, n_expert_used);
    } else if (t.name == "token_embd.weight" && !tied) {
      c.active_params += n;
      c.active_bytes += t.rows() > 0 ? bytes / t.rows() : bytes;
    } else {
      c.active_params += n;
      c.active_bytes += bytes;
    }
  }
  return c;
}

ParamCount count_params(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture").value_or("");
  const int64_t n_expert = file.get_int(arch + ".expert_count").value_or(0);
  const int64_t n_used = file.get_int(arch + ".expert_used_count").value_or(0);
  return count_params(file, n_expert, n_used);
}

}  // namespace autoglm
