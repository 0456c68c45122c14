// How a model file's bytes come into memory: mapped (the default), read into private memory
// (--no-mmap), and locked in RAM (--mlock), with the lock's refusal reported, not fatal.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/mapped_file.h"

namespace autoglm {
namespace {

// This run's temporary folder, removed when the tests end.
const std::filesystem::path& test_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("autoglm-mapped-" + std::to_string(getpid()));
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// A file of `size` bytes, a known pattern, in this run's temporary folder.
std::string write_pattern_file(const std::string& name, size_t size) {
  const auto& dir = test_dir();
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::vector<char> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = char((i * 131 + 7) & 0xff);
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(size));
  return path;
}

bool holds_pattern(const MappedFile& f) {
  for (size_t i = 0; i < f.size(); ++i)
    if (f.data()[i] != uint8_t((i * 131 + 7) & 0xff)) return false;
  return true;
}

// The inode of the file behind the mapping that holds `p` (0: anonymous memory; -1: not mapped),
// from /proc/self/maps: compared with stat(), not by path, which overlay filesystems may rename.
long long mapped_inode(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long lo = 0, hi = 0;
    long long inode = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %lld", &lo, &hi, &inode) < 3) continue;
    if (at >= lo && at < hi) return inode;
  }
  return -1;
}

long long inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? (long long)st.st_ino : -2;
}

// Kibibytes locked in RAM by this process (VmLck of /proc/self/status).
long locked_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmLck:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(MappedFile, MappedByDefaultSoPagesAreSharedWithTheFile) {
  const std::string path = write_pattern_file("mapped.bin", 3 * 4096 + 17);
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), size_t(3 * 4096 + 17));
  EXPECT_TRUE(holds_pattern(**f));
  EXPECT_EQ(mapped_inode((*f)->data()), inode_of(path));
  EXPECT_TRUE((*f)->lock_failure().empty());
}

TEST(MappedFile, NoMmapReadsIntoPrivateMemory) {
  const std::string path = write_pattern_file("read.bin", 5 * 4096 + 3);
  auto f = MappedFile::open(path, FileLoad{.mmap = false, .mlock = false});
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->size(), size_t(5 * 4096 + 3));
  EXPECT_TRUE(holds_pattern(**f));
  EXPECT_EQ(mapped_inode((*f)->data()), 0) << "--no-mmap's bytes are not anonymous memory";
}

// Locks what the limit allows; past it, the file still opens and lock_failure names the file,
// the flag and the limit to raise. (A process with CAP_IPC_LOCK is not held to the limit.)
TEST(MappedFile, MlockLocksThePagesOrSaysWhyNot) {
  for (const bool mapped : {true, false}) {
    const std::string path = write_pattern_file(mapped ? "lock-mapped.bin" : "lock-read.bin", 8 * 4096);
    const long before = locked_kib();
    auto f = MappedFile::open(path, FileLoad{.mmap = mapped, .mlock = true});
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_TRUE(holds_pattern(**f));
    if ((*f)->lock_failure().empty()) {
      EXPECT_GE(locked_kib() - before, 32) << "mlock reported no failure, but VmLck did not grow";
    } else {
      rlimit limit{};
      ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &limit), 0);
      EXPECT_LT(limit.rlim_cur, rlim_t(before * 1024 + 8 * 4096))
          << "refused within the limit: " << (*f)->lock_failure();
    }
  }
}

// Sets whether CAP_IPC_LOCK (locking past RLIMIT_MEMLOCK) is in this thread's effective set;
// the permitted set is left alone, so a root test run can drop it and take it back.
bool set_ipc_lock_effective(bool on) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  if (on) {
    data[0].effective |= data[0].permitted & (1u << CAP_IPC_LOCK);
  } else {
    data[0].effective &= ~(1u << CAP_IPC_LOCK);
  }
  return syscall(SYS_capset, &header, data) == 0;
}

// RLIMIT_MEMLOCK's soft limit at 0 and CAP_IPC_LOCK out of the effective set while it lives;
// both restored when it goes, whatever the test's assertions did.
class NoLockingAllowed {
 public:
  NoLockingAllowed() {
    ok_ = getrlimit(RLIMIT_MEMLOCK, &saved_) == 0 && set_ipc_lock_effective(false);
    rlimit none = saved_;
    none.rlim_cur = 0;
    ok_ = ok_ && setrlimit(RLIMIT_MEMLOCK, &none) == 0;
  }
  ~NoLockingAllowed() {
    setrlimit(RLIMIT_MEMLOCK, &saved_);
    set_ipc_lock_effective(true);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST(MappedFile, MlockPastTheLimitIsReportedNotFatal) {
  const std::string path = write_pattern_file("over.bin", 4 * 4096);
  Result<std::unique_ptr<MappedFile>> f = invalid_argument("not opened");
  {
    const NoLockingAllowed no_locking;
    ASSERT_TRUE(no_locking.ok()) << "could not lower RLIMIT_MEMLOCK or drop CAP_IPC_LOCK";
    f = MappedFile::open(path, FileLoad{.mmap = true, .mlock = true});
  }
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE(holds_pattern(**f));
  const std::string& why = (*f)->lock_failure();
  EXPECT_NE(why.find(path), std::string::npos) << why;
  EXPECT_NE(why.find("--mlock"), std::string::npos) << why;
  EXPECT_NE(why.find("ulimit -l"), std::string::npos) << why;
}

TEST(MappedFile, ErrorsNameTheFile) {
  auto missing = MappedFile::open("/nonexistent/model.gguf", FileLoad{.mmap = false, .mlock = false});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf: cannot open"), std::string::npos);
  const auto dir = std::filesystem::temp_directory_path();
  auto folder = MappedFile::open(dir.string());
  ASSERT_FALSE(folder.is_ok());
  EXPECT_NE(folder.status().message().find("not a regular file"), std::string::npos);
}

TEST(MappedFile, EmptyFileOpensEitherWay) {
  const std::string path = write_pattern_file("empty.bin", 0);
  for (const bool mapped : {true, false}) {
    auto f = MappedFile::open(path, FileLoad{.mmap = mapped, .mlock = true});
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ((*f)->size(), 0u);
    EXPECT_TRUE((*f)->lock_failure().empty());
  }
}

}  // namespace
}  // namespace autoglm
