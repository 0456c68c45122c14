// Where the forward pass runs: Device and its one parse (parse_device, device_name) are public
// (autoglm/settings.h); the name is what --device, the config's `device:` and Python's device=
// accept.
#pragma once

#include "autoglm/settings.h"
