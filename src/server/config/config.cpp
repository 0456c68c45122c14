#include "server/config/config.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/read_file.h"

#include <yaml-cpp/yaml.h>

#include "server/config/config_reader.h"
#include "server/config/routing_config.h"

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

namespace autoglm {
namespace {

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

Status read_exec(const ConfigReader& r, const YAML::Node& node, const std::string& path, ToolExec& e) {
  if (!node.IsMap()) return r.error(node, path, "must be a mapping with command, http or builtin");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = path + "." + key;
    if (key == "command") {
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, e.command));
      if (e.command.empty()) return r.error(kv.second, at, "must name a program");
    } else if (key == "http") {
      if (!kv.second.IsMap())
        return r.error(kv.second, at,
                       "must be a mapping (method, url, headers, timeout_ms, allow_placeholder_host_port)");
      for (const auto& h : kv.second) {
        const std::string hk = h.first.Scalar(), hat = at + "." + hk;
        if (hk == "method") {
          AUTOGLM_RETURN_IF_ERROR(r.scalar(h.second, hat, e.method));
        } else if (hk == "url") {
          AUTOGLM_RETURN_IF_ERROR(r.scalar(h.second, hat, e.url));
        } else if (hk == "timeout_ms") {
          AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(h.second, hat, e.timeout_ms, 1, 600000));
        } else if (hk == "headers") {
          if (!h.second.IsMap()) return r.error(h.second, hat, "must map header names to values");
          for (const auto& hv : h.second) e.headers.emplace_back(hv.first.Scalar(), hv.second.Scalar());
        } else if (hk == "allow_placeholder_host_port") {
          AUTOGLM_RETURN_IF_ERROR(r.scalar(h.second, hat, e.allow_placeholder_host_port));
        } else {
          return r.error(h.first, hat,
                         "is not a known key (method, url, headers, timeout_ms, allow_placeholder_host_port)");
        }
      }
      if (e.url.empty()) return r.error(kv.second, at + ".url", "is required");
    } else if (key == "builtin") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, e.builtin));
    } else if (key == "timeout_ms") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, e.timeout_ms, 1, 600000));
    } else if (key == "max_output_bytes") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, e.max_output_bytes, 1, 16 << 20));
    } else if (key == "cwd") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, e.cwd));
    } else if (key == "env") {
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, e.env));
    } else {
      return r.error(kv.first, at,
                     "is not a known key (command, http, builtin, timeout_ms, max_output_bytes, cwd, env)");
    }
  }
  return Status::ok();
}

// arguments: {NAME: {allow_leading_dash: bool, path_under: /dir, not_a_path: bool}}
Status read_argument_rules(const ConfigReader& r, const YAML::Node& node, const std::string& path,
                           std::map<std::string, ArgumentRule>& rules) {
  static const std::string kKeys = "(allow_leading_dash, path_under, not_a_path)";
  if (!node.IsMap()) return r.error(node, path, "must map parameter names to rules " + kKeys);
  for (const auto& kv : node) {
    const std::string name = kv.first.Scalar(), at = path + "." + name;
    if (!kv.second.IsMap()) return r.error(kv.second, at, "must be a mapping " + kKeys);
    ArgumentRule rule;
    for (const auto& item : kv.second) {
      const std::string key = item.first.Scalar();
      if (key == "allow_leading_dash") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(item.second, at + "." + key, rule.allow_leading_dash));
      } else if (key == "path_under") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(item.second, at + "." + key, rule.path_under));
        if (rule.path_under.empty() || rule.path_under[0] != '/')
          return r.error(item.second, at + "." + key, "must be an absolute directory");
      } else if (key == "not_a_path") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(item.second, at + "." + key, rule.not_a_path));
      } else {
        return r.error(item.first, at + "." + key, "is not a known key " + kKeys);
      }
    }
    rules[name] = rule;
  }
  return Status::ok();
}

Status read_tools(const ConfigReader& r, const YAML::Node& node, std::vector<ToolConfig>& tools) {
  if (!node.IsSequence()) return r.error(node, "tools", "must be a list");
  std::set<std::string> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node t = node[i];
    const std::string path = "tools[" + std::to_string(i) + "]";
    if (!t.IsMap()) return r.error(t, path, "must be a mapping with name, description, parameters, exec");
    ToolConfig tool;
    bool has_exec = false;
    for (const auto& kv : t) {
      const std::string key = kv.first.Scalar(), at = path + "." + key;
      if (key == "name") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, tool.name));
      } else if (key == "description") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, tool.description));
      } else if (key == "parameters") {
        if (!kv.second.IsMap()) return r.error(kv.second, at, "must be a JSON Schema object");
        tool.parameters_json = to_json(kv.second).dump();
      } else if (key == "triggers") {
        AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, tool.triggers));
      } else if (key == "exec") {
        AUTOGLM_RETURN_IF_ERROR(read_exec(r, kv.second, at, tool.exec));
        has_exec = true;
      } else if (key == "arguments") {
        AUTOGLM_RETURN_IF_ERROR(read_argument_rules(r, kv.second, at, tool.arguments));
      } else {
        return r.error(kv.first, at, "is not a known key (name, description, parameters, triggers, exec, arguments)");
      }
    }
    if (tool.name.empty()) return r.error(t, path + ".name", "is required");
    for (char c : tool.name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
        return r.error(t, path + ".name", "'" + tool.name + "' may hold only letters, digits, '_' and '-'");
    if (!names.insert(tool.name).second) return r.error(t, path + ".name", "'" + tool.name + "' is defined twice");
    if (!has_exec) return r.error(t, path + ".exec", "is required (command, http or builtin)");
    tools.push_back(std::move(tool));
  }
  return Status::ok();
}

