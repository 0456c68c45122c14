// autoglm logits: evaluate tokens in one pass and write the logits (the golden format).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/common.h"

namespace autoglm::cli {
namespace {

struct LogitsArgs {
  std::string device = "cpu";
  MemoryFlags memory;
  std::string model, tokens, prompt, out, positions = "all", kv_type = "f16", quantize;
  int threads = 1;
  std::vector<std::string> lora;
};

Result<std::vector<int32_t>> parse_ids(const std::string& list, int64_t n_vocab) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0 || v >= n_vocab) throw std::out_of_range(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      return invalid_argument("--tokens: '" + item + "' is not a token id in [0, " + std::to_string(n_vocab) + ")");
    }
  }
  return ids;
}

int logits(const LogitsArgs& a) {
  auto offline = offline_runtime_options(a.device, a.kv_type, a.threads, a.memory);
  if (!offline) return fail(offline.status());
  RuntimeOptions options = *offline;
  options.quantize = a.quantize;
  auto lora = lora_options(a.lora);
  if (!lora) return fail(lora.status());
  options.lora = *lora;
  auto rt = open_runtime(a.model, options);
  if (!rt) return fail(rt.status());
  const int64_t n_vocab = (*rt)->info().n_vocab;  // the model's rows (a tokenizer may have fewer)
  std::vector<int32_t> ids;
  if (!a.tokens.empty()) {
    auto parsed = parse_ids(a.tokens, n_vocab);
    if (!parsed) return fail(parsed.status());
    ids = *parsed;
  } else {
    ids = (*rt)->encode(a.prompt, true);
  }
  auto out = (*rt)->logits(ids, a.positions == "all");
  if (!out) return fail(out.status());
  const std::vector<float>& rows = *out;

  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(a.out.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(rows.data(), 4, rows.size(), f.get()) != rows.size())
    return fail(io_error(a.out + ": cannot write logits"));
  std::printf("tokens (%zu):", ids.size());
  for (int32_t id : ids) std::printf(" %d", id);
  std::printf("\nwrote %zu rows x %lld logits (float32, little-endian) to %s\n", rows.size() / size_t(n_vocab),
              (long long)n_vocab, a.out.c_str());
  const float* last = rows.data() + rows.size() - size_t(n_vocab);
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) order[size_t(i)] = i;
  const int k = int(std::min<int64_t>(5, n_vocab));
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t x, int32_t y) { return last[x] > last[y] || (last[x] == last[y] && x < y); });
  std::printf("top-5 of the last row:\n");
  for (int i = 0; i < k; ++i)
    std::printf("  %6d %10.5f '%s'\n", order[size_t(i)], last[order[size_t(i)]],
                (*rt)->token_piece(order[size_t(i)]).c_str());
  return 0;
}

}  // namespace

void register_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Write the logits of a token sequence evaluated in one pass");
  auto a = std::make_shared<LogitsArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  add_kv_type_option(*cmd, a->kv_type);
  add_device_option(*cmd, a->device);
  add_bf16_activations_option(*cmd);
  add_quantize_option(*cmd, a->quantize);
  add_memory_options(*cmd, a->memory);
  add_lora_option(*cmd, a->lora);
  auto* tokens = cmd->add_option("--tokens", a->tokens, "Comma-separated token ids (fed as given, no BOS added)");
  auto* prompt = cmd->add_option("-p,--prompt", a->prompt, "Text (tokenized with BOS as the model asks)");
  tokens->excludes(prompt);
  cmd->add_option("-o,--output", a->out, "Output file: float32 rows [positions][n_vocab]")->required();
  cmd->add_option("--positions", a->positions, "all | last")->check(CLI::IsMember({"all", "last"}));
  add_threads_option(*cmd, a->threads);
  cmd->callback([a, tokens, prompt] {
    if (tokens->count() == 0 && prompt->count() == 0) {
      std::fprintf(stderr, "error: give --tokens or --prompt\n");
      exit_code() = 2;
      return;
    }
    exit_code() = logits(*a);
  });
}

}  // namespace autoglm::cli
