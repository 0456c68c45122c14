// Jobs and batches on a damaged store. A jobs.data_dir database that is truncated, zero-filled,
// damaged inside, or another program's SQLite file stops the start with an error naming the file
// and leaves it as it was; a WAL left by a crash is read, not taken for damage. A disk that
// fills (or fails) under a running batch answers 503, starts nothing, keeps every answer it could
// not write, and once there is room again answers every accepted line exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_util.h"
#include "server/api.h"
#include "server/http/http_server.h"
#include "server/jobs/async_jobs.h"
#include "server/jobs/batches.h"
#include "server_test_util.h"
#include "test_util.h"

namespace autoglm {

// Names the cases in ctest (found by ADL, so beside WriteFault).
void PrintTo(WriteFault fault, std::ostream* os) {
  *os << (fault == WriteFault::kDiskFull ? "disk full" : "I/O error");
}

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string dir = (fs::path(::testing::TempDir()) / ("store-damage-" + name)).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string batch_line(const std::string& custom_id, const std::string& content) {
  return json{{"custom_id", custom_id},
              {"method", "POST"},
              {"url", "/v1/chat/completions"},
              {"body", {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 4}}}}
             .dump() +
         "\n";
}

// Undoes a write fault however the test ends.
struct FaultGuard {
  std::string path;
  FaultGuard(std::string p, WriteFault fault) : path(std::move(p)) { sqlite_fail_writes(path, fault); }
  void clear() { sqlite_fail_writes(path, WriteFault::kNone); }
  ~FaultGuard() { clear(); }
};

// The jobs and the batches over one data_dir, as the server holds them (the runners stop first).
struct Store {
  std::unique_ptr<AsyncJobs> jobs;
  std::unique_ptr<Batches> batches;
  ~Store() {
    if (jobs) jobs->stop();
    batches.reset();
    jobs.reset();
  }
};

JobsConfig config_in(const std::string& dir, int concurrency = 2) {
  JobsConfig c;
  c.data_dir = dir;
  c.concurrency = concurrency;
  return c;
}

RunJob never_runs() {
  return [](const Job&, const std::string&, JobRun&) { return std::pair<int, std::string>(500, "{}"); };
}

// Opens what a server opens at start-up: the job store, then the files and batches beside it.
Status open_store(const JobsConfig& config, RunJob run, Store& out) {
  auto jobs = AsyncJobs::start(config, {}, std::move(run));
  if (!jobs) return jobs.status();
  out.jobs = std::move(jobs).value();
  auto batches = Batches::start(*out.jobs, config);
  if (!batches) return batches.status();
  out.batches = std::move(batches).value();
  return Status::ok();
}

const std::string kMarker = "MIDDLE-OF-THE-UPLOAD";

// A store as a server leaves it: queued jobs and an uploaded batch input of many pages (kMarker
// half way through it). Closed, so the file holds everything (no WAL).
void make_store(const std::string& dir) {
  Store s;
  ASSERT_TRUE(open_store(config_in(dir), never_runs(), s).is_ok());
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(
        s.jobs->submit("/v1/completions", R"({"prompt": ")" + std::string(300, 'j') + R"("})", "", "", "").is_ok());
  std::string input;
  for (int i = 0; i < 40; ++i) input += batch_line("line-" + std::to_string(i), std::string(2000, 'a' + i % 26));
  input += batch_line("marker", kMarker);
  for (int i = 40; i < 80; ++i) input += batch_line("line-" + std::to_string(i), std::string(2000, 'a' + i % 26));
  ASSERT_TRUE(s.batches->upload("", "input.jsonl", input).is_ok());
}

// What a start on `dir` says, and that it left jobs.db as it was.
Status start_on_damaged(const std::string& dir) {
  const std::string path = dir + "/jobs.db";
  const std::string before = bytes_of(path);
  Store s;
  Status st = open_store(config_in(dir), never_runs(), s);
  EXPECT_EQ(bytes_of(path), before) << "the start changed " << path;
  return st;
}

void expect_says(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.is_ok()) << "the start went on";
  for (const std::string& part : parts)
    EXPECT_NE(st.message().find(part), std::string::npos) << "'" << part << "' not in: " << st.message();
}

class DamagedStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    path = dir + "/jobs.db";
    make_store(dir);
    size = int64_t(fs::file_size(path));
    ASSERT_GT(size, 64 << 10) << "the store should span many pages";
    ASSERT_FALSE(fs::exists(path + "-wal"));
  }
  std::string dir, path;
  int64_t size = 0;
};

TEST_F(DamagedStore, ATruncatedFileStopsTheStartNamingIt) {
  fs::resize_file(path, size / 2);
  expect_says(start_on_damaged(dir), {"jobs.data_dir: " + path + ": ", "malformed", "left as it is"});
  fs::resize_file(path, 100);  // the header only
  expect_says(start_on_damaged(dir), {"jobs.data_dir: " + path + ": ", "malformed"});
}

TEST_F(DamagedStore, AZeroFilledFileStopsTheStartNamingIt) {
  write_bytes(path, std::string(size_t(size), '\0'));
  const Status st = start_on_damaged(dir);
  expect_says(st, {"jobs.data_dir: " + path + ": file is not a database", "left as it is"});
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
}

// A page no start-up query reads (inside the upload): only reading the whole file finds it.
TEST_F(DamagedStore, APageZeroedInsideTheFileStopsTheStart) {
  std::string bytes = bytes_of(path);
  const size_t at = bytes.find(kMarker);
  ASSERT_NE(at, std::string::npos);
  const size_t page = at / 4096 * 4096;
  ASSERT_GT(page, 0u);
  std::fill(bytes.begin() + page, bytes.begin() + page + 4096, '\0');
  write_bytes(path, bytes);
  expect_says(start_on_damaged(dir), {"jobs.data_dir: " + path + ": the database is damaged (PRAGMA quick_check: "});
}

TEST(ForeignStore, AnotherProgramsDatabaseStopsTheStartAndIsLeftAlone) {
  const std::string dir = fresh_dir("foreign");
  const std::string path = dir + "/jobs.db";
  {
    auto db = SqliteDb::open(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT);", "test");
    ASSERT_TRUE(db.is_ok()) << db.status().message();
    ASSERT_TRUE((*db)->exec("INSERT INTO notes (text) VALUES ('keep me')").is_ok());
    ASSERT_TRUE((*db)->exec("PRAGMA journal_mode=DELETE").is_ok());  // as most programs leave a file
  }
  const Status st = start_on_damaged(dir);
  expect_says(st, {"jobs.data_dir: " + path + ": has tables notes but none of 'callback_attempts', 'callbacks', 'jobs'",
                   "not an Open-AutoGLM store"});
  auto db = SqliteDb::open(path, "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT);", "test");
  ASSERT_TRUE(db.is_ok());
  EXPECT_EQ((*db)->query("SELECT name FROM sqlite_master WHERE type = 'table'")->size(), 1u);  // no jobs table added
}

TEST(ForeignStore, ASameNamedTableOfAnotherShapeStopsTheStart) {
  const std::string dir = fresh_dir("shape");
  const std::string path = dir + "/jobs.db";
  {
    auto db = SqliteDb::open(path, "CREATE TABLE jobs (id TEXT, name TEXT);", "test");
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE((*db)->exec("PRAGMA journal_mode=DELETE").is_ok());  // as most programs leave a file
  }
  expect_says(start_on_damaged(dir), {"jobs.data_dir: " + path + ": has a table 'jobs' without column 'attempts'",
                                      "not an Open-AutoGLM store"});
  // The same for the tables the batches add to a job store.
  const std::string other = fresh_dir("shape-files");
  {
    auto store = JobStore::open(other + "/jobs.db");
    ASSERT_TRUE(store.is_ok());
    ASSERT_TRUE((*store)->db().exec("CREATE TABLE files (id TEXT, data BLOB)").is_ok());
  }
  expect_says(start_on_damaged(other),
              {"jobs.data_dir: " + other + "/jobs.db: has a table 'files' without column 'bytes'"});
}

