#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.h"

#include <pcre2.h>

#include <map>
#include <mutex>

namespace autoglm {
namespace {

// The split patterns of the published tokenizers, by family.
const char* const kGpt2[] = {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"};
const char* const kDefault[] = {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2[0], R"(\p{N}+)", R"([0-9][0-9][0-9])"};
const char* const kLlama3[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
const char* const kQwen2[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
const char* const kStarcoder[] = {R"(\p{N})", kGpt2[0]};
const char* const kFalcon[] = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2[0], R"([0-9][0-9][0-9])"};
const char* const kDeepseekCoder[] = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"};
const char* const kDeepseekLlm[] = {
    "[\r\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{"
    "2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{"
    "13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{"
    "1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{"
    "1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{"
    "1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{"
    "210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{"
    "2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{"
    "2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{"
    "A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{"
    "10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
    "\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    R"(\p{N}+)"};

struct Family {
  std::vector<std::string> names;
  std::vector<const char*> patterns;
};

template <size_t N>
std::vector<const char*> list(const char* const (&p)[N]) {
  return std::vector<const char*>(p, p + N);
}

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {{"default"}, list(kDefault)},
      {{"gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion"}, list(kGpt2)},
      {{"llama3", "llama-bpe", "dbrx", "smaug-bpe", "chatglm-bpe", "falcon3"}, list(kLlama3)},
      {{"qwen2", "stablelm2", "deepseek-r1-qwen", "hunyuan"}, list(kQwen2)},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, list(kStarcoder)},
      {{"falcon"}, list(kFalcon)},
      {{"deepseek-coder"}, list(kDeepseekCoder)},
      {{"deepseek-llm"}, list(kDeepseekLlm)},
  };
  return table;
}

}  // namespace

struct PreTokenizer::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

Result<std::shared_ptr<const PreTokenizer>> PreTokenizer::for_name(const std::string& pre) {
  // Compiled patterns are shared: several models may use the same family.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const PreTokenizer>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(pre); it != cache.end()) return it->second;

  const Family* family = nullptr;
  for (const auto& f : families())
    for (const auto& n : f.names)
      if (n == pre) family = &f;
  if (!family) return unsupported("BPE pre-tokenizer '" + pre + "' is not supported");

  auto p = std::shared_ptr<PreTokenizer>(new PreTokenizer());
  for (const char* source : family->patterns) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto pattern = std::make_unique<Pattern>();
    pattern->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source), PCRE2_ZERO_TERMINATED,
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &offset, nullptr);
    if (!pattern->code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return Status(StatusCode::kInternal, "pre-tokenizer '" + pre + "': regex error at " + std::to_string(offset) +
                                               ": " + reinterpret_cast<char*>(message));
    }
    pcre2_jit_compile(pattern->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
    p->patterns_.push_back(std::move(pattern));
  }
  cache[pre] = p;
  return std::shared_ptr<const PreTokenizer>(p);
}

std::vector<std::string> PreTokenizer::split(const std::string& text) const {
  std::vector<std::string> pieces{text};
  for (const auto& pattern : patterns_) {
    std::vector<std::string> next;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(pattern->code, nullptr);
    for (const std::string& piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0;    // search position
      size_t emitted = 0;  // end of the last piece pushed
      while (start <= piece.size()) {
        const int rc = pcre2_match(pattern->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m1 == m0) {  // empty match: step over one character
          if (m0 >= piece.size()) break;
          start = m0 + 1;
          while (start < piece.size() && (static_cast<unsigned char>(piece[start]) & 0xc0) == 0x80) ++start;
          continue;
        }
        if (m0 > emitted) next.emplace_back(piece, emitted, m0 - emitted);
        next.emplace_back(piece, m0, m1 - m0);
        emitted = start = m1;
      }
      if (emitted < piece.size()) next.emplace_back(piece, emitted, piece.size() - emitted);
    }
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace autoglm
