#include "cli/common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>

#include "autoglm/model_tools.h"
#include "cli/progress.h"
#include "core/read_file.h"
#include "core/thread_pool.h"

namespace autoglm::cli {

namespace {

bool environment_says(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::string(v) == value;
}

// Applies an auto/on/off switch set in the environment; false, with an error naming it, for a bad value.
bool apply_switch_from_environment(const char* name, void (*apply)(CpuSwitch)) {
  const char* value = std::getenv(name);
  if (!value) return true;
  const auto mode = cpu_switch_from_name(value);
  if (!mode) {
    std::fprintf(stderr, "error: %s=%s is not one of 1, 0, on, off, auto\n", name, value);
    return false;
  }
  apply(*mode);
  return true;
}

}  // namespace

bool pin_threads_from_environment() {
  return environment_says("AUTOGLM_AFFINITY", "1");
}

bool apply_process_environment() {
  set_log_sink([](LogLevel, const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  const char* isa = std::getenv("AUTOGLM_CPU_ISA");
  if (isa && !select_cpu_kernels(isa)) {
    std::fprintf(stderr, "error: AUTOGLM_CPU_ISA=%s is not a kernel set this CPU runs\n", isa);
    return false;
  }
  return apply_switch_from_environment("AUTOGLM_BF16_ACTIVATIONS", set_cpu_bf16_activations) &&
         apply_switch_from_environment("AUTOGLM_LATTICE_GATHERS", set_cpu_lattice_gathers) &&
         apply_switch_from_environment("AUTOGLM_LATTICE_PERMUTES", set_cpu_lattice_permutes);
}

std::optional<Bf16Mode> bf16_activations_mode(const std::string& name) {
  return bf16_mode_from_name(name);
}

void add_bf16_activations_option(CLI::App& cmd) {
  cmd.add_option_function<std::string>(
         "--bf16-activations", [](const std::string& v) { set_cpu_bf16_activations(*bf16_activations_mode(v)); },
         "BF16 weights: round the activations to BF16 (on; the BF16 dot-product instructions run) or keep floats "
         "(off); auto (default): on where the CPU has AVX512-BF16. Overrides AUTOGLM_BF16_ACTIVATIONS")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

void add_quantize_option(CLI::App& cmd, std::string& quantize) {
  cmd.add_option("--quantize", quantize, "Re-encode the weights at load: q8_0, q4_0, q4_k, q6_k, ... (default: keep)");
}

void add_lora_option(CLI::App& cmd, std::vector<std::string>& lora) {
  cmd.add_option("--lora", lora,
                 "A LoRA adapter, PATH[:SCALE] (a PEFT folder or a GGUF adapter; repeatable: they stack)");
}

void add_memory_options(CLI::App& cmd, MemoryFlags& flags) {
  cmd.add_flag("--no-mmap", flags.no_mmap,
               "Read the model file into private memory instead of mapping it (pages not shared; no lazy loading)");
  cmd.add_flag("--mlock", flags.mlock, "Lock the model's weights in RAM (never swapped; needs RLIMIT_MEMLOCK)");
  cmd.add_flag("--check-tensors", flags.check_tensors,
               "Decode every weight at load: a block with a NaN or infinite value (a corrupt scale) is an error");
}

Result<RuntimeOptions> offline_runtime_options(const std::string& device, const std::string& kv_type, int threads,
                                               const MemoryFlags& memory) {
  RuntimeOptions options;
  memory.apply_to(options);
  AUTOGLM_ASSIGN_OR_RETURN(options.device, parse_device(device));
  AUTOGLM_ASSIGN_OR_RETURN(options.kv_type, kv_type_option(kv_type));
  options.threads = threads;
  options.start_engine = false;
  return options;
}

void add_cpu_moe_options(CLI::App& cmd, CpuMoeFlags& flags) {
  cmd.add_flag("--cpu-moe", flags.all,
               "Mixture-of-experts models on a GPU: keep the routed experts of every layer in host memory and run "
               "them on the CPU threads (the rest runs on the GPU); ignored on the cpu");
  cmd.add_option("--n-cpu-moe", flags.first_layers,
                 "As --cpu-moe for the experts of the first N layers only (the rest on the GPU); ignored on the cpu")
      ->type_name("N")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20));  // the config key's bounds
}

Result<std::vector<LoraOption>> lora_options(const std::vector<std::string>& args) {
  std::vector<LoraOption> out;
  for (const std::string& arg : args) {
    AUTOGLM_ASSIGN_OR_RETURN(LoraOption option, parse_lora_option(arg));
    out.push_back(std::move(option));
  }
  return out;
}

RuntimeOptions environment_options() {
  RuntimeOptions options;
  options.repack_weights = !environment_says("AUTOGLM_REPACK", "0");
  options.pin_threads = pin_threads_from_environment();
  auto bars = std::make_shared<std::map<std::string, std::unique_ptr<ProgressBar>>>();
  options.progress = [bars](const std::string& step, int64_t done, int64_t total) {
    auto& bar = (*bars)[step];
    if (!bar) bar = std::make_unique<ProgressBar>(step, total);
    bar->advance();
    if (done == total) bar.reset();  // finishes the line
  };
  return options;
}

Result<std::unique_ptr<Runtime>> open_runtime(const std::string& path, RuntimeOptions options) {
  if (!options.quantize.empty() && !weight_type_name(options.quantize))
    return invalid_argument("--quantize '" + options.quantize + "' is not a weight type (q8_0, q4_0, q4_k, ...)");
  const RuntimeOptions env = environment_options();
  options.repack_weights = env.repack_weights;
  options.pin_threads = options.pin_threads || env.pin_threads;
  options.progress = env.progress;
  return Runtime::open(path, options);
}

Result<OutputConstraint> output_constraint(const std::string& grammar_file, const std::string& schema_file) {
  if (grammar_file.empty() && schema_file.empty()) return OutputConstraint{};
  if (!grammar_file.empty() && !schema_file.empty())
    return invalid_argument("--grammar and --json-schema cannot be combined");
  const std::string& path = grammar_file.empty() ? schema_file : grammar_file;
  auto text = read_file(path);
  if (!text || text->empty()) return invalid_argument(path + ": cannot read it (or it is empty)");
  OutputConstraint constraint;
  constraint.kind = schema_file.empty() ? ConstraintKind::kGbnf : ConstraintKind::kJsonSchema;
  constraint.text = *text;
  constraint.source = path;
  return constraint;
}

MeanSd mean_and_sd(const std::vector<double>& xs) {
  MeanSd r;
  if (xs.empty()) return r;
  r.mean = std::accumulate(xs.begin(), xs.end(), 0.0) / double(xs.size());
  double squares = 0;
  for (double x : xs) squares += (x - r.mean) * (x - r.mean);
  r.sd = xs.size() > 1 ? std::sqrt(squares / double(xs.size() - 1)) : 0.0;
  return r;
}

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return exit_code() = 1;
}

void add_device_option(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device, "Where the model runs: cpu, cuda or cuda:N (a build with the CUDA backend)")
      ->capture_default_str();
}

void add_kv_type_option(CLI::App& cmd, std::string& kv_type) {
  cmd.add_option("--kv-type", kv_type, "KV cache type: f16, q8_0 (half the memory) or f32")->capture_default_str();
}

Result<KvType> kv_type_option(const std::string& name) {
  auto type = kv_type_from_name(name);
  if (!type) return Status(type.status().code(), "kv_cache.dtype: " + type.status().message());
  return *type;
}

void add_threads_option(CLI::App& cmd, int& threads) {
  threads = physical_core_count();
  cmd.add_option("-t,--threads", threads, "Worker threads (default: physical cores)")->check(CLI::Range(1, 1024));
}

int& exit_code() {
  static int code = 0;
  return code;
}

}  // namespace autoglm::cli
