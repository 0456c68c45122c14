#include "server/api/feedback.h"

#include <cmath>
#include <ctime>

namespace autoglm {

FeedbackBook::FeedbackBook(const std::string& log_path, size_t capacity) : capacity_(capacity) {
  if (!log_path.empty()) log_.open(log_path, std::ios::app);
}

void FeedbackBook::remember(const std::string& response_id, RequestMetrics* series, const std::string& model,
                            const std::string& route) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (answered_.emplace(response_id, Answered{series, model, route}).second) order_.push_back(response_id);
  while (order_.size() > capacity_) {
    answered_.erase(order_.front());
    order_.pop_front();
  }
}

bool FeedbackBook::record(const json& body) {
  if (!body.contains("response_id") || !body["response_id"].is_string())
    bad("response_id", "'response_id' must be the id of a response (a string)");
  std::string thumbs;
  if (body.contains("thumbs") && !body["thumbs"].is_null()) {
    thumbs = body["thumbs"].is_string() ? body["thumbs"].get<std::string>() : "";
    if (thumbs != "up" && thumbs != "down") bad("thumbs", "'thumbs' must be \"up\" or \"down\"");
  }
  std::optional<double> score;
  if (body.contains("score") && !body["score"].is_null()) {
    if (!body["score"].is_number() || !std::isfinite(body["score"].get<double>()) ||
        std::abs(body["score"].get<double>()) > 1e6)
      bad("score", "'score' must be a number between -1000000 and 1000000");
    score = body["score"].get<double>();
  }
  if (thumbs.empty() && !score) bad("thumbs", "give 'thumbs' (up or down), 'score', or both");
  std::string comment;
  if (body.contains("comment") && !body["comment"].is_null()) {
    if (!body["comment"].is_string()) bad("comment", "'comment' must be a string");
    comment = check_utf8(body["comment"], "comment");
    if (comment.size() > 4096) bad("comment", "'comment' is longer than 4096 bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = answered_.find(body["response_id"].get<std::string>());
  if (it == answered_.end()) return false;
  RequestMetrics& series = *it->second.series;
  if (thumbs == "up") ++series.thumbs_up;
  if (thumbs == "down") ++series.thumbs_down;
  if (score) {
    ++series.scores;
    series.score_milli_sum += int64_t(std::llround(*score * 1000));
  }
  if (log_.is_open()) {
    json line = {{"time", int64_t(std::time(nullptr))},
                 {"response_id", it->first},
                 {"model", it->second.model},
                 {"route", it->second.route}};
    if (!thumbs.empty()) line["thumbs"] = thumbs;
    if (score) line["score"] = *score;
    if (!comment.empty()) line["comment"] = comment;
    log_ << line.dump(-1, ' ', false, json::error_handler_t::replace) << '\n' << std::flush;
  }
  return true;
}

}  // namespace autoglm
