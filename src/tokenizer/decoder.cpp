#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "tokenizer/json_steps.h"

#include "core/utf8.h"
#include "tokenizer/encoders.h"

namespace autoglm {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xNN>" -> the byte, or -1.
int byte_token_value(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Runs of byte tokens become the text they spell, or one U+FFFD per byte if that is not UTF-8.
void fuse_byte_tokens(std::vector<std::string>& tokens, bool validate) {
  std::vector<std::string> out;
  std::string bytes;
  size_t n_bytes = 0;
  auto flush = [&] {
    if (n_bytes == 0) return;
    const bool valid = !validate || utf8::sanitize(bytes) == bytes;
    if (valid) {
      out.push_back(bytes);
    } else {
      std::string replacement;
      for (size_t i = 0; i < n_bytes; ++i) replacement += "\xef\xbf\xbd";
      out.push_back(replacement);
    }
    bytes.clear();
    n_bytes = 0;
  };
  for (std::string& t : tokens) {
    const int b = byte_token_value(t);
    if (b >= 0) {
      bytes += char(b);
      ++n_bytes;
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens = std::move(out);
}

// Removes up to `n` copies of `content` at the start (or end) of s.
void strip_chars(std::string& s, const std::string& content, int start, int stop) {
  if (content.empty()) return;
  for (int i = 0; i < start && s.compare(0, content.size(), content) == 0; ++i) s.erase(0, content.size());
  for (int i = 0;
       i < stop && s.size() >= content.size() && s.compare(s.size() - content.size(), content.size(), content) == 0;
       ++i)
    s.erase(s.size() - content.size());
}

}  // namespace

Result<std::shared_ptr<const Decoder>> Decoder::from_json(const nlohmann::json& j, const std::string& where) {
  auto d = std::make_shared<Decoder>();
  if (!j.is_null()) AUTOGLM_RETURN_IF_ERROR(d->add_json_step(j, where));
  return std::shared_ptr<const Decoder>(d);
}

Status Decoder::add_json_step(const nlohmann::json& j, const std::string& where) {
  AUTOGLM_ASSIGN_OR_RETURN(const std::string type, json_step_type(j, where));
  const std::string at = where + " (" + type + ")";
  if (type == "Sequence")
    return add_json_sequence(j, where, "decoders",
                             [&](const nlohmann::json& e, const std::string& w) { return add_json_step(e, w); });
  Step s{Kind::kFuse, "", ""};
  if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    s.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = Kind::kFuse;
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.pattern = j.value("replacement", "\xe2\x96\x81");
    const std::string scheme = j.value("prepend_scheme", j.value("add_prefix_space", true) ? "always" : "never");
    s.strip_first_space = scheme != "never";
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.content = j.value("content", " ");
    s.start = j.value("start", 0);
    s.stop = j.value("stop", 0);
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    const nlohmann::json& pattern = j.value("pattern", nlohmann::json());
    if (!pattern.contains("String") || !pattern["String"].is_string())
      return unsupported(at + ": only a \"String\" pattern is supported");
    if (!j.contains("content") || !j["content"].is_string()) return corrupt(at + ": \"content\" must be a string");
    s.pattern = pattern["String"].get<std::string>();
    s.content = j["content"].get<std::string>();
  } else {
    return unsupported(at + ": decoder type '" + type + "' is not supported");
  }
  steps_.push_back(std::move(s));
  return Status::ok();
}

void Decoder::apply(const Step& s, std::vector<std::string>& tokens, bool whole) const {
  switch (s.kind) {
    case Kind::kByteLevel: {
      std::string bytes;
      for (const std::string& t : tokens) bytes += unicode_to_bytes(t);
      tokens.assign(1, whole ? utf8::sanitize(bytes) : bytes);
      return;
    }
    case Kind::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = utf8::replace_all(tokens[i], s.pattern, " ");
        if (whole && i == 0 && s.strip_first_space && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
      }
      return;
    case Kind::kByteFallback: fuse_byte_tokens(tokens, whole); return;
    case Kind::kFuse: {
      std::string joined;
      for (const std::string& t : tokens) joined += t;
      tokens.assign(1, joined);
      return;
    }
    case Kind::kStrip:
      if (whole)
        for (std::string& t : tokens) strip_chars(t, s.content, s.start, s.stop);
      return;
    case Kind::kReplace:
      for (std::string& t : tokens) t = utf8::replace_all(t, s.pattern, s.content);
      return;
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step& s : steps_) apply(s, tokens, true);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string Decoder::decode_piece(const std::string& token) const {
  std::vector<std::string> tokens{token};
  for (const Step& s : steps_) apply(s, tokens, false);
  return tokens.empty() ? "" : tokens[0];
}

}  // namespace autoglm
