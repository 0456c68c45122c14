// The YAML configuration: every key, and errors that name the key and the line.
#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

#include "server/config/config.h"
#include "test_util.h"

namespace autoglm {
namespace {

TEST(ServerConfig, ReadsEveryKey) {
  auto c = parse_server_config(R"(
model: m.gguf
context_window: 2048
host: 0.0.0.0
port: 9000
threads: 2
kv_cache: {memory_mib: 256, block_size: 32, dtype: f32}
prefix_cache: false
max_batch_tokens: 256
max_running: 8
max_queued: 64
priorities: {batch: -5, interactive: 5}
api_keys: [a, b]
tools:
  - name: get_weather
    description: Current weather
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    triggers: ["weather in"]
    exec:
      http: {method: GET, url: "http://127.0.0.1:9000/weather/{city}", timeout_ms: 1500, headers: {X-Key: k}}
  - name: echo
    description: Repeat a message back
    parameters: {type: object, properties: {message: {type: string, maxLength: 64}}, required: [message]}
    exec: {command: ["/bin/echo", "{message}"], timeout_ms: 2000, max_output_bytes: 4096, env: [LANG]}
    arguments: {message: {allow_leading_dash: true, path_under: /srv/notes}}
cors: {allow_origins: ["https://app.example"], allow_headers: [Authorization], max_age: 60}
task: {max_steps: 3, session_ttl_s: 60}
tool_access: {a: [echo]}
)",
                               "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->model, "m.gguf");
  EXPECT_EQ(c->runtime.context_window, 2048);
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->runtime.kv_memory_mib, 256);
  EXPECT_EQ(c->runtime.kv_block_size, 32);
  EXPECT_FALSE(c->runtime.prefix_cache);
  EXPECT_EQ(c->priorities.at("interactive"), 5);
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(c->tools.size(), 2u);
  EXPECT_EQ(c->tools[0].name, "get_weather");
  EXPECT_EQ(c->tools[0].exec.method, "GET");
  EXPECT_EQ(c->tools[0].exec.timeout_ms, 1500);
  EXPECT_EQ(c->tools[0].triggers, (std::vector<std::string>{"weather in"}));
  EXPECT_EQ(c->tools[1].exec.command, (std::vector<std::string>{"/bin/echo", "{message}"}));
  EXPECT_EQ(c->tools[1].exec.max_output_bytes, 4096);
  EXPECT_TRUE(c->tools[1].arguments.at("message").allow_leading_dash);
  EXPECT_EQ(c->tools[1].arguments.at("message").path_under, "/srv/notes");
  EXPECT_EQ(c->task.max_steps, 3);
  EXPECT_EQ(c->cors_allow_origins, (std::vector<std::string>{"https://app.example"}));
  EXPECT_EQ(c->cors_allow_headers, (std::vector<std::string>{"Authorization"}));
  EXPECT_EQ(c->cors_max_age, 60);
  EXPECT_EQ(c->tool_access.at("a"), (std::vector<std::string>{"echo"}));
  EXPECT_NE(c->tools[0].parameters_json.find("\"required\":[\"city\"]"), std::string::npos)
      << c->tools[0].parameters_json;
}

TEST(ServerConfig, ReadsTheRequestLimits) {
  auto c = parse_server_config(R"(
limits:
  json_depth: 32
  json_object_keys: 100
  prompt_tokens: 100
  stop_strings: 4
  stop_string_bytes: 64
  top_logprobs: 5
  grammar_bytes: 4096
  grammar_symbols: 1000
  grammar_stacks: 64
  template_steps: 5000
  template_output_bytes: 2048
)",
                               "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const RequestLimits& l = c->runtime.limits;
  EXPECT_EQ(l.json_depth, 32);
  EXPECT_EQ(l.json_object_keys, 100);
  EXPECT_EQ(l.prompt_tokens, 100);
  EXPECT_EQ(l.stop_strings, 4);
  EXPECT_EQ(l.stop_string_bytes, 64);
  EXPECT_EQ(l.top_logprobs, 5);
  EXPECT_EQ(l.grammar_bytes, 4096);
  EXPECT_EQ(l.grammar_symbols, 1000);
  EXPECT_EQ(l.grammar_stacks, 64);
  EXPECT_EQ(l.template_steps, 5000);
  EXPECT_EQ(l.template_output_bytes, 2048);
  // Absent keys keep their defaults.
  auto d = parse_server_config("limits: {json_depth: 16}\n", "test.yaml");
  ASSERT_TRUE(d.is_ok()) << d.status().message();
  EXPECT_EQ(d->runtime.limits.json_depth, 16);
  EXPECT_EQ(d->runtime.limits.grammar_stacks, RequestLimits{}.grammar_stacks);
}

void expect_error(const std::string& yaml, const std::string& fragment) {
  auto c = parse_server_config(yaml, "cfg.yaml");
  ASSERT_FALSE(c.is_ok()) << yaml;
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
}

TEST(ServerConfig, ErrorsNameKeyAndLine) {
  expect_error("model: a\nmodle: b\n", "cfg.yaml:2: 'modle' is not a known key");
  expect_error("port: 99999\n", "cfg.yaml:1: 'port' must be between 0 and 65535");
  expect_error("port: eighty\n", "'port' has a value of the wrong type");
  expect_error("kv_cache: {memory: 5}\n", "'kv_cache.memory' is not a known key");
  const std::string exec = "    exec: {builtin: calculator}\n";
  expect_error("tools:\n  - name: a\n" + exec + "  - name: a\n" + exec, "'tools[1].name' 'a' is defined twice");
  expect_error("tools:\n  - description: x\n" + exec, "'tools[0].name' is required");
  expect_error("tools:\n  - name: a\n    parameters: [1]\n", "'tools[0].parameters' must be a JSON Schema object");
  expect_error("tools:\n  - name: a\n", "'tools[0].exec' is required");
  expect_error("tools:\n  - name: a\n    exec: {command: [ls]}\n",
               "tools[0].exec.command[0]: must be an absolute path");
  expect_error("tools:\n  - name: a\n    exec: {http: {url: \"http://10.1.2.3/x\"}}\n",
               "tools[0].exec.http.url: host '10.1.2.3' is not on the http allowlist");
  expect_error("tools:\n  - name: a\n    exec: {shell: x}\n", "'tools[0].exec.shell' is not a known key");
  expect_error("tools:\n  - name: a\n" + exec + "tool_access: {k: [b]}\n", "tool_access: 'b' names no tool");
  expect_error("max_running: 0\n", "'max_running' must be between 1");
  expect_error("tools:\n  - name: a\n" + exec + "    arguments: {x: {path_under: rel}}\n",
               "'tools[0].arguments.x.path_under' must be an absolute directory");
  expect_error("limits: {json_depth: 1}\n", "cfg.yaml:1: 'limits.json_depth' must be between 2");
  expect_error("port: 1\nlimits:\n  grammar_rules: 5\n", "cfg.yaml:3: 'limits.grammar_rules' is not a known key");
  expect_error("limits: [1]\n", "'limits' must be a mapping (json_depth, json_object_keys, prompt_tokens");
  expect_error("model: [unclosed\n", "YAML syntax error");
}

// A model-chosen {placeholder} may not pick an http tool's host or port unless the tool says
// so; a parameter of a tool with a cwd is confined under it unless it is not a path.
TEST(ServerConfig, ToolAddressAndPathRulesAreRead) {
  const std::string params = "    parameters: {type: object, properties: {p: {type: string}}}\n";
  expect_error("tools:\n  - name: a\n" + params + "    exec: {http: {url: \"http://127.0.0.1:{p}/x\"}}\n",
               "cfg.yaml: tools[0].exec.http.url: placeholder {p} is in the host or port");
  auto c = parse_server_config("tools:\n  - name: a\n" + params +
                                   "    exec: {http: {url: \"http://127.0.0.1:{p}/x\", allow_placeholder_host_port: "
                                   "true}}\n  - name: b\n" +
                                   params + "    exec: {command: [/bin/echo, \"{p}\"], cwd: /tmp}\n" +
                                   "    arguments: {p: {not_a_path: true}}\n",
                               "cfg.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->tools[0].exec.allow_placeholder_host_port);
  EXPECT_TRUE(c->tools[1].arguments.at("p").not_a_path);
  expect_error("tools:\n  - name: b\n" + params + "    exec: {command: [/bin/echo, \"{p}\"]}\n" +
                   "    arguments: {p: {not_a_path: true, path_under: /srv}}\n",
               "tools[0].arguments.p: path_under and not_a_path: true contradict each other");
  expect_error("tools:\n  - name: b\n" + params + "    exec: {command: [/bin/echo]}\n    arguments: {p: {text: 1}}\n",
               "'tools[0].arguments.p.text' is not a known key (allow_leading_dash, path_under, not_a_path)");
}

TEST(ServerConfig, ToolsExampleParses) {
  auto c = load_server_config(std::string(AUTOGLM_SOURCE_DIR) + "/config/tools.example.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->tools.size(), 3u);
  EXPECT_EQ(c->tools[1].exec.url, "http://127.0.0.1:9000/weather");
  EXPECT_EQ(c->tools[2].exec.builtin, "calculator");
}

TEST(ServerConfig, DefaultFileParses) {
  const std::string path = std::string(AUTOGLM_SOURCE_DIR) + "/config/default.yaml";
  auto c = load_server_config(path);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->port, 8080);
  // The file spells out the built-in limits: the two agree.
  const RequestLimits d;
  const RequestLimits& l = c->runtime.limits;
  EXPECT_EQ(l.json_depth, d.json_depth);
  EXPECT_EQ(l.json_object_keys, d.json_object_keys);
  EXPECT_EQ(l.prompt_tokens, d.prompt_tokens);
  EXPECT_EQ(l.stop_strings, d.stop_strings);
  EXPECT_EQ(l.stop_string_bytes, d.stop_string_bytes);
  EXPECT_EQ(l.top_logprobs, d.top_logprobs);
  EXPECT_EQ(l.grammar_bytes, d.grammar_bytes);
  EXPECT_EQ(l.grammar_symbols, d.grammar_symbols);
  EXPECT_EQ(l.grammar_stacks, d.grammar_stacks);
  EXPECT_EQ(l.template_steps, d.template_steps);
  EXPECT_EQ(l.template_output_bytes, d.template_output_bytes);
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// A key file saved on Windows (CRLF) locked everyone out: each key kept its '\r'.
TEST(ServerConfig, ApiKeyFilesWithCrlfLineEndsGiveTheKeys) {
  const std::string path = testing::TempDir() + "/keys_crlf.txt";
  std::ofstream(path, std::ios::binary) << "# operators\r\nkey-one\r\n\r\n  key-two \r\n";
  auto c = parse_server_config("api_keys: {file: " + path + "}\n", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"key-one", "key-two"}));
}

// The body budget's keys: a client's share and the wait for a body's bytes.
TEST(ServerConfig, BodyBudgetKeys) {
  auto c = parse_server_config("max_body_bytes_in_flight_per_client: 65536\nbody_timeout_s: 2.5\n", "t.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->max_body_bytes_in_flight_per_client, 65536);
  EXPECT_EQ(c->body_timeout_s, 2.5);
  auto bad = parse_server_config("body_timeout_s: 0\n", "t.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("body_timeout_s"), std::string::npos) << bad.status().message();
}

TEST(ServerConfigScheduler, MaxStepMsIsAutoOffOrMilliseconds) {
  auto a = parse_server_config("scheduler: {max_step_ms: auto}\n", "t.yaml");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_LT(a->runtime.max_step_ms, 0);
  auto fixed = parse_server_config("scheduler: {max_step_ms: 25}\n", "t.yaml");
  ASSERT_TRUE(fixed.is_ok());
  EXPECT_EQ(fixed->runtime.max_step_ms, 25);
  EXPECT_LT(parse_server_config("port: 1\n", "t.yaml")->runtime.max_step_ms, 0);                      // auto by default
  EXPECT_EQ(parse_server_config("scheduler: {max_step_ms: 0}\n", "t.yaml")->runtime.max_step_ms, 0);  // off
  auto bad = parse_server_config("scheduler: {max_step: 25}\n", "t.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("scheduler.max_step"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(parse_server_config("scheduler: {max_step_ms: -3}\n", "t.yaml").is_ok());
}

TEST(ServerConfigDevice, CpuByDefaultCudaWithAnOrdinal) {
  EXPECT_EQ(parse_server_config("port: 1\n", "t.yaml")->runtime.device, Device{});
  auto gpu = parse_server_config("device: cuda:1\n", "t.yaml");
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  EXPECT_EQ(gpu->runtime.device, (Device{DeviceKind::kCuda, 1}));
  expect_error("port: 1\ndevice: gpu\n", "cfg.yaml:2: 'device' must be cpu, cuda or cuda:N, not 'gpu'");
  expect_error("device: cuda:x\n", "'device' must be cpu, cuda or cuda:N, not 'cuda:x'");
  auto per_model = parse_server_config("models:\n  - {name: a, path: a.gguf, device: cuda:0}\n", "t.yaml");
  ASSERT_TRUE(per_model.is_ok()) << per_model.status().message();
  EXPECT_EQ(per_model->models.at(0).config->runtime.device, (Device{DeviceKind::kCuda, 0}));
}

// cpu_moe and n_cpu_moe (the CLI's --cpu-moe, --n-cpu-moe N): top level, per model and as
// the serve flags' overrides; a negative layer count names the key.
TEST(ServerConfigDevice, CpuMoeKeys) {
  auto plain = parse_server_config("port: 1\n", "t.yaml");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_FALSE(plain->runtime.cpu_moe);
  EXPECT_EQ(plain->runtime.n_cpu_moe, 0);
  auto c = parse_server_config("device: cuda\ncpu_moe: true\nn_cpu_moe: 12\n", "t.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_TRUE(c->runtime.cpu_moe);
  EXPECT_EQ(c->runtime.n_cpu_moe, 12);
  expect_error("n_cpu_moe: -1\n", "cfg.yaml:1: 'n_cpu_moe' must be between 0 and");
  expect_error("cpu_moe: maybe\n", "cfg.yaml:1: 'cpu_moe' has a value of the wrong type: 'maybe'");
  auto per_model = parse_server_config("models:\n  - {name: a, path: a.gguf, device: cuda, n_cpu_moe: 3}\n", "t.yaml");
  ASSERT_TRUE(per_model.is_ok()) << per_model.status().message();
  EXPECT_EQ(per_model->models.at(0).config->runtime.n_cpu_moe, 3);
  auto flags = load_server_config("", {{"cpu_moe", "true"}, {"n_cpu_moe", "5"}});
  ASSERT_TRUE(flags.is_ok()) << flags.status().message();
  EXPECT_TRUE(flags->runtime.cpu_moe);
  EXPECT_EQ(flags->runtime.n_cpu_moe, 5);
}

TEST(ServerConfigSpeculative, MethodAndDraftLimitsAreRead) {
  auto c =
      parse_server_config("speculative: {method: ngram, draft_max: 5, draft_min: 2, draft_p_min: 0.5}\n", "t.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->runtime.speculative, SpecMethod::kNgram);
  EXPECT_EQ(c->runtime.draft_max, 5);
  EXPECT_EQ(c->runtime.draft_min, 2);
  EXPECT_EQ(c->runtime.draft_p_min, 0.5);
  EXPECT_EQ(parse_server_config("port: 1\n", "t.yaml")->runtime.speculative, SpecMethod::kNone);  // off by default
  c = parse_server_config("speculative: {method: draft, draft: d.gguf, draft_quantize: q4_0, exit_layer: 3}\n",
                          "t.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->runtime.speculative, SpecMethod::kDraft);
  EXPECT_EQ(c->runtime.draft_model, "d.gguf");
  EXPECT_EQ(c->runtime.draft_quantize, "q4_0");
  EXPECT_EQ(c->runtime.exit_layer, 3);
  for (const auto& [yaml, culprit] : std::vector<std::pair<std::string, std::string>>{
           {"speculative: {method: medusa}\n", "speculative.method"},
           {"speculative: {draft_max: 0}\n", "speculative.draft_max"},
           {"speculative: {draft_p_min: 2}\n", "speculative.draft_p_min"},
           {"speculative: {drafts: 4}\n", "speculative.drafts"},
           {"speculative: {draft_quantize: q9}\n", "speculative.draft_quantize"},
           {"speculative: {exit_layer: -1}\n", "speculative.exit_layer"},
           {"speculative: ngram\n", "speculative"}}) {
    auto bad = parse_server_config(yaml, "t.yaml");
    ASSERT_FALSE(bad.is_ok()) << yaml;
    EXPECT_NE(bad.status().message().find(culprit), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace autoglm

namespace autoglm {
namespace {

// Flags and keyword arguments reach the configuration as overrides by dotted key: they win
// over the file, nested keys keep their siblings, and a bad value names its key.
TEST(ServerConfigJobs, KeysAreReadAndCheckedByName) {
  auto c = parse_server_config(
      "jobs: {data_dir: /var/lib/autoglm, concurrency: 3, priority: high, retention_s: 60, max_bytes: 1048576, "
      "max_file_bytes: 4096}\n",
      "j.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->jobs.data_dir, "/var/lib/autoglm");
  EXPECT_EQ(c->jobs.concurrency, 3);
  EXPECT_EQ(c->jobs.priority, "high");
  EXPECT_EQ(c->jobs.retention_s, 60);
  EXPECT_EQ(c->jobs.max_bytes, 1048576);
  EXPECT_EQ(c->jobs.max_file_bytes, 4096);
  const std::pair<const char*, const char*> bad[] = {
      {"jobs: {max_bytes: 100}\n", "'jobs.max_bytes' must be between 65536"},
      {"jobs: {max_file_bytes: -1}\n", "'jobs.max_file_bytes' must be between 1024"},
      {"jobs: {concurrency: 0}\n", "j.yaml:1: 'jobs.concurrency' must be between 1"},
      {"jobs: {queue: 3}\n", "'jobs.queue' is not a known key"},
      {"jobs: {data_dir: /x, priority: urgent}\n", "'jobs.priority' names no class of 'priorities' ('urgent')"},
  };
  for (const auto& [yaml, expected] : bad) {
    auto e = parse_server_config(yaml, "j.yaml");
    ASSERT_FALSE(e.is_ok()) << yaml;
    EXPECT_NE(e.status().message().find(expected), std::string::npos) << e.status().message();
  }
}

TEST(ServerConfigOverrides, DottedKeysOverTheFile) {
  const std::string path = ::testing::TempDir() + "/overrides.yaml";
  {
    std::ofstream f(path);
    f << "model: a.gguf\nport: 1\nkv_cache: {dtype: q8_0, memory_mib: 64}\n";
  }
  auto c = load_server_config(
      path,
      {{"port", "0"}, {"kv_cache.memory_mib", "32"}, {"speculative.method", "\"ngram\""}, {"model", "\"b: c.gguf\""}});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->port, 0);
  EXPECT_EQ(c->runtime.kv_memory_mib, 32);
  EXPECT_EQ(c->runtime.kv_type, KvType::kQ8_0);  // its sibling stays
  EXPECT_EQ(c->runtime.speculative, SpecMethod::kNgram);
  EXPECT_EQ(c->model, "b: c.gguf");  // JSON-quoted strings stay strings
  auto defaults = load_server_config("", {{"max_running", "3"}});
  ASSERT_TRUE(defaults.is_ok()) << defaults.status().message();
  EXPECT_EQ(defaults->runtime.max_running, 3);
  for (const auto& [key, value, culprit] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"port", "70000", "port"},
           {"kv_cache.dtype", "\"q9\"", "kv_cache.dtype"},
           {"nope", "1", "nope"},
           {"port", "[1", "'port': the value '[1' is not YAML"}}) {
    auto bad = load_server_config(path, {{key, value}});
    ASSERT_FALSE(bad.is_ok()) << key;
    EXPECT_NE(bad.status().message().find(culprit), std::string::npos) << bad.status().message();
  }
  EXPECT_FALSE(load_server_config(path + ".missing", {{"port", "1"}}).is_ok());
}

}  // namespace
}  // namespace autoglm
