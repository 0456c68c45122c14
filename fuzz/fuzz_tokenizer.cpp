// Text -> token ids -> text with real vocabularies (SentencePiece, Llama 3 BPE, Qwen2 BPE
// with its <|...|> markers). The first byte picks the vocabulary and whether special tokens
// are parsed (its low four bits: the seeds start with a letter, '@' is mode 0); with bit 3
// set, bytes below 0x20 become special-token pieces, so inputs are dense random mixes of
// markers and text.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<autoglm::Tokenizer>> tokenizers;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("AUTOGLM_SHARED_DIR");
  const std::string shared = dir ? dir : AUTOGLM_SHARED_DIR;
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"}) {
    const std::string path = shared + "/models/vocab/" + name;
    auto file = autoglm::GgufFile::open(path);
    if (!file) {
      std::fprintf(stderr, "fuzz_tokenizer: %s\n", file.status().message().c_str());
      std::exit(1);
    }
    auto tok = autoglm::Tokenizer::from_gguf(**file);
    if (!tok) {
      std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path.c_str(), tok.status().message().c_str());
      std::exit(1);
    }
    tokenizers.push_back(std::move(tok).value());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const autoglm::Tokenizer& tok = *tokenizers[(mode & 3) % tokenizers.size()];
  const bool parse_special = mode & 4;
  std::string text;
  if (mode & 8) {
    const auto& vocab = tok.vocab();
    std::vector<int32_t> specials;
    for (int32_t id = 0; id < int32_t(vocab.pieces.size()) && specials.size() < 64; ++id)
      if (vocab.is_special(id)) specials.push_back(id);
    for (size_t i = 1; i < size; ++i)
      if (data[i] < 0x20 && !specials.empty())
        text += vocab.pieces[size_t(specials[data[i] % specials.size()])];
      else
        text += char(data[i]);
  } else {
    text.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  }
  const auto ids = tok.encode(text, /*add_special=*/true, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= int32_t(tok.n_vocab())) std::abort();
  (void)tok.decode(ids);
  (void)tok.decode(ids, /*special=*/true);
  return 0;
}
