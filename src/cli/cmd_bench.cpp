// autoglm bench: prompt processing (ppN), generation (tgN) and aggregate decode with several
// sequences in parallel (-b), like llama-bench and llama-batched-bench, with the decode rows'
// effective weight bandwidth against the machine's read bandwidth measured here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/bench_common.h"
#include "cli/bench_speculative.h"
#include "core/byte_size.h"
#include "engine/constrained.h"
#include "kernels/cpu/bandwidth.h"
#include "kernels/cpu/compute_peak.h"
#include "kernels/cuda/cuda_api.h"
#include "media/image_preprocess.h"
#include "model/runner.h"
#include "model/vision_encoder.h"
#include "runtime/runtime_parts.h"  // bench measures the model and kernels below the API
#include "sample/sampler.h"

namespace autoglm::cli {
namespace {

struct BenchArgs {
  std::string device = "cpu";
  MemoryFlags memory;
  CpuMoeFlags cpu_moe;
  std::string model, kv_type = "f16", quantize, schema_file;
  int32_t n_prompt = 512, n_gen = 128, reps = 3, ubatch = 512, parallel_prompt = 128;
  int32_t depth = 0;  // tokens already in the cache before each test (-d, as llama-bench)
  std::vector<int> threads, parallel;
  bool profile = false;
  SpecOptions spec;
  std::vector<std::string> lora;
  bool lora_spread = false;  // sequence i runs adapter i % n alone, instead of all stacked
  std::string mmproj;        // a projector: also time its vision tower on an image of image_size
  std::string image_size = "1080x2400";
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A screenshot-like picture: flat panels, text-like stripes and gradients.
Image synthetic_screen(int32_t w, int32_t h) {
  Image img{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 4, 255)};
  for (int32_t y = 0; y < h; ++y)
    for (int32_t x = 0; x < w; ++x) {
      uint8_t* p = img.rgba.data() + (size_t(y) * size_t(w) + size_t(x)) * 4;
      const bool text = (y / 24) % 3 == 0 && (x / 9) % 5 != 0;
      p[0] = text ? 30 : uint8_t(240 - y * 40 / h);
      p[1] = text ? 30 : uint8_t(240 - x * 30 / w);
      p[2] = text ? 40 : 250;
    }
  return img;
}

// The vision tower's time for one image (preprocessing included) on `threads` threads.
Status bench_image(const Projector& projector, const std::string& size, int threads, int reps) {
  int32_t w = 0, h = 0;
  if (std::sscanf(size.c_str(), "%dx%d", &w, &h) != 2 || w < 28 || h < 28 || w > 16384 || h > 16384)
    return invalid_argument("--image-size '" + size + "' is not WIDTHxHEIGHT (28..16384)");
  ThreadPool pool(threads, pin_threads_from_environment());
  const Image image = synthetic_screen(w, h);
  std::vector<double> seconds;
  int64_t tokens = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first pages the weights in
    const auto t0 = std::chrono::steady_clock::now();
    AUTOGLM_ASSIGN_OR_RETURN(const PixelPatches patches, preprocess_image(image, projector.vision->spec().preprocess));
    AUTOGLM_ASSIGN_OR_RETURN(const ImageEmbedding e, VisionEncoder(*projector.vision, pool).encode(patches));
    tokens = e.n_tokens();
    if (r > 0) seconds.push_back(seconds_since(t0));
  }
  const auto [mean, sd] = mean_and_sd(seconds);
  std::printf("image %dx%d (%s): %lld image tokens, encoded in %.3f s +- %.3f (%d threads, preprocessing included)\n",
              w, h, projector.path.c_str(), (long long)tokens, mean, sd, threads);
  return Status::ok();
}

// Bytes of the matrices one forward step streams (every projection and the output; the
// embedding table is only looked up).
// Positions attended by `n` tokens after `computed` ones (each sees itself and those before).
int64_t attended_positions_of(int64_t computed, int64_t n) {
  return n * computed + n * (n + 1) / 2;
}

// f summed over the matrices one token goes through in the layers: the projections (latent
// attention's too), the dense FFN or the router, the shared expert and n_expert_used routed
// experts (they are all the same size).
int64_t sum_over_layer_matrices(const Model& m, int64_t (*f)(const cpu::WeightMatrix&)) {
  int64_t n = 0;
  const int64_t used = m.spec().moe.n_expert_used;
  for (const auto& l : m.weights().layers) {
    const ExpertWeights& x = l.experts;
    const MlaWeights& a = l.mla;
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down, &x.router, &x.shared_gate, &x.shared_up,
                          &x.shared_down, &a.q_a, &a.q_b, &a.q, &a.kv_a})
      n += f(*w);
    if (!x.gate.empty()) n += used * (f(x.gate[0]) + f(x.up[0]) + f(x.down[0]));
    for (size_t h = 0; h < a.k_b.size(); ++h) n += f(a.k_b[h]) + f(a.v_b[h]);
  }
  return n;
}