Status read_task(const ConfigReader& r, const YAML::Node& node, TaskOptions& o) {
  if (!node.IsMap())
    return r.error(node, "task", "must be a mapping (max_steps, session_ttl_s, max_tokens, temperature)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "task." + key;
    if (key == "max_steps") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, at, o.max_steps, 1, 32));
    } else if (key == "session_ttl_s") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, at, o.session_ttl_seconds, 1.0, 86400.0 * 7));
    } else if (key == "max_tokens") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, o.max_tokens, 1, 1 << 16));
    } else if (key == "temperature") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, at, o.temperature, 0.0f, 2.0f));
    } else {
      return r.error(kv.first, at, "is not a known key (max_steps, session_ttl_s, max_tokens, temperature)");
    }
  }
  return Status::ok();
}

Status read_tool_access(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "tool_access", "must map API keys to lists of tool names");
  for (const auto& kv : node) {
    std::vector<std::string> names;
    AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, "tool_access", names));
    c.tool_access[kv.first.Scalar()] = names;
  }
  return Status::ok();
}

Status read_kv_cache(const ConfigReader& r, const YAML::Node& node, RuntimeOptions& c) {
  const std::string known = "memory_mib, fraction, block_size, dtype, ram_mib, disk_dir, disk_mib";
  if (!node.IsMap()) return r.error(node, "kv_cache", "must be a mapping (" + known + ")");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key == "memory_mib") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.memory_mib", c.kv_memory_mib, 1.0, 1048576.0));
    } else if (key == "fraction") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.fraction", c.kv_memory_fraction, 0.0, 0.95));
    } else if (key == "block_size") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, "kv_cache.block_size", c.kv_block_size, 1, 1024));
    } else if (key == "dtype") {
      std::string name;
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, "kv_cache.dtype", name));
      auto type = kv_type_from_name(name);
      if (!type) return r.error(kv.second, "kv_cache.dtype", "'" + name + "' is not one of f32, f16, q8_0");
      c.kv_type = *type;
    } else if (key == "ram_mib") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.ram_mib", c.cache_ram_mib, 0.0, 1048576.0 * 64));
    } else if (key == "disk_dir") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, "kv_cache.disk_dir", c.cache_disk_dir));
    } else if (key == "disk_mib") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged(kv.second, "kv_cache.disk_mib", c.cache_disk_mib, 1.0, 1048576.0 * 1024));
    } else {
      return r.error(kv.first, "kv_cache." + key, "is not a known key (" + known + ")");
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

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

Status read_api_keys(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (node.IsMap()) {  // {file: path}: one key per line
    const YAML::Node file = node["file"];
    if (!file || node.size() != 1) return r.error(node, "api_keys", "must be a list of keys or {file: PATH}");
    std::ifstream in(file.Scalar());
    if (!in) return r.error(file, "api_keys.file", "cannot be read: " + file.Scalar());
    for (std::string line; std::getline(in, line);) {
      const std::string key = trimmed(line);  // a file saved with CRLF ends each key with '\r'
      if (!key.empty() && key[0] != '#') c.api_keys.push_back(key);
    }
    return Status::ok();
  }
  return r.strings(node, "api_keys", c.api_keys);
}

// scheduler: {max_step_ms: auto | 0 | milliseconds}
Status read_scheduler(const ConfigReader& r, const YAML::Node& node, RuntimeOptions& c) {
  if (!node.IsMap()) return r.error(node, "scheduler", "must be a mapping (max_step_ms)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key != "max_step_ms") return r.error(kv.first, "scheduler." + key, "is not a known key (max_step_ms)");
    if (kv.second.IsScalar() && kv.second.Scalar() == "auto") {
      c.max_step_ms = -1;
      continue;
    }
    AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, "scheduler.max_step_ms", c.max_step_ms, 0, 60000));
  }
  return Status::ok();
}

