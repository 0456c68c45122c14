// Per-request limits of the library and the server.
#pragma once

#include <cstdint>

namespace autoglm {

// What one request may cost: requests are untrusted, and each of these bounds work or memory
// that grows with the input. Errors past a limit name it by these field names, which are
// also the keys of the server's `limits:` config section.
struct RequestLimits {
  int json_depth = 128;                               // nesting of JSON request data (bodies, messages_json, ...)
  int64_t json_object_keys = 65536;                   // keys of one JSON object in request data
  int64_t prompt_tokens = 0;                          // tokens of one prompt; 0: the context window
  int64_t stop_strings = 16;                          // stop strings per request
  int64_t stop_string_bytes = 1024;                   // bytes of one stop string
  int64_t top_logprobs = 20;                          // alternatives per token
  int64_t grammar_bytes = int64_t(1) << 20;           // a GBNF text (a JSON Schema's after conversion)
  int64_t grammar_symbols = 200000;                   // a grammar's symbols after repetitions expand
  int64_t grammar_stacks = 4096;                      // parses a grammar keeps alive at once
  int64_t template_steps = 4000000;                   // statements, expressions, loop items of one chat render
  int64_t template_output_bytes = int64_t(32) << 20;  // the rendered prompt text
  int64_t image_bytes = int64_t(20) << 20;            // one image's encoded bytes (a data URL's, a file's)
  int64_t image_pixels = int64_t(40) << 20;           // one image's decoded width x height
  int64_t images_per_request = 16;                    // images in one request's messages
};

}  // namespace autoglm
