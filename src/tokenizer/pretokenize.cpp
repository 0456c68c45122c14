#include "tokenizer/pretokenize.h"

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "tokenizer/json_steps.h"

#include "core/utf8.h"

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

// GPT-2's split rule as the ByteLevel pre-tokenizer applies it (use_regex).
const char kByteLevelRegex[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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

Result<SplitBehavior> behavior_from_name(const std::string& name, const std::string& where) {
  static const std::map<std::string, SplitBehavior> names = {{"Isolated", SplitBehavior::kIsolated},
                                                             {"Removed", SplitBehavior::kRemoved},
                                                             {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
                                                             {"MergedWithNext", SplitBehavior::kMergedWithNext},
                                                             {"Contiguous", SplitBehavior::kContiguous}};
  auto it = names.find(name);
  if (it == names.end()) return corrupt(where + ": unknown split behavior '" + name + "'");
  return it->second;
}

struct Segment {
  size_t begin, end;
  bool match;
};

// The text cut at the matches of `regex` (gaps and matches alternate), then
// grouped as `behavior` says; empty pieces are dropped.
std::vector<Segment> split_segments(const Regex& regex, const std::string& text, SplitBehavior behavior, bool invert) {
  std::vector<Segment> parts;
  size_t done = 0;
  for (const auto& [b, e] : regex.find_all(text)) {
    if (b > done) parts.push_back({done, b, invert});
    parts.push_back({b, e, !invert});
    done = e;
  }
  if (done < text.size()) parts.push_back({done, text.size(), invert});

  std::vector<Segment> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated: return parts;
    case SplitBehavior::kRemoved:
      for (const Segment& s : parts)
        if (!s.match) out.push_back(s);
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : parts) {
        if (s.match && !previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        previous_match = s.match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->match && !previous_match && !out.empty())
          out.back().begin = it->begin;
        else
          out.push_back(*it);
        previous_match = it->match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (const Segment& s : parts) {
        if (s.match == previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        previous_match = s.match;
      }
      return out;
  }
  return parts;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

Status PreTokenizer::add_split(const std::string& pattern, bool literal, SplitBehavior behavior, bool invert) {
  AUTOGLM_ASSIGN_OR_RETURN(auto regex, Regex::compile(pattern, literal));
  add_split(std::move(regex), behavior, invert);
  return Status::ok();
}

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert) {
  Step step;
  step.regex = std::move(regex);
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
}

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
    Status s = p->add_split(source, false, SplitBehavior::kIsolated);
    if (!s.is_ok()) return Status(StatusCode::kInternal, "pre-tokenizer '" + pre + "': " + s.message());
  }
  p->byte_level_ = true;  // GGUF BPE vocabularies are byte-level
  cache[pre] = p;
  return std::shared_ptr<const PreTokenizer>(p);
}

Result<std::shared_ptr<const PreTokenizer>> PreTokenizer::from_json(const nlohmann::json& j, const std::string& where) {
  auto p = std::shared_ptr<PreTokenizer>(new PreTokenizer());
  if (!j.is_null()) AUTOGLM_RETURN_IF_ERROR(p->add_json_step(j, where));
  return std::shared_ptr<const PreTokenizer>(p);
}

Status PreTokenizer::add_json_step(const nlohmann::json& j, const std::string& where) {
  AUTOGLM_ASSIGN_OR_RETURN(const std::string type, json_step_type(j, where));
  const std::string at = where + " (" + type + ")";
  if (type == "Sequence")
    return add_json_sequence(j, where, "pretokenizers",
                             [&](const nlohmann::json& e, const std::string& w) { return add_json_step(e, w); });
  if (type == "Split") {
    AUTOGLM_ASSIGN_OR_RETURN(auto regex, json_step_pattern(j, at));
    AUTOGLM_ASSIGN_OR_RETURN(SplitBehavior behavior, behavior_from_name(j.value("behavior", "Isolated"), at));
    add_split(std::move(regex), behavior, j.value("invert", false));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    byte_level_ = true;
    if (j.value("add_prefix_space", false)) {
      Step step;
      step.kind = Kind::kPrefixSpace;
      step.marker = " ";
      steps_.push_back(step);
    }
    return j.value("use_regex", true) ? add_split(kByteLevelRegex, false, SplitBehavior::kIsolated) : Status::ok();
  }
  if (type == "Metaspace") {
    Step step;
    step.kind = Kind::kMetaspace;
    step.marker = j.value("replacement", "\xe2\x96\x81");
    const std::string scheme = j.value("prepend_scheme", j.value("add_prefix_space", true) ? "always" : "never");
    if (scheme == "always")
      step.prepend = Prepend::kAlways;
    else if (scheme == "first")
      step.prepend = Prepend::kFirst;
    else if (scheme == "never")
      step.prepend = Prepend::kNever;
    else
      return corrupt(at + ": unknown prepend_scheme '" + scheme + "'");
    steps_.push_back(step);
    return j.value("split", true) ? add_split(step.marker, true, SplitBehavior::kMergedWithNext) : Status::ok();
  }
  if (type == "Digits")
    return add_split(j.value("individual_digits", false) ? "[0-9]" : "[0-9]+", false, SplitBehavior::kIsolated);
  if (type == "Whitespace") return add_split(R"(\w+|[^\w\s]+)", false, SplitBehavior::kRemoved, true);
  if (type == "WhitespaceSplit") return add_split(R"(\s+)", false, SplitBehavior::kRemoved);
  if (type == "Punctuation") {
    AUTOGLM_ASSIGN_OR_RETURN(SplitBehavior behavior, behavior_from_name(j.value("behavior", "Isolated"), at));
    return add_split(R"(\p{P})", false, behavior);
  }
  return unsupported(at + ": pre-tokenizer type '" + type + "' is not supported");
}

void PreTokenizer::apply(const Step& step, const std::string& piece, bool first, std::vector<std::string>& out) const {
  switch (step.kind) {
    case Kind::kSplit:
      for (const Segment& s : split_segments(*step.regex, piece, step.behavior, step.invert))
        out.emplace_back(piece, s.begin, s.end - s.begin);
      return;
    case Kind::kPrefixSpace: out.push_back(starts_with(piece, " ") ? piece : " " + piece); return;
    case Kind::kMetaspace: {
      std::string text = utf8::replace_all(piece, " ", step.marker);
      const bool prepend = step.prepend == Prepend::kAlways || (step.prepend == Prepend::kFirst && first);
      if (prepend && !starts_with(text, step.marker)) text = step.marker + text;
      out.push_back(std::move(text));
      return;
    }
  }
}

std::vector<std::string> PreTokenizer::split(const std::string& text, bool first_fragment) const {
  std::vector<std::string> pieces{text};
  for (const Step& step : steps_) {
    std::vector<std::string> next;
    for (size_t i = 0; i < pieces.size(); ++i) apply(step, pieces[i], first_fragment && i == 0, next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace autoglm
