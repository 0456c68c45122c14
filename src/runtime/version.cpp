#include "autoglm/runtime.h"

namespace autoglm {

const char* version() {
  return AUTOGLM_VERSION;
}

}  // namespace autoglm
