// autoglm bench: prompt processing (ppN) and text generation (tgN) speed, like llama-bench.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/common.h"
#include "model/runner.h"

namespace autoglm::cli {
namespace {

struct BenchArgs {
  std::string model;
  int32_t n_prompt = 512, n_gen = 128, reps = 3, batch = 512;
  std::vector<int> threads;
};

// Seconds for `n_prompt` tokens in batches, or `n_gen` single-token decodes, from an empty cache.
Result<double> time_once(const Model& model, ThreadPool& pool, int32_t n_tokens, int32_t batch_size) {
  ModelRunner runner(model, pool);
  ContiguousKvCache cache(model.spec(), n_tokens + 1);
  std::vector<int32_t> ids(static_cast<size_t>(n_tokens));
  for (int32_t i = 0; i < n_tokens; ++i) ids[size_t(i)] = int32_t((i * 7919 + 13) % model.spec().n_vocab);
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  for (int32_t start = 0; start < n_tokens; start += batch_size) {
    const int32_t n = std::min(batch_size, n_tokens - start);
    Batch b;
    b.caches = {&cache};
    b.add_sequence_tokens(0, ids.data() + start, n, start, true);
    AUTOGLM_RETURN_IF_ERROR(runner.forward(b, logits));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Stats {
  double mean = 0, sd = 0;
};

Stats tokens_per_second(const std::vector<double>& seconds, int32_t n_tokens) {
  std::vector<double> tps;
  for (double s : seconds) tps.push_back(n_tokens / s);
  Stats st;
  st.mean = std::accumulate(tps.begin(), tps.end(), 0.0) / double(tps.size());
  double var = 0;
  for (double t : tps) var += (t - st.mean) * (t - st.mean);
  st.sd = tps.size() > 1 ? std::sqrt(var / double(tps.size() - 1)) : 0.0;
  return st;
}

int bench(const BenchArgs& a) {
  auto loaded = Model::load(a.model);
  if (!loaded) return fail(loaded.status());
  const Model& m = **loaded;
  std::string type = m.weight_type_summary();
  std::printf("| %-24s | %10s | %8s | %-22s | %7s | %8s | %18s |\n", "model", "size", "params", "types", "threads",
              "test", "t/s");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(26, '-').c_str(), std::string(12, '-').c_str(),
              std::string(10, '-').c_str(), std::string(24, '-').c_str(), std::string(9, '-').c_str(),
              std::string(10, '-').c_str(), std::string(20, '-').c_str());
  for (int threads : a.threads) {
    ThreadPool pool(threads);
    struct Test {
      std::string name;
      int32_t n, batch;
    };
    std::vector<Test> tests;
    if (a.n_prompt > 0) tests.push_back({"pp" + std::to_string(a.n_prompt), a.n_prompt, a.batch});
    if (a.n_gen > 0) tests.push_back({"tg" + std::to_string(a.n_gen), a.n_gen, 1});
    for (const auto& t : tests) {
      if (auto warm = time_once(m, pool, std::min(t.n, 16), t.batch); !warm) return fail(warm.status());
      std::vector<double> seconds;
      for (int r = 0; r < a.reps; ++r) {
        auto s = time_once(m, pool, t.n, t.batch);
        if (!s) return fail(s.status());
        seconds.push_back(*s);
      }
      const Stats st = tokens_per_second(seconds, t.n);
      char size[32], params[32], tps[48];
      std::snprintf(size, sizeof(size), "%.2f MiB", double(m.weight_bytes()) / 1048576.0);
      std::snprintf(params, sizeof(params), "%.2f M", double(m.n_params()) / 1e6);
      std::snprintf(tps, sizeof(tps), "%.2f ± %.2f", st.mean, st.sd);
      std::printf("| %-24s | %10s | %8s | %-22s | %7d | %8s | %18s |\n", m.spec().name.substr(0, 24).c_str(), size,
                  params, type.substr(0, 22).c_str(), threads, t.name.c_str(), tps);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt processing and generation speed (tokens/s)");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-p,--n-prompt", a->n_prompt, "Prompt tokens (0: skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", a->n_gen, "Generated tokens (0: skip)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--repetitions", a->reps, "Repetitions of each test")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--batch-size", a->batch, "Prompt tokens per forward")->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", a->threads, "Thread counts to test (repeatable; default: physical cores)")
      ->check(CLI::Range(1, 1024));
  cmd->callback([a] {
    if (a->threads.empty()) a->threads.push_back(physical_core_count());
    exit_code() = bench(*a);
  });
}

}  // namespace autoglm::cli