int64_t matrix_params(const cpu::WeightMatrix& w) {
  return w.rows * w.cols;
}

int64_t streamed_weight_bytes(const Model& m) {
  const auto bytes = [](const cpu::WeightMatrix& w) { return w.bytes(); };
  return sum_over_layer_matrices(m, bytes) + m.weights().output.bytes();
}

// Floating-point operations of prefilling `prompt` tokens after `depth`, in chunks of `ubatch`
// (logits for each chunk's last token): two per weight per token, and the attention's
// scores and weighted sums over the positions each token sees.
double prefill_flops(const Model& m, int64_t prompt, int64_t depth, int64_t ubatch) {
  const ModelSpec& s = m.spec();
  const double chunks = double((prompt + ubatch - 1) / ubatch);
  double flops = 2.0 * double(prompt) * double(sum_over_layer_matrices(m, matrix_params)) +
                 2.0 * chunks * double(matrix_params(m.weights().output));
  const double positions = double(attended_positions_of(depth, prompt));
  flops += 2.0 * double(s.n_layer * s.n_head) * double(s.head_dim + s.head_dim_v) * positions;
  return flops;
}

std::vector<int32_t> bench_tokens(int32_t n, int64_t n_vocab, int32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((int64_t(i) * 7919 + 13 + salt * 104729) % n_vocab);
  return ids;
}

struct Test {
  std::string name;
  int32_t prompt = 0;    // tokens prefilled per sequence before timing (parallel rows) or timed (pp)
  int32_t depth = 0;     // tokens in each sequence's cache before the test, never timed
  int32_t generate = 0;  // decode steps timed
  int32_t sequences = 1;
  bool timed_prefill = false;
};

// A JSON Schema constraining the first sequence of the decode tests: each step's mask is
// timed (a document that completes starts over).
struct Constraint {
  const VocabularyTrie* trie = nullptr;
  std::shared_ptr<const Grammar> grammar;
  std::unique_ptr<GrammarMatcher> matcher;
  std::vector<double> mask_ms;

  int32_t pick(float* row, int32_t n_vocab) {
    if (!matcher || matcher->finished()) matcher = trie->make_matcher(grammar);
    const auto t0 = std::chrono::steady_clock::now();
    const bool any = matcher->apply(row, n_vocab);
    mask_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    const int32_t token = int32_t(std::max_element(row, row + n_vocab) - row);
    if (!any || !matcher->accept(token)) matcher.reset();
    return token;
  }
};

SamplingParams client_defaults() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 0.95f;
  p.min_p = 0.0f;
  p.seed = 1;
  return p;
}

// The first sequence's token drawn as clients ask by default (temperature 1, top-p 0.95,
// no top-k: the whole vocabulary), each draw timed.
struct TimedSampler {
  Sampler sampler{client_defaults()};
  std::vector<double> ms;
  std::vector<int32_t> history;

  int32_t pick(float* row, int32_t n_vocab) {
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t token = sampler.sample(row, n_vocab, history);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return token;
  }
};

