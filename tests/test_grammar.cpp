// The grammar engine: GBNF grammars accept exactly their language, JSON Schemas become
// grammars whose sentences validate, token masks equal a brute-force check of every token.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "sample/grammar.h"
#include "sample/json_schema.h"
#include "sample/token_mask.h"

namespace autoglm {
namespace {

using nlohmann::json;

std::shared_ptr<const Grammar> compile(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << text;
  return g ? *g : nullptr;
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  return GrammarState(g).advance_bytes(text).accepting();
}

void expect_language(const std::string& grammar, const std::vector<std::string>& in,
                     const std::vector<std::string>& out) {
  auto g = compile(grammar);
  ASSERT_TRUE(g);
  for (const auto& s : in) EXPECT_TRUE(accepts(g, s)) << "should accept '" << s << "'";
  for (const auto& s : out) EXPECT_FALSE(accepts(g, s)) << "should reject '" << s << "'";
}

TEST(Gbnf, Arithmetic) {
  expect_language(R"G(
    root   ::= expr
    expr   ::= term (("+" | "-") term)*
    term   ::= factor (("*" | "/") factor)*
    factor ::= number | "(" expr ")"
    number ::= [0-9]+
  )G",
                  {"1", "12+3", "2*(3+4)", "((1))", "1-2-3*4/5", "(1+2)*(3-4)"},
                  {"", "+", "1+", "(1", "1)", "()", "1 + 2", "a", "1**2", "(1+2"});
}

TEST(Gbnf, List) {
  expect_language(R"(root ::= "[" ( item ( ", " item )* )? "]"   # comma-separated words
                     item ::= [a-z]{1,5})",
                  {"[]", "[a]", "[ab, cde]", "[abcde, x, y]"},
                  {"[", "[a,b]", "[a, ]", "[abcdef]", "[A]", "a", "[a, b"});
}

TEST(Gbnf, Date) {
  expect_language(R"(
    root  ::= year "-" month "-" day
    year  ::= [0-9]{4}
    month ::= "0" [1-9] | "1" [0-2]
    day   ::= "0" [1-9] | [12] [0-9] | "3" [01]
  )",
                  {"2024-01-31", "1999-12-01", "0000-10-10"},
                  {"2024-13-01", "2024-00-10", "2024-1-01", "24-01-01", "2024-01-32", "2024-01-00", "2024-01-011"});
}

TEST(Gbnf, ClassesEscapesAndUnicode) {
  expect_language(R"(root ::= [^\n"]+ "\"" [\u00e0-\u00ff] . "\x41")",
                  {"ab\"\xc3\xa9xA",
                   "\xe4\xbd\xa0\"\xc3\xa0\xf0\x9f\xa6\x99"
                   "A"},
                  {"a\nb\"\xc3\xa9xA", "ab\"exA", "ab\"\xc3\xa9xB"});
  // An overlong encoding of '"' is not the character.
  EXPECT_FALSE(accepts(compile(R"(root ::= "\"")"), "\xc0\xa2"));
}

TEST(Gbnf, ErrorsSayWhere) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    auto g = Grammar::parse(text);
    ASSERT_FALSE(g.is_ok()) << text;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  };
  expect_error("root ::= \"a", "line 1, column 12: unterminated string literal");
  expect_error("root ::= a\n", "rule 'a' is used but not defined");
  expect_error("item ::= \"x\"", "no 'root' rule");
  expect_error("root ::= root \"x\" | \"y\"", "rule 'root' is left-recursive");
  expect_error("root ::= [z-a]", "line 1, column 14: character range is reversed");
  expect_error("root ::= \"a\"{3,2}", "repetition bound is below its count");
  expect_error("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
  expect_error("root ::= \"a\" )", "line 1, column 14: unbalanced ')'");
  expect_error("root ::= \"a\" @", "unexpected character '@'");
}

std::string rule_name(int k) {
  std::string name = "a";
  name += std::to_string(k);
  return name;
}

// aK ::= aK+1 "0" | aK+1 "1" for K < levels: 2^levels parses wait at the start.
std::string binary_levels(int levels) {
  std::string text;
  for (int k = 0; k < levels; ++k) {
    const std::string next = rule_name(k + 1);
    text += rule_name(k);
    text += " ::= ";
    text += next;
    text += " \"0\" | ";
    text += next;
    text += " \"1\"\n";
  }
  return text;
}

