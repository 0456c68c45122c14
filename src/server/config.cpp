#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include "model/kv_cache.h"

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace autoglm {
namespace {

class ConfigReader {
 public:
  explicit ConfigReader(std::string origin) : origin_(std::move(origin)) {}

  Status error(const YAML::Node& node, const std::string& key, const std::string& what) const {
    return invalid_argument(origin_ + ":" + std::to_string(node.Mark().line + 1) + ": '" + key + "' " + what);
  }

  template <typename T>
  Status scalar(const YAML::Node& node, const std::string& key, T& out) const {
    if (!node.IsScalar()) return error(node, key, "must be a single value");
    try {
      out = node.as<T>();
    } catch (const YAML::Exception&) {
      return error(node, key, "has a value of the wrong type: '" + node.Scalar() + "'");
    }
    return Status::ok();
  }

  template <typename T>
  Status ranged(const YAML::Node& node, const std::string& key, T& out, T lo, T hi) const {
    AUTOGLM_RETURN_IF_ERROR(scalar(node, key, out));
    if (out < lo || out > hi)
      return error(node, key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return Status::ok();
  }

  Status strings(const YAML::Node& node, const std::string& key, std::vector<std::string>& out) const {
    if (node.IsScalar()) {
      out = {node.Scalar()};
      return Status::ok();
    }
    if (!node.IsSequence()) return error(node, key, "must be a string or a list of strings");
    out.clear();
    for (const auto& item : node) {
      if (!item.IsScalar()) return error(item, key, "must hold strings only");
      out.push_back(item.Scalar());
    }
    return Status::ok();
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

// Converts a YAML mapping/sequence/scalar to JSON (for tool parameter schemas).
nlohmann::ordered_json to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = to_json(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& item : n) a.push_back(to_json(item));
    return a;
  }
  if (n.IsNull()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted in the file
  if (s == "true" || s == "false") return s == "true";
  try {
    size_t used = 0;
    const long long i = std::stoll(s, &used);
    if (used == s.size()) return i;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (...) {
  }
  return s;
}

Status read_tools(const ConfigReader& r, const YAML::Node& node, std::vector<ToolConfig>& tools) {
  if (!node.IsSequence()) return r.error(node, "tools", "must be a list");
  std::set<std::string> names;
  for (const auto& t : node) {
    if (!t.IsMap()) return r.error(t, "tools", "entries must be mappings with name, description, parameters");
    ToolConfig tool;
    for (const auto& kv : t) {
      const std::string key = kv.first.Scalar();
      if (key == "name") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, "tools.name", tool.name));
      } else if (key == "description") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, "tools.description", tool.description));
      } else if (key == "parameters") {
        if (!kv.second.IsMap()) return r.error(kv.second, "tools.parameters", "must be a JSON Schema object");
        tool.parameters_json = to_json(kv.second).dump();
      } else if (key == "command") {
        AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, "tools.command", tool.command));
      } else {
        return r.error(kv.first, "tools." + key, "is not a known key (name, description, parameters, command)");
      }
    }
    if (tool.name.empty()) return r.error(t, "tools.name", "is required");
    for (char c : tool.name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
        return r.error(t, "tools.name", "'" + tool.name + "' may hold only letters, digits, '_' and '-'");
    if (!names.insert(tool.name).second) return r.error(t, "tools.name", "'" + tool.name + "' is defined twice");
    tools.push_back(std::move(tool));
  }
  return Status::ok();
}

Status read_kv_cache(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "kv_cache", "must be a mapping (memory_mib, fraction, block_size, dtype)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key == "memory_mib") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.memory_mib", c.kv_cache_mib, 1.0, 1048576.0));
    } else if (key == "fraction") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.fraction", c.kv_cache_fraction, 0.0, 0.95));
    } else if (key == "block_size") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, "kv_cache.block_size", c.kv_block_size, 1, 1024));
    } else if (key == "dtype") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, "kv_cache.dtype", c.kv_dtype));
      if (!kv_type_from_name(c.kv_dtype))
        return r.error(kv.second, "kv_cache.dtype", "'" + c.kv_dtype + "' is not one of f32, f16, q8_0");
    } else {
      return r.error(kv.first, "kv_cache." + key, "is not a known key (memory_mib, fraction, block_size, dtype)");
    }
  }
  return Status::ok();
}

