// The Batch API: multipart forms and batch input files are read with what is wrong named (the
// line); over HTTP on stories260K, every line of a batch is answered exactly once, as its
// synchronous request is, through a cancel, a restart and a full store.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "server/api.h"
#include "server/api/multipart.h"
#include "server/http/http_server.h"
#include "server/jobs/batch_input.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {
namespace {

using json = nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;

const std::string kBoundary = "----autoglm-test-7MA4YWxk";

std::string form(const std::vector<std::array<std::string, 3>>& fields) {  // name, filename, data
  std::string body;
  for (const auto& [name, filename, data] : fields) {
    body += "--" + kBoundary + "\r\nContent-Disposition: form-data; name=\"" + name + "\"";
    if (!filename.empty()) body += "; filename=\"" + filename + "\"\r\nContent-Type: application/jsonl";
    body += "\r\n\r\n" + data + "\r\n";
  }
  return body + "--" + kBoundary + "--\r\n";
}

const std::string kFormType = "multipart/form-data; boundary=" + kBoundary;

TEST(Multipart, ReadsFieldsAndFiles) {
  auto parts = parse_multipart(kFormType, form({{"purpose", "", "batch"}, {"file", "in.jsonl", "a\r\nb\n"}}));
  ASSERT_TRUE(parts.is_ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(form_field(*parts, "purpose")->data, "batch");
  const FormPart* file = form_field(*parts, "file");
  EXPECT_EQ(file->filename, "in.jsonl");
  EXPECT_EQ(file->content_type, "application/jsonl");
  EXPECT_EQ(file->data, "a\r\nb\n");  // line breaks inside a part are its own
  EXPECT_EQ(form_field(*parts, "other"), nullptr);
  auto quoted = parse_multipart("multipart/form-data; boundary=\"" + kBoundary + "\"", form({{"x", "", "1"}}));
  ASSERT_TRUE(quoted.is_ok());
  EXPECT_EQ(quoted->at(0).data, "1");
}

TEST(Multipart, MalformedBodiesAreErrorsSayingWhat) {
  const std::string good = form({{"file", "in.jsonl", "x"}});
  struct Case {
    std::string type, body, says;
  };
  const std::vector<Case> cases = {
      {"application/json", good, "must be multipart/form-data"},
      {"multipart/form-data", good, "no usable boundary"},
      {kFormType, "no boundary here", "no boundary line"},
      {kFormType, good.substr(0, good.size() - 20), "does not end with the closing boundary"},
      {kFormType, "--" + kBoundary + "\r\nContent-Disposition: form-data\r\n\r\nx\r\n--" + kBoundary + "--",
       "part 1: Content-Disposition has no name"},
      {kFormType, "--" + kBoundary + "\r\nX-Other: 1\r\n\r\nx\r\n--" + kBoundary + "--",
       "part 1 has no Content-Disposition"},
      {kFormType, "--" + kBoundary + "\r\nbroken header\r\n\r\nx\r\n--" + kBoundary + "--", "without ':'"},
  };
  for (const Case& c : cases) {
    auto parts = parse_multipart(c.type, c.body);
    ASSERT_FALSE(parts.is_ok()) << c.says;
    EXPECT_NE(parts.status().message().find(c.says), std::string::npos) << parts.status().message();
  }
  // A body cut anywhere before its closing "--" is an error (never a crash, never a part cut short).
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(parse_multipart(kFormType, good.substr(0, n)).is_ok(), n >= good.size() - 2) << n;
}

std::string line(const std::string& id, const std::string& url, const std::string& body) {
  return R"({"custom_id": ")" + id + R"(", "method": "POST", "url": ")" + url + R"(", "body": )" + body + "}";
}

TEST(BatchInput, ReadsEveryLineAndNamesTheFirstBadOne) {
  const std::string chat = "/v1/chat/completions";
  auto lines = parse_batch_input(line("a", chat, R"({"messages": []})") + "\n\n" +
                                 line("b", chat, R"({"max_tokens": 2})") + "\n");
  ASSERT_TRUE(lines.is_ok()) << lines.status().message();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ(lines->at(1).line, 3);
  EXPECT_EQ(lines->at(1).custom_id, "b");
  EXPECT_EQ(json::parse(lines->at(1).body)["max_tokens"], 2);
  const std::string ok = line("a", chat, "{}") + "\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {ok + "{not json\n", "line 2: not a JSON object"},
      {ok + R"({"method": "POST", "url": "/v1/chat/completions", "body": {}})", "line 2: 'custom_id'"},
      {ok + line("a", chat, "{}"), "line 2: 'custom_id' \"a\" is used by an earlier line"},
      {ok + line("b", "/v1/embeddings", "{}"), "line 2: 'url' must be"},
      {ok + line("b", "/v1/completions", "{}"), "line 2: 'url' /v1/completions differs from line 1's"},
      {ok + line("b", chat, "[]"), "line 2: 'body' must be an object"},
      {ok + line("b", chat, R"({"stream": true})"), "line 2: 'body.stream'"},
      {R"({"custom_id": "a", "method": "GET", "url": "/v1/completions", "body": {}})", "line 1: 'method'"},
      {"\n \n", "holds no requests"},
  };
  for (const auto& [text, says] : bad) {
    auto r = parse_batch_input(text);
    ASSERT_FALSE(r.is_ok()) << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  }
}

class BatchesApi : public ::testing::Test {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    data_dir = ::testing::TempDir() + "/batches-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(data_dir);
  }
  void start(int concurrency = 2, int64_t max_bytes = 0) {
    ServerConfig cfg;
    cfg.model = test::shared_path("models/stories260K.gguf");
    cfg.runtime.threads = 2;
    cfg.jobs.data_dir = data_dir;
    cfg.jobs.concurrency = concurrency;
    cfg.jobs.max_bytes = max_bytes;
    cfg.api_keys = {"sk-one", "sk-two"};
    api = std::make_unique<ApiService>(cfg);
    server = std::make_unique<HttpServer>(*api, 2);
    ASSERT_TRUE(server->start("127.0.0.1", 0).is_ok());
    port = server->port();
    const Status loaded = api->load();
    ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  }
  void stop() {
    server->stop();
    server.reset();
    api.reset();
  }
  void TearDown() override {
    if (server) stop();
  }
  test::HttpResult call(const std::string& method, const std::string& path, const std::string& body = "",
                        Headers headers = {}, const std::string& key = "sk-one") {
    headers.emplace_back("Authorization", "Bearer " + key);
    return test::http_call(port, method, path, body, headers);
  }
  test::HttpResult upload(const std::string& jsonl, const std::string& purpose = "batch") {
    return call("POST", "/v1/files", form({{"purpose", "", purpose}, {"file", "input.jsonl", jsonl}}),
                {{"Content-Type", kFormType}});
  }
  std::string create(const std::string& jsonl, const std::string& endpoint = "/v1/chat/completions") {
    const auto file = upload(jsonl);
    EXPECT_EQ(file.status, 200) << file.body;
    const auto batch =
        call("POST", "/v1/batches",
             json{{"input_file_id", file.j()["id"]}, {"endpoint", endpoint}, {"completion_window", "24h"}}.dump());
    EXPECT_EQ(batch.status, 200) << batch.body;
    EXPECT_EQ(batch.j()["status"], "in_progress");
    return batch.j().value("id", "");
  }
  json wait_for(const std::string& id) {
    json batch;
    for (int i = 0; i < 1200; ++i) {
      batch = call("GET", "/v1/batches/" + id).j();
      const std::string s = batch.value("status", "");
      if (s == "completed" || s == "cancelled" || s == "expired" || s == "failed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return batch;
  }
  // A file's lines by custom_id; a custom_id seen twice fails the test.
  std::map<std::string, json> lines_of(const json& file_id) {
    std::map<std::string, json> out;
    if (file_id.is_null()) return out;
    const auto content = call("GET", "/v1/files/" + file_id.get<std::string>() + "/content");
    EXPECT_EQ(content.status, 200);
    std::stringstream in(content.body);
    for (std::string text; std::getline(in, text);) {
      const json l = json::parse(text);
      EXPECT_TRUE(out.emplace(l["custom_id"].get<std::string>(), l).second) << "twice: " << text;
    }
    return out;
  }
  static std::string chat_body(const std::string& content, int max_tokens) {
    return json{
        {"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}, {"temperature", 0}}
        .dump();
  }
  std::string data_dir;
  std::unique_ptr<ApiService> api;
  std::unique_ptr<HttpServer> server;
  int port = 0;
};

TEST_F(BatchesApi, EveryLineIsAnsweredOnceAsItsSynchronousRequestIs) {
  start();
  std::string jsonl;
  std::vector<std::string> bodies;
  for (int i = 0; i < 6; ++i) {
    const char* topics[] = {"dog", "cat", "sun", "sea", "hat", "toy"};
    bodies.push_back(chat_body(std::string("Tell me about the ") + topics[i], 4 + 3 * i));
    jsonl += line(std::string("req-") + std::to_string(i), "/v1/chat/completions", bodies.back()) + "\n";
  }
  jsonl += line("bad", "/v1/chat/completions", R"({"messages": "not a list"})") + "\n";
  const auto file = upload(jsonl);
  ASSERT_EQ(file.status, 200) << file.body;
  EXPECT_EQ(file.j()["purpose"], "batch");
  EXPECT_EQ(file.j()["bytes"], jsonl.size());
  EXPECT_EQ(call("GET", "/v1/files/" + file.j()["id"].get<std::string>() + "/content").body, jsonl);
  const auto created = call("POST", "/v1/batches",
                            json{{"input_file_id", file.j()["id"]},
                                 {"endpoint", "/v1/chat/completions"},
                                 {"completion_window", "24h"},
                                 {"metadata", {{"run", "nightly"}}}}
                                .dump());
  ASSERT_EQ(created.status, 200) << created.body;
  const std::string id = created.j()["id"];
  const json done = wait_for(id);
  ASSERT_EQ(done["status"], "completed") << done.dump();
  EXPECT_EQ(done["request_counts"], json({{"total", 7}, {"completed", 6}, {"failed", 1}}));
  EXPECT_EQ(done["metadata"]["run"], "nightly");
  EXPECT_FALSE(done["completed_at"].is_null());
  const auto output = lines_of(done["output_file_id"]), errors = lines_of(done["error_file_id"]);
  ASSERT_EQ(output.size(), 6u);
  ASSERT_EQ(errors.size(), 1u);
  for (int i = 0; i < 6; ++i) {
    const json& l = output.at("req-" + std::to_string(i));
    EXPECT_EQ(l["response"]["status_code"], 200);
    EXPECT_TRUE(l["error"].is_null());
    const json sync = call("POST", "/v1/chat/completions", bodies[i]).j();
    EXPECT_EQ(l["response"]["body"]["choices"], sync["choices"]) << i;
    for (const char* count : {"prompt_tokens", "completion_tokens"})  // cached_tokens depends on what ran before
      EXPECT_EQ(l["response"]["body"]["usage"][count], sync["usage"][count]) << i;
  }
  EXPECT_EQ(errors.at("bad")["response"]["status_code"], 400);
  EXPECT_EQ(errors.at("bad")["response"]["body"]["error"]["param"], "messages");
  // Files and batches are listed for their key only; output files are listed too.
  EXPECT_EQ(call("GET", "/v1/batches").j()["data"][0]["id"], id);
  EXPECT_EQ(call("GET", "/v1/files").j()["data"].size(), 3u);
  EXPECT_EQ(call("GET", "/v1/files?purpose=batch_output").j()["data"].size(), 2u);
  EXPECT_EQ(call("GET", "/v1/batches", "", {}, "sk-two").j()["data"].size(), 0u);
  EXPECT_EQ(call("GET", "/v1/batches/" + id, "", {}, "sk-two").status, 404);
  EXPECT_EQ(call("GET", "/v1/files/" + file.j()["id"].get<std::string>(), "", {}, "sk-two").status, 404);
  EXPECT_EQ(call("GET", "/v1/jobs").j()["data"].size(), 0u);  // a batch's requests are not jobs of their own
  const std::string metrics = call("GET", "/metrics").body;
  EXPECT_EQ(test::metric_in(metrics, "autoglm_batches{status=\"completed\"}"), 1);
  EXPECT_EQ(test::metric_in(metrics, "autoglm_batch_requests"), 0);  // a final batch's requests are gone
  // Deleting a file.
  const std::string input_id = file.j()["id"];
  EXPECT_EQ(call("DELETE", "/v1/files/" + input_id).j()["deleted"], true);
  EXPECT_EQ(call("GET", "/v1/files/" + input_id).status, 404);
  EXPECT_EQ(call("GET", "/v1/batches/" + id).j()["status"], "completed");
}

TEST_F(BatchesApi, BadUploadsAndBatchesAreRefusedNamingWhatWasWrong) {
  start();
  const std::string ok = line("a", "/v1/chat/completions", chat_body("Hi", 2)) + "\n";
  auto purpose = upload(ok, "fine-tune");
  EXPECT_EQ(purpose.status, 400);
  EXPECT_EQ(purpose.j()["error"]["param"], "purpose");
  auto bad_line = upload(ok + "{oops\n");
  EXPECT_EQ(bad_line.status, 400);
  EXPECT_EQ(bad_line.j()["error"]["param"], "file");
  EXPECT_NE(bad_line.j()["error"]["message"].get<std::string>().find("input.jsonl: line 2: not a JSON object"),
            std::string::npos)
      << bad_line.body;
  auto not_a_form = call("POST", "/v1/files", ok);
  EXPECT_EQ(not_a_form.status, 400);
  EXPECT_EQ(not_a_form.j()["error"]["param"], "file");
  EXPECT_EQ(call("GET", "/v1/files").j()["data"].size(), 0u);  // nothing refused was stored
  const std::string file_id = upload(ok).j()["id"];
  auto batch = [&](const json& body) { return call("POST", "/v1/batches", body.dump()); };
  const json good = {{"input_file_id", file_id}, {"endpoint", "/v1/chat/completions"}, {"completion_window", "24h"}};
  auto with = [&](const json& extra) {
    json body = good;
    body.update(extra);
    return body;
  };
  struct Case {
    json body;
    std::string param;
  };
  for (const Case& c : std::vector<Case>{
           {with({{"input_file_id", "file-nope"}}), "input_file_id"},
           {with({{"endpoint", "/v1/completions"}}), "endpoint"},
           {with({{"endpoint", "/v1/embeddings"}}), "endpoint"},
           {with({{"completion_window", "1h"}}), "completion_window"},
           {with({{"metadata", {{"k", 1}}}}), "metadata"},
       }) {
    const auto r = batch(c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump();
    EXPECT_EQ(r.j()["error"]["param"], c.param) << r.body;
  }
  EXPECT_EQ(call("GET", "/v1/batches").j()["data"].size(), 0u);
  const auto other_key = call("POST", "/v1/batches", good.dump(), {}, "sk-two");
  EXPECT_EQ(other_key.status, 400);  // another key's file is not found
  EXPECT_EQ(call("POST", "/v1/batches/batch_nope/cancel").status, 404);
  EXPECT_EQ(call("GET", "/v1/files/file-nope/content").status, 404);
}

TEST_F(BatchesApi, ACancelledBatchAnswersEveryLineOnce) {
  start(1);
  std::string jsonl;
  for (int i = 0; i < 40; ++i)
    jsonl += line(std::string("c") + std::to_string(i), "/v1/completions",
                  R"({"prompt": "Once", "max_tokens": 400, "ignore_eos": true})") +
             "\n";
  const std::string id = create(jsonl, "/v1/completions");
  const auto completed = [&] {
    const json b = call("GET", "/v1/batches/" + id).j();
    return b.is_object() && b.contains("request_counts") ? b["request_counts"].value("completed", 0) : 0;
  };
  ASSERT_TRUE(test::wait_until([&] { return completed() > 0; })) << "no line was ever answered";
  // The engine is held over the cancel: the lines not answered by then cannot be, however fast.
  test::HttpResult cancelled;
  {
    test::EngineHold hold(*api);
    ASSERT_LT(completed(), 40) << "every line was answered before the cancel";
    cancelled = call("POST", "/v1/batches/" + id + "/cancel");
  }
  ASSERT_EQ(cancelled.status, 200) << cancelled.body;
  EXPECT_EQ(cancelled.j()["status"], "cancelled");
  EXPECT_FALSE(cancelled.j()["cancelling_at"].is_null());
  const auto output = lines_of(cancelled.j()["output_file_id"]), errors = lines_of(cancelled.j()["error_file_id"]);
  EXPECT_GE(output.size(), 1u);
  EXPECT_EQ(output.size() + errors.size(), 40u);
  for (const auto& [custom_id, l] : errors) EXPECT_EQ(l["error"]["code"], "batch_cancelled") << custom_id;
  for (const auto& [custom_id, l] : output) EXPECT_EQ(output.count(custom_id) + errors.count(custom_id), 1u);
  EXPECT_EQ(cancelled.j()["request_counts"]["completed"], output.size());
  // A second cancel changes nothing.
  EXPECT_EQ(call("POST", "/v1/batches/" + id + "/cancel").j()["output_file_id"], cancelled.j()["output_file_id"]);
}

TEST_F(BatchesApi, ABatchCutByAStopIsFinishedAfterTheNextStart) {
  start(1);
  std::string jsonl;
  for (int i = 0; i < 20; ++i)
    jsonl += line(std::string("r") + std::to_string(i), "/v1/chat/completions",
                  chat_body(std::string("Hi ") + std::to_string(i), 24)) +
             "\n";
  const std::string id = create(jsonl);
  stop();
  start(2);
  const json done = wait_for(id);
  ASSERT_EQ(done["status"], "completed") << done.dump();
  EXPECT_EQ(done["request_counts"]["completed"], 20);
  const auto output = lines_of(done["output_file_id"]);
  EXPECT_EQ(output.size(), 20u);
  for (const auto& [custom_id, l] : lines_of(done["error_file_id"])) ADD_FAILURE() << l.dump();
}

TEST_F(BatchesApi, AFullStoreIsA503AndLosesNothing) {
  start(1, 512 << 10);
  const std::string padding(20000, 'x');
  std::string jsonl;
  for (int i = 0; i < 5; ++i)
    jsonl += line(std::string("p") + std::to_string(i), "/v1/completions",
                  R"({"prompt": ")" + padding + R"(", "max_tokens": 1})") +
             "\n";
  std::vector<std::string> stored;
  test::HttpResult last;
  for (int i = 0; i < 20; ++i) {
    last = upload(jsonl);
    if (last.status != 200) break;
    stored.push_back(last.j()["id"]);
  }
  ASSERT_EQ(last.status, 503) << last.body;
  EXPECT_NE(last.j()["error"]["message"].get<std::string>().find("storage is full"), std::string::npos) << last.body;
  ASSERT_GE(stored.size(), 1u);
  // Small files fill the last pages; then a job of four pages cannot be stored either.
  const std::string small = line("s", "/v1/completions", R"({"prompt": ")" + std::string(3000, 'y') + R"("})");
  for (int i = 0; i < 200 && upload(small).status == 200; ++i) {
  }
  EXPECT_EQ(upload(small).status, 503);
  // (Its bytes are in `user`: a prompt past the context window is refused before it is stored.)
  const auto job = call("POST", "/v1/async/completions",
                        json{{"prompt", "Once"}, {"max_tokens", 1}, {"user", std::string(16000, 'z')}}.dump());
  EXPECT_EQ(job.status, 503);
  EXPECT_EQ(call("GET", "/health").status, 200);  // the server goes on
  EXPECT_EQ(call("POST", "/v1/completions", R"({"prompt": "Once", "max_tokens": 2})").status, 200);
  EXPECT_EQ(call("DELETE", "/v1/files/" + stored.back()).status, 200);  // room again
  stored.pop_back();
  EXPECT_EQ(upload(line("s", "/v1/completions", R"({"prompt": "Once"})")).status, 200);
  stop();
  start(1, 512 << 10);
  for (const std::string& id : stored)
    EXPECT_EQ(call("GET", "/v1/files/" + id + "/content").body, jsonl) << id;  // nothing stored was lost
}

}  // namespace
}  // namespace autoglm
