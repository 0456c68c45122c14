#include "tasks/tools.h"

#include <algorithm>

#include "chat/tool_calls.h"
#include "sample/json_schema.h"

namespace autoglm {
namespace {

using nlohmann::json;

Status path_error(const std::string& path, const std::string& reason) {
  return invalid_argument(path + ": " + reason);
}

Status check_placeholders(const std::string& text, const json& params, const std::string& path) {
  const json props = params.contains("properties") ? params["properties"] : json::object();
  for (const std::string& p : placeholders(text))
    if (!props.is_object() || !props.contains(p))
      return path_error(path, "placeholder {" + p + "} names no property of 'parameters'");
  return Status::ok();
}

// An http tool's URL: a fixed http:// host on the allowlist (placeholders choose the host or
// port only where the tool allows it), a known method.
Status check_http(const ToolExec& e, const json& params, const std::vector<std::string>& allowlist,
                  const std::string& path) {
  const std::string host = url_host(e.url);
  if (host.empty()) return path_error(path + ".http.url", "must be an http:// URL");
  const std::vector<std::string> in_address = placeholders(url_authority(e.url));
  if (!in_address.empty() && !e.allow_placeholder_host_port)
    return path_error(path + ".http.url", "placeholder {" + in_address[0] +
                                              "} is in the host or port: the model would choose where the request "
                                              "goes (http.allow_placeholder_host_port: true allows it)");
  const bool host_filled_later = !placeholders(host).empty();  // then checked when the tool runs
  if (!host_filled_later && std::find(allowlist.begin(), allowlist.end(), host) == allowlist.end())
    return path_error(path + ".http.url", "host '" + host + "' is not on the http allowlist");
  static const std::vector<std::string> methods = {"GET", "POST", "PUT", "DELETE"};
  if (std::find(methods.begin(), methods.end(), e.method) == methods.end())
    return path_error(path + ".http.method", "must be GET, POST, PUT or DELETE");
  AUTOGLM_RETURN_IF_ERROR(check_placeholders(e.url, params, path + ".http.url"));
  return Status::ok();
}

Status check_exec(const ToolExec& e, const json& params, const std::vector<std::string>& allowlist,
                  const std::string& path) {
  const int kinds = int(!e.command.empty()) + int(!e.url.empty()) + int(!e.builtin.empty());
  if (kinds != 1) return path_error(path, "needs exactly one of command, http, builtin");
  if (e.timeout_ms < 1 || e.timeout_ms > 600000) return path_error(path + ".timeout_ms", "must be in 1..600000");
  if (e.max_output_bytes < 1 || e.max_output_bytes > (16 << 20))
    return path_error(path + ".max_output_bytes", "must be in 1..16777216");
  if (!e.command.empty()) {
    if (e.command[0].empty() || e.command[0][0] != '/')
      return path_error(path + ".command[0]", "must be an absolute path to a program (no shell is used)");
    for (size_t i = 0; i < e.command.size(); ++i)
      AUTOGLM_RETURN_IF_ERROR(check_placeholders(e.command[i], params, path + ".command[" + std::to_string(i) + "]"));
  }
  if (!e.url.empty()) AUTOGLM_RETURN_IF_ERROR(check_http(e, params, allowlist, path));
  if (!e.builtin.empty()) {
    const auto& names = builtin_tool_names();
    if (std::find(names.begin(), names.end(), e.builtin) == names.end())
      return path_error(path + ".builtin", "'" + e.builtin + "' is not a builtin (calculator, current_time, echo)");
  }
  return Status::ok();
}

}  // namespace

const std::vector<std::string>& builtin_tool_names() {
  static const std::vector<std::string> names = {"calculator", "current_time", "echo"};
  return names;
}

json Tool::openai() const {
  return {{"type", "function"},
          {"function", {{"name", config.name}, {"description", config.description}, {"parameters", parameters}}}};
}

void ToolStats::record(const std::string& tool, bool ok, double seconds) {
  std::lock_guard<std::mutex> lock(mutex);
  Counts& c = by_tool[tool];
  (ok ? c.ok : c.error) += 1;
  c.seconds += seconds;
}

std::map<std::string, ToolStats::Counts> ToolStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex);
  return by_tool;
}

