#include "server/model_shelf.h"

#include <algorithm>

namespace autoglm {

namespace {
// Requests that may wait on loads at once: the HTTP workers that prepare requests are few (4),
// and one must stay free for the models already loaded.
constexpr int64_t kMostWaiting = 3;
}  // namespace

const char* model_status_name(ModelStatus status) {
  switch (status) {
    case ModelStatus::kUnloaded: return "unloaded";
    case ModelStatus::kLoading: return "loading";
    case ModelStatus::kLoaded: return "loaded";
    case ModelStatus::kSleeping: return "sleeping";
    case ModelStatus::kFailed: return "failed";
  }
  return "unloaded";
}

const char* unload_reason_name(UnloadReason reason) {
  switch (reason) {
    case UnloadReason::kRequest: return "request";
    case UnloadReason::kMakeRoom: return "lru";
    case UnloadReason::kIdle: return "idle";
  }
  return "request";
}

ModelShelf::ModelShelf(std::vector<std::unique_ptr<ModelService>>& models, Options options)
    : models_(models), options_(std::move(options)) {}

ModelShelf::~ModelShelf() {
  stop();
}

Status ModelShelf::start() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto& m : models_) {
    if (m->on_demand) continue;
    m->status = ModelStatus::kLoading;
    load(*m, lock);
    if (m->status == ModelStatus::kFailed) return m->failure;
  }
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ModelShelf::stop() {
  std::vector<std::unique_ptr<Runtime>> runtimes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& m : models_)
      if (m->runtime) {
        runtimes.push_back(std::move(m->runtime));
        m->status = ModelStatus::kUnloaded;
      }
  }
  runtimes.clear();  // each engine stops with its runtime, the lock free for the holds its replies drop
}

std::shared_ptr<void> ModelShelf::take_hold(ModelService& model) {
  ++model.holds;
  model.last_used = Clock::now();
  return std::shared_ptr<void>(static_cast<void*>(&model), [this](void* p) {
    auto& m = *static_cast<ModelService*>(p);
    std::lock_guard<std::mutex> lock(mutex_);
    --m.holds;
    m.last_used = Clock::now();  // idle from the end of its last request
    changed_.notify_all();
  });
}

Result<ModelHold> ModelShelf::hold(ModelService& model) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool counted = false;
  struct Uncount {  // with the lock held: destroyed before `lock`
    bool& counted;
    int64_t& waiting;
    int64_t& waiters;
    ~Uncount() {
      if (counted) --waiting, --waiters;
    }
  } uncount{counted, waiting_, model.waiters};
  for (;;) {
    if (stopping_) return resource_exhausted("the server is stopping");
    switch (model.status) {
      case ModelStatus::kLoaded:
        if (!model.unloading) return ModelHold{&model, model.runtime.get(), take_hold(model)};
        break;  // loaded again (autoload) once the unload is done
      case ModelStatus::kLoading: break;
      case ModelStatus::kFailed:
        return Status(StatusCode::kInternal, "the model '" + model.name + "' failed to load: " +
                                                 model.failure.message() + " (POST /models/load tries again)");
      case ModelStatus::kUnloaded:
        if (!options_.autoload)
          return not_found("the model '" + model.name +
                           "' is not loaded and models_autoload is off: load it with POST /models/load");
        [[fallthrough]];
      case ModelStatus::kSleeping: queue_load(model); break;
    }
    if (!counted) {
      if (waiting_ >= kMostWaiting)
        return resource_exhausted("the model '" + model.name + "' is loading and " + std::to_string(waiting_) +
                                  " requests already wait for loads; retry shortly");
      ++waiting_;
      ++model.waiters;
      counted = true;
    }
    changed_.wait(lock);
  }
}

Status ModelShelf::request_load(ModelService& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (model.status == ModelStatus::kLoaded && !model.unloading) return Status::ok();
  if (model.status == ModelStatus::kLoading) return Status::ok();
  queue_load(model);  // an unloading model loads again after its unload
  return Status::ok();
}