// speculative: {method: none | draft | ngram | early-exit | mtp, draft: MODEL, draft_quantize: TYPE,
//               draft_max: 8, draft_min: 0, draft_p_min: 0, exit_layer: 0}
Status read_speculative(const ConfigReader& r, const YAML::Node& node, RuntimeOptions& c) {
  constexpr const char* kKeys = "method, draft, draft_quantize, draft_max, draft_min, draft_p_min, exit_layer";
  if (!node.IsMap()) return r.error(node, "speculative", std::string("must be a mapping (") + kKeys + ")");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "speculative." + key;
    if (key == "method") {
      if (!kv.second.IsScalar()) return r.error(kv.second, at, "must be none, draft, ngram, early-exit or mtp");
      auto method = spec_method_from_name(kv.second.Scalar());
      if (!method) return r.error(kv.second, at, "must be none, draft, ngram, early-exit or mtp");
      c.speculative = *method;
    } else if (key == "draft") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, c.draft_model));
    } else if (key == "draft_quantize") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, c.draft_quantize));
      if (c.draft_quantize != "auto" && !dtype_from_name(c.draft_quantize))
        return r.error(kv.second, at, "is not a weight type (q8_0, q4_0, ...) or auto");
    } else if (key == "exit_layer") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, c.exit_layer, 0, 1000));
    } else if (key == "draft_max") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, c.draft_max, 1, 64));
    } else if (key == "draft_min") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, c.draft_min, 0, 64));
    } else if (key == "draft_p_min") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<float>(kv.second, at, c.draft_p_min, 0, 1));
    } else {
      return r.error(kv.first, at, std::string("is not a known key (") + kKeys + ")");
    }
  }
  return Status::ok();
}

// jobs: {data_dir, concurrency, priority, retention_s, callback_..., max_bytes, max_file_bytes}
Status read_jobs(const ConfigReader& r, const YAML::Node& node, JobsConfig& j) {
  constexpr const char* kKeys =
      "data_dir, concurrency, priority, retention_s, callback_secret, callback_allowlist, callback_attempts, "
      "callback_backoff_s, callback_timeout_s, max_bytes, max_file_bytes";
  if (!node.IsMap()) return r.error(node, "jobs", std::string("must be a mapping (") + kKeys + ")");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "jobs." + key;
    if (key == "data_dir") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, j.data_dir));
    } else if (key == "concurrency") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, j.concurrency, 1, 256));
    } else if (key == "retention_s") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, at, j.retention_s, 1, 10 * 365 * 86400.0));
    } else if (key == "priority") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, j.priority));  // checked once priorities are read
    } else if (key == "callback_secret") {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, j.callback_secret));
    } else if (key == "callback_allowlist") {
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, j.callback_allowlist));
    } else if (key == "callback_attempts") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int32_t>(kv.second, at, j.callback_attempts, 1, 100));
    } else if (key == "callback_backoff_s") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, at, j.callback_backoff_s, 0.001, 3600));
    } else if (key == "callback_timeout_s") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, at, j.callback_timeout_s, 0.1, 600));
    } else if (key == "max_bytes") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, j.max_bytes, 1 << 16, int64_t(1) << 50));
    } else if (key == "max_file_bytes") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, j.max_file_bytes, 1024, int64_t(1) << 34));
    } else {
      return r.error(kv.first, at, std::string("is not a known key (") + kKeys + ")");
    }
  }
  return Status::ok();
}

// response_cache: {enabled: false, max_entries: 1024, max_bytes: 67108864, ttl_s: 3600, path: FILE}
Status read_response_cache(const ConfigReader& r, const YAML::Node& node, ResponseCacheConfig& c) {
  constexpr const char* kKeys = "enabled, max_entries, max_bytes, ttl_s, path";
  if (!node.IsMap()) return r.error(node, "response_cache", std::string("must be a mapping (") + kKeys + ")");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "response_cache." + key;
    if (key == "enabled")
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, c.enabled));
    else if (key == "max_entries")
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, c.max_entries, 1, int64_t(1) << 30));
    else if (key == "max_bytes")
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, c.max_bytes, 1024, int64_t(1) << 40));
    else if (key == "ttl_s")
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, at, c.ttl_s, 0.001, 365.0 * 86400));
    else if (key == "path")
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, c.path));
    else
      return r.error(kv.first, at, std::string("is not a known key (") + kKeys + ")");
  }
  return Status::ok();
}

Status read_cors(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "cors", "must be a mapping (allow_origins, allow_headers, max_age)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "cors." + key;
    if (key == "allow_origins")
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, c.cors_allow_origins));
    else if (key == "allow_headers")
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, c.cors_allow_headers));
    else if (key == "max_age")
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, c.cors_max_age, 0, 86400));
    else
      return r.error(kv.first, at, "is not a known key (allow_origins, allow_headers, max_age)");
  }
  return Status::ok();
}

