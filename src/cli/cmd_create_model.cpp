// autoglm create-model: write a deterministic random-weight model.
#include <cstdio>

#include "autoglm/model_tools.h"
#include "cli/common.h"

namespace autoglm::cli {

void register_create_model(CLI::App& app) {
  auto* cmd = app.add_subcommand("create-model", "Write a deterministic random-weight GGUF model (no download needed)");
  auto o = std::make_shared<RandomModelOptions>();
  auto type = std::make_shared<std::string>("f16");
  auto out = std::make_shared<std::string>();
  cmd->add_option("--arch", o->arch,
                  "llama | qwen2 | qwen3 | qwen3moe | glm4moe | gpt-oss | deepseek2 | glm4v | qwen25vl")
      ->check(CLI::IsMember(random_model_archs()));
  cmd->add_option("--preset", o->preset,
                  "Dense: tiny | 150m | 1b; mixture of experts: tiny | 30b-a3b; vision (glm4v, qwen25vl): tiny | 9b")
      ->check(CLI::IsMember(random_model_presets()));
  cmd->add_option("--type", *type, "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k");
  cmd->add_option("--seed", o->seed, "Seed of the weights");
  cmd->add_option("--vocab", o->n_vocab, "Vocabulary size (default: the preset's)");
  cmd->add_option("--n-layer", o->n_layer, "Number of blocks (default: the preset's)");
  cmd->add_option("-t,--threads", o->threads, "Quantizing threads (default: one per physical core)");
  cmd->add_option("-o,--output", *out, "Output GGUF file")->required();
  auto lora_for = std::make_shared<std::string>();
  auto rank = std::make_shared<int64_t>(16);
  auto alpha = std::make_shared<float>(32.0f);
  cmd->add_option("--lora-for", *lora_for, "Write a random LoRA adapter (GGUF) for this base model instead");
  cmd->add_option("--rank", *rank, "The adapter's rank (with --lora-for)");
  cmd->add_option("--alpha", *alpha, "The adapter's alpha (with --lora-for)");
  cmd->callback([o, type, out, lora_for, rank, alpha] {
    if (!lora_for->empty()) {
      if (Status st = write_random_lora(*lora_for, *rank, *alpha, o->seed, *out); !st)
        exit_code() = fail(st);
      else
        std::printf("wrote %s: a rank-%lld LoRA adapter for %s\n", out->c_str(), (long long)*rank, lora_for->c_str());
      return;
    }
    const auto t = weight_type_name(*type);
    if (!t) {
      exit_code() = fail(invalid_argument("--type '" + *type + "' is not a weight type"));
      return;
    }
    o->type = *type;
    if (Status st = write_random_model(*o, *out); !st) {
      exit_code() = fail(st);
      return;
    }
    std::printf("wrote %s: %s %s, %s weights, seed %llu\n", out->c_str(), o->arch.c_str(), o->preset.c_str(),
                t->c_str(), (unsigned long long)o->seed);
    if (o->arch == "glm4v" || o->arch == "qwen25vl")
      std::printf("wrote %s: its projector (vision tower)\n", projector_path_for(*out).c_str());
  });
}

}  // namespace autoglm::cli
