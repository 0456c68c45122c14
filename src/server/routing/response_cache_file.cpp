#include "server/routing/response_cache_file.h"

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace autoglm {
namespace {

using nlohmann::json;
using SystemClock = std::chrono::system_clock;

double unix_seconds(SystemClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

json bytes_of(const std::string& s) {
  return json::binary(std::vector<uint8_t>(s.begin(), s.end()));
}

std::string text_of(const json& j) {
  const auto& bytes = j.get_binary();
  return std::string(bytes.begin(), bytes.end());
}

// An event as CBOR (text as bytes: a piece need not be valid UTF-8 on its own), its typed
// parts as [kind, text, call index]. An entry written before events had parts has no "o":
// it fails to decode and is skipped.
json event_json(const StreamEvent& ev) {
  json lps = json::array();
  for (const TokenLogprob& lp : ev.logprobs) lps.push_back({lp.token, lp.logprob, lp.top});
  json parts = json::array();
  for (const OutputPart& part : ev.parts) parts.push_back({int(part.kind), bytes_of(part.text), part.tool_index});
  return {{"t", bytes_of(ev.text)},
          {"o", parts},
          {"k", ev.tokens},
          {"l", lps},
          {"f", ev.finished},
          {"r", int(ev.finish_reason)},
          {"e", ev.error},
          {"q", ev.stop_sequence},
          {"p", {ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens, ev.preemptions}},
          {"s", {ev.queue_seconds, ev.prefill_seconds}}};
}

StreamEvent event_of(const json& j) {
  StreamEvent ev;
  ev.text = text_of(j.at("t"));
  for (const json& part : j.at("o")) {
    const int kind = part.at(0).get<int>();
    if (kind < int(PartKind::kText) || kind > int(PartKind::kToolCallEnd))
      throw json::out_of_range::create(401, "an output part of unknown kind", &part);
    ev.parts.push_back({PartKind(kind), text_of(part.at(1)), part.at(2).get<int32_t>()});
  }
  ev.tokens = j.at("k").get<std::vector<int32_t>>();
  for (const json& lp : j.at("l"))
    ev.logprobs.push_back(
        {lp[0].get<int32_t>(), lp[1].get<float>(), lp[2].get<std::vector<std::pair<int32_t, float>>>()});
  ev.finished = j.at("f").get<bool>();
  ev.finish_reason = FinishReason(j.at("r").get<int>());
  ev.error = j.at("e").get<std::string>();
  ev.stop_sequence = j.value("q", std::string());  // entries written before it was kept: none
  const json& p = j.at("p");
  ev.prompt_tokens = p[0], ev.cached_tokens = p[1], ev.completion_tokens = p[2], ev.preemptions = p[3];
  ev.queue_seconds = j.at("s")[0], ev.prefill_seconds = j.at("s")[1];
  return ev;
}

std::vector<uint8_t> encode(const CachedGeneration& g) {
  json choices = json::array();
  for (const auto& events : g.choices) {
    json list = json::array();
    for (const StreamEvent& ev : events) list.push_back(event_json(ev));
    choices.push_back(std::move(list));
  }
  return json::to_cbor(json{{"bytes", g.bytes}, {"choices", choices}});
}

CachedGeneration decode(const void* data, int size) {
  const auto* p = static_cast<const uint8_t*>(data);
  const json j = json::from_cbor(p, p + size);
  CachedGeneration g;
  g.bytes = j.at("bytes").get<int64_t>();
  for (const json& list : j.at("choices")) {
    g.choices.emplace_back();
    for (const json& ev : list) g.choices.back().push_back(event_of(ev));
  }
  return g;
}

// A failed write is logged and dropped: the file only backs the memory, which keeps serving.
void logged(const Status& st) {
  if (!st.is_ok()) log_line(LogLevel::kWarning, st.message());
}

}  // namespace

Result<std::unique_ptr<ResponseCacheFile>> ResponseCacheFile::open(const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(
      auto db, SqliteDb::open(path,
                              "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, expires REAL NOT NULL, "
                              "written REAL NOT NULL, data BLOB NOT NULL);",
                              "response_cache.path"));
  return std::unique_ptr<ResponseCacheFile>(new ResponseCacheFile(std::move(db)));
}

ResponseCacheFile::~ResponseCacheFile() = default;

std::vector<ResponseCacheFile::Row> ResponseCacheFile::load() {
  std::vector<Row> rows;
  logged(db_->exec("DELETE FROM responses WHERE expires <= ?", {unix_seconds(SystemClock::now())}));
  auto found = db_->query("SELECT key, expires, data FROM responses ORDER BY written DESC");
  if (!found) {
    logged(found.status());
    return rows;
  }
  for (const SqlRow& r : *found) {
    Row row;
    row.key = sql_text(r[0]);
    row.expires = SystemClock::time_point(
        std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(sql_number(r[1]))));
    const std::string data = sql_text(r[2]);
    try {
      row.generation = decode(data.data(), int(data.size()));
    } catch (const json::exception& e) {
      log_line(LogLevel::kWarning, "response cache file: entry " + row.key + " unreadable, skipped: " + e.what());
      continue;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void ResponseCacheFile::put(const std::string& key, const CachedGeneration& g, SystemClock::time_point expires) {
  const std::vector<uint8_t> data = encode(g);
  logged(db_->exec(
      "INSERT OR REPLACE INTO responses (key, expires, written, data) VALUES (?, ?, ?, ?)",
      {key, unix_seconds(expires), unix_seconds(SystemClock::now()), SqlBlob{std::string(data.begin(), data.end())}}));
}

void ResponseCacheFile::remove(const std::string& key) {
  logged(db_->exec("DELETE FROM responses WHERE key = ?", {key}));
}

}  // namespace autoglm
