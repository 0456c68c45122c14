// The durable job store: what is written survives reopening the file (a restart), unfinished
// jobs are found again, ends are final, pages and retention, and a file that is not a
// database is an error naming it; the SQLite file's transactions and its size cap.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "server/jobs/job_store.h"

namespace autoglm {
namespace {

std::string fresh_path(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

Job job(const std::string& id, double created, const std::string& owner = "key-a") {
  Job j;
  j.id = id;
  j.endpoint = "/v1/chat/completions";
  j.body = R"({"messages": []})";
  j.owner = owner;
  j.created_at = created;
  return j;
}

TEST(JobStore, JobsSurviveReopeningAndUnfinishedOnesAreFound) {
  const std::string path = fresh_path("jobs.db");
  {
    auto store = JobStore::open(path);
    ASSERT_TRUE(store.is_ok()) << store.status().message();
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*store)->add(job("job_" + std::to_string(i), 100 + i)).is_ok());
    ASSERT_TRUE((*store)->start("job_0", 110).is_ok());
    ASSERT_TRUE(*(*store)->finish("job_0", JobStatus::kCompleted, 200, R"({"ok": true})", 120));
    ASSERT_TRUE((*store)->start("job_1", 111).is_ok());    // running when the "crash" comes
    EXPECT_FALSE((*store)->add(job("job_1", 1)).is_ok());  // ids are unique
  }
  auto store = JobStore::open(path);
  ASSERT_TRUE(store.is_ok());
  const auto done = (*store)->get("job_0");
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status, JobStatus::kCompleted);
  EXPECT_EQ(done->result, R"({"ok": true})");
  EXPECT_EQ(done->http_status, 200);
  EXPECT_EQ(done->attempts, 1);
  EXPECT_DOUBLE_EQ(done->finished_at, 120);
  auto unfinished = (*store)->unfinished();
  ASSERT_TRUE(unfinished.is_ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].id, "job_1");  // oldest first
  EXPECT_EQ((*unfinished)[0].status, JobStatus::kInProgress);
  EXPECT_EQ((*unfinished)[1].id, "job_2");
  EXPECT_EQ((*store)->counts()[JobStatus::kQueued], 1);
  EXPECT_FALSE((*store)->get("job_9").has_value());
}

TEST(JobStore, AnEndIsFinal) {
  auto store = JobStore::open(fresh_path("ends.db"));
  ASSERT_TRUE(store.is_ok());
  ASSERT_TRUE((*store)->add(job("job_c", 1)).is_ok());
  EXPECT_TRUE(*(*store)->finish("job_c", JobStatus::kCancelled, 499, "", 2));
  EXPECT_FALSE(*(*store)->finish("job_c", JobStatus::kCompleted, 200, "late", 3));  // the run ended after the cancel
  ASSERT_TRUE((*store)->start("job_c", 4).is_ok());                                 // not started again either
  EXPECT_EQ((*store)->get("job_c")->status, JobStatus::kCancelled);
  EXPECT_EQ((*store)->get("job_c")->result, "");
}

TEST(JobStore, PagesByOwnerAndStatusAndRetention) {
  auto store = JobStore::open(fresh_path("pages.db"));
  ASSERT_TRUE(store.is_ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*store)->add(job("job_" + std::to_string(i), i)).is_ok());
  ASSERT_TRUE((*store)->add(job("job_other", 9, "key-b")).is_ok());
  ASSERT_TRUE(*(*store)->finish("job_1", JobStatus::kFailed, 400, "{}", 50));
  ASSERT_TRUE(*(*store)->finish("job_3", JobStatus::kCompleted, 200, "{}", 60));
  auto first = (*store)->list("key-a", std::nullopt, "", 2);
  ASSERT_TRUE(first.is_ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].id, "job_4");  // newest first
  EXPECT_EQ((*first)[1].id, "job_3");
  auto second = (*store)->list("key-a", std::nullopt, "job_3", 10);
  ASSERT_EQ(second->size(), 3u);
  EXPECT_EQ((*second)[0].id, "job_2");
  auto queued = (*store)->list("key-a", JobStatus::kQueued, "", 10);
  EXPECT_EQ(queued->size(), 3u);
  EXPECT_EQ((*store)->list("key-b", std::nullopt, "", 10)->size(), 1u);  // only its owner's
  EXPECT_EQ(*(*store)->remove_finished_before(55), 1);                   // job_1 ended at 50
  EXPECT_FALSE((*store)->get("job_1").has_value());
  EXPECT_TRUE((*store)->get("job_3").has_value());
  EXPECT_TRUE((*store)->get("job_0").has_value());  // unfinished jobs are never removed
}

TEST(JobStore, AFileThatIsNotADatabaseIsAnErrorNamingIt) {
  const std::string path = fresh_path("garbage.db");
  std::ofstream(path) << std::string(4096, 'x');
  auto store = JobStore::open(path);
  ASSERT_FALSE(store.is_ok());
  EXPECT_NE(store.status().message().find("jobs.data_dir: " + path), std::string::npos) << store.status().message();
  auto missing = JobStore::open("/nonexistent-dir/jobs.db");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent-dir/jobs.db"), std::string::npos);
}

TEST(SqliteDb, ATransactionKeepsAllOrNothingAndAFullFileSaysSo) {
  auto db = SqliteDb::open(fresh_path("tx.db"), "CREATE TABLE t (v TEXT NOT NULL);", "test", 256 << 10);
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  SqliteDb& d = **db;
  const Status failed = d.transaction([&]() -> Status {
    AUTOGLM_RETURN_IF_ERROR(d.exec("INSERT INTO t VALUES ('a')"));
    return d.exec("INSERT INTO t VALUES (NULL)");  // NOT NULL: the whole transaction goes
  });
  EXPECT_FALSE(failed.is_ok());
  EXPECT_EQ(d.query("SELECT v FROM t")->size(), 0u);
  ASSERT_TRUE(d.transaction([&]() -> Status {
                 AUTOGLM_RETURN_IF_ERROR(d.exec("INSERT INTO t VALUES ('a')"));
                 return d.exec("INSERT INTO t VALUES ('b')");
               }).is_ok());
  EXPECT_EQ(d.query("SELECT v FROM t")->size(), 2u);
  Status full;
  for (int i = 0; i < 100 && full.is_ok(); ++i) full = d.exec("INSERT INTO t VALUES (?)", {std::string(16 << 10, 'x')});
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("test: "), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("full"), std::string::npos) << full.message();
  EXPECT_EQ(d.query("SELECT v FROM t WHERE v IN ('a', 'b')")->size(), 2u);  // what was there stays
}

}  // namespace
}  // namespace autoglm