TEST(LeftoverStore, AnEmptyFileStartsAnEmptyStore) {
  const std::string dir = fresh_dir("empty");
  write_bytes(dir + "/jobs.db", "");
  Store s;
  ASSERT_TRUE(open_store(config_in(dir), never_runs(), s).is_ok());
  EXPECT_TRUE(s.jobs->store().unfinished()->empty());
}

// A server killed while it held the store leaves its last writes in jobs.db-wal (and a
// jobs.db-shm index, which may be stale): the next start reads them, it is no damage.
TEST(LeftoverStore, AWalLeftByACrashIsReadNotTakenForDamage) {
  const std::string dir = fresh_dir("wal");
  Store s;
  ASSERT_TRUE(open_store(config_in(dir), never_runs(), s).is_ok());
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(s.jobs->submit("/v1/completions", R"({"prompt": "x"})", "", "", "")->id);
  ASSERT_GT(fs::file_size(dir + "/jobs.db-wal"), 0u) << "the jobs should be in the WAL still";
  for (const bool stale_index : {false, true}) {
    const std::string copy = fresh_dir(stale_index ? "wal-stale-index" : "wal-copy");
    for (const char* suffix : {"", "-wal", "-shm"})  // as a kill -9 leaves them, the store still open
      fs::copy_file(dir + "/jobs.db" + suffix, copy + "/jobs.db" + suffix);
    if (stale_index)
      write_bytes(copy + "/jobs.db-shm", std::string(size_t(fs::file_size(copy + "/jobs.db-shm")), '\0'));
    Store again;
    const Status st = open_store(config_in(copy), never_runs(), again);
    ASSERT_TRUE(st.is_ok()) << st.message();
    auto left = again.jobs->store().unfinished();
    ASSERT_TRUE(left.is_ok());
    ASSERT_EQ(left->size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*left)[i].id, ids[i]);
  }
}

// The fault switch itself: writes to the file fail as SQLite sees a full or a broken disk,
// reads go on, another file is untouched, and nothing written before is lost.
TEST(WriteFaults, AFullOrFailingDiskRefusesWritesAndLosesNothing) {
  const std::string dir = fresh_dir("faults");
  auto a = SqliteDb::open(dir + "/a.db", "CREATE TABLE IF NOT EXISTS t (v TEXT NOT NULL);", "test.a");
  auto b = SqliteDb::open(dir + "/b.db", "CREATE TABLE IF NOT EXISTS t (v TEXT NOT NULL);", "test.b");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  ASSERT_TRUE((*a)->exec("INSERT INTO t VALUES ('before')").is_ok());
  size_t rows = 1;
  for (const auto& [fault, code, says] :
       {std::tuple{WriteFault::kDiskFull, StatusCode::kResourceExhausted, "database or disk is full"},
        std::tuple{WriteFault::kIoError, StatusCode::kIoError, "disk I/O error"}}) {
    FaultGuard guard(dir + "/a.db", fault);
    const Status refused = (*a)->exec("INSERT INTO t VALUES ('during')");
    EXPECT_EQ(refused.code(), code) << refused.message();
    EXPECT_NE(refused.message().find("test.a: " + dir + "/a.db: " + says), std::string::npos) << refused.message();
    const Status in_tx = (*a)->transaction([&] { return (*a)->exec("INSERT INTO t VALUES ('during')"); });
    EXPECT_EQ(in_tx.code(), code) << in_tx.message();
    EXPECT_EQ((*a)->query("SELECT v FROM t")->size(), rows);  // reads go on
    EXPECT_TRUE((*b)->exec("INSERT INTO t VALUES ('elsewhere')").is_ok());
    guard.clear();
    ASSERT_TRUE((*a)->exec("INSERT INTO t VALUES ('after')").is_ok());
    ++rows;
  }
  EXPECT_EQ((*a)->query("SELECT v FROM t")->size(), 3u);
  EXPECT_EQ(sql_text((*a)->query("PRAGMA quick_check")->front()[0]), "ok");
}