// lora_adapters: {NAME: PATH, NAME: {path: PATH, scale: 0.5}}
Status read_lora_adapters(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "lora_adapters", "must be a mapping of names to paths (or {path, scale})");
  c.lora_adapters.clear();
  for (const auto& kv : node) {
    LoraAdapterConfig a;
    a.name = kv.first.Scalar();
    const std::string at = "lora_adapters." + a.name;
    if (kv.second.IsScalar()) {
      AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, at, a.path));
    } else if (kv.second.IsMap()) {
      for (const auto& field : kv.second) {
        const std::string key = field.first.Scalar();
        if (key == "path")
          AUTOGLM_RETURN_IF_ERROR(r.scalar(field.second, at + ".path", a.path));
        else if (key == "scale")
          AUTOGLM_RETURN_IF_ERROR(r.ranged<float>(field.second, at + ".scale", a.scale, -100.0f, 100.0f));
        else
          return r.error(field.first, at + "." + key, "is not a known key (path, scale)");
      }
    } else {
      return r.error(kv.second, at, "must be a path or {path, scale}");
    }
    if (a.path.empty()) return r.error(kv.second, at + ".path", "is required (a PEFT folder or a GGUF adapter)");
    c.lora_adapters.push_back(std::move(a));
  }
  return Status::ok();
}

Status read_rate_limit(const ConfigReader& r, const YAML::Node& node, ServerConfig& c) {
  if (!node.IsMap()) return r.error(node, "rate_limit", "must be a mapping (requests_per_second, burst)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (key == "requests_per_second")
      AUTOGLM_RETURN_IF_ERROR(
          r.ranged<double>(kv.second, "rate_limit.requests_per_second", c.rate_limit_per_second, 0, 1e6));
    else if (key == "burst")
      AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, "rate_limit.burst", c.rate_limit_burst, 1, 1e6));
    else
      return r.error(kv.first, "rate_limit." + key, "is not a known key (requests_per_second, burst)");
  }
  return Status::ok();
}

Status read_limits(const ConfigReader& r, const YAML::Node& node, RequestLimits& l) {
  struct Key {
    const char* name;
    int64_t* value;
    int64_t lo, hi;
  };
  int64_t json_depth = l.json_depth;
  const Key keys[] = {
      {"json_depth", &json_depth, 2, 100000},
      {"json_object_keys", &l.json_object_keys, 16, int64_t(1) << 30},
      {"prompt_tokens", &l.prompt_tokens, 0, 1 << 24},
      {"stop_strings", &l.stop_strings, 0, 1024},
      {"stop_string_bytes", &l.stop_string_bytes, 1, 1 << 20},
      {"top_logprobs", &l.top_logprobs, 0, 1000},
      {"grammar_bytes", &l.grammar_bytes, 1024, int64_t(1) << 30},
      {"grammar_symbols", &l.grammar_symbols, 100, 100000000},
      {"grammar_stacks", &l.grammar_stacks, 16, 1 << 20},
      {"template_steps", &l.template_steps, 1000, int64_t(1) << 40},
      {"template_output_bytes", &l.template_output_bytes, 1024, int64_t(64) << 20},
      {"image_bytes", &l.image_bytes, 1024, int64_t(1) << 30},
      {"image_pixels", &l.image_pixels, 64, int64_t(1) << 32},
      {"images_per_request", &l.images_per_request, 0, 4096},
  };
  std::string known;
  for (const Key& k : keys) known += (known.empty() ? "" : ", ") + std::string(k.name);
  if (!node.IsMap()) return r.error(node, "limits", "must be a mapping (" + known + ")");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const Key* found = nullptr;
    for (const Key& k : keys)
      if (key == k.name) found = &k;
    if (!found) return r.error(kv.first, "limits." + key, "is not a known key (" + known + ")");
    AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, "limits." + key, *found->value, found->lo, found->hi));
  }
  l.json_depth = int(json_depth);
  return Status::ok();
}

}  // namespace

Status check_access_rules(const ServerConfig& c) {
  // An empty key would match a missing or empty Authorization header (or turn checks off).
  for (const std::string& key : c.api_keys)
    if (key.empty())
      return invalid_argument("api_keys holds an empty key (from --api-key \"\" or the config): refused");
  for (const auto& [key, tools] : c.tool_access) {
    const std::string shown = "'..." + key.substr(key.size() - std::min<size_t>(4, key.size())) + "'";
    if (c.api_keys.empty())
      return invalid_argument("tool_access limits key " + shown +
                              " but api_keys is empty: without api_keys every caller is anonymous and could run "
                              "every tool; list the keys in api_keys (or remove tool_access)");
    if (std::find(c.api_keys.begin(), c.api_keys.end(), key) == c.api_keys.end())
      return invalid_argument("tool_access names key " + shown + ", which is not one of api_keys");
  }
  return Status::ok();
}

