#include "server/http/access_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <cstdio>

namespace autoglm {

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& target) {
  auto log = std::make_unique<AccessLog>();
  if (target.empty()) return log;
  try {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (target == "-")
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    else
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(target, /*truncate=*/false);
    log->logger_ = std::make_shared<spdlog::logger>("access", std::move(sink));
    log->logger_->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %v");
    log->logger_->flush_on(spdlog::level::info);
  } catch (const spdlog::spdlog_ex& e) {
    return invalid_argument("access_log: cannot open '" + target + "': " + e.what());
  }
  return log;
}

AccessLog::~AccessLog() = default;

namespace {

// A value as one logfmt token: quoted when it has spaces or quotes.
std::string token(const std::string& v) {
  if (v.empty()) return "-";
  if (v.find_first_of(" \"=\t\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return out + "\"";
}

}  // namespace

std::string AccessLog::format(const AccessEntry& e, std::chrono::steady_clock::time_point now) {
  char latency[32];
  std::snprintf(latency, sizeof(latency), "%.1f", std::chrono::duration<double, std::milli>(now - e.started).count());
  return "access method=" + token(e.method) + " path=" + token(e.path) + " status=" + std::to_string(e.status) +
         " prompt_tokens=" + std::to_string(e.prompt_tokens) +
         " completion_tokens=" + std::to_string(e.completion_tokens) + " latency_ms=" + latency +
         " key=" + token(e.key_id) + " client=" + token(e.client) +
         (e.model.empty() ? "" : " model=" + token(e.model)) + (e.route.empty() ? "" : " route=" + token(e.route));
}

void AccessLog::write(const AccessEntry& entry) {
  if (logger_) logger_->info(format(entry, std::chrono::steady_clock::now()));
}

std::string api_key_id(const std::string& key) {
  if (key.empty()) return "-";
  char id[16];
  std::snprintf(id, sizeof(id), "%08x", unsigned(XXH64(key.data(), key.size(), 0) & 0xffffffffu));
  return std::string("key-") + id;
}

}  // namespace autoglm
