// RFC 2397 data URLs (data:[<media type>][;base64],<data>), as OpenAI's image_url parts carry an
// image: the media type and the decoded bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "autoglm/status.h"

namespace autoglm {

struct DataUrl {
  std::string media_type;  // lower-case, without parameters ("image/png"); "text/plain" when absent
  std::string bytes;
};

// Errors say what is wrong (no "data:", no ',', bad base64, more than `max_bytes` decoded).
Result<DataUrl> parse_data_url(std::string_view url, int64_t max_bytes);

}  // namespace autoglm