namespace {

std::string replace_first(std::string text, const std::string& what, const std::string& with) {
  if (const size_t at = text.find(what); at != std::string::npos) text.replace(at, what.size(), with);
  return text;
}

using KeyTable = std::map<std::string, std::function<Status(const YAML::Node&)>>;

// device: cpu | cuda | cuda:N (whether the GPU exists is checked when the model loads).
Status read_device(const ConfigReader& r, const YAML::Node& node, Device& device) {
  std::string name;
  AUTOGLM_RETURN_IF_ERROR(r.scalar(node, "device", name));
  auto parsed = parse_device(name);
  if (!parsed) return r.error(node, "device", "must be cpu, cuda or cuda:N, not '" + name + "'");
  device = *parsed;
  return Status::ok();
}

// tool_call_format: one of the formats the runtime knows.
Status read_tool_call_format(const ConfigReader& r, const YAML::Node& node, std::string& format) {
  AUTOGLM_RETURN_IF_ERROR(r.scalar(node, "tool_call_format", format));
  if (format.empty()) return Status::ok();  // read off the template
  const std::vector<std::string> names = tool_call_format_names();
  if (std::find(names.begin(), names.end(), format) != names.end()) return Status::ok();
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return r.error(node, "tool_call_format", "must be one of " + list + ", not '" + format + "'");
}

// media: where images may come from and the image processor's pixel limits.
Status read_media(const ConfigReader& r, const YAML::Node& node, MediaOptions& m) {
  if (!node.IsMap())
    return r.error(node, "media",
                   "must be a mapping (allowed_local_dirs, allowed_hosts, min_pixels, max_pixels, "
                   "embedding_cache_mib)");
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar(), at = "media." + key;
    if (key == "allowed_local_dirs") {
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, m.allowed_local_dirs));
    } else if (key == "allowed_hosts") {
      AUTOGLM_RETURN_IF_ERROR(r.strings(kv.second, at, m.allowed_hosts));
    } else if (key == "min_pixels") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, m.min_pixels, 0, int64_t(1) << 32));
    } else if (key == "max_pixels") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, m.max_pixels, 0, int64_t(1) << 32));
    } else if (key == "embedding_cache_mib") {
      AUTOGLM_RETURN_IF_ERROR(r.ranged<int64_t>(kv.second, at, m.embedding_cache_mib, 0, int64_t(1) << 20));
    } else {
      return r.error(kv.first, at,
                     "is not a known key (allowed_local_dirs, allowed_hosts, min_pixels, max_pixels, "
                     "embedding_cache_mib)");
    }
  }
  if (m.min_pixels > 0 && m.max_pixels > 0 && m.min_pixels > m.max_pixels)
    return r.error(node, "media.min_pixels", "must not exceed media.max_pixels");
  return Status::ok();
}

// served_model_name: a name, or a list of names (none empty).
Status read_served_names(const ConfigReader& r, const YAML::Node& node, std::vector<std::string>& names) {
  AUTOGLM_RETURN_IF_ERROR(r.strings(node, "served_model_name", names));
  for (const std::string& n : names)
    if (n.empty()) return r.error(node, "served_model_name", "holds an empty name");
  return Status::ok();
}