// Each run waits at the gate until it opens (or the runners stop), and is counted.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, int> runs;  // custom_id (or job id) -> times run
  int started = 0;
  bool open = false;

  RunJob runner(std::shared_ptr<Gate> self) {
    return [self](const Job& job, const std::string&, JobRun& run) {
      run.arm([self] { self->release(); });
      const std::string key = job.custom_id.empty() ? job.id : job.custom_id;
      std::unique_lock<std::mutex> lock(self->mutex);
      ++self->runs[key];
      ++self->started;
      self->changed.notify_all();
      self->changed.wait(lock, [&] { return self->open; });
      return std::pair<int, std::string>(200, json{{"answer", key}, {"run", self->runs[key]}}.dump());
    };
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    changed.notify_all();
  }
  bool started_at_least(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(30), [&] { return started >= n; });
  }
  int started_now() {
    std::lock_guard<std::mutex> lock(mutex);
    return started;
  }
};

class FullStore : public ::testing::TestWithParam<WriteFault> {
 protected:
  void SetUp() override {
    dir = fresh_dir(std::string("full-") + (GetParam() == WriteFault::kDiskFull ? "disk" : "io") + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    gate = std::make_shared<Gate>();
  }
  StatusCode refusal() const {
    return GetParam() == WriteFault::kDiskFull ? StatusCode::kResourceExhausted : StatusCode::kIoError;
  }
  std::string dir;
  std::shared_ptr<Gate> gate;
};

// Lines 1 and 2 are running when the disk fills: their answers cannot be written, nothing else
// starts, a new batch, upload or job is refused; with room again every accepted line is
// answered once, none run twice, and what was refused left nothing behind.
TEST_P(FullStore, ABatchRunningWhenTheDiskFillsAnswersEveryAcceptedLineOnce) {
  Store s;
  ASSERT_TRUE(open_store(config_in(dir, 2), gate->runner(gate), s).is_ok());
  s.jobs->run();
  std::string input;
  for (int i = 1; i <= 6; ++i) input += batch_line("req-" + std::to_string(i), "line " + std::to_string(i));
  auto file = s.batches->upload("", "in.jsonl", input);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto batch = s.batches->create("", file->id, "/v1/chat/completions", "24h", "");
  ASSERT_TRUE(batch.is_ok()) << batch.status().message();
  ASSERT_TRUE(gate->started_at_least(2)) << "two lines never started";

  FaultGuard full(dir + "/jobs.db", GetParam());
  auto second = s.batches->create("", file->id, "/v1/chat/completions", "24h", "");
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), refusal()) << second.status().message();
  EXPECT_NE(second.status().message().find("jobs.data_dir: " + dir + "/jobs.db: "), std::string::npos)
      << second.status().message();
  EXPECT_EQ(s.batches->upload("", "more.jsonl", input).status().code(), refusal());
  EXPECT_EQ(s.jobs->submit("/v1/completions", R"({"prompt": "x"})", "", "", "").status().code(), refusal());

  gate->release();
  ASSERT_TRUE(test::wait_until([&] { return s.jobs->unwritten_ends() == 2; }, std::chrono::seconds(30)))
      << "the two answers were not kept: " << s.jobs->unwritten_ends();
  EXPECT_EQ(gate->started_now(), 2) << "a line started while the store refused writes";
  const auto during = s.batches->get(batch->id, "");
  ASSERT_TRUE(during);
  EXPECT_EQ(during->status, BatchStatus::kInProgress);
  EXPECT_EQ(during->completed, 0);
  EXPECT_EQ(s.jobs->store().batch_counts(batch->id)[JobStatus::kInProgress], 2);

  full.clear();
  ASSERT_TRUE(
      test::wait_until([&] { return batch_final(s.batches->get(batch->id, "")->status); }, std::chrono::seconds(60)))
      << "the batch never ended after room came back";
  const auto done = *s.batches->get(batch->id, "");
  EXPECT_EQ(done.status, BatchStatus::kCompleted);
  EXPECT_EQ(done.completed, 6);
  EXPECT_EQ(done.failed, 0);
  EXPECT_TRUE(done.error_file_id.empty());
  auto output = s.batches->file_content(done.output_file_id, "");
  ASSERT_TRUE(output.is_ok()) << output.status().message();
  std::map<std::string, int> answered;
  std::stringstream lines(*output);
  for (std::string text; std::getline(lines, text);) {
    const json line = json::parse(text);
    const std::string id = line["custom_id"];
    ++answered[id];
    EXPECT_EQ(line["response"]["status_code"], 200) << text;
    EXPECT_EQ(line["response"]["body"]["answer"], id) << text;
    EXPECT_EQ(line["response"]["body"]["run"], 1) << text;
  }
  EXPECT_EQ(answered.size(), 6u);
  for (const auto& [id, times] : answered) EXPECT_EQ(times, 1) << id << " answered " << times << " times";
  for (const auto& [id, times] : gate->runs) EXPECT_EQ(times, 1) << id << " ran " << times << " times";
  EXPECT_EQ(s.batches->list("", "", 10)->size(), 1u);  // the refused batch left nothing
  EXPECT_EQ(s.jobs->list("", std::nullopt, "", 10)->size(), 0u);
  EXPECT_EQ(s.jobs->unwritten_ends(), 0);
}

