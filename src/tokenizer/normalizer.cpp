#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tokenizer/json_steps.h"

#include "core/utf8.h"

namespace autoglm {
namespace {

std::string unicode_normalize(const std::string& text, utf8proc_option_t form) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()),
                              &out, utf8proc_option_t(form | UTF8PROC_STABLE));
  if (n < 0) return text;  // not valid UTF-8: left as it is (callers sanitize first)
  std::string result(reinterpret_cast<char*>(out), size_t(n));
  std::free(out);
  return result;
}

std::string lowercase(const std::string& text) {
  return utf8::map_code_points(
      text, [](uint32_t cp, std::string& out) { utf8::append(out, uint32_t(utf8proc_tolower(utf8proc_int32_t(cp)))); });
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

Result<std::shared_ptr<const Normalizer>> Normalizer::from_json(const nlohmann::json& j, const std::string& where) {
  auto n = std::make_shared<Normalizer>();
  if (!j.is_null()) AUTOGLM_RETURN_IF_ERROR(n->add_json_step(j, where));
  return std::shared_ptr<const Normalizer>(n);
}

Status Normalizer::add_json_step(const nlohmann::json& j, const std::string& where) {
  AUTOGLM_ASSIGN_OR_RETURN(const std::string type, json_step_type(j, where));
  const std::string at = where + " (" + type + ")";
  if (type == "Sequence")
    return add_json_sequence(j, where, "normalizers",
                             [&](const nlohmann::json& e, const std::string& w) { return add_json_step(e, w); });
  if (type == "NFC") return steps_.push_back({Kind::kNfc, "", nullptr}), Status::ok();
  if (type == "NFD") return steps_.push_back({Kind::kNfd, "", nullptr}), Status::ok();
  if (type == "NFKC") return steps_.push_back({Kind::kNfkc, "", nullptr}), Status::ok();
  if (type == "NFKD") return steps_.push_back({Kind::kNfkd, "", nullptr}), Status::ok();
  if (type == "Lowercase") return steps_.push_back({Kind::kLowercase, "", nullptr}), Status::ok();
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string()) return corrupt(at + ": \"prepend\" must be a string");
    return steps_.push_back({Kind::kPrepend, j["prepend"].get<std::string>(), nullptr}), Status::ok();
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) return corrupt(at + ": \"content\" must be a string");
    AUTOGLM_ASSIGN_OR_RETURN(auto regex, json_step_pattern(j, at));
    return steps_.push_back({Kind::kReplace, j["content"].get<std::string>(), std::move(regex)}), Status::ok();
  }
  if (type == "Strip") {
    Step s{Kind::kStrip, "", nullptr};
    s.left = j.value("strip_left", true);
    s.right = j.value("strip_right", true);
    return steps_.push_back(s), Status::ok();
  }
  return unsupported(at + ": normalizer type '" + type + "' is not supported");
}

std::string Normalizer::apply_step(const Step& s, const std::string& text) {
  switch (s.kind) {
    case Kind::kNfc: return unicode_normalize(text, utf8proc_option_t(UTF8PROC_COMPOSE));
    case Kind::kNfd: return unicode_normalize(text, utf8proc_option_t(UTF8PROC_DECOMPOSE));
    case Kind::kNfkc: return unicode_normalize(text, utf8proc_option_t(UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
    case Kind::kNfkd: return unicode_normalize(text, utf8proc_option_t(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
    case Kind::kLowercase: return lowercase(text);
    case Kind::kPrepend: return text.empty() ? text : s.text + text;
    case Kind::kReplace: return s.regex->replace_all(text, s.text);
    case Kind::kStrip: {
      size_t b = 0, e = text.size();
      while (s.left && b < e && is_space(text[b])) ++b;
      while (s.right && e > b && is_space(text[e - 1])) --e;
      return text.substr(b, e - b);
    }
  }
  return text;
}

std::string Normalizer::apply(const std::string& text) const {
  std::string out = text;
  for (const Step& s : steps_) out = apply_step(s, out);
  return out;
}

}  // namespace autoglm