// Seconds of the timed part of one run of `t`, from empty caches.
// `loras`: sequence s runs loras[s % size] (empty: the base).
Result<double> run_once(const Model& model, ModelRunner& runner, const Test& t, int32_t ubatch, DType kv_type,
                        const std::vector<std::shared_ptr<const LoraSet>>& loras, Constraint* constraint = nullptr,
                        TimedSampler* sampler = nullptr) {
  auto lora_of = [&](int32_t s) { return loras.empty() ? nullptr : loras[size_t(s) % loras.size()].get(); };
  const int64_t n_vocab = model.spec().n_vocab;
  std::vector<ContiguousKvCache> caches;
  caches.reserve(size_t(t.sequences));
  for (int32_t s = 0; s < t.sequences; ++s)
    caches.emplace_back(model.spec(), t.depth + t.prompt + t.generate + 1, kv_type, model.device());
  std::vector<float> logits;
  // Tokens [from, from + n) of each sequence, in chunks of ubatch.
  auto prefill = [&](int32_t from, int32_t n) -> Status {
    for (int32_t s = 0; s < t.sequences; ++s) {
      const auto ids = bench_tokens(from + n, n_vocab, s);
      for (int32_t start = from; start < from + n; start += ubatch) {
        Batch b;
        b.caches = {&caches[size_t(s)]};
        if (lora_of(s)) b.loras = {lora_of(s)};
        b.add_sequence_tokens(0, ids.data() + start, std::min(ubatch, from + n - start), start, true);
        AUTOGLM_RETURN_IF_ERROR(runner.forward(b, logits));
      }
    }
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(prefill(0, t.depth));  // the context already there
  runner.profile().reset();
  auto t0 = std::chrono::steady_clock::now();
  AUTOGLM_RETURN_IF_ERROR(prefill(t.depth, t.prompt));
  if (t.timed_prefill) return seconds_since(t0);
  const int32_t at = t.depth + t.prompt;  // the first decoded position
  Batch step;
  for (int32_t s = 0; s < t.sequences; ++s) {
    step.caches.push_back(&caches[size_t(s)]);
    if (lora_of(s)) step.loras.push_back(lora_of(s));
    const int32_t first = int32_t((s * 31 + 7) % n_vocab);
    step.add_sequence_tokens(s, &first, 1, at, true);
  }
  runner.profile().reset();
  t0 = std::chrono::steady_clock::now();
  for (int32_t g = 0; g < t.generate; ++g) {
    for (int32_t s = 0; s < t.sequences; ++s) step.positions[size_t(s)] = at + g;
    AUTOGLM_RETURN_IF_ERROR(runner.forward(step, logits));
    OpTimer sampling(runner.profile(), Op::kSampling);
    for (int32_t s = 0; s < t.sequences; ++s) {  // greedy but for the first sequence
      float* row = logits.data() + int64_t(s) * n_vocab;
      step.tokens[size_t(s)] = s == 0 && constraint ? constraint->pick(row, int32_t(n_vocab))
                               : s == 0 && sampler  ? sampler->pick(row, int32_t(n_vocab))
                                                    : int32_t(std::max_element(row, row + n_vocab) - row);
    }
  }
  return seconds_since(t0);
}

std::vector<Test> planned_tests(const BenchArgs& a) {
  std::vector<Test> tests;
  const std::string at_depth = a.depth > 0 ? " @d" + std::to_string(a.depth) : "";
  if (a.n_prompt > 0) tests.push_back({"pp" + std::to_string(a.n_prompt) + at_depth, a.n_prompt, a.depth, 0, 1, true});
  if (a.n_gen > 0) tests.push_back({"tg" + std::to_string(a.n_gen) + at_depth, 0, a.depth, a.n_gen, 1, false});
  for (int b : a.parallel)
    tests.push_back(
        {"tg" + std::to_string(a.n_gen) + " x" + std::to_string(b) + " @pp" + std::to_string(a.parallel_prompt),
         a.parallel_prompt, 0, a.n_gen, b, false});
  return tests;
}

// What the machine can do, measured by the probes: memory read bandwidth (bytes/s), float and
// int8 multiply-add peaks (operations/s).
struct Machine {
  double bandwidth = 0, fma_peak = 0, int8_peak = 0;
};

// The CPU's, from the probes on `pool`; a GPU's nominal memory bandwidth (its memory clock and
// bus width: what the decode rows are held to), with no compute peaks probed ("-" below).
Machine measure_machine(const Device& device, ThreadPool& pool) {
  if (device.kind == DeviceKind::kCpu)
    return {cpu::measure_read_bandwidth(pool), cpu::measure_fma_peak(pool), cpu::measure_int8_peak(pool)};
  auto info = cuda::device_info(device.index);
  if (info)
    std::printf("%s: %s, compute capability %d.%d, %d SMs, %s (%s free)\n", device_name(device).c_str(),
                info->name.c_str(), info->compute_major, info->compute_minor, info->multiprocessors,
                format_bytes(double(info->total_bytes)).c_str(), format_bytes(double(info->free_bytes)).c_str());
  return {info ? info->memory_bandwidth_gbs * 1e9 : 0.0, 0, 0};
}

// The peak a model's prefill is held to: the int8 one where its layer matrices meet int8
// activations (the quantized types), the float one otherwise.
double compute_peak_for(const Model& m, const Machine& machine) {
  return cpu::uses_int8_activations(m.layer_weight_type()) ? machine.int8_peak : machine.fma_peak;
}

// Decode rows: the weight bandwidth they reach and its share of the read bandwidth (the mean of
// each repetition's share of the probe taken just before it, where there is one: a VM's
// bandwidth moves between seconds); prefill rows: their GFLOP/s and share of the peak.
void print_row(const Model& m, int threads, const Test& t, double mean, double sd, double step_bytes,
               const Machine& machine, int64_t ubatch, const std::vector<double>& shares) {
  char size[32], tps[48], eff[32] = "-", ratio[32] = "-", gflops[32] = "-", peak[32] = "-";
  std::snprintf(size, sizeof(size), "%.2f MiB", double(m.weight_bytes()) / 1048576.0);
  std::snprintf(tps, sizeof(tps), "%.2f ± %.2f", mean, sd);
  if (!t.timed_prefill) {
    const double steps_per_second = mean / t.sequences;
    std::snprintf(eff, sizeof(eff), "%.1f", step_bytes * steps_per_second / 1e9);
    const double share = shares.empty() ? step_bytes * steps_per_second / machine.bandwidth
                                        : std::accumulate(shares.begin(), shares.end(), 0.0) / double(shares.size());
    std::snprintf(ratio, sizeof(ratio), "%.0f%%", 100.0 * share);
  } else {
    const double flops_per_second = prefill_flops(m, t.prompt, t.depth, ubatch) * mean / double(t.prompt);
    std::snprintf(gflops, sizeof(gflops), "%.1f", flops_per_second / 1e9);
    if (const double peak_ops = compute_peak_for(m, machine); peak_ops > 0)
      std::snprintf(peak, sizeof(peak), "%.0f%%", 100.0 * flops_per_second / peak_ops);
  }
  std::printf("| %-22s | %10s | %-22s | %7d | %-18s | %16s | %9s | %7s | %8s | %9s |\n",
              m.spec().name.substr(0, 22).c_str(), size, m.weight_type_summary().substr(0, 22).c_str(), threads,
              t.name.c_str(), tps, eff, ratio, gflops, peak);
  std::fflush(stdout);
}

// The read bandwidth probed just before each decode repetition, and the share of it each reached.
void print_probes_beside(const std::vector<double>& probes, const std::vector<double>& shares) {
  std::string line = "  read bandwidth before each repetition (GB/s) and the share of it reached:";
  char part[48];
  for (size_t r = 0; r < probes.size(); ++r) {
    std::snprintf(part, sizeof(part), " %.1f (%.0f%%)", probes[r] / 1e9, 100 * shares[r]);
    line += part;
  }
  std::printf("%s\n", line.c_str());
}

// Time per token of one part of a step (grammar mask, sampler) beside the decode step.
void print_per_token_times(const char* what, std::vector<double> ms, double step_ms) {
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2], p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
  std::printf(
      "  %s (first sequence, %zu tokens): p50 %.3f ms, p99 %.3f ms, mean %.3f ms = %.1f%% / %.1f%% / "
      "%.1f%% of the %.2f ms decode step\n",
      what, ms.size(), p50, p99, mean, 100 * p50 / step_ms, 100 * p99 / step_ms, 100 * mean / step_ms, step_ms);
}

