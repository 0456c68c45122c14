// The served models' lives: loaded at start or on the first request that names one, unloaded on
// request, to make room (the least recently used idle model past models_max), or asleep after
// sleep_idle_seconds without a request. Loads and unloads run on the shelf's own thread, off the
// engines' and the I/O threads; a request holds its model loaded (ModelHold) until its reply is
// done, so an unload waits for the requests in flight and never cuts one off.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "autoglm/runtime.h"
#include "autoglm/status.h"
#include "server/config/config.h"

namespace autoglm {

// Where a model is in its life (llama-server's router's words, and "failed" with the reason).
enum class ModelStatus { kUnloaded, kLoading, kLoaded, kSleeping, kFailed };
const char* model_status_name(ModelStatus status);

// Why a model was unloaded (the unloads metric's `reason`).
enum class UnloadReason { kRequest, kMakeRoom, kIdle };
const char* unload_reason_name(UnloadReason reason);

// One served model: how the API names it and, while loaded, its runtime. The runtime, info and
// pooling are read through a hold (ModelShelf::hold), which keeps the model loaded; the lifecycle
// fields are the shelf's, under its lock.
struct ModelService {
  std::string name;
  std::vector<std::string> aliases;  // other names requests may give (served_model_name)
  bool answers_to(const std::string& n) const {
    return n == name || std::find(aliases.begin(), aliases.end(), n) != aliases.end();
  }
  std::shared_ptr<const ServerConfig> config;  // the server's, with the model's own keys on top
  bool on_demand = false;                      // of models_dir: loaded when first asked for
  std::unique_ptr<Runtime> runtime;
  ModelInfo info;                    // the runtime's, read once loaded
  Pooling pooling = Pooling::kLast;  // of /v1/embeddings

  // The lifecycle (ModelShelf's, under its lock).
  ModelStatus status = ModelStatus::kUnloaded;
  Status failure;          // the last load's error, while kFailed
  std::string progress;    // the load's step in progress, while kLoading
  int64_t holds = 0;       // requests using the runtime
  int64_t waiters = 0;     // requests waiting for it to load (it is not unloaded to make room then)
  bool unloading = false;  // an unload waits for the holds to end; no new ones are given
  std::chrono::steady_clock::time_point last_used;
};

// A model kept loaded for one request: its runtime may be used while the hold lives.
struct ModelHold {
  ModelService* model = nullptr;
  Runtime* runtime = nullptr;
  std::shared_ptr<void> token;  // dropped when the request's reply is done
};

class ModelShelf {
 public:
  struct Options {
    int64_t max_loaded = 0;         // 0: no limit
    double sleep_idle_seconds = 0;  // 0: never
    bool autoload = true;
    // Opens a model's runtime: beside `other`'s threads when one is loaded, else on its own.
    std::function<Result<std::unique_ptr<Runtime>>(ModelService&, const Runtime* other)> open;
    // Told of each load and unload (metrics): the model, what happened, the seconds it took.
    std::function<void(const ModelService&, const std::string& event, double seconds)> on_event;
  };

  ModelShelf(std::vector<std::unique_ptr<ModelService>>& models, Options options);
  ~ModelShelf();
  ModelShelf(const ModelShelf&) = delete;
  ModelShelf& operator=(const ModelShelf&) = delete;

  // Loads the models that are not on demand, in order, then starts the shelf's thread; a model
  // that fails stops the start (its error names it).
  Status start();
  // Stops the thread and unloads every model (the engines stop with their runtimes).
  void stop();

  // The model loaded and held: at once when loaded, else after its load (autoload, or a model
  // asleep). Errors: kNotFound (not loaded and models_autoload is off), kInternal (its load
  // failed: the reason), kResourceExhausted (too many requests already wait on loads).
  Result<ModelHold> hold(ModelService& model);
  // Starts loading (a failed model tries again); OK when loaded or loading already.
  Status request_load(ModelService& model);
  // Starts unloading once its requests in flight are done; kInvalidArgument when not loaded.
  Status request_unload(ModelService& model);

  // The step a load is in ("repacking 3/40"), shown while it loads; for Options::open.
  void set_progress(ModelService& model, const std::string& step);

  // {"value": status, "in_use", "failed", "reason", "progress", "unloading"}: /v1/models' `status`.
  nlohmann::json status_of(const ModelService& model) const;
  ModelStatus status(const ModelService& model) const;
  // Calls `visit` for each loaded model with the shelf's lock held (its runtime may be read then).
  void for_each_loaded(const std::function<void(ModelService&)>& visit) const;

 private:
  int64_t loaded_count() const;  // with the lock held
  using Clock = std::chrono::steady_clock;
  struct Job {
    ModelService* model;
    bool load;  // else unload
    UnloadReason reason;
  };

  void run();
  bool job_waits(const Job& job) const;
  std::optional<Job> take_runnable_job();
  void load(ModelService& model, std::unique_lock<std::mutex>& lock);
  void unload(ModelService& model, UnloadReason reason, std::unique_lock<std::mutex>& lock);
  void make_room(ModelService& for_model, std::unique_lock<std::mutex>& lock);
  ModelService* least_recently_used_idle(const ModelService* besides) const;
  void trim_to_max(std::unique_lock<std::mutex>& lock);
  void unload_idle_past(int64_t keep, const ModelService* besides, std::unique_lock<std::mutex>& lock);
  void queue_load(ModelService& model);
  void put_idle_to_sleep(std::unique_lock<std::mutex>& lock);
  Clock::time_point next_sleep_check() const;
  const Runtime* any_loaded() const;
  std::shared_ptr<void> take_hold(ModelService& model);

  std::vector<std::unique_ptr<ModelService>>& models_;
  Options options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a status, a hold or the queue changed
  std::deque<Job> jobs_;
  int64_t waiting_ = 0;  // requests waiting on a load
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace autoglm