// With the lock held: a load job; a model not loaded shows `loading` from now.
void ModelShelf::queue_load(ModelService& model) {
  if (model.status != ModelStatus::kLoaded) {
    model.status = ModelStatus::kLoading;
    model.progress.clear();
  }
  jobs_.push_back({&model, true, UnloadReason::kRequest});
  changed_.notify_all();
}

Status ModelShelf::request_unload(ModelService& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (model.status != ModelStatus::kLoaded)
    return invalid_argument("the model '" + model.name + "' is not loaded (it is " + model_status_name(model.status) +
                            ")");
  if (model.unloading) return Status::ok();
  model.unloading = true;  // no new holds from now
  jobs_.push_back({&model, false, UnloadReason::kRequest});
  changed_.notify_all();
  return Status::ok();
}

void ModelShelf::set_progress(ModelService& model, const std::string& step) {
  std::lock_guard<std::mutex> lock(mutex_);
  model.progress = step;
}

nlohmann::json ModelShelf::status_of(const ModelService& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json s = {{"value", model_status_name(model.status)}, {"in_use", model.holds}};
  if (model.status == ModelStatus::kFailed) {
    s["failed"] = true;
    s["reason"] = model.failure.message();
  }
  if (model.status == ModelStatus::kLoading && !model.progress.empty()) s["progress"] = model.progress;
  if (model.unloading) s["unloading"] = true;
  return s;
}

ModelStatus ModelShelf::status(const ModelService& model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model.status;
}

void ModelShelf::for_each_loaded(const std::function<void(ModelService&)>& visit) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_)
    if (m->status == ModelStatus::kLoaded && m->runtime) visit(*m);
}

int64_t ModelShelf::loaded_count() const {
  return std::count_if(models_.begin(), models_.end(), [](const auto& m) { return m->status == ModelStatus::kLoaded; });
}

const Runtime* ModelShelf::any_loaded() const {
  for (const auto& m : models_)
    if (m->status == ModelStatus::kLoaded && m->runtime && !m->unloading) return m->runtime.get();
  return nullptr;
}

// A job that cannot run yet: an unload waits for its model's requests in flight, and a load for
// the unload ahead of it, without holding up the jobs behind them.
bool ModelShelf::job_waits(const Job& job) const {
  const ModelService& m = *job.model;
  if (m.status != ModelStatus::kLoaded) return false;
  return job.load ? m.unloading : m.holds > 0;
}

std::optional<ModelShelf::Job> ModelShelf::take_runnable_job() {
  const auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return !job_waits(j); });
  if (it == jobs_.end()) return std::nullopt;
  const Job job = *it;
  jobs_.erase(it);
  return job;
}

void ModelShelf::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (const std::optional<Job> job = take_runnable_job()) {
      if (job->load && job->model->status != ModelStatus::kLoaded) {
        job->model->status = ModelStatus::kLoading;
        load(*job->model, lock);
      } else if (!job->load && job->model->status == ModelStatus::kLoaded) {
        unload(*job->model, job->reason, lock);
      }
      continue;
    }
    trim_to_max(lock);
    put_idle_to_sleep(lock);
    // A hold ending, a new job or a status change wakes the thread (changed_).
    if (std::all_of(jobs_.begin(), jobs_.end(), [&](const Job& j) { return job_waits(j); }) && !stopping_)
      changed_.wait_until(lock, next_sleep_check());
  }
}

// With the lock held on entry and exit; released while the runtime opens.
void ModelShelf::load(ModelService& model, std::unique_lock<std::mutex>& lock) {
  changed_.notify_all();
  make_room(model, lock);
  const Runtime* other = any_loaded();  // only this thread unloads: it stays loaded meanwhile
  lock.unlock();
  const auto began = Clock::now();
  Result<std::unique_ptr<Runtime>> opened = options_.open(model, other);
  const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
  lock.lock();
  model.progress.clear();
  if (!opened) {
    model.status = ModelStatus::kFailed;
    model.failure = opened.status();
    if (options_.on_event) options_.on_event(model, "load_failed", seconds);
  } else {
    model.runtime = std::move(opened).value();
    model.info = model.runtime->info();
    model.status = ModelStatus::kLoaded;
    model.failure = Status::ok();
    model.last_used = Clock::now();
    if (options_.on_event) options_.on_event(model, "loaded", seconds);
  }
  changed_.notify_all();
}