// The top-level keys, each read into `c`.
KeyTable top_level_keys(const ConfigReader& r, ServerConfig& c) {
  RuntimeOptions& o = c.runtime;
  return {
      {"model", [&](const YAML::Node& n) { return r.scalar(n, "model", c.model); }},
      {"lora_adapters", [&](const YAML::Node& n) { return read_lora_adapters(r, n, c); }},
      {"max_loras", [&](const YAML::Node& n) { return r.ranged<int>(n, "max_loras", o.max_loras, 1, 4096); }},
      {"engine", [&](const YAML::Node& n) { return r.scalar(n, "engine", o.architecture); }},
      {"quantize", [&](const YAML::Node& n) { return r.scalar(n, "quantize", o.quantize); }},
      {"mmap", [&](const YAML::Node& n) { return r.scalar(n, "mmap", o.use_mmap); }},
      {"mlock", [&](const YAML::Node& n) { return r.scalar(n, "mlock", o.use_mlock); }},
      {"device", [&](const YAML::Node& n) { return read_device(r, n, o.device); }},
      {"cpu_moe", [&](const YAML::Node& n) { return r.scalar(n, "cpu_moe", o.cpu_moe); }},
      {"n_cpu_moe", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "n_cpu_moe", o.n_cpu_moe, 0, 1 << 20); }},
      {"chat_template", [&](const YAML::Node& n) { return r.scalar(n, "chat_template", o.chat_template); }},
      {"mmproj", [&](const YAML::Node& n) { return r.scalar(n, "mmproj", o.mmproj); }},
      {"media", [&](const YAML::Node& n) { return read_media(r, n, o.media); }},
      {"tool_call_format", [&](const YAML::Node& n) { return read_tool_call_format(r, n, o.tool_call_format); }},
      {"served_model_name", [&](const YAML::Node& n) { return read_served_names(r, n, c.served_model_name); }},
      {"context_window",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "context_window", o.context_window, 16, 1 << 20); }},
      {"host", [&](const YAML::Node& n) { return r.scalar(n, "host", c.host); }},
      {"port", [&](const YAML::Node& n) { return r.ranged(n, "port", c.port, 0, 65535); }},
      {"threads", [&](const YAML::Node& n) { return r.ranged(n, "threads", o.threads, 0, 1024); }},
      {"kv_cache", [&](const YAML::Node& n) { return read_kv_cache(r, n, o); }},
      {"prefix_cache", [&](const YAML::Node& n) { return r.scalar(n, "prefix_cache", o.prefix_cache); }},
      {"prefix_cache_per_key",
       [&](const YAML::Node& n) { return r.scalar(n, "prefix_cache_per_key", c.prefix_cache_per_key); }},
      {"profile", [&](const YAML::Node& n) { return r.scalar(n, "profile", o.profile); }},
      {"max_batch_tokens",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_batch_tokens", o.max_batch_tokens, 1, 1 << 20); }},
      {"max_running", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_running", o.max_running, 1, 4096); }},
      {"max_queued", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_queued", o.max_queued, 1, 1 << 20); }},
      {"max_body_bytes",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_body_bytes", c.max_body_bytes, 1024, 1ll << 30); }},
      {"priorities", [&](const YAML::Node& n) { return read_priorities(r, n, c); }},
      {"scheduler", [&](const YAML::Node& n) { return read_scheduler(r, n, o); }},
      {"speculative", [&](const YAML::Node& n) { return read_speculative(r, n, o); }},
      {"api_keys", [&](const YAML::Node& n) { return read_api_keys(r, n, c); }},
      {"max_body_bytes_in_flight",
       [&](const YAML::Node& n) {
         return r.ranged<int64_t>(n, "max_body_bytes_in_flight", c.max_body_bytes_in_flight, 1024, int64_t(1) << 40);
       }},
      {"max_body_bytes_in_flight_per_client",
       [&](const YAML::Node& n) {
         return r.ranged<int64_t>(n, "max_body_bytes_in_flight_per_client", c.max_body_bytes_in_flight_per_client, 0,
                                  int64_t(1) << 40);
       }},
      {"body_timeout_s",
       [&](const YAML::Node& n) { return r.ranged<double>(n, "body_timeout_s", c.body_timeout_s, 0.01, 3600); }},
      {"stream_write_timeout_s",
       [&](const YAML::Node& n) {
         return r.ranged<double>(n, "stream_write_timeout_s", c.stream_write_timeout_s, 0.01, 3600);
       }},
      {"shutdown_grace_s",
       [&](const YAML::Node& n) { return r.ranged<double>(n, "shutdown_grace_s", c.shutdown_grace_s, 0, 3600); }},
      {"max_connections",
       [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "max_connections", c.max_connections, 1, 1 << 20); }},
      {"rate_limit", [&](const YAML::Node& n) { return read_rate_limit(r, n, c); }},
      {"access_log", [&](const YAML::Node& n) { return r.scalar(n, "access_log", c.access_log); }},
      {"embeddings_pooling",
       [&](const YAML::Node& n) {
         std::string name;
         AUTOGLM_RETURN_IF_ERROR(r.scalar(n, "embeddings_pooling", name));
         auto pooling = pooling_from_name(name);
         if (!pooling) return r.error(n, "embeddings_pooling", "must be auto, last or mean");
         c.embeddings_pooling = *pooling;
         return Status::ok();
       }},
      {"reasoning_format",
       [&](const YAML::Node& n) {
         std::string name;
         AUTOGLM_RETURN_IF_ERROR(r.scalar(n, "reasoning_format", name));
         auto format = reasoning_format_from_name(name);
         if (!format) return r.error(n, "reasoning_format", "must be auto, none or deepseek");
         c.reasoning_format = *format;
         return Status::ok();
       }},
      {"limits", [&](const YAML::Node& n) { return read_limits(r, n, o.limits); }},
      {"cors", [&](const YAML::Node& n) { return read_cors(r, n, c); }},
      {"response_cache", [&](const YAML::Node& n) { return read_response_cache(r, n, c.response_cache); }},
      {"metrics_require_key",
       [&](const YAML::Node& n) { return r.scalar(n, "metrics_require_key", c.metrics_require_key); }},
      {"web_ui", [&](const YAML::Node& n) { return r.scalar(n, "web_ui", c.web_ui); }},
      {"tools", [&](const YAML::Node& n) { return read_tools(r, n, c.tools); }},
      {"task", [&](const YAML::Node& n) { return read_task(r, n, c.task); }},
      {"http_allowlist", [&](const YAML::Node& n) { return r.strings(n, "http_allowlist", c.http_allowlist); }},
      {"tool_access", [&](const YAML::Node& n) { return read_tool_access(r, n, c); }},
      {"routes", [&](const YAML::Node& n) { return read_routes(r, n, c.routes); }},
      {"feedback_log", [&](const YAML::Node& n) { return r.scalar(n, "feedback_log", c.feedback_log); }},
      {"jobs", [&](const YAML::Node& n) { return read_jobs(r, n, c.jobs); }},
      {"models_dir", [&](const YAML::Node& n) { return r.scalar(n, "models_dir", c.models_dir); }},
      {"models_autoload", [&](const YAML::Node& n) { return r.scalar(n, "models_autoload", c.models_autoload); }},
      {"models_max", [&](const YAML::Node& n) { return r.ranged<int64_t>(n, "models_max", c.models_max, -1, 4096); }},
      {"sleep_idle_seconds",
       [&](const YAML::Node& n) {
         return r.ranged<double>(n, "sleep_idle_seconds", c.sleep_idle_seconds, 0, 365.0 * 86400);
       }},
  };
}

// The keys a `models:` entry may set for its own model; `path` is the top level's `model`.
const std::set<std::string> kPerModelKeys = {"path",           "quantize",
                                             "mmap",           "mlock",
                                             "device",         "cpu_moe",
                                             "n_cpu_moe",      "engine",
                                             "chat_template",  "tool_call_format",
                                             "context_window", "speculative",
                                             "max_running",    "max_batch_tokens",
                                             "max_queued",     "scheduler",
                                             "kv_cache",       "lora_adapters",
                                             "max_loras",      "served_model_name",
                                             "mmproj",         "media"};

// models: [{name, path, kv_cache_share, <per-model keys>}]: each model's configuration is the
// top level's with its own keys on top.
Status read_models(const ConfigReader& r, const YAML::Node& node, const ServerConfig& top,
                   std::vector<ServedModel>& models) {
  if (!node.IsSequence() || node.size() == 0)
    return r.error(node, "models", "must be a list of models (name, path, ...)");
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node& entry = node[i];
    const std::string at = "models[" + std::to_string(i) + "]";
    if (!entry.IsMap()) return r.error(entry, at, "must be a mapping (name, path, ...)");
    auto config = std::make_shared<ServerConfig>(top);
    config->models.clear();
    config->routes.clear();
    config->served_model_name.clear();  // each entry's own
    ServedModel m;
    KeyTable keys = top_level_keys(r, *config);
    keys["path"] = keys["model"];
    for (const auto& kv : entry) {
      const std::string key = kv.first.Scalar(), key_at = at + "." + key;
      if (key == "name") {
        AUTOGLM_RETURN_IF_ERROR(r.scalar(kv.second, key_at, m.name));
      } else if (key == "kv_cache_share") {
        AUTOGLM_RETURN_IF_ERROR(r.ranged<double>(kv.second, key_at, m.kv_cache_share, 0.001, 1));
      } else if (kPerModelKeys.count(key)) {
        // The shared readers name the bare key: put the entry's path in front.
        if (Status st = keys.at(key)(kv.second); !st.is_ok())
          return invalid_argument(replace_first(st.message(), "'" + key, "'" + at + "." + key));
      } else {
        std::string known = "name, kv_cache_share";
        for (const std::string& k : kPerModelKeys) known += ", " + k;
        return r.error(kv.first, key_at, "is not a known key (" + known + ")");
      }
    }
    if (m.name.empty()) return r.error(entry, at + ".name", "is required (the name requests use as 'model')");
    if (config->model.empty()) return r.error(entry, at + ".path", "is required (a GGUF file or a model folder)");
    m.aliases = config->served_model_name;
    std::vector<std::string> own = m.aliases;
    own.insert(own.begin(), m.name);
    for (const ServedModel& other : models)
      for (const std::string& n : own) {
        if (other.name != n && std::find(other.aliases.begin(), other.aliases.end(), n) == other.aliases.end())
          continue;
        const std::string field = at + (n == m.name ? ".name" : ".served_model_name");
        return r.error(entry, field,
                       other.name == n ? "'" + n + "' is already the name of a model"
                                       : "'" + n + "' is already a name of model '" + other.name + "'");
      }
    m.config = std::move(config);
    models.push_back(std::move(m));
  }
  double shares = 0;
  for (const ServedModel& m : models) shares += m.kv_cache_share;
  if (shares > 1 + 1e-9)
    return r.error(
        node, "models",
        "give kv_cache_share values that sum to at most 1 (they sum to " + nlohmann::json(shares).dump() + ")");
  return Status::ok();
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
  const KeyTable keys = top_level_keys(r, c);
  std::optional<YAML::Node> models;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key == "models") {  // read last: its entries start from every top-level key
      models = kv.second;
      continue;
    }
    auto it = keys.find(key);
    if (it == keys.end()) {
      std::string known;
      for (const auto& [k, unused] : keys) known += (known.empty() ? "" : ", ") + k;
      known += ", models";
      return r.error(kv.first, key, "is not a known key (" + known + ")");
    }
    AUTOGLM_RETURN_IF_ERROR(it->second(kv.second));
  }
  if (models) {
    if (!c.served_model_name.empty())
      return r.error(*models, "served_model_name",
                     "names one model: with 'models', give served_model_name in each entry that wants more names");
    if (!c.model.empty())
      return r.error(*models, "models", "and 'model' cannot both be given: name the single model in 'models' too");
    AUTOGLM_RETURN_IF_ERROR(read_models(r, *models, c, c.models));
  }
  if (!c.models_dir.empty()) {
    auto found = scan_models_dir(c.models_dir, c);
    if (!found) return invalid_argument(origin + ": models_dir: " + found.status().message());
    const std::vector<std::string> configured = served_model_names(c);
    for (ServedModel& m : *found)  // a name of `models:` (or the single model) keeps its own entry
      if (std::find(configured.begin(), configured.end(), m.name) == configured.end())
        c.dir_models.push_back(std::move(m));
  }
  AUTOGLM_RETURN_IF_ERROR(check_routes(c.routes, served_model_names(c), origin));
  if (!c.jobs.data_dir.empty() && !c.priorities.count(c.jobs.priority))
    return invalid_argument(origin + ": 'jobs.priority' names no class of 'priorities' ('" + c.jobs.priority + "')");
  // Tools are checked whole at start-up: schemas, executors, placeholders, hosts, access lists.
  auto registry = ToolRegistry::build(c.tools, c.http_allowlist);
  if (!registry) return invalid_argument(origin + ": " + registry.status().message());
  for (const auto& [key, names] : c.tool_access)
    for (const std::string& n : names)
      if (!(*registry)->find(n)) return invalid_argument(origin + ": tool_access: '" + n + "' names no tool");
  return c;
}