// Hostile grammars end with an error (or parse) in bounded time and memory, never a crash.
TEST(GbnfLimits, LongRuleChainsParseWithoutRecursion) {
  std::string chain = "root ::= a0\n";
  for (int i = 0; i < 100000; ++i) chain += rule_name(i) + " ::= " + rule_name(i + 1) + "\n";
  GrammarLimits roomy;  // 2 MB of text: over the default grammar_bytes
  roomy.max_text_bytes = 8 << 20;
  auto g = Grammar::parse(chain + "a100000 ::= \"x\"\n", roomy);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_TRUE(GrammarState(*g).advance('x').accepting());
  EXPECT_EQ((*g)->min_length((*g)->root()), 1);
  auto cycle = Grammar::parse(chain + "a100000 ::= a0 \"x\"\n", roomy);
  ASSERT_FALSE(cycle.is_ok());
  EXPECT_NE(cycle.status().message().find("left-recursive"), std::string::npos) << cycle.status().message();
}

TEST(GbnfLimits, TextOverTheByteLimitIsRefusedBeforeParsing) {
  GrammarLimits small;
  small.max_text_bytes = 64;
  const std::string text = "root ::= \"a\" # " + std::string(100, 'x');
  ASSERT_TRUE(Grammar::parse(text).is_ok());
  auto g = Grammar::parse(text, small);
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("limit grammar_bytes"), std::string::npos) << g.status().message();
}

TEST(GbnfLimits, RepetitionsThatAddUpAreRefused) {
  std::string many = "root ::=";
  for (int i = 0; i < 300; ++i) many += " \"a\"{0,10000}";
  auto g = Grammar::parse(many + "\n");
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("expands to more than"), std::string::npos) << g.status().message();
}

TEST(GbnfLimits, NestedRepetitionsAndAlternativesAreBounded) {
  auto nested = Grammar::parse("root ::= (\"a\"{0,10000}){0,10000}\n");
  ASSERT_FALSE(nested.is_ok());
  EXPECT_NE(nested.status().message().find("parses at its start"), std::string::npos) << nested.status().message();
  auto wide = Grammar::parse("root ::= a0\n" + binary_levels(18) + "a18 ::= \"x\"\n");
  ASSERT_FALSE(wide.is_ok());
  EXPECT_NE(wide.status().message().find("parses at its start"), std::string::npos) << wide.status().message();
  // Ten levels (512 parses) stay well inside the bound and match.
  auto ok = Grammar::parse("root ::= a0\n" + binary_levels(10) + "a10 ::= \"x\"\n");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_TRUE(GrammarState(*ok).advance_bytes("x0110100101").accepting());
}

