#include "chat/marker_guard.h"

#include <algorithm>

namespace autoglm {
namespace {

// U+E000 and U+E001 (private use): "\uE000<index>\uE001" stands for hidden marker <index>.
constexpr std::string_view kOpen = "\xEE\x80\x80";
constexpr std::string_view kClose = "\xEE\x80\x81";

}  // namespace

ControlMarkers::ControlMarkers(const Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType t = vocab.types[size_t(id)];
    if ((t == TokenType::kControl || t == TokenType::kUnknown) && !vocab.pieces[size_t(id)].empty())
      markers_.push_back(vocab.pieces[size_t(id)]);
  }
  std::stable_sort(markers_.begin(), markers_.end(),
                   [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (uint32_t m = 0; m < markers_.size(); ++m) by_first_[uint8_t(markers_[m][0])].push_back(m);
}

bool MarkerGuard::hide_in(std::string& s) {
  std::string out;
  size_t copied = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (uint32_t index : markers_.by_first_[uint8_t(s[i])]) {
      const std::string& m = markers_.markers_[index];
      if (s.compare(i, m.size(), m) != 0) continue;
      out.append(s, copied, i - copied);
      out += kOpen;
      out += std::to_string(hidden_.size());
      out += kClose;
      hidden_.push_back(m);
      copied = i + m.size();
      i = copied - 1;
      break;
    }
  }
  if (copied == 0) return false;
  out.append(s, copied, std::string::npos);
  s = std::move(out);
  return true;
}

bool MarkerGuard::hide(nlohmann::ordered_json& j) {
  if (markers_.markers_.empty()) return false;
  bool any = false;
  if (j.is_string()) return hide_in(j.get_ref<std::string&>());
  if (j.is_array()) {
    for (auto& item : j) any = hide(item) || any;
    return any;
  }
  if (!j.is_object()) return false;
  std::vector<std::string> keys;
  bool key_changed = false;
  for (auto& [key, value] : j.items()) {
    any = hide(value) || any;
    keys.push_back(key);
    key_changed = hide_in(keys.back()) || key_changed;
  }
  if (!key_changed) return any;
  nlohmann::ordered_json rebuilt = nlohmann::ordered_json::object();  // keys with markers: rare
  size_t i = 0;
  for (auto& [key, value] : j.items()) rebuilt[keys[i++]] = std::move(value);
  j = std::move(rebuilt);
  return true;
}

std::string MarkerGuard::restore(const std::string& rendered, std::vector<Tokenizer::ByteRange>& plain) const {
  plain.clear();
  if (hidden_.empty()) return rendered;
  std::string out;
  out.reserve(rendered.size());
  size_t i = 0;
  while (i < rendered.size()) {
    const size_t open = rendered.find(kOpen, i);
    if (open == std::string::npos) break;
    const size_t digits = open + kOpen.size();
    size_t end = digits, index = 0;
    for (; end < rendered.size() && end - digits < 10 && rendered[end] >= '0' && rendered[end] <= '9'; ++end)
      index = index * 10 + size_t(rendered[end] - '0');
    if (end == digits || rendered.compare(end, kClose.size(), kClose) != 0 || index >= hidden_.size()) {
      out.append(rendered, i, digits - i);  // not one of ours: kept as it is
      i = digits;
      continue;
    }
    out.append(rendered, i, open - i);
    const std::string& marker = hidden_[index];
    plain.push_back({out.size(), out.size() + marker.size()});
    out += marker;
    i = end + kClose.size();
  }
  out.append(rendered, i, std::string::npos);
  return out;
}

}  // namespace autoglm
