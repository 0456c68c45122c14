#include "server/response_cache_file.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace autoglm {
namespace {

using nlohmann::json;
using SystemClock = std::chrono::system_clock;

double unix_seconds(SystemClock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// An event as CBOR (text as bytes: a piece need not be valid UTF-8 on its own).
json event_json(const StreamEvent& ev) {
  json lps = json::array();
  for (const TokenLogprob& lp : ev.logprobs) lps.push_back({lp.token, lp.logprob, lp.top});
  return {{"t", json::binary(std::vector<uint8_t>(ev.text.begin(), ev.text.end()))},
          {"k", ev.tokens},
          {"l", lps},
          {"f", ev.finished},
          {"r", int(ev.finish_reason)},
          {"e", ev.error},
          {"p", {ev.prompt_tokens, ev.cached_tokens, ev.completion_tokens, ev.preemptions}},
          {"s", {ev.queue_seconds, ev.prefill_seconds}}};
}

StreamEvent event_of(const json& j) {
  StreamEvent ev;
  const auto& bytes = j.at("t").get_binary();
  ev.text.assign(bytes.begin(), bytes.end());
  ev.tokens = j.at("k").get<std::vector<int32_t>>();
  for (const json& lp : j.at("l"))
    ev.logprobs.push_back(
        {lp[0].get<int32_t>(), lp[1].get<float>(), lp[2].get<std::vector<std::pair<int32_t, float>>>()});
  ev.finished = j.at("f").get<bool>();
  ev.finish_reason = FinishReason(j.at("r").get<int>());
  ev.error = j.at("e").get<std::string>();
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

// Runs a statement with its parameters bound by `bind`; logs (and drops) a failure: the file
// only backs the memory, which keeps serving.
template <class Bind>
void run(sqlite3* db, const char* sql, Bind bind) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK) {
    bind(st);
    if (sqlite3_step(st) != SQLITE_DONE)
      log_line(LogLevel::kWarning, std::string("response cache file: ") + sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
}

}  // namespace

Result<std::unique_ptr<ResponseCacheFile>> ResponseCacheFile::open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return io_error("response_cache.path: " + path + ": " + why);
  }
  char* error = nullptr;
  const char* schema =
      "PRAGMA journal_mode=WAL;"
      "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, expires REAL NOT NULL, written REAL NOT NULL, "
      "data BLOB NOT NULL);";
  if (sqlite3_exec(db, schema, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error ? error : "unknown error";
    sqlite3_free(error);
    sqlite3_close(db);
    return io_error("response_cache.path: " + path + ": not a response cache database: " + why);
  }
  return std::unique_ptr<ResponseCacheFile>(new ResponseCacheFile(db));
}

ResponseCacheFile::~ResponseCacheFile() {
  sqlite3_close(db_);
}

std::vector<ResponseCacheFile::Row> ResponseCacheFile::load() {
  std::vector<Row> rows;
  const double now = unix_seconds(SystemClock::now());
  run(db_, "DELETE FROM responses WHERE expires <= ?", [&](sqlite3_stmt* st) { sqlite3_bind_double(st, 1, now); });
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT key, expires, data FROM responses ORDER BY written DESC", -1, &st, nullptr) ==
      SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      Row row;
      row.key = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      row.expires = SystemClock::time_point(std::chrono::duration_cast<SystemClock::duration>(
          std::chrono::duration<double>(sqlite3_column_double(st, 1))));
      try {
        row.generation = decode(sqlite3_column_blob(st, 2), sqlite3_column_bytes(st, 2));
      } catch (const json::exception& e) {
        log_line(LogLevel::kWarning, "response cache file: entry " + row.key + " unreadable, skipped: " + e.what());
        continue;
      }
      rows.push_back(std::move(row));
    }
  }
  sqlite3_finalize(st);
  return rows;
}

void ResponseCacheFile::put(const std::string& key, const CachedGeneration& g, SystemClock::time_point expires) {
  const std::vector<uint8_t> data = encode(g);
  run(db_, "INSERT OR REPLACE INTO responses (key, expires, written, data) VALUES (?, ?, ?, ?)", [&](sqlite3_stmt* st) {
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 2, unix_seconds(expires));
    sqlite3_bind_double(st, 3, unix_seconds(SystemClock::now()));
    sqlite3_bind_blob(st, 4, data.data(), int(data.size()), SQLITE_TRANSIENT);
  });
}

void ResponseCacheFile::remove(const std::string& key) {
  run(db_, "DELETE FROM responses WHERE key = ?",
      [&](sqlite3_stmt* st) { sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT); });
}

}  // namespace autoglm