std::vector<std::string> placeholders(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = text.find('{'); i != std::string::npos; i = text.find('{', i + 1)) {
    const size_t end = text.find('}', i);
    if (end == std::string::npos) break;
    out.push_back(text.substr(i + 1, end - i - 1));
  }
  return out;
}

std::string url_authority(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) return "";
  const size_t end = url.find_first_of("/?#", scheme.size());
  return url.substr(scheme.size(), end == std::string::npos ? std::string::npos : end - scheme.size());
}

std::string url_host(const std::string& url) {
  const std::string scheme = "http://";
  if (url.compare(0, scheme.size(), scheme) != 0) return "";
  const size_t start = scheme.size();
  size_t end = url.find_first_of("/?#", start);
  if (end == std::string::npos) end = url.size();
  std::string authority = url.substr(start, end - start);
  if (authority.find('@') != std::string::npos) return "";  // no credentials in tool URLs
  if (!authority.empty() && authority[0] == '[') {          // [v6]:port
    const size_t close = authority.find(']');
    return close == std::string::npos ? "" : authority.substr(1, close - 1);
  }
  return authority.substr(0, authority.find(':'));
}

Result<std::shared_ptr<ToolRegistry>> ToolRegistry::build(const std::vector<ToolConfig>& configs,
                                                          std::vector<std::string> http_allowlist,
                                                          std::optional<ListenAddress> own_address) {
  auto r = std::make_shared<ToolRegistry>();
  r->own_address_ = std::move(own_address);
  r->http_allowlist_ =
      http_allowlist.empty() ? std::vector<std::string>{"127.0.0.1", "localhost", "::1"} : std::move(http_allowlist);
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string path = "tools[" + std::to_string(i) + "]";
    Tool t;
    t.config = configs[i];
    try {
      t.parameters = json::parse(t.config.parameters_json);
    } catch (const json::exception& e) {
      return path_error(path + ".parameters", std::string("not JSON: ") + e.what());
    }
    if (!t.parameters.is_object() || (t.parameters.contains("type") && t.parameters["type"] != "object"))
      return path_error(path + ".parameters", "must be a JSON Schema of type object");
    t.parameters = tool_arguments_schema(t.parameters);  // no argument keys beyond the listed ones
    if (auto g = json_schema_to_gbnf(t.parameters); !g) return path_error(path + ".parameters", g.status().message());
    for (size_t k = 0; k < t.config.triggers.size(); ++k) {
      auto re = Regex::compile(t.config.triggers[k], false, /*caseless=*/true);
      if (!re) return path_error(path + ".triggers[" + std::to_string(k) + "]", re.status().message());
      t.triggers.push_back(*re);
    }
    AUTOGLM_RETURN_IF_ERROR(check_exec(t.config.exec, t.parameters, r->http_allowlist_, path + ".exec"));
    for (const auto& [name, rule] : t.config.arguments) {
      if (!t.parameters.contains("properties") || !t.parameters["properties"].contains(name))
        return path_error(path + ".arguments." + name, "names no property of 'parameters'");
      if (rule.not_a_path && !rule.path_under.empty())
        return path_error(path + ".arguments." + name, "path_under and not_a_path: true contradict each other");
    }
    r->tools_.push_back(std::move(t));
  }
  return r;
}

const Tool* ToolRegistry::find(const std::string& name) const {
  for (const Tool& t : tools_)
    if (t.config.name == name) return &t;
  return nullptr;
}

const Tool* ToolRegistry::triggered_by(const std::string& input, const std::vector<std::string>* allowed) const {
  for (const Tool& t : tools_) {
    if (allowed && std::find(allowed->begin(), allowed->end(), t.config.name) == allowed->end()) continue;
    for (const auto& re : t.triggers)
      if (!re->find_all(input).empty()) return &t;
  }
  return nullptr;
}

}  // namespace autoglm
