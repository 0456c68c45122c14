#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace autoglm {

namespace {

// The whole file read into anonymous private memory (munmap frees it like a mapping).
Result<const uint8_t*> read_whole(int fd, size_t size, const std::string& path) {
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return io_error(path + ": cannot allocate " + std::to_string(size) + " bytes to read it");
  auto* bytes = static_cast<uint8_t*>(mem);
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, off_t(done));
    if (n <= 0) {
      munmap(mem, size);
      return io_error(path + ": read failed at byte " + std::to_string(done) + ": " +
                      (n == 0 ? std::string("unexpected end of file") : std::string(std::strerror(errno))));
    }
    done += size_t(n);
  }
  mprotect(mem, size, PROT_READ);
  return bytes;
}

}  // namespace

void read_ahead(const void* p, size_t bytes) {
  // One request reads at most the device's readahead window (8 MiB here: a whole-range
  // MADV_WILLNEED read only that), so the range goes in windows.
  constexpr size_t kWindow = size_t(8) << 20;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t at = begin; at < end; at += kWindow)
    madvise(reinterpret_cast<void*>(at), std::min<size_t>(kWindow, end - at), MADV_WILLNEED);
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path, const FileLoad& load) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = size_t(st.st_size);
  if (file->size_ > 0 && !load.mmap) {
    auto bytes = read_whole(fd, file->size_, path);
    ::close(fd);
    if (!bytes) return bytes.status();
    file->data_ = *bytes;
  } else if (file->size_ > 0) {
    void* map = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return io_error(path + ": mmap failed: " + std::strerror(errno));
    }
    file->data_ = static_cast<const uint8_t*>(map);
    ::close(fd);
  } else {
    ::close(fd);
  }
  if (load.mlock && file->size_ > 0) {
    if (mlock(file->data_, file->size_) != 0)
      file->lock_failure_ = path + ": --mlock: cannot lock " + std::to_string(file->size_ >> 20) + " MiB in RAM (" +
                            std::strerror(errno) + "); raise RLIMIT_MEMLOCK (ulimit -l) to keep the weights resident";
  }
  return file;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace autoglm