std::string model_name_of_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();  // a folder given as "dir/"
  const size_t slash = path.find_last_of('/');
  return path.substr(slash == std::string::npos ? 0 : slash + 1);
}

namespace {

std::vector<ServedModel> configured_models(const ServerConfig& c) {
  if (!c.models.empty()) return c.models;
  if (c.model.empty()) return {};
  ServedModel m{model_name_of_path(c.model), {}, 1, std::make_shared<const ServerConfig>(c)};
  if (!c.served_model_name.empty()) {  // the first replaces the file's name, as vLLM's does
    m.name = c.served_model_name.front();
    m.aliases.assign(c.served_model_name.begin() + 1, c.served_model_name.end());
  }
  return {m};
}

}  // namespace

std::vector<ServedModel> served_models(const ServerConfig& c) {
  std::vector<ServedModel> all = configured_models(c);
  all.insert(all.end(), c.dir_models.begin(), c.dir_models.end());
  return all;
}

int64_t models_max_of(const ServerConfig& c) {
  if (c.models_max >= 0) return c.models_max;
  return c.models_dir.empty() ? 0 : 4;  // llama-server's default for its router
}

std::vector<std::string> served_model_names(const ServerConfig& c) {
  std::vector<std::string> names;
  for (const ServedModel& m : served_models(c)) names.push_back(m.name);
  return names;
}

