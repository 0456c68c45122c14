// The Anthropic Messages API: a Messages body as the chat request it becomes (blocks, tools,
// tool_choice, thinking), errors in Anthropic's shape naming the Messages field, and the reply
// and its stream rendered from the same typed events as chat completions, on a thinking
// model's own template (Qwen3's) with the reply forced by a grammar.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "server/api/anthropic_messages.h"
#include "server/api/anthropic_request.h"
#include "server_test_util.h"
#include "sse_test_util.h"

namespace autoglm {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

TEST(AnthropicToChat, BlocksBecomeTurnsToolCallsAndToolMessages) {
  const ojson body = ojson::parse(R"({
    "model": "m", "max_tokens": 100, "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
        {"type": "text", "text": "Thanks"}]}],
    "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "stop_sequences": ["END"], "metadata": {"user_id": "u1"}, "top_k": 5,
    "thinking": {"type": "enabled", "budget_tokens": 50}})");
  const ojson chat = anthropic_to_chat(body);
  const ojson expected_messages = ojson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Use the tool.",
     "tool_calls": [{"id": "toolu_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    {"role": "user", "content": "Thanks"}])");
  EXPECT_EQ(chat["messages"], expected_messages) << chat.dump(2);
  EXPECT_EQ(chat["tools"][0]["function"]["parameters"], ojson({{"type", "object"}}));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["stop"], ojson::array({"END"}));
  EXPECT_EQ(chat["user"], "u1");
  EXPECT_EQ(chat["top_k"], 5);
  EXPECT_EQ(chat["max_tokens"], 100);
  EXPECT_EQ(chat["thinking_budget_tokens"], 50);
  EXPECT_EQ(chat["chat_template_kwargs"]["enable_thinking"], true);
}

// Image blocks become the chat API's image_url parts in order with the text around them:
// base64 sources as data: URLs, url sources as they are.
TEST(AnthropicToChat, ImageBlocksBecomeImageUrlParts) {
  const ojson body = ojson::parse(R"({
    "max_tokens": 10,
    "messages": [{"role": "user", "content": [
      {"type": "text", "text": "Before "},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
      {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
      {"type": "text", "text": "after"}]}]})");
  const ojson expected = ojson::parse(R"([{"role": "user", "content": [
    {"type": "text", "text": "Before "},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
    {"type": "text", "text": "after"}]}])");
  EXPECT_EQ(anthropic_to_chat(body)["messages"], expected) << anthropic_to_chat(body).dump(2);
}

TEST(AnthropicToChat, ToolChoiceAndThinkingForms) {
  ojson body = ojson::parse(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}]})");
  body["tool_choice"] = {{"type", "tool"}, {"name", "f"}};
  EXPECT_EQ(anthropic_to_chat(body)["tool_choice"]["function"]["name"], "f");
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_EQ(anthropic_to_chat(body)["tool_choice"], "none");
  body.erase("tool_choice");
  body["thinking"] = {{"type", "disabled"}};
  const ojson off = anthropic_to_chat(body);
  EXPECT_EQ(off["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_FALSE(off.contains("thinking_budget_tokens"));
  body.erase("max_tokens");
  EXPECT_FALSE(anthropic_to_chat(body, true).contains("max_tokens")) << "count_tokens asks for none";
}

// The field each bad body is refused for, as Anthropic names it.
std::string refused_field(const std::string& body_text) {
  try {
    anthropic_to_chat(ojson::parse(body_text));
  } catch (const ParamError& e) {
    return e.param;
  }
  return "(accepted)";
}

TEST(AnthropicToChat, BadBodiesNameTheField) {
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(refused_field("{" + m + "}"), "max_tokens");
  EXPECT_EQ(refused_field(R"({"max_tokens": 0, )" + m + "}"), "max_tokens");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": []})"), "messages");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "system", "content": "x"}]})"), "messages.0.role");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
            {"type": "tool_result", "content": "r"}]}]})"),
            "messages.0.content.1.tool_use_id");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "image",
            "source": {"type": "file", "file_id": "f"}}]}]})"),
            "messages.0.content.0.source.type");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "image",
            "source": {"type": "base64", "data": "AA=="}}]}]})"),
            "messages.0.content.0.source.media_type");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "user", "content": [{"type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": ""}}]}]})"),
            "messages.0.content.0.type");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, "messages": [{"role": "assistant", "content": [{"type": "tool_use",
            "id": "t", "name": "f", "input": "x"}]}]})"),
            "messages.0.content.0.input");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "thinking": {"type": "enabled", "budget_tokens": 9}})"),
            "thinking.budget_tokens");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "thinking": {"type": "enabled"}})"),
            "thinking.budget_tokens");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "tools": [{"name": "f"}]})"), "tools.0.input_schema");
  EXPECT_EQ(
      refused_field(R"({"max_tokens": 9, )" + m + R"(, "tools": [{"type": "web_search_20250305", "name": "w"}]})"),
      "tools.0.type");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "tool_choice": {"type": "any"}})"), "tool_choice");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "stop_sequences": ["a", 1]})"), "stop_sequences.1");
  EXPECT_EQ(refused_field(R"({"max_tokens": 9, )" + m + R"(, "metadata": {"user_id": 5}})"), "metadata.user_id");
}

