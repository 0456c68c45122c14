// Chat templates against ../shared/golden/chat_templates: exact renderings of real templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "test_util.h"

namespace autoglm {
namespace {

using nlohmann::ordered_json;

struct Outcome {
  int passed = 0;
  std::vector<std::string> failures;
};

ordered_json load(const std::string& rel) {
  return ordered_json::parse(test::read_file(test::shared_path(rel)));
}

// Renders every case of one template; records mismatches with the first differing offset.
void run_cases(const std::string& label, const std::string& source, const ordered_json& special,
               const ordered_json& cases, Outcome& out) {
  auto tmpl = ChatTemplate::parse(source);
  if (!tmpl) {
    out.failures.push_back(label + ": parse error: " + tmpl.status().message());
    return;
  }
  for (const auto& c : cases) {
    ordered_json vars = special.is_object() ? special : ordered_json::object();
    if (c.contains("extra_context"))
      for (const auto& [k, v] : c["extra_context"].items()) vars[k] = v;
    const ordered_json tools = c.contains("tools") ? c["tools"] : ordered_json();
    auto r = tmpl->render(c["messages"], tools, c["add_generation_prompt"].get<bool>(), vars);
    const std::string name = label + " / " + c["name"].get<std::string>();
    if (!r) {
      out.failures.push_back(name + ": " + r.status().message());
      continue;
    }
    const std::string expected = c["expected"];
    if (*r == expected) {
      ++out.passed;
      continue;
    }
    size_t at = 0;
    while (at < r->size() && at < expected.size() && (*r)[at] == expected[at]) ++at;
    out.failures.push_back(name + ": differs at byte " + std::to_string(at) + ": got '" + r->substr(at, 40) +
                           "', expected '" + expected.substr(at, 40) + "'");
  }
}

void report(const Outcome& o) {
  for (const auto& f : o.failures) ADD_FAILURE() << f;
  std::printf("%d cases rendered identically, %zu failed\n", o.passed, o.failures.size());
}

TEST(ChatTemplateGolden, Qwen3AndLlama3) {
  AUTOGLM_REQUIRE_SHARED("golden/chat_templates/qwen3.json");
  Outcome o;
  for (const char* name : {"qwen3", "llama3"}) {
    const auto g = load(std::string("golden/chat_templates/") + name + ".json");
    const auto cfg = load(std::string("models/hf-tokenizers/") + name + "/tokenizer_config.json");
    run_cases(name, cfg[g["template_key"].get<std::string>()], g["special_tokens"], g["cases"], o);
  }
  EXPECT_EQ(o.passed, 36);  // every case of both files
  report(o);
}

TEST(ChatTemplateGolden, FiftyMoreTemplates) {
  AUTOGLM_REQUIRE_SHARED("golden/chat_templates/more.json");
  Outcome o;
  const auto g = load("golden/chat_templates/more.json");
  for (const auto& t : g["templates"]) run_cases(t["model_name"], t["template"], t["special_tokens"], t["cases"], o);
  EXPECT_EQ(o.passed, g["n_cases"].get<int>());
  report(o);
}

TEST(ChatTemplate, BuiltinsRender) {
  const ordered_json messages =
      ordered_json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"Hi"}])");
  const ordered_json vars = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  auto chatml = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(chatml.is_ok());
  EXPECT_EQ(*chatml->render(messages, nullptr, true, vars),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto llama2 = ChatTemplate::builtin("llama2");
  ASSERT_TRUE(llama2.is_ok());
  EXPECT_EQ(*llama2->render(messages, nullptr, true, vars), "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]");
  auto llama3 = ChatTemplate::builtin("llama3");
  ASSERT_TRUE(llama3.is_ok());
  EXPECT_EQ(*llama3->render(messages, nullptr, false, {{"bos_token", "<|begin_of_text|>"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_FALSE(ChatTemplate::builtin("nope").is_ok());
}

TEST(ChatTemplate, ErrorsAreValues) {
  auto bad = ChatTemplate::parse("{% if x %}unclosed");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("endif"), std::string::npos) << bad.status().message();
  auto raising = ChatTemplate::parse("{{ raise_exception('Only user and assistant roles') }}");
  ASSERT_TRUE(raising.is_ok());
  auto r = raising->render(ordered_json::array(), nullptr, false, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("Only user and assistant roles"), std::string::npos);
}

TEST(ChatTemplate, ExpressionsAndWhitespaceControl) {
  auto t = ChatTemplate::parse(
      "{%- set ns = namespace(n=0) -%}\n"
      "{%- for x in [3, 1, 2] if x > 1 %}\n"
      "  {{ loop.index }}:{{ x * 2 }}{% if not loop.last %},{% endif %}\n"
      "{%- set ns.n = ns.n + x %}\n"
      "{%- endfor %}\n"
      "|{{ ns.n }}|{{ 'a,b'.split(',')[-1] | upper }}|{{ [1,2,3][::-1] | join('-') }}|{{ 7 // 2 }}|{{ none is none }}"
      "|{{ {'k': [1, 'x']} | tojson }}|{{ 'x' if false else 'y' }}|{{ '  t ' | trim }}|");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto r = t->render(ordered_json::array(), nullptr, false, nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(*r, "  1:6,  2:4|5|B|3-2-1|3|True|{\"k\": [1, \"x\"]}|y|t|");
}

}  // namespace
}  // namespace autoglm