Status read_priorities(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "priorities", "must map class names to integer weights");
  c.priorities.clear();
  for (const auto& kv : node) {
    int weight = 0;
    AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "priorities." + kv.first.Scalar(), weight, -1000, 1000));
    c.priorities[kv.first.Scalar()] = weight;
  }
  return Status::ok();
}

Status read_api_keys(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (node.IsMap()) {  // {file: path}: one key per line
    const YAML::Node file = node["file"];
    if (!file || node.size() != 1) return r.error(node, "api_keys", "must be a list of keys or {file: PATH}");
    std::ifstream in(file.Scalar());
    if (!in) return r.error(file, "api_keys.file", "cannot be read: " + file.Scalar());
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') c.api_keys.push_back(line);
    return Status::ok();
  }
  return r.strings(node, "api_keys", c.api_keys);
}

}  // namespace

Result<ServerConfig> parse_server_config(const std::string& yaml, const std::string& origin) {
  ConfigReader r(origin);
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    return invalid_argument(origin + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  ServerConfig c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) return invalid_argument(origin + ": the configuration must be a mapping of keys");
  const std::map<std::string, std::function<Status(const YAML::Node&)>> keys = {
      {"model", [&](const YAML::Node& n) { return r.scalar(n, "model", c.model); }},
      {"engine", [&](const YAML::Node& n) { return r.scalar(n, "engine", c.architecture); }},
      {"quantize", [&](const YAML::Node& n) { return r.scalar(n, "quantize", c.quantize); }},
      {"chat_template", [&](const YAML::Node& n) { return r.scalar(n, "chat_template", c.chat_template); }},
      {"context_window",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "context_window", c.context_window, 16, 1 << 20); }},
      {"host", [&](const YAML::Node& n) { return r.scalar(n, "host", c.host); }},
      {"port", [&](const YAML::Node& n) { return r.ranged(n, "port", c.port, 0, 65535); }},
      {"threads", [&](const YAML::Node& n) { return r.ranged(n, "threads", c.threads, 0, 1024); }},
      {"kv_cache", [&](const YAML::Node& n) { return read_kv_cache(r, n, c); }},
      {"prefix_cache", [&](const YAML::Node& n) { return r.scalar(n, "prefix_cache", c.prefix_cache); }},
      {"profile", [&](const YAML::Node& n) { return r.scalar(n, "profile", c.profile); }},
      {"max_batch_tokens",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_batch_tokens", c.max_batch_tokens, 1, 1 << 20); }},
      {"max_running", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_running", c.max_running, 1, 4096); }},
      {"max_queued", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_queued", c.max_queued, 1, 1 << 20); }},
      {"max_body_bytes",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_body_bytes", c.max_body_bytes, 1024, 1ll << 30); }},
      {"priorities", [&](const YAML::Node& n) { return read_priorities(r, n, c); }},
      {"api_keys", [&](const YAML::Node& n) { return read_api_keys(r, n, c); }},
      {"tools", [&](const YAML::Node& n) { return read_tools(r, n, c.tools); }},
  };
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    auto it = keys.find(key);
    if (it == keys.end()) {
      std::string known;
      for (const auto& [k, unused] : keys) known += (known.empty() ? "" : ", ") + k;
      return r.error(kv.first, key, "is not a known key (" + known + ")");
    }
    AUTOGLM_RETURN_IF_ERROR(it->second(kv.second));
  }
  return c;
}

Result<ServerConfig> load_server_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error(path + ": cannot open the configuration file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_server_config(ss.str(), path);
}

}  // namespace autoglm
