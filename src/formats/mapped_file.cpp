#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace autoglm {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->size_ = size_t(st.st_size);
  if (file->size_ > 0) {
    void* map = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      return io_error(path + ": mmap failed: " + std::strerror(errno));
    }
    file->data_ = static_cast<const uint8_t*>(map);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace autoglm
