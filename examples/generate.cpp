// Generates text with the Open-AutoGLM runtime, as an embedding program would.
//   generate MODEL PROMPT [MAX_TOKENS] [--chat]
// Greedy decoding; the continuation goes to stdout as it is produced.
#include <autoglm/runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS] [--chat]\n", argv[0]);
    return 2;
  }
  autoglm::RuntimeOptions options;
  options.kv_memory_mib = 64;
  auto runtime = autoglm::Runtime::open(argv[1], options);
  if (!runtime) {
    std::fprintf(stderr, "error: %s\n", runtime.status().message().c_str());
    return 1;
  }
  autoglm::Request request;
  if (argc > 4 && std::string(argv[4]) == "--chat")
    request.chat = autoglm::Conversation{{{"user", argv[2]}}, "", "", "", true};
  else
    request.text = argv[2];
  request.max_tokens = argc > 3 ? std::atoi(argv[3]) : 64;
  request.sampling.temperature = 0;
  auto handle = (*runtime)->submit(request);
  if (!handle) {
    std::fprintf(stderr, "error: %s\n", handle.status().message().c_str());
    return 1;
  }
  autoglm::StreamEvent event;
  while ((*handle)->next(event)) {
    std::fputs(event.text.c_str(), stdout);
    std::fflush(stdout);
    if (!event.finished) continue;
    std::fprintf(stderr, "\n[%s: %d prompt tokens, %d generated]\n", autoglm::finish_reason_name(event.finish_reason),
                 event.prompt_tokens, event.completion_tokens);
    return event.finish_reason == autoglm::FinishReason::kError ? 1 : 0;
  }
  return 1;
}