TEST(AnthropicToChat, ChatFieldsAreNamedAsTheMessagesFieldsTheyCameFrom) {
  EXPECT_EQ(anthropic_param("stop"), "stop_sequences");
  EXPECT_EQ(anthropic_param("user"), "metadata.user_id");
  EXPECT_EQ(anthropic_param("tools[2].function.parameters.properties"), "tools.2.input_schema.properties");
  EXPECT_EQ(anthropic_param("tools[0].function.name"), "tools.0.name");
  EXPECT_EQ(anthropic_param("messages[3].content"), "messages");
  EXPECT_EQ(anthropic_param("messages.0.content.1.tool_use_id"), "messages.0.content.1.tool_use_id");
  EXPECT_EQ(anthropic_param("thinking_budget_tokens"), "thinking.budget_tokens");
  EXPECT_EQ(anthropic_param("temperature"), "temperature");
}

TEST(AnthropicReply, ErrorsTakeAnthropicsShape) {
  const Reply r = anthropic_reply(error_reply(404, "no model 'x'", "model"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(
      json::parse(r.body),
      json::parse(R"({"type": "error", "error": {"type": "not_found_error", "message": "model: no model 'x'"}})"));
  EXPECT_EQ(json::parse(anthropic_reply(error_reply(429, "slow down")).body)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(json::parse(anthropic_reply(error_reply(401, "k", "", "authentication_error")).body)["error"]["type"],
            "authentication_error");
  Reply fine = json_reply(200, {{"input_tokens", 3}});
  EXPECT_EQ(anthropic_reply(fine).body, fine.body);
}

class MessagesServer : public test::ServerTest {
 protected:
  void start_qwen3() {
    ServerConfig cfg;
    start_qwen3(cfg);
  }
  void start_qwen3(ServerConfig cfg) {
    AUTOGLM_REQUIRE_SHARED("models/hf-tokenizers/qwen3/tokenizer_config.json");
    const json tc = json::parse(test::read_file(test::shared_path("models/hf-tokenizers/qwen3/tokenizer_config.json")));
    const std::string path = ::testing::TempDir() + "/qwen3_messages.jinja";
    std::ofstream(path) << tc["chat_template"].get<std::string>();
    cfg.runtime.chat_template = path;
    start(cfg);
  }
  test::HttpResult messages(json body, const std::vector<std::pair<std::string, std::string>>& headers = {},
                            const std::string& path = "/v1/messages") {
    return test::http_call(port, "POST", path, body.dump(), headers);
  }
  static json hello(const std::string& grammar) {
    return {
        {"max_tokens", 256}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"grammar", grammar}};
  }
};

constexpr const char* kThinkThenHello = R"(root ::= "<think>Greet back.</think>\n\nHello there")";
constexpr const char* kThinkThenCall =
    R"(root ::= "<think>Use the tool.</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")";

json weather_tools() {
  return json::parse(R"([{"name": "get_weather", "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])");
}

TEST_F(MessagesServer, AMessageWithThinkingAndText) {
  start_qwen3();
  const auto r = messages(hello(kThinkThenHello));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(m["content"].size(), 2u) << r.body;
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "Greet back.");
  EXPECT_EQ(m["content"][1], json({{"type", "text"}, {"text", "Hello there"}}));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_GT(m["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_GT(m["usage"]["output_tokens"].get<int>(), 0);
}

TEST_F(MessagesServer, TheStreamFollowsAnthropicsEventSequence) {
  start_qwen3();
  json body = hello(kThinkThenHello);
  body["stream"] = true;
  const auto r = messages(body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> names;
  std::string thinking, text;
  json message_delta;
  for (const auto& [name, data] : test::sse_events(r.body)) {
    ASSERT_FALSE(data.is_discarded()) << r.body;
    EXPECT_EQ(data["type"], name);
    if (names.empty() || names.back() != name) names.push_back(name);
    if (name == "message_start") {
      EXPECT_GT(data["message"]["usage"]["input_tokens"].get<int>(), 0);
    }
    if (name == "content_block_delta" && data["delta"]["type"] == "thinking_delta")
      thinking += data["delta"]["thinking"].get<std::string>();
    if (name == "content_block_delta" && data["delta"]["type"] == "text_delta")
      text += data["delta"]["text"].get<std::string>();
    if (name == "message_delta") message_delta = data;
  }
  const std::vector<std::string> expected = {"message_start",       "ping",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  "content_block_start",
                                             "content_block_delta", "content_block_stop",
                                             "message_delta",       "message_stop"};
  EXPECT_EQ(names, expected) << r.body;
  EXPECT_EQ(thinking, "Greet back.");
  EXPECT_EQ(text, "Hello there");
  EXPECT_EQ(message_delta["delta"]["stop_reason"], "end_turn");
  EXPECT_GT(message_delta["usage"]["output_tokens"].get<int>(), 0);
}

TEST_F(MessagesServer, AToolRoundTrip) {
  start_qwen3();
  json body = hello(kThinkThenCall);
  body["tools"] = weather_tools();
  const auto r = messages(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_EQ(m["content"].size(), 2u) << r.body;
  const json& call = m["content"][1];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], json({{"city", "Paris"}}));
  EXPECT_EQ(call["id"].get<std::string>().rfind("toolu_", 0), 0u) << call;

  body["stream"] = true;  // streamed: the call's input as input_json_delta pieces
  std::string partial;
  for (const auto& [name, data] : test::sse_events(messages(body).body))
    if (name == "content_block_delta" && data["delta"]["type"] == "input_json_delta")
      partial += data["delta"]["partial_json"].get<std::string>();
  EXPECT_EQ(json::parse(partial), json({{"city", "Paris"}}));

  json next = hello(kThinkThenHello);  // the result goes back, after the assistant's turn as it was
  next["tools"] = weather_tools();
  next["messages"].push_back({{"role", "assistant"}, {"content", m["content"]}});
  next["messages"].push_back(
      {{"role", "user"},
       {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", call["id"]}, {"content", "sunny"}}})}});
  const auto answer = messages(next);
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(json::parse(answer.body)["content"][1]["text"], "Hello there");
}

TEST_F(MessagesServer, CountTokensIsThePromptTheChatWouldRender) {
  start_qwen3();
  const json counted_body = {{"system", "Be brief."},
                             {"messages", json::array({{{"role", "user"}, {"content", "How are you?"}}})}};
  const auto counted = messages(counted_body, {}, "/v1/messages/count_tokens");
  ASSERT_EQ(counted.status, 200) << counted.body;
  const json chat = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", "How are you?"}}})},
                     {"max_tokens", 1}};
  const auto r = test::http_call(port, "POST", "/v1/chat/completions", chat.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(counted.body)["input_tokens"], json::parse(r.body)["usage"]["prompt_tokens"]);
}

TEST_F(MessagesServer, AStopSequenceIsReported) {
  start_qwen3();
  json body = hello(R"(root ::= "Hello there friend")");
  body["stop_sequences"] = {"there"};
  const auto r = messages(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "there");
  EXPECT_EQ(m["content"][0]["text"], "Hello ");
}

void expect_anthropic_error(const test::HttpResult& r, int status, const std::string& type,
                            const std::string& message_start) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_EQ(j["error"]["message"].get<std::string>().rfind(message_start, 0), 0u) << r.body;
}

TEST_F(MessagesServer, ErrorsAreInAnthropicsShapeAndNameTheField) {
  start_qwen3();
  json body = hello(kThinkThenHello);
  body.erase("max_tokens");
  expect_anthropic_error(messages(body), 400, "invalid_request_error", "max_tokens:");
  body = hello(kThinkThenHello);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 256}};
  expect_anthropic_error(messages(body), 400, "invalid_request_error", "thinking.budget_tokens:");
  body = hello(kThinkThenHello);
  body["model"] = "no-such-model";
  expect_anthropic_error(messages(body), 404, "not_found_error", "");
  body = hello(kThinkThenHello);
  body["temperature"] = "hot";
  expect_anthropic_error(messages(body), 400, "invalid_request_error", "temperature:");
  body = hello(kThinkThenHello);
  body.erase("grammar");
  body["tools"] = json::parse(R"([{"name": "f", "input_schema": {"type": "object", "properties": 5}}])");
  body["tool_choice"] = {{"type", "any"}};
  expect_anthropic_error(messages(body), 400, "invalid_request_error", "tools: schema at #");
  const auto broken = test::http_call(port, "POST", "/v1/messages", "{not json");
  expect_anthropic_error(broken, 400, "invalid_request_error", "");
  // The other APIs keep OpenAI's shape.
  const auto chat = test::http_call(port, "POST", "/v1/chat/completions", "{\"messages\": 5}");
  EXPECT_EQ(chat.status, 400);
  EXPECT_TRUE(json::parse(chat.body)["error"].contains("param")) << chat.body;
}

TEST_F(MessagesServer, TheKeyComesFromXApiKeyOrAuthorization) {
  ServerConfig cfg;
  cfg.api_keys = {"sk-right"};
  start_qwen3(cfg);
  const json body = hello(kThinkThenHello);
  EXPECT_EQ(messages(body, {{"x-api-key", "sk-right"}, {"anthropic-version", "2023-06-01"}}).status, 200);
  EXPECT_EQ(messages(body, {{"Authorization", "Bearer sk-right"}}).status, 200);
  expect_anthropic_error(messages(body, {{"x-api-key", "sk-wrong"}}), 401, "authentication_error", "");
  expect_anthropic_error(messages(body), 401, "authentication_error", "");
  EXPECT_EQ(test::http_call(port, "GET", "/v1/models", "", {{"x-api-key", "sk-right"}}).status, 200);
}

}  // namespace
}  // namespace autoglm