TEST(JsonSchema, SentencesValidateAndOthersDoNot) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 8},
      "age": {"type": "integer", "minimum": 0},
      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 2},
      "kind": {"anyOf": [{"const": 1}, {"type": "null"}]},
      "when": {"type": "string", "format": "date"},
      "next": {"$ref": "#/$defs/node"}
    },
    "required": ["name", "tags"],
    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}
  })");
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto g = compile(*gbnf);
  ASSERT_TRUE(g);
  // Keys come in the schema's order as nlohmann::json stores it (sorted).
  for (const std::string ok : {R"({"name": "bo", "tags": ["a"]})", R"({"name":"","tags":["a", "b"],"age": 42})",
                               R"({"name": "x\n", "tags": ["b"], "kind": 1, "next": {"next": {}}})",
                               R"({"name": "\u00e9t\u00e9", "tags": ["a"], "when": "2024-02-28"})"})
    EXPECT_TRUE(accepts(g, ok)) << ok << "\n" << *gbnf;
  for (const std::string bad :
       {R"({"tags": ["a"]})", R"({"name": "bo", "tags": []})", R"({"name": "bo", "tags": ["a", "b", "a"]})",
        R"({"name": "123456789", "tags": ["a"]})", R"({"name": "bo", "tags": ["c"]})",
        R"({"name": "bo", "tags": ["a"], "age": -1})", R"({"name": "bo", "tags": ["a"], "when": "2024-02-30"})",
        R"({"name": "bo", "tags": ["a"], "other": 1})", R"({"name": "bo" "tags": ["a"]})"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(JsonSchema, UnsupportedKeywordsAreRefusedWithThePath) {
  auto r =
      json_schema_to_gbnf(json::parse(R"({"type": "object", "properties": {"a": {"type": "string", "not": {}}}})"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("schema at #/properties/a: 'not' is not supported"), std::string::npos)
      << r.status().message();
  r = json_schema_to_gbnf(json::parse(R"({"$ref": "#/$defs/missing"})"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("points to nothing"), std::string::npos);
  r = json_schema_to_gbnf(json::parse(R"({"type": "array", "minItems": "3"})"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'minItems' must be an integer"), std::string::npos) << r.status().message();
  r = json_schema_to_gbnf(json::parse(R"({"type": "strung"})"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown type 'strung'"), std::string::npos);
}

TEST(JsonSchema, ReferenceChainsCountTowardTheDepthLimit) {
  // d0 -> d1 -> ... -> d20000: each $ref used to start the depth count again, so the chain
  // recursed 20 000 deep (a stack overflow under ASan).
  json defs = json::object();
  const int n = 20000;
  const auto name = [](int i) {
    std::string s = "d";
    s += std::to_string(i);
    return s;
  };
  for (int i = 0; i < n; ++i) {
    std::string ref = "#/$defs/";
    ref += name(i + 1);
    defs[name(i)] = {{"$ref", ref}};
  }
  defs[name(n)] = {{"type", "integer"}};
  auto r = json_schema_to_gbnf(json{{"$defs", defs}, {"$ref", "#/$defs/d0"}});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("nested too deeply"), std::string::npos) << r.status().message();
  // A short chain and a recursive schema still convert.
  EXPECT_TRUE(json_schema_to_gbnf(json::parse(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "string"}},
                                                 "$ref": "#/$defs/a"})"))
                  .is_ok());
  EXPECT_TRUE(json_schema_to_gbnf(json::parse(R"({"$defs": {"node": {"type": "object", "properties":
                                                 {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"})"))
                  .is_ok());
}

TEST(JsonSchema, NumbersAreAlwaysFiniteDoubles) {
  auto gbnf = json_schema_to_gbnf(json::parse(R"({"type": "number"})"));
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto g = compile(*gbnf);
  ASSERT_TRUE(g);
  for (const std::string ok : {"0", "-1.5", "2e10", "-3.25E-7", "9999999999999999.999999999999999e99"}) {
    EXPECT_TRUE(accepts(g, ok)) << ok;
    EXPECT_TRUE(std::isfinite(std::stod(ok))) << ok;
  }
  for (const std::string bad : {"1e999", "1e308", "01", "1.", "+1", "99999999999999999"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(JsonSchema, AnyObject) {
  auto g = compile(json_object_gbnf());
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, R"({"a": [1, -2.5e3, true, null, {"b": "c"}]})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, R"({"a": 01})"));
}

// The mask equals checking every token on its own, on a vocabulary with multi-byte and
// grammar-spanning tokens.
TEST(TokenMask, EqualsBruteForceAndCaches) {
  std::vector<std::string> vocab = {"",   "{",   "}",    "{\"",  "\"",       "a",   "ab", "\":",     " ", "1",
                                    "12", "\"}", "\xc3", "\xa9", "\xc3\xa9", "é\"", ",",  "\"a\": ", "x", "null"};
  auto g = compile(R"(root ::= "{" ( "\"" [a-z\u00e9]* "\":" " "? num ( "," "\"" [a-z]* "\":" num )* )? "}"
                     num ::= [0-9]+ | "null")");
  ASSERT_TRUE(g);
  auto trie = std::make_shared<TokenTrie>(vocab);
  const int32_t eos = 0;
  GrammarMatcher m(g, trie, {eos});
  GrammarState brute(g);
  std::mt19937 rng(7);
  for (int step = 0; step < 40; ++step) {
    std::vector<float> logits(vocab.size(), 0.0f);
    const bool any = m.apply(logits.data(), int32_t(vocab.size()));
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < int32_t(vocab.size()); ++id) {
      const bool expect =
          id == eos ? brute.accepting() : !vocab[size_t(id)].empty() && !brute.advance_bytes(vocab[size_t(id)]).dead();
      EXPECT_EQ(!std::isinf(logits[size_t(id)]), expect) << "step " << step << " token " << id;
      if (expect) allowed.push_back(id);
    }
    ASSERT_EQ(any, !allowed.empty());
    if (allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    if (pick == eos) break;
    ASSERT_TRUE(m.accept(pick));
    brute = brute.advance_bytes(vocab[size_t(pick)]);
  }
  EXPECT_GT(m.masks_built(), 0);
  // A token the grammar does not admit is refused and leaves the state alone.
  std::vector<float> before(vocab.size(), 0.0f), after(vocab.size(), 0.0f);
  m.apply(before.data(), int32_t(vocab.size()));
  int32_t refused = -1;
  for (int32_t id = 1; id < int32_t(vocab.size()) && refused < 0; ++id)
    if (std::isinf(before[size_t(id)])) refused = id;
  ASSERT_GE(refused, 0);
  EXPECT_FALSE(m.accept(refused));
  m.apply(after.data(), int32_t(vocab.size()));
  for (size_t id = 0; id < vocab.size(); ++id) EXPECT_EQ(std::isinf(before[id]), std::isinf(after[id])) << id;
}

// The fewest tokens to a whole sentence, plus the end token if there is one: breadth-first
// over every token of a tiny vocabulary (the definition).
int64_t brute_shortest(const GrammarState& from, const std::vector<std::string>& vocab, bool end_token) {
  std::set<std::string> seen = {from.key()};
  std::vector<GrammarState> layer = {from};
  for (int64_t depth = 0; depth < 64 && !layer.empty(); ++depth) {
    std::vector<GrammarState> next;
    for (const GrammarState& s : layer) {
      if (s.accepting()) return depth + (end_token ? 1 : 0);
      for (const std::string& t : vocab) {
        if (t.empty()) continue;
        GrammarState n = s.advance_bytes(t);
        if (!n.dead() && seen.insert(n.key()).second) next.push_back(std::move(n));
      }
    }
    layer = std::move(next);
  }
  return -1;
}

std::vector<std::string> with_single_bytes(std::vector<std::string> vocab, int from, int to) {
  for (int b = from; b <= to; ++b) vocab.push_back(std::string(1, char(b)));
  return vocab;
}

// Random walks (admissible tokens drawn uniformly) from the start: at every state on the way
// the matcher's count equals the brute-force one. `eos`: the end token's id (-1: none).
void expect_shortest_counts(const std::shared_ptr<const Grammar>& g, const std::vector<std::string>& vocab, int32_t eos,
                            int runs) {
  auto trie = std::make_shared<TokenTrie>(vocab);
  std::mt19937 rng(5);
  for (int run = 0; run < runs; ++run) {
    GrammarMatcher m(g, trie, eos >= 0 ? std::vector<int32_t>{eos} : std::vector<int32_t>{});
    GrammarState brute(g);
    std::string text;
    for (int step = 0; step < 24; ++step) {
      ASSERT_EQ(m.shortest_completion(), brute_shortest(brute, vocab, eos >= 0)) << "after '" << text << "'";
      std::vector<float> logits(vocab.size(), 0.0f);
      if (!m.apply(logits.data(), int32_t(vocab.size()))) break;
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < int32_t(vocab.size()); ++id)
        if (!std::isinf(logits[size_t(id)]) && id != eos) allowed.push_back(id);
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept(pick));
      brute = brute.advance_bytes(vocab[size_t(pick)]);
      text += vocab[size_t(pick)];
    }
  }
}

const char* kWeatherSchema = R"({"type": "object", "properties": {"city": {"type": "string"},
    "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]})";

// The shortest completion is counted in the vocabulary's tokens, not in characters.
TEST(TokenMask, ShortestCompletionIsTheFewestTokens) {
  auto g = compile(*json_schema_to_gbnf(json::parse(kWeatherSchema)));
  ASSERT_TRUE(g);
  // Printable ASCII and some longer pieces (no byte tokens: no bound from bytes).
  const auto vocab = with_single_bytes({"", "{\"", "city", "\":", "\":\"", "\",\"", "unit", "cel", "sius", "celsius",
                                        "fahren", "heit\"}", "\"}", " \"", "\xc3\xa9", "\xc3", "\xa9", "ab", "\\u00"},
                                       0x20, 0x7e);
  auto trie = std::make_shared<TokenTrie>(vocab);
  EXPECT_FALSE(trie->spells_every_byte());
  GrammarMatcher start(g, trie, {0});
  EXPECT_EQ(start.shortest_completion(), 9);  // {" city ": " ", " unit ": " celsius "} end
  expect_shortest_counts(g, vocab, 0, 40);
}

// With a token for every byte the bytes left bound the count; tokens ending inside a
// character count the rest of it one byte at a time.
TEST(TokenMask, ShortestCompletionWithByteTokens) {
  auto g = compile(R"(root ::= "{" ws "\"t\":" ws ( "\"°C\"" | "\"°F\"" | "\"kelvin\"" | [0-9]+ ) ws "," ws name ws "}"
                      name ::= "\"n\":" ws "\"" [a-z]* "\""
                      ws   ::= " "?)");
  ASSERT_TRUE(g);
  const auto vocab =
      with_single_bytes({"", "{\"t\":", "\"kelvin\"", "\"°", "°C", "\xc2", "\"n\":\"", "ab", "\"}", ", "}, 0x00, 0xff);
  EXPECT_TRUE(TokenTrie(vocab).spells_every_byte());
  expect_shortest_counts(g, vocab, 0, 60);
}

// Without an end token the text ends where max_tokens cuts it: nothing to count for the end.
TEST(TokenMask, ShortestCompletionWithoutAnEndToken) {
  auto g = compile("root ::= [a-c]{3,5}");
  ASSERT_TRUE(g);
  const std::vector<std::string> vocab = {"", "a", "b", "c", "ab", "bca"};
  auto trie = std::make_shared<TokenTrie>(vocab);
  EXPECT_EQ(GrammarMatcher(g, trie, {0}).shortest_completion(), 2);  // bca, end
  EXPECT_EQ(GrammarMatcher(g, trie, {}).shortest_completion(), 1);   // bca
  expect_shortest_counts(g, vocab, -1, 20);
}

// Random walks under every budget from the shortest completion upward always end in a whole
// sentence: near the end only tokens after which the text can still be finished remain.
// Token 0 is the end token, if `end_token`; without one the text ends when the budget does.
void expect_budgets_end_in_sentences(const std::shared_ptr<const Grammar>& g, const std::vector<std::string>& vocab,
                                     int runs, bool end_token = true) {
  auto trie = std::make_shared<TokenTrie>(vocab);
  std::mt19937 rng(11);
  for (int run = 0; run < runs; ++run) {
    GrammarMatcher m(g, trie, end_token ? std::vector<int32_t>{0} : std::vector<int32_t>{});
    const int64_t budget = m.shortest_completion() + run % 12;
    std::string text;
    bool ended = !end_token;
    for (int64_t used = 0; used < budget; ++used) {
      std::vector<float> logits(vocab.size(), 0.0f);
      if (!m.apply(logits.data(), int32_t(vocab.size()), budget - used)) break;  // nothing may follow
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < int32_t(vocab.size()); ++id)
        if (!std::isinf(logits[size_t(id)])) allowed.push_back(id);
      const int32_t pick = allowed[rng() % allowed.size()];
      if (end_token && pick == 0) {
        ended = true;
        break;
      }
      ASSERT_TRUE(m.accept(pick));
      text += vocab[size_t(pick)];
    }
    EXPECT_TRUE(ended) << "budget " << budget << " ran out inside: " << text;
    EXPECT_TRUE(accepts(g, text)) << "budget " << budget << ": " << text;
  }
}

TEST(TokenMask, BudgetEndsInAWholeSentence) {
  auto object = compile(json_object_gbnf());
  ASSERT_TRUE(object);
  expect_budgets_end_in_sentences(
      object, {"", "{", "}", "[", "]", "\"", ":", ",", "a", "1", "{\"", "\":[", "[[", "{\"a\":{"}, 300);
  auto weather = compile(*json_schema_to_gbnf(json::parse(kWeatherSchema)));
  ASSERT_TRUE(weather);
  // Byte tokens (the bound from bytes) and pieces longer than a character.
  expect_budgets_end_in_sentences(
      weather,
      with_single_bytes(
          {"", "{\"", "city", "\":\"", "\",\"", "unit", "cel", "sius", "fahrenheit\"}", "\"}", "\xe4\xb8"}, 0x00, 0xff),
      300);
}

}  // namespace
}  // namespace autoglm