// A job's answer written once the disk has room again: the job is not run again.
TEST_P(FullStore, AJobThatEndsOnAFullDiskIsWrittenOnceThereIsRoom) {
  Store s;
  ASSERT_TRUE(open_store(config_in(dir, 1), gate->runner(gate), s).is_ok());
  s.jobs->run();
  auto job = s.jobs->submit("/v1/completions", R"({"prompt": "x"})", "", "", "");
  ASSERT_TRUE(job.is_ok());
  ASSERT_TRUE(gate->started_at_least(1));
  auto queued = s.jobs->submit("/v1/completions", R"({"prompt": "y"})", "", "", "");  // waits for the runner
  ASSERT_TRUE(queued.is_ok());
  FaultGuard full(dir + "/jobs.db", GetParam());
  auto cancel = s.jobs->cancel(queued->id, "");  // refused: the job goes on
  ASSERT_FALSE(cancel.is_ok());
  EXPECT_EQ(cancel.status().code(), refusal()) << cancel.status().message();
  gate->release();
  ASSERT_TRUE(test::wait_until([&] { return s.jobs->unwritten_ends() == 1; }, std::chrono::seconds(30)))
      << "the answer was not kept";
  EXPECT_EQ(s.jobs->get(job->id, "")->status, JobStatus::kInProgress);
  EXPECT_EQ(s.jobs->get(queued->id, "")->status, JobStatus::kQueued);
  full.clear();
  for (const std::string& id : {job->id, queued->id}) {
    ASSERT_TRUE(test::wait_until([&] { return s.jobs->get(id, "")->status == JobStatus::kCompleted; },
                                 std::chrono::seconds(60)))
        << id << " was never answered";
    const Job done = *s.jobs->get(id, "");
    EXPECT_EQ(done.attempts, 1);
    EXPECT_EQ(json::parse(done.result)["run"], 1);
    EXPECT_EQ(gate->runs[id], 1);
  }
}

// A stop while an answer waits for room: the job is in progress in the file, so the next start
// runs it again (the documented recovery: an accepted job is answered, never dropped).
TEST_P(FullStore, AnAnswerStillUnwrittenAtAStopRunsAgainAtTheNextStart) {
  std::string id;
  {
    Store s;
    ASSERT_TRUE(open_store(config_in(dir, 1), gate->runner(gate), s).is_ok());
    s.jobs->run();
    auto job = s.jobs->submit("/v1/completions", R"({"prompt": "x"})", "", "", "");
    ASSERT_TRUE(job.is_ok());
    id = job->id;
    ASSERT_TRUE(gate->started_at_least(1));
    FaultGuard full(dir + "/jobs.db", GetParam());
    gate->release();
    ASSERT_TRUE(test::wait_until([&] { return s.jobs->unwritten_ends() == 1; }, std::chrono::seconds(30)));
    s.jobs->stop();  // still refused: its last try fails too
    EXPECT_EQ(s.jobs->unwritten_ends(), 1);
  }
  auto again = std::make_shared<Gate>();
  again->open = true;
  Store s;
  ASSERT_TRUE(open_store(config_in(dir, 1), again->runner(again), s).is_ok());
  s.jobs->run();
  ASSERT_TRUE(
      test::wait_until([&] { return s.jobs->get(id, "")->status == JobStatus::kCompleted; }, std::chrono::seconds(60)));
  EXPECT_EQ(s.jobs->get(id, "")->attempts, 2);
}

