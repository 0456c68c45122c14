// JSON Schema keywords as grammars: each accepts exactly the strings of its table
// (tests/data/schema_keywords.json, whose labels the e2e suite checks against ajv), numbers
// never overflow, and keywords that cannot be enforced are refused with their path.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "sample/regex.h"
#include "sample/schema_formats.h"
#include "sample/schema_numbers.h"

namespace autoglm {
namespace {

using nlohmann::json;

json load_cases() {
  std::ifstream in(std::string(AUTOGLM_SOURCE_DIR) + "/tests/data/schema_keywords.json");
  EXPECT_TRUE(in.good());
  return json::parse(in);
}

std::shared_ptr<const Grammar> schema_grammar(const json& schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  EXPECT_TRUE(gbnf.is_ok()) << gbnf.status().message() << "\n" << schema.dump();
  if (!gbnf) return nullptr;
  auto g = Grammar::parse(*gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g ? *g : nullptr;
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  return GrammarState(g).advance_bytes(text).accepting();
}

TEST(SchemaKeywords, EachTableIsAcceptedExactly) {
  const json cases = load_cases();
  ASSERT_GT(cases.size(), 30u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto g = schema_grammar(c["schema"]);
    ASSERT_TRUE(g);
    for (const json& ok : c["valid"]) EXPECT_TRUE(accepts(g, ok.get<std::string>())) << "should accept " << ok;
    for (const json& bad : c["invalid"]) EXPECT_FALSE(accepts(g, bad.get<std::string>())) << "should reject " << bad;
  }
}

TEST(SchemaKeywords, DraftFourExclusiveFlags) {
  auto g = schema_grammar(json::parse(
      R"({"type": "integer", "minimum": 1, "exclusiveMinimum": true, "maximum": 5, "exclusiveMaximum": true})"));
  ASSERT_TRUE(g);
  for (const char* ok : {"2", "3", "4"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"1", "5", "0", "6"}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

// Integer ranges against arithmetic, over many small ranges and every value near them.
TEST(SchemaKeywords, IntegerRangesMatchArithmetic) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t a = rng() % 1200, b = a + rng() % 1500;
    auto dfa = compile_regex("^(?:" + integer_range_regex(a, b) + ")$");
    ASSERT_TRUE(dfa.is_ok()) << dfa.status().message();
    for (uint64_t n = (a > 30 ? a - 30 : 0); n <= b + 30; ++n) {
      const std::string text = std::to_string(n);
      EXPECT_EQ(dfa_matches(*dfa, std::u32string(text.begin(), text.end())), n >= a && n <= b)
          << n << " in [" << a << ", " << b << "]";
    }
  }
}

// A walk through the grammar choosing random allowed characters: every finished sentence
// of a numeric schema parses to a finite double within the bounds.
TEST(SchemaKeywords, NumbersAreFiniteAndWithinBounds) {
  struct Case {
    const char* schema;
    double lo, hi;
  };
  const Case cases[] = {
      {R"({"type": "number", "minimum": -1e300, "maximum": 1e300})", -1e300, 1e300},
      {R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})", -9007199254740991.0,
       9007199254740991.0},
      {R"({"type": "number", "exclusiveMinimum": 0, "maximum": 3})", 0, 3},
      {R"({"type": "number", "minimum": 5})", 5, INFINITY},
      {R"({"type": "integer", "multipleOf": 5, "maximum": -10})", -INFINITY, -10},
  };
  const std::string alphabet = "0123456789-.eE+";
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    auto g = schema_grammar(json::parse(c.schema));
    ASSERT_TRUE(g);
    for (int walk = 0; walk < 300; ++walk) {
      GrammarState state(g);
      std::string text;
      while (!(state.accepting() && (rng() % 4 == 0 || !state.can_continue()))) {
        std::string allowed;
        for (char ch : alphabet)
          if (!state.advance_byte(uint8_t(ch)).dead()) allowed += ch;
        ASSERT_FALSE(allowed.empty()) << c.schema << " stuck after " << text;
        const char ch = allowed[rng() % allowed.size()];
        text += ch;
        state = state.advance_byte(uint8_t(ch));
      }
      const double v = std::stod(text);
      EXPECT_TRUE(std::isfinite(v)) << text;
      EXPECT_GE(v, c.lo) << c.schema << ": " << text;
      EXPECT_LE(v, c.hi) << c.schema << ": " << text;
      const std::string schema = c.schema;
      if (schema.find("exclusiveMinimum") != std::string::npos) {
        EXPECT_GT(v, c.lo) << text;
      }
      if (schema.find("multipleOf") != std::string::npos) {
        EXPECT_EQ(std::stoll(text) % 5, 0) << text;  // past 2^53 a double cannot tell
      }
    }
  }
}

