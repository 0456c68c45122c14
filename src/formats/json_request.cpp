#include "formats/json_request.h"

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
      fail("an object has more than " + std::to_string(max_keys_) + " keys (limit json_object_keys)");
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
      return fail("nests arrays and objects deeper than " + std::to_string(max_depth_) + " levels (limit json_depth)");
    json* v = put(std::move(container));
    open_.push_back({v, {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }
  bool fail(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }

  int max_depth_;
  int64_t max_keys_;
  std::vector<Open> open_;  // a child's parent does not grow while the child is open
  std::string key_;
};

}  // namespace

Result<json> parse_json_request(std::string_view text, int max_depth, int64_t max_object_keys) {
  LinearBuilder builder(max_depth, max_object_keys);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (!ok || !builder.error.empty()) return invalid_argument(builder.error.empty() ? "not valid JSON" : builder.error);
  return std::move(builder.root);
}

}  // namespace autoglm