// Frees the runtime of a model no request holds (run() takes an unload once its holds end; the
// wait is for an idle model's, already none), the lock released while it frees. The model reads
// "loaded" and "unloading" until its memory is free: "unloaded" and the unload's count appear
// together, so whoever sees one sees the other.
void ModelShelf::unload(ModelService& model, UnloadReason reason, std::unique_lock<std::mutex>& lock) {
  model.unloading = true;
  changed_.wait(lock, [&] { return model.holds == 0; });
  std::unique_ptr<Runtime> runtime = std::move(model.runtime);
  lock.unlock();
  const auto began = Clock::now();
  runtime.reset();
  const double seconds = std::chrono::duration<double>(Clock::now() - began).count();
  lock.lock();
  model.status = reason == UnloadReason::kIdle ? ModelStatus::kSleeping : ModelStatus::kUnloaded;
  model.unloading = false;
  if (options_.on_event) options_.on_event(model, std::string("unloaded:") + unload_reason_name(reason), seconds);
  changed_.notify_all();
}

// The least recently used loaded model that no request uses or waits for, but `besides`.
ModelService* ModelShelf::least_recently_used_idle(const ModelService* besides) const {
  ModelService* oldest = nullptr;
  for (auto& m : models_)
    if (m.get() != besides && m->status == ModelStatus::kLoaded && m->holds == 0 && m->waiters == 0 && !m->unloading &&
        (!oldest || m->last_used < oldest->last_used))
      oldest = m.get();
  return oldest;
}

// Past max_loaded, the least recently used idle model unloads first. With none idle the load goes
// ahead (waiting could wait on the request that asked for it: a cascade holds one model while it
// loads another); run() unloads the extra ones once idle.
void ModelShelf::make_room(ModelService& for_model, std::unique_lock<std::mutex>& lock) {
  unload_idle_past(options_.max_loaded - 1, &for_model, lock);
}

// Models past max_loaded (loaded while every other was in use) unload once idle.
void ModelShelf::trim_to_max(std::unique_lock<std::mutex>& lock) {
  unload_idle_past(options_.max_loaded, nullptr, lock);
}

// The least recently used idle models but `besides` unload while more than `keep` are loaded.
void ModelShelf::unload_idle_past(int64_t keep, const ModelService* besides, std::unique_lock<std::mutex>& lock) {
  if (options_.max_loaded <= 0) return;
  while (loaded_count() > keep) {
    ModelService* oldest = least_recently_used_idle(besides);
    if (!oldest) return;
    unload(*oldest, UnloadReason::kMakeRoom, lock);
  }
}

void ModelShelf::put_idle_to_sleep(std::unique_lock<std::mutex>& lock) {
  if (options_.sleep_idle_seconds <= 0) return;
  const auto idle_for =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.sleep_idle_seconds));
  for (auto& m : models_)
    if (m->status == ModelStatus::kLoaded && m->holds == 0 && m->waiters == 0 && !m->unloading &&
        Clock::now() - m->last_used >= idle_for)
      unload(*m, UnloadReason::kIdle, lock);
}

ModelShelf::Clock::time_point ModelShelf::next_sleep_check() const {
  auto next = Clock::now() + std::chrono::hours(1);
  if (options_.sleep_idle_seconds <= 0) return next;
  const auto idle_for =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.sleep_idle_seconds));
  for (const auto& m : models_)
    if (m->status == ModelStatus::kLoaded && m->holds == 0) next = std::min(next, m->last_used + idle_for);
  return next;
}

}  // namespace autoglm
