// An upload to /v1/files: a multipart body (boundary "B") -> its parts -> each part read as a
// batch input file. Only errors as values may come out.
#include "server/api/multipart.h"
#include "server/jobs/batch_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto parts = autoglm::parse_multipart("multipart/form-data; boundary=B", body);
  if (!parts) return 0;
  for (const autoglm::FormPart& part : *parts) {
    auto lines = autoglm::parse_batch_input(part.data);
    if (lines)
      for (const autoglm::BatchLine& line : *lines)
        if (line.custom_id.empty() || line.body.empty()) __builtin_trap();  // what the reader promises
  }
  return 0;
}