void expect_refused(const std::string& schema, const std::string& fragment) {
  auto r = json_schema_to_gbnf(json::parse(schema));
  ASSERT_FALSE(r.is_ok()) << schema;
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(SchemaKeywords, WhatCannotBeEnforcedIsRefusedWithThePath) {
  expect_refused(R"j({"properties": {"a": {"type": "string", "pattern": "(a)\\1"}}})j",
                 "schema at #/properties/a: 'pattern': pattern: backreferences are not supported at character 4");
  expect_refused(R"j({"type": "string", "pattern": "(?<=a)b"})j", "lookbehind is not supported");
  expect_refused(R"j({"type": "string", "pattern": "a(?=b)"
})j",
                 "lookahead is supported only right after a leading '^'");
  expect_refused(R"j({"type": "string", "pattern": "\\bword"})j", "word boundaries");
  expect_refused(R"j({"type": "string", "pattern": "\\p{L}"})j", "Unicode property escapes");
  expect_refused(R"j({"type": "string", "pattern": "a^b"})j", "anchors are supported only at the ends");
  expect_refused(R"j({"type": "string", "pattern": "(a"})j", "expected ')'");
  expect_refused(R"j({"type": "string", "pattern": "(a{1000}){1000}"})j", "automaton states");
  expect_refused(R"j({"type": "string", "format": "iri-reference"})j",
                 "string format 'iri-reference' is not supported");
  expect_refused(R"j({"type": "string", "format": "ipv4", "pattern": "^x"})j", "no string satisfies 'pattern'");
  expect_refused(R"j({"items": {"type": "array", "uniqueItems": true}})j",
                 "schema at #/items: 'uniqueItems' is not supported");
  expect_refused(R"j({"type": "object", "not": {}})j", "'not' is not supported");
  expect_refused(R"j({"type": "number", "multipleOf": 0.01})j", "'multipleOf' 0.01 is not supported");
  // A state per remainder: refused before its 10^6 states are built (it took 0.7 s and 480 MB).
  expect_refused(R"j({"type": "integer", "multipleOf": 999983, "minimum": -9007199254740991})j",
                 "'multipleOf' 999983 is not supported (whole numbers up to 20000)");
  expect_refused(R"j({"type": "number", "minimum": 0.5})j", "'minimum' 0.500000 on a number");
  expect_refused(R"j({"type": "integer", "minimum": 3, "maximum": 2})j", "no value lies between");
  expect_refused(R"j({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5})j", "no integer in range");
  expect_refused(R"j({"allOf": [{"type": "string"}, {"type": "integer"}]})j", "allOf branches disagree on 'type'");
  expect_refused(R"j({"type": "object", "properties": {"a": {}}, "minProperties": 2})j", "cannot be met");
  expect_refused(R"j({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})j",
                 "minItems cannot be met");
  // Found by fuzz_request_json: a count beyond int64 was converted anyway.
  expect_refused(R"j({"type": "string", "maxLength": 4.91e27})j", "minLength <= maxLength <= 10000");
  expect_refused(R"j({"type": "array", "maxItems": 18446744073709551615})j", "minItems <= maxItems <= 1000");
  expect_refused(R"j({"type": "array", "minItems": 2.5})j", "'minItems' must be an integer");
  EXPECT_TRUE(json_schema_to_gbnf(json::parse(R"j({"type": "array", "minItems": 2.0, "maxItems": 3})j")).is_ok());
}

// Issue 37: `^(c{1,100}){1,100}$` has only 10001 DFA states, but each is a set of thousands
// of NFA states; building them took seconds and 800 MB of a request-preparation thread. The
// work budget refuses it with the schema path, having spent little more than max_steps.
TEST(SchemaKeywords, NestedCountedRepetitionIsRefusedWithinTheBudget) {
  const std::string bomb = "^(c{1,100}){1,100}$";
  AutomatonBudget budget;
  auto dfa = compile_regex(bomb, budget);
  ASSERT_FALSE(dfa.is_ok());
  EXPECT_NE(dfa.status().message().find("needs more than 4000000 steps"), std::string::npos) << dfa.status().message();
  // Checked at least once per DFA edge; one edge costs at most a closure over the NFA (its
  // states and their epsilon moves) and the labels of one DFA state.
  EXPECT_GT(budget.steps(), budget.limits().max_steps);
  EXPECT_LE(budget.steps(), budget.limits().max_steps + 4 * budget.limits().max_nfa_states);
  expect_refused(json{{"type", "string"}, {"pattern", bomb}}.dump(),
                 "schema at #: 'pattern': pattern needs more than 4000000 steps");
  expect_refused(
      json{{"properties", {{"a", {{"type", "array"}, {"items", {{"type", "string"}, {"pattern", bomb}}}}}}}}.dump(),
      "schema at #/properties/a/items: 'pattern': pattern needs more than 4000000 steps");
}

