// Identifiers that grant access to server state (task sessions; later responses, jobs,
// batches, files): 128 bits from the kernel's CSPRNG, so they cannot be guessed or counted.
#pragma once

#include <string>
#include <string_view>

namespace autoglm {

// `prefix` followed by 22 characters of unpadded base64url (128 random bits).
std::string random_id(std::string_view prefix);

// Compares in time that depends only on the lengths, not on where the strings differ.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace autoglm