INSTANTIATE_TEST_SUITE_P(Faults, FullStore, ::testing::Values(WriteFault::kDiskFull, WriteFault::kIoError),
                         [](const auto& info) { return info.param == WriteFault::kDiskFull ? "DiskFull" : "IoError"; });

// Over HTTP on stories260K: the start-up error of a damaged store, and the 503s of a full one.
class DamagedStoreServer : public test::ServerTest {
 protected:
  void SetUp() override {
    AUTOGLM_REQUIRE_SHARED("models/stories260K.gguf");
    dir = fresh_dir(std::string("server-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cfg.jobs.data_dir = dir;
    cfg.jobs.concurrency = 1;
  }
  Status start() { return try_start(cfg); }
  test::HttpResult call(const std::string& method, const std::string& path, const std::string& body = "",
                        const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return test::http_call(port, method, path, body, headers);
  }
  test::HttpResult upload(const std::string& jsonl) {
    const std::string boundary = "----damage-test";
    const std::string body = "--" + boundary +
                             "\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--" + boundary +
                             "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n" +
                             jsonl + "\r\n--" + boundary + "--\r\n";
    return call("POST", "/v1/files", body, {{"Content-Type", "multipart/form-data; boundary=" + boundary}});
  }
  ServerConfig cfg;
  std::string dir;
};

TEST_F(DamagedStoreServer, TheStartFailsNamingTheFile) {
  write_bytes(dir + "/jobs.db", std::string(8192, '\0'));
  const Status st = start();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("jobs.data_dir: " + dir + "/jobs.db: file is not a database"), std::string::npos)
      << st.message();
}

TEST_F(DamagedStoreServer, AFullStoreAnswers503WithRetryAfterNamingIt) {
  ASSERT_TRUE(start().is_ok());
  std::string input;
  for (int i = 1; i <= 3; ++i) input += batch_line("req-" + std::to_string(i), "Once upon a time");
  const auto file = upload(input);
  ASSERT_EQ(file.status, 200) << file.body;
  const std::string create =
      json{{"input_file_id", file.j()["id"]}, {"endpoint", "/v1/chat/completions"}, {"completion_window", "24h"}}
          .dump();
  for (const auto& [fault, retry_after, says] : {std::tuple{WriteFault::kDiskFull, "30", "the jobs storage is full"},
                                                 std::tuple{WriteFault::kIoError, "1", "disk I/O error"}}) {
    FaultGuard guard(dir + "/jobs.db", fault);
    for (const auto& r : {call("POST", "/v1/batches", create), upload(input),
                          call("POST", "/v1/async/completions", R"({"prompt": "Once", "max_tokens": 2})")}) {
      ASSERT_EQ(r.status, 503) << r.body;
      EXPECT_EQ(r.header("Retry-After"), retry_after) << r.body;
      const std::string message = r.j()["error"]["message"];
      EXPECT_NE(message.find(says), std::string::npos) << message;
      EXPECT_NE(message.find("jobs.data_dir: " + dir + "/jobs.db"), std::string::npos) << message;
    }
    EXPECT_EQ(call("GET", "/health").status, 200);
    EXPECT_EQ(test::metric_in(call("GET", "/metrics").body, "autoglm_jobs_unwritten"), 0);
  }
  const auto batch = call("POST", "/v1/batches", create);  // room again
  ASSERT_EQ(batch.status, 200) << batch.body;
  const std::string id = batch.j()["id"];
  json done;
  ASSERT_TRUE(test::wait_until(
      [&] {
        done = call("GET", "/v1/batches/" + id).j();
        return done["status"] == "completed";
      },
      std::chrono::seconds(120)))
      << done.dump();
  EXPECT_EQ(done["request_counts"]["completed"], 3);
  EXPECT_EQ(call("GET", "/v1/batches").j()["data"].size(), 1u);  // the refused ones left nothing
}

}  // namespace
}  // namespace autoglm
