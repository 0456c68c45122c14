// Grammar mask time per token on a real vocabulary: a random walk through a JSON Schema's
// language, one admissible token drawn uniformly at each step (as sampling from a flat
// model would), timing GrammarMatcher::apply. Prints p50/p99/mean per token and how many
// masks were built versus found in the cache.
// Usage: grammar_mask VOCAB.gguf SCHEMA.json [steps=2000] [seed=1]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/constrained.h"
#include "formats/gguf.h"
#include "sample/json_schema.h"

using namespace autoglm;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf SCHEMA.json [steps] [seed]\n", argv[0]);
    return 2;
  }
  auto file = GgufFile::open(argv[1]);
  if (!file) return std::fprintf(stderr, "%s\n", file.status().message().c_str()), 1;
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok) return std::fprintf(stderr, "%s\n", tok.status().message().c_str()), 1;
  std::ifstream in(argv[2]);
  std::stringstream text;
  text << in.rdbuf();
  auto gbnf = json_schema_to_gbnf(nlohmann::json::parse(text.str()));
  if (!gbnf) return std::fprintf(stderr, "%s\n", gbnf.status().message().c_str()), 1;
  auto grammar = Grammar::parse(*gbnf);
  if (!grammar) return std::fprintf(stderr, "%s\n", grammar.status().message().c_str()), 1;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 2000;
  std::mt19937 rng(argc > 4 ? uint32_t(std::atoi(argv[4])) : 1u);
  const int32_t n_vocab = (*tok)->n_vocab();
  const auto t_trie = std::chrono::steady_clock::now();
  const VocabularyTrie trie(**tok);
  trie.get();
  const double trie_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_trie).count();

  std::vector<double> times;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  int documents = 0;
  auto matcher = trie.make_matcher(*grammar);
  for (int step = 0; step < steps; ++step) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const bool any = matcher->apply(logits.data(), n_vocab, 4096);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n_vocab; ++id)
      if (!std::isinf(logits[size_t(id)])) allowed.push_back(id);
    const int32_t pick = any ? allowed[rng() % allowed.size()] : -1;
    if (pick < 0 || (*tok)->vocab().is_eog(pick) || matcher->finished()) {  // a whole document: start another
      ++documents;
      matcher = trie.make_matcher(*grammar);
      continue;
    }
    matcher->accept(pick);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (double t : times) mean += t / double(times.size());
  std::printf("vocabulary %d tokens (trie built in %.1f ms); %d steps, %d documents completed\n", n_vocab, trie_ms,
              steps, documents);
  std::printf("mask per token: p50 %.3f ms  p99 %.3f ms  mean %.3f ms  max %.3f ms\n", sorted[sorted.size() / 2],
              sorted[sorted.size() * 99 / 100], mean, sorted.back());
  return 0;
}
