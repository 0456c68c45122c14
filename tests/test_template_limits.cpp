// Hostile chat templates (a model file from anywhere, or --chat-template) end with an error
// that names the limit, in bounded time and memory: recursion, huge ranges, string bombs,
// nested loops, self-containing values, deep nesting in the source, and cancellation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/chat_template.h"

namespace autoglm {
namespace {

using nlohmann::ordered_json;

const ordered_json kMessages = ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});

// The render's error message ("" when it rendered).
std::string render_error(const std::string& source, const std::atomic<bool>* cancel = nullptr) {
  auto t = ChatTemplate::parse(source);
  if (!t) return t.status().message();
  t->set_cancel_flag(cancel);
  auto r = t->render(kMessages, ordered_json(), true, ordered_json::object());
  return r ? "" : r.status().message();
}

void expect_error_containing(const std::string& source, const std::string& expected) {
  const std::string error = render_error(source);
  EXPECT_NE(error.find(expected), std::string::npos) << "template: " << source.substr(0, 120) << "\nerror: " << error;
}

TEST(TemplateLimits, RecursiveMacroStopsAtTheDepthLimit) {
  expect_error_containing("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nest deeper than");
}

TEST(TemplateLimits, HugeRangeIsRefusedBeforeItIsBuilt) {
  expect_error_containing("{% for i in range(10**9) %}x{% endfor %}", "range: 1000000000 items exceed");
  expect_error_containing("{{ range(0, 10**12, 3) | length }}", "exceed the limit");
}

TEST(TemplateLimits, StringBombsAreRefused) {
  expect_error_containing("{{ 'ab' * 10**12 }}", "would exceed");
  expect_error_containing(
      "{% set ns = namespace(s='abcd') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
      "would exceed");
  expect_error_containing(
      "{% set ns = namespace(s='abcd') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "would exceed");
  expect_error_containing("{{ ('a' * 100000) | replace('a', 'b' * 100000) }}", "replace: the result would exceed");
  expect_error_containing("{{ 'x' | indent(10**12) }}", "indent: width");
}

TEST(TemplateLimits, NestedLoopsRunOutOfSteps) {
  expect_error_containing(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}x{% endfor %}{% endfor %}"
      "{% endfor %}",
      "more than 4000000 steps");
}

TEST(TemplateLimits, AValueThatContainsItselfCannotBePrinted) {
  expect_error_containing("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}", "nests deeper than");
  expect_error_containing("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns | tojson }}", "nests deeper than");
}

TEST(TemplateLimits, DeepNestingInTheSourceIsAParseError) {
  expect_error_containing("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}",
                          "expressions nest deeper than 200");
  expect_error_containing(
      "{{ " +
          [] {
            std::string s;
            for (int i = 0; i < 100000; ++i) s += "not ";
            return s;
          }() +
          "x }}",
      "nest deeper than 200");
  std::string blocks;
  for (int i = 0; i < 100000; ++i) blocks += "{% if true %}";
  expect_error_containing(blocks, "blocks nest deeper than 200");
}

TEST(TemplateLimits, ACancelledRenderStopsAtItsNextStep) {
  std::atomic<bool> cancel{true};
  const std::string error =
      render_error("{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}", &cancel);
  EXPECT_NE(error.find("cancelled"), std::string::npos) << error;
  cancel = false;
  EXPECT_EQ(render_error("{% for a in range(100) %}{{ a }}{% endfor %}", &cancel), "");
}

TEST(TemplateLimits, IntegerLiteralsOutOfRangeAreAParseError) {
  // Found by fuzz_jinja: the literal used to escape the parser as std::out_of_range.
  expect_error_containing("{{ 99999999999999999999999 }}",
                          "line 1: the integer 99999999999999999999999 is out of range");
  EXPECT_EQ(render_error("{{ 9223372036854775807 }}{{ 1" + std::string(400, '0') + ".5 }}"), "");
}

TEST(TemplateLimits, AnEmptySubscriptIsAParseError) {
  // Found by fuzz_jinja: x[] left the index expression empty and the interpreter read through it.
  expect_error_containing("{% if messages[]['role'] == 'system' %}{% endif %}", "line 1: empty subscript '[]'");
  EXPECT_EQ(render_error("{{ messages[0]['role'] }}{{ messages[:] | length }}{{ 'abc'[::-1] }}"), "");
}

TEST(TemplateLimits, IntegerResultsOutOfRangeAreAnError) {
  // Found by fuzz_jinja: 615**100 left int64 and was converted anyway.
  expect_error_containing("{{ 615**100 - 1 }}", "the integer result of '**' is out of range");
  expect_error_containing("{{ 9223372036854775807 * 4 }}", "the integer result of '*' is out of range");
  expect_error_containing("{{ -(-9223372036854775807 - 1) }}", "the integer result of '-' is out of range");
  expect_error_containing("{{ 10 is divisibleby(0) }}", "divisibleby(0): division by zero");
  EXPECT_EQ(render_error("{{ (10.0 ** 300 | int) > 0 }}{{ 5 is divisibleby(-1) }}{{ (0.0 / 1.0) | int }}"), "");
  EXPECT_EQ(render_error("{{ 2**62 }}{{ -7 // 2 }}{{ 7 % -3 }}{{ 615.0 ** 100 }}"), "");
}

TEST(TemplateLimits, BreakOutsideALoopIsAParseError) {
  // Found by fuzz_jinja: the interpreter's break escaped render() as an unknown exception.
  expect_error_containing("{{ 'a' }}{% break %}", "line 1: 'break' outside a for loop");
  expect_error_containing("{% if true %}{% continue %}{% endif %}", "'continue' outside a for loop");
  expect_error_containing("{% for x in [1] %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}",
                          "'break' outside a for loop");
  EXPECT_EQ(render_error("{% for x in range(5) %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "");
}

TEST(TemplateLimits, ConfiguredStepAndOutputLimitsApply) {
  auto t = ChatTemplate::parse("{% for a in range(100) %}{{ 'x' * 100 }}{% endfor %}");
  ASSERT_TRUE(t.is_ok());
  ASSERT_TRUE(t->render(kMessages, ordered_json(), true, ordered_json::object()).is_ok());
  t->set_limits(50, 1 << 20);
  auto steps = t->render(kMessages, ordered_json(), true, ordered_json::object());
  ASSERT_FALSE(steps.is_ok());
  EXPECT_NE(steps.status().message().find("limit template_steps"), std::string::npos) << steps.status().message();
  t->set_limits(1000000, 5000);
  auto output = t->render(kMessages, ordered_json(), true, ordered_json::object());
  ASSERT_FALSE(output.is_ok());
  EXPECT_NE(output.status().message().find("limit template_output_bytes"), std::string::npos)
      << output.status().message();
}

TEST(TemplateLimits, OrdinaryTemplatesStayWellInsideTheLimits) {
  // A long conversation through a template with a macro and nested loops renders.
  ordered_json messages = ordered_json::array();
  for (int i = 0; i < 2000; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(200, 'w')}});
  auto t = ChatTemplate::parse(
      "{% macro turn(m) %}<|{{ m.role }}|>{% for part in m.content.split('w') %}{{ part }}{% endfor %}"
      "{{ m.content }}{% endmacro %}{% for m in messages %}{{ turn(m) }}{% endfor %}");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto r = t->render(messages, ordered_json(), true, ordered_json::object());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->size(),
            2000u * (4 + 200) + 1000u * std::string("user").size() + 1000u * std::string("assistant").size());
}

}  // namespace
}  // namespace autoglm
