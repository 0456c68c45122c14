#include "core/json_request.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace autoglm {
namespace {

using json = nlohmann::ordered_json;

class LinearBuilder : public nlohmann::json_sax<json> {
 public:
  LinearBuilder(int max_depth, int64_t max_keys) : max_depth_(max_depth), max_keys_(max_keys) {}

  bool null() override { return put(nullptr) != nullptr; }
  bool boolean(bool v) override { return put(v) != nullptr; }
  bool number_integer(number_integer_t v) override { return put(v) != nullptr; }
  bool number_unsigned(number_unsigned_t v) override { return put(v) != nullptr; }
  bool number_float(number_float_t v, const string_t&) override { return put(v) != nullptr; }
  bool string(string_t& v) override { return put(std::move(v)) != nullptr; }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return fail(e.what());
  }

  json root;
  std::string error;
  bool over_limit = false;  // the error is a limit, not bad JSON

 private:
  struct Open {
    json* value;
    std::unordered_map<std::string, size_t> keys;  // objects: key -> index in the object
  };

  json* put(json v) {
    if (open_.empty()) {
      root = std::move(v);
      return &root;
    }
    Open& top = open_.back();
    if (top.value->is_array()) {
      top.value->get_ref<json::array_t&>().push_back(std::move(v));
      return &top.value->get_ref<json::array_t&>().back();
    }
    // ordered_map is a vector of pairs: append to it, and index it, as the vector it is.
    using Pairs = std::vector<std::pair<const std::string, json>>;
    auto& items = static_cast<Pairs&>(top.value->get_ref<json::object_t&>());
    if (int64_t(items.size()) >= max_keys_ && !top.keys.count(key_)) {
      fail("has an object with more than " + std::to_string(max_keys_) + " keys (limit json_object_keys)", true);
      return nullptr;
    }
    const auto [it, added] = top.keys.try_emplace(key_, items.size());
    if (!added) {
      items[it->second].second = std::move(v);
      return &items[it->second].second;
    }
    items.emplace_back(std::move(key_), std::move(v));
    return &items.back().second;
  }
  bool open(json container) {
    if (int(open_.size()) >= max_depth_)
      return fail("nests arrays and objects deeper than " + std::to_string(max_depth_) + " levels (limit json_depth)",
                  true);
    json* v = put(std::move(container));
    open_.push_back({v, {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }
  bool fail(std::string message, bool limit = false) {
    over_limit = over_limit || (error.empty() && limit);
    if (error.empty()) error = std::move(message);
    return false;
  }

  int max_depth_;
  int64_t max_keys_;
  std::vector<Open> open_;  // a child's parent does not grow while the child is open
  std::string key_;
};

int hex4(std::string_view t, size_t at) {  // the value of 4 hex digits at `at`, or -1
  if (at + 4 > t.size()) return -1;
  int v = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Clients that cut a string inside a surrogate pair send a lone surrogate escape (\uD83D
// with no low half); Python's and JavaScript's parsers accept it. It becomes \uFFFD, the
// replacement character, instead of failing the whole request. One pass; escapes are read
// in order, so an escaped backslash before a 'u' is not taken for an escape.
std::string replace_lone_surrogates(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  bool in_string = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (!in_string) {
      in_string = c == '"';
      out += c;
      continue;
    }
    if (c == '"') in_string = false;
    if (c != '\\' || i + 1 >= t.size()) {
      out += c;
      continue;
    }
    if (t[i + 1] != 'u') {  // a two-character escape
      out.append(t.substr(i, 2));
      ++i;
      continue;
    }
    const int v = hex4(t, i + 2);
    const bool high = v >= 0xD800 && v <= 0xDBFF, low = v >= 0xDC00 && v <= 0xDFFF;
    const bool paired = high && i + 8 <= t.size() && t.substr(i + 6, 2) == "\\u" && hex4(t, i + 8) >= 0xDC00 &&
                        hex4(t, i + 8) <= 0xDFFF;
    if ((high && !paired) || low) {
      out += "\\uFFFD";
    } else {
      out.append(t.substr(i, paired ? 12 : 6));
      if (paired) i += 6;
    }
    i += 5;
  }
  return out;
}

bool has_surrogate_escape(std::string_view t) {
  for (size_t at = t.find("\\u"); at != std::string_view::npos; at = t.find("\\u", at + 2))
    if (at + 2 < t.size() && (t[at + 2] == 'd' || t[at + 2] == 'D')) return true;
  return false;
}

}  // namespace

Result<json> parse_json_request(std::string_view text, int max_depth, int64_t max_object_keys) {
  std::string repaired;
  if (has_surrogate_escape(text)) text = repaired = replace_lone_surrogates(text);
  LinearBuilder builder(max_depth, max_object_keys);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (builder.over_limit) return out_of_range(builder.error);
  if (!ok || !builder.error.empty()) return invalid_argument(builder.error.empty() ? "not valid JSON" : builder.error);
  return std::move(builder.root);
}

}  // namespace autoglm