Result<ServerConfig> load_server_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return io_error(path + ": cannot open the configuration file");
  return parse_server_config(*text, path);
}

Result<ServerConfig> load_server_config(const std::string& path, const ConfigOverrides& overrides) {
  if (overrides.empty()) return path.empty() ? parse_server_config("", "defaults") : load_server_config(path);
  std::string text;
  if (!path.empty()) {
    auto file = read_file(path);
    if (!file) return io_error(path + ": cannot open the configuration file");
    text = *file;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return parse_server_config(text, path);  // its message names the line
  }
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  for (const auto& [key, value] : overrides) {
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      return invalid_argument("'" + key + "': the value '" + value + "' is not YAML: " + e.what());
    }
    std::vector<std::string> parts;
    for (size_t start = 0, dot; start <= key.size(); start = dot + 1) {
      dot = std::min(key.find('.', start), key.size());
      parts.push_back(key.substr(start, dot - start));
    }
    YAML::Node node = root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!node[parts[i]].IsMap()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
      node.reset(node[parts[i]]);
    }
    node[parts.back()] = parsed;
  }
  YAML::Emitter merged;
  merged << root;
  return parse_server_config(merged.c_str(), (path.empty() ? std::string("defaults") : path) + " with overrides");
}

int64_t body_budget_share(const ServerConfig& c) {
  return c.max_body_bytes_in_flight_per_client > 0 ? c.max_body_bytes_in_flight_per_client
                                                   : c.max_body_bytes_in_flight / 4;
}

}  // namespace autoglm
