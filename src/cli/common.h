// Pieces shared by the CLI subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autoglm/cpu_kernels.h"
#include "autoglm/runtime.h"
#include "autoglm/status.h"

namespace autoglm::cli {

// Opens a model (a GGUF file or a Hugging Face folder) as every command does: the
// environment's switches (AUTOGLM_REPACK=0, AUTOGLM_AFFINITY=1) applied and a progress bar
// for long load steps. Commands that drive the single-sequence generator pass
// start_engine = false.
Result<std::unique_ptr<Runtime>> open_runtime(const std::string& path, RuntimeOptions options);
// Adds --lora PATH[:SCALE] (repeatable: the adapters stack, in order).
void add_lora_option(CLI::App& cmd, std::vector<std::string>& lora);
// The --lora arguments as runtime options; an error names the argument.
Result<std::vector<LoraOption>> lora_options(const std::vector<std::string>& args);
// Adds --quantize (q8_0, q4_0, q4_k, ...: re-encode the weights at load).
void add_quantize_option(CLI::App& cmd, std::string& quantize);
// --no-mmap and --mlock, as llama.cpp spells them (RuntimeOptions::use_mmap, use_mlock).
struct MemoryFlags {
  bool no_mmap = false;
  bool mlock = false;
  bool check_tensors = false;
  void apply_to(RuntimeOptions& options) const {
    options.use_mmap = !no_mmap;
    options.use_mlock = mlock;
    options.check_tensors = check_tensors;
  }
};
void add_memory_options(CLI::App& cmd, MemoryFlags& flags);
// Options of a runtime without an engine (logits, perplexity): device, KV type, threads, memory
// flags; an error names the bad --device or --kv-type.
Result<RuntimeOptions> offline_runtime_options(const std::string& device, const std::string& kv_type, int threads,
                                               const MemoryFlags& memory);
// --cpu-moe and --n-cpu-moe N, as llama.cpp spells them (RuntimeOptions::cpu_moe, n_cpu_moe).
struct CpuMoeFlags {
  bool all = false;
  int64_t first_layers = -1;  // -1: not given
  void apply_to(RuntimeOptions& options) const {
    options.cpu_moe = all;
    options.n_cpu_moe = std::max<int64_t>(first_layers, 0);
  }
};
void add_cpu_moe_options(CLI::App& cmd, CpuMoeFlags& flags);
// The environment's pinning switch (AUTOGLM_AFFINITY=1), for thread pools the CLI makes itself.
bool pin_threads_from_environment();
// Runtime options from the environment (AUTOGLM_REPACK=0, AUTOGLM_AFFINITY=1) with a progress
// bar for long load steps; the rest default.
RuntimeOptions environment_options();
// Reads AUTOGLM_CPU_ISA and AUTOGLM_BF16_ACTIVATIONS and installs the stderr log sink; false
// (after printing why) when the ISA is unknown or not runnable here, or the BF16 mode unknown.
bool apply_process_environment();
// auto | on | off (and 1 | 0, the environment's spelling); nullopt for anything else.
std::optional<Bf16Mode> bf16_activations_mode(const std::string& name);
// Adds --bf16-activations auto|on|off (set_cpu_bf16_activations, at parse time).
void add_bf16_activations_option(CLI::App& cmd);

// Mean and sample standard deviation (0 for fewer than two values) of a benchmark's repetitions.
struct MeanSd {
  double mean = 0, sd = 0;
};
MeanSd mean_and_sd(const std::vector<double>& xs);

// Prints "error: ..." to stderr and returns exit code 1.
int fail(const Status& status);

// Adds -t/--threads (default: physical cores).
void add_threads_option(CLI::App& cmd, int& threads);
// Adds --kv-type (f16 default, q8_0, f32).
void add_kv_type_option(CLI::App& cmd, std::string& kv_type);
// --device cpu|cuda|cuda:N (RuntimeOptions::device; serve's maps to the config key `device`).
void add_device_option(CLI::App& cmd, std::string& device);
// --kv-type as the runtime's option; an error as the runtime's ("kv_cache.dtype: KV cache type ...").
Result<KvType> kv_type_option(const std::string& name);

// --grammar FILE (GBNF) or --json-schema FILE as a request's constraint (kNone when neither is
// given); errors name the flag or the file, and so do the runtime's (the constraint's source).
Result<OutputConstraint> output_constraint(const std::string& grammar_file, const std::string& schema_file);

// Each subcommand registers itself and its callback here.
void register_run(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_logits(CLI::App& app);
void register_create_model(CLI::App& app);
void register_quantize(CLI::App& app);
void register_convert(CLI::App& app);
void register_serve(CLI::App& app);
void register_export_lora(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_imatrix(CLI::App& app);

// Set by a subcommand's callback; main() returns it.
int& exit_code();

}  // namespace autoglm::cli