// A class's ranges are its memory and its boundaries' work: 2000 of them repeated 100 times
// count as more than max_nfa_states and are refused before any determinizing.
TEST(SchemaKeywords, RepeatedLargeClassesCountTheirRanges) {
  std::string cls = "^[";
  for (uint32_t k = 0; k < 2000; ++k) {  // U+4E00, U+4E02, ...: 2000 ranges of one character
    const uint32_t c = 0x4e00 + 2 * k;
    cls += char(0xe0 | (c >> 12)), cls += char(0x80 | ((c >> 6) & 0x3f)), cls += char(0x80 | (c & 0x3f));
  }
  AutomatonBudget budget;
  auto dfa = compile_regex(cls + "]{1,100}$", budget);
  ASSERT_FALSE(dfa.is_ok());
  EXPECT_NE(dfa.status().message().find("needs more than 100000 automaton states"), std::string::npos)
      << dfa.status().message();
  EXPECT_EQ(budget.steps(), 0u);
  EXPECT_TRUE(compile_regex(cls + "]{1,10}$").is_ok());  // ten copies fit
}

// Ordinary patterns and every built-in format use a small part of the budget, and still
// constrain the string exactly.
TEST(SchemaKeywords, OrdinaryPatternsFitTheBudgetAndStillConstrain) {
  const std::string email = R"(^[a-z]{1,20}@[a-z]{2,10}\.com$)";
  AutomatonBudget budget;
  ASSERT_TRUE(compile_regex(email, budget).is_ok());
  EXPECT_LT(budget.steps(), budget.limits().max_steps / 1000);
  auto g = schema_grammar(json{{"type", "string"}, {"pattern", email}});
  ASSERT_TRUE(g);
  for (const char* ok : {R"("abc@de.com")", R"("a@bcdefghijk.com")", R"("abcdefghijklmnopqrst@xy.com")"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {R"("abc@d.com")", R"("ABC@de.com")", R"("abc@de.org")", R"("@de.com")",
                          R"("abcdefghijklmnopqrstu@xy.com")", R"("a@bcdefghijkl.com")", R"("abc@de.comx")"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
  for (const char* f : {"date", "time", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uuid"}) {
    AutomatonBudget each;
    EXPECT_TRUE(compile_regex(format_regex(f), each).is_ok()) << f;
    EXPECT_LT(each.steps(), each.limits().max_steps / 100) << f;
  }
}

// One budget per schema: patterns that each fit do not add up to a slow request.
TEST(SchemaKeywords, PatternsOfOneSchemaShareTheBudget) {
  const std::string heavy = "^(c{1,30}){1,30}$";  // c{1,900}, the long way round
  AutomatonBudget alone;
  ASSERT_TRUE(compile_regex(heavy, alone).is_ok());
  ASSERT_GT(alone.steps(), alone.limits().max_steps / 2);
  EXPECT_TRUE(json_schema_to_gbnf(json{{"type", "string"}, {"pattern", heavy}}).is_ok());
  // The same pattern twice is converted once (its rules are shared); a different one spends again.
  const json same = {
      {"type", "object"},
      {"properties",
       {{"a", {{"type", "string"}, {"pattern", heavy}}}, {"b", {{"type", "string"}, {"pattern", heavy}}}}}};
  EXPECT_TRUE(json_schema_to_gbnf(same).is_ok());
  const json two = {{"type", "object"},
                    {"properties",
                     {{"a", {{"type", "string"}, {"pattern", heavy}}},
                      {"b", {{"type", "string"}, {"pattern", "^(d{1,30}){1,30}$"}}}}}};
  expect_refused(two.dump(), "schema at #/properties/b: 'pattern': pattern needs more than 4000000 steps");
}

TEST(SchemaKeywords, AllOfFollowsReferences) {
  auto g =
      schema_grammar(json::parse(R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}},
      "required": ["id"]}}, "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}},
      "required": ["name"], "additionalProperties": false}]})"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, R"({"id": 1, "name": "x"})"));
  EXPECT_FALSE(accepts(g, R"({"name": "x"})"));
  EXPECT_FALSE(accepts(g, R"({"id": 1})"));
}

}  // namespace
}  // namespace autoglm
