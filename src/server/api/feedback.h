// POST /v1/feedback: a client's verdict on a response it got (by the response's id), counted
// on the series of the model and route that answered it, so an A/B comparison has quality
// beside speed; with feedback_log set, each verdict is also a JSON line in that file.
#pragma once

#include <deque>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>

#include "server/api/request_params.h"
#include "server/metrics/metrics.h"

namespace autoglm {

class FeedbackBook {
 public:
  // `log_path` empty: metrics only. `capacity`: the newest response ids remembered.
  explicit FeedbackBook(const std::string& log_path = "", size_t capacity = 100000);

  // A response and the series it was counted on (model and route).
  void remember(const std::string& response_id, RequestMetrics* series, const std::string& model,
                const std::string& route);
  // {"response_id", "thumbs": "up" | "down", "score": number, "comment"}: at least one of
  // thumbs and score. Throws ParamError naming the field; false: the id is not known (too
  // old, or never given out).
  bool record(const json& body);

 private:
  struct Answered {
    RequestMetrics* series;
    std::string model, route;
  };
  std::mutex mutex_;
  size_t capacity_;
  std::unordered_map<std::string, Answered> answered_;
  std::deque<std::string> order_;  // oldest first
  std::ofstream log_;
};

}  // namespace autoglm
