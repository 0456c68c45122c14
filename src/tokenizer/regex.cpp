#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

namespace autoglm {

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern, bool literal, bool caseless) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = (literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY) |
                           (caseless ? PCRE2_CASELESS : 0);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return invalid_argument("regex /" + pattern + "/: " + reinterpret_cast<char*>(message) + " at offset " +
                            std::to_string(offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
  auto regex = std::shared_ptr<Regex>(new Regex());
  regex->code_ = code;
  return std::shared_ptr<const Regex>(regex);
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(const std::string& text) const {
  auto* code = static_cast<pcre2_code*>(code_);
  std::vector<std::pair<size_t, size_t>> matches;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    if (pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr) < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) {  // empty match: step over one character
      if (ov[0] >= text.size()) break;
      start = ov[0] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80) ++start;
      continue;
    }
    matches.emplace_back(ov[0], ov[1]);
    start = ov[1];
  }
  pcre2_match_data_free(md);
  return matches;
}

std::string Regex::replace_all(const std::string& text, const std::string& with) const {
  std::string out;
  size_t done = 0;
  for (const auto& [b, e] : find_all(text)) {
    out.append(text, done, b - done);
    out += with;
    done = e;
  }
  out.append(text, done, std::string::npos);
  return out;
}

}  // namespace autoglm