int bench(const BenchArgs& a) {
  RuntimeOptions options;
  options.quantize = a.quantize;
  a.memory.apply_to(options);
  a.cpu_moe.apply_to(options);
  auto device = parse_device(a.device);
  if (!device) return fail(device.status());
  options.device = *device;
  options.threads = 1;  // each row of the table runs on its own pool
  options.start_engine = false;
  auto lora = lora_options(a.lora);
  if (!lora) return fail(lora.status());
  options.lora = *lora;
  options.mmproj = a.mmproj.empty() ? "none" : a.mmproj;
  auto rt = open_runtime(a.model, options);
  if (!rt) return fail(rt.status());
  if (const Projector* projector = runtime_parts(**rt).projector.get())
    for (int threads : a.threads)
      if (Status st = bench_image(*projector, a.image_size, threads, a.reps); !st.is_ok()) return fail(st);
  const Model& m = *runtime_parts(**rt).model;
  std::vector<std::shared_ptr<const LoraSet>> loras;
  if (const auto& stacked = runtime_parts(**rt).default_lora; stacked && a.lora_spread)
    for (const auto& adapter : *stacked) loras.push_back(std::make_shared<const LoraSet>(LoraSet{adapter}));
  else if (stacked)
    loras.push_back(stacked);
  auto kv_type = resolve_kv_type(a.kv_type, m.spec());
  if (!kv_type) return fail(kv_type.status());
  const double step_bytes = double(streamed_weight_bytes(m));
  auto speculation =
      prepare_speculation(a.spec, a.model, m, runtime_parts(**rt).tokenizer->vocab(), *runtime_parts(**rt).pool);
  if (!speculation) return fail(speculation.status());
  std::unique_ptr<VocabularyTrie> trie;
  Constraint constraint;
  if (!a.schema_file.empty()) {
    auto text = output_constraint("", a.schema_file);
    if (!text) return fail(text.status());
    auto grammar = constraint_grammar(*text, RequestLimits{});
    if (!grammar) return fail(grammar.status());
    trie = std::make_unique<VocabularyTrie>(*runtime_parts(**rt).tokenizer);
    constraint.trie = trie.get();
    constraint.grammar = *grammar;
  }
  for (int threads : a.threads) {
    ThreadPool pool(threads, pin_threads_from_environment());
    const Machine machine = measure_machine(m.device(), pool);
    const double bw = machine.bandwidth;
    std::printf(
        "threads %d: measured read bandwidth %.1f GB/s; weights streamed per step %.1f MiB -> decode bound "
        "%.1f tok/s (one sequence); peaks: float FMA %.1f GFLOP/s, int8 dot products %.1f GOP/s (%% of peak: "
        "of the one the weights' kernels use); KV %s\n",
        threads, bw / 1e9, step_bytes / 1048576.0, bw / step_bytes, machine.fma_peak / 1e9, machine.int8_peak / 1e9,
        a.kv_type.c_str());
    std::printf("| %-22s | %10s | %-22s | %7s | %-18s | %16s | %9s | %7s | %8s | %9s |\n", "model", "size", "types",
                "threads", "test", "t/s", "eff GB/s", "% of bw", "GFLOP/s", "% of peak");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(24, '-').c_str(), std::string(12, '-').c_str(),
                std::string(24, '-').c_str(), std::string(9, '-').c_str(), std::string(20, '-').c_str(),
                std::string(18, '-').c_str(), std::string(11, '-').c_str(), std::string(9, '-').c_str(),
                std::string(10, '-').c_str(), std::string(11, '-').c_str());
    ModelRunner runner(m, pool);
    for (const Test& t : planned_tests(a)) {
      Test warm = t;
      warm.prompt = std::min(t.prompt, 16);
      warm.depth = std::min(t.depth, 16);
      warm.generate = std::min(t.generate, 4);
      if (auto w = run_once(m, runner, warm, a.ubatch, *kv_type, loras); !w) return fail(w.status());
      runner.profile().set_enabled(a.profile);
      std::vector<double> tps;
      Constraint* c = trie && !t.timed_prefill ? &constraint : nullptr;
      constraint.mask_ms.clear();
      TimedSampler sampler;
      TimedSampler* timed = !c && !t.timed_prefill ? &sampler : nullptr;
      const bool probe_beside = !t.timed_prefill && m.device().kind == DeviceKind::kCpu;
      std::vector<double> probes, shares;
      for (int r = 0; r < a.reps; ++r) {
        if (probe_beside) probes.push_back(cpu::measure_read_bandwidth(pool, 3));
        auto s = run_once(m, runner, t, a.ubatch, *kv_type, loras, c, timed);
        if (!s) return fail(s.status());
        tps.push_back(double(t.timed_prefill ? t.prompt : t.generate * t.sequences) / *s);
        if (probe_beside) shares.push_back(tps.back() / t.sequences * step_bytes / probes.back());
      }
      const auto [mean, sd] = mean_and_sd(tps);
      print_row(m, threads, t, mean, sd, step_bytes, machine, a.ubatch, shares);
      if (!probes.empty()) print_probes_beside(probes, shares);
      const double step_ms = 1000.0 * t.sequences / mean;
      if (c && !constraint.mask_ms.empty()) print_per_token_times("grammar mask", constraint.mask_ms, step_ms);
      if (timed && !sampler.ms.empty()) {
        const std::string what =
            "sampler, temperature 1 top-p 0.95 over " + std::to_string(m.spec().n_vocab) + " tokens";
        print_per_token_times(what.c_str(), sampler.ms, step_ms);
      }
      if (runner.profile().enabled())
        std::printf("\nper-op time, %s (last repetition):\n%s\n", t.name.c_str(), runner.profile().table().c_str());
      runner.profile().set_enabled(false);
    }
    if (speculation->config.method != SpecMethod::kNone && a.n_gen > 0)
      if (auto s = bench_speculation(m, *runtime_parts(**rt).tokenizer, pool, *speculation, a.n_gen, a.reps, *kv_type);
          !s.is_ok())
        return fail(s);
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt processing and generation speed (tokens/s)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file or Hugging Face folder")->required();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens (0: skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--mmproj", a->mmproj, "A projector (vision tower) GGUF: also time it on an image of --image-size");
  cmd->add_option("--image-size", a->image_size, "The timed image, WIDTHxHEIGHT (a phone screenshot by default)")
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->n_gen, "Generated tokens (0: skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-d,--n-depth", a->depth, "Tokens already in the context before the pp and tg tests (untimed)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--repetitions", a->reps, "Repetitions of each test")->check(CLI::PositiveNumber);
  cmd->add_option("-u,--ubatch", a->ubatch, "Prompt tokens per forward")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--parallel", a->parallel,
                  "Aggregate decode with this many sequences at once (comma-separated list, e.g. 1,4,8,16)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--parallel-prompt", a->parallel_prompt, "Prompt tokens of each parallel sequence")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", a->threads, "Thread counts to test (repeatable; default: physical cores)")
      ->check(CLI::Range(1, 1024));
  add_kv_type_option(*cmd, a->kv_type);
  add_device_option(*cmd, a->device);
  add_bf16_activations_option(*cmd);
  add_quantize_option(*cmd, a->quantize);
  add_memory_options(*cmd, a->memory);
  add_cpu_moe_options(*cmd, a->cpu_moe);
  add_lora_option(*cmd, a->lora);
  cmd->add_flag("--lora-spread", a->lora_spread,
                "With several --lora: sequence i of a parallel test runs adapter i % N alone (the serving shape)");
  cmd->add_flag("--profile", a->profile, "Print the per-op time breakdown of each test");
  add_spec_options(*cmd, a->spec);
  cmd->add_option("--json-schema", a->schema_file,
                  "Constrain the decode tests' first sequence to this JSON Schema and report the mask time per token");
  cmd->callback([a] {
    if (a->threads.empty()) a->threads.push_back(physical_core_count());
    exit_code() = bench(*a);
  });
}

}  // namespace autoglm::cli
