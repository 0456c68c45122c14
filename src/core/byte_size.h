// Sizes in messages and logs: "512 MiB", "1.25 GiB".
#pragma once

#include <string>

namespace autoglm {

// MiB below 1 GiB (whole), GiB above (two decimals).
std::string format_bytes(double bytes);

}  // namespace autoglm
