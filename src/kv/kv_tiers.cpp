#include "kv/kv_tiers.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/log.h"

namespace autoglm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'A', 'G', 'K', 'V', 'B', 'L', 'K', '1'};

// A block file's head; the checksum covers the other fields and the bytes after it.
struct FileHeader {
  char magic[8];
  uint64_t model_key, format_key, hash, bytes, checksum;
};

uint64_t checksum_of(FileHeader header, const uint8_t* bytes, size_t n) {
  header.checksum = 0;
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &header, sizeof(header));
  XXH3_64bits_update(state, bytes, n);
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return sum;
}

std::string hex(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof(s), "%016" PRIx64, v);
  return s;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(fs::file_time_type::clock::now().time_since_epoch())
      .count();
}

}  // namespace

KvTiers::KvTiers(KvTierOptions options) : options_(std::move(options)) {
  if (options_.disk_dir.empty()) return;
  folder_ = (fs::path(options_.disk_dir) / (hex(options_.model_key) + "-" + hex(options_.format_key))).string();
  std::error_code ec;
  fs::create_directories(folder_, ec);
  if (ec) {
    log_line(LogLevel::kWarning,
             "kv cache disk tier: cannot create " + folder_ + ": " + ec.message() + " (no disk tier)");
    options_.disk_dir.clear();
    return;
  }
  if (!lock_folder()) {
    options_.disk_dir.clear();
    return;
  }
  index_disk();
}

KvTiers::~KvTiers() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // the lock goes with it
}

// The folder's lock, so that one process's budget holds over its files; false (warned) when
// another process holds it. Where no lock can be taken (a read-only folder, a file system without
// flock) the tier runs without one, warned.
bool KvTiers::lock_folder() {
  const std::string path = folder_ + "/lock";
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    log_line(LogLevel::kWarning, "kv cache disk tier: cannot open " + path + ": " + std::strerror(errno) +
                                     " (the tier runs without its lock)");
    return true;
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error != EWOULDBLOCK) {
      log_line(LogLevel::kWarning, "kv cache disk tier: cannot lock " + path + ": " + std::strerror(error) +
                                       " (the tier runs without its lock)");
      ::close(lock_fd_);
      lock_fd_ = -1;
      return true;
    }
    char owner[32] = {};
    const ssize_t n = ::pread(lock_fd_, owner, sizeof(owner) - 1, 0);
    log_line(LogLevel::kWarning, "kv cache disk tier: " + folder_ + " is in use by another process (pid " +
                                     std::string(owner, size_t(std::max<ssize_t>(n, 0))) +
                                     "); this one runs without the disk tier (give each its own --cache-disk-dir)");
    ::close(lock_fd_);
    lock_fd_ = -1;
    return false;
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid only names the owner in another process's warning; the lock holds without it.
  }
  return true;
}

std::shared_ptr<KvTiers> open_kv_tiers(const KvTierOptions& options) {
  if (options.disk_dir.empty()) return std::make_shared<KvTiers>(options);
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<KvTiers>> open;
  const std::string key = options.disk_dir + "/" + hex(options.model_key) + "-" + hex(options.format_key);
  std::lock_guard<std::mutex> lock(mutex);
  if (std::shared_ptr<KvTiers> shared = open[key].lock()) return shared;
  auto tiers = std::make_shared<KvTiers>(options);
  open[key] = tiers;
  return tiers;
}

std::string KvTiers::file_of(uint64_t hash) const {
  return folder_ + "/" + hex(hash) + ".kv";
}

// The files a run before left: each block file by its modification time (the order of last use);
// leftovers of an interrupted write go.
void KvTiers::index_disk() {
  std::error_code ec;
  for (fs::directory_iterator it(folder_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    const std::string name = p.filename().string();
    if (name.find(".tmp-") != std::string::npos) {
      fs::remove(p, ec);
      continue;
    }
    if (p.extension() != ".kv" || name.size() != 19) continue;
    uint64_t hash = 0;
    if (std::sscanf(name.c_str(), "%16" SCNx64, &hash) != 1) continue;
    std::error_code size_ec, time_ec;
    const int64_t bytes = int64_t(fs::file_size(p, size_ec));
    const int64_t used = fs::last_write_time(p, time_ec).time_since_epoch().count();
    if (size_ec || time_ec) continue;
    on_disk_[hash] = {used, bytes};
    disk_by_use_.emplace(used, hash);
    disk_held_ += bytes;
  }
  trim_disk();
}

KvTiers::RamBlock KvTiers::block_of(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values,
                                    int64_t value_bytes) {
  RamBlock block{hash, std::vector<uint8_t>(size_t(key_bytes + value_bytes))};
  std::memcpy(block.bytes.data(), keys, size_t(key_bytes));
  if (value_bytes > 0) std::memcpy(block.bytes.data() + key_bytes, values, size_t(value_bytes));
  return block;
}

void KvTiers::put(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes) {
  if (enabled()) keep(hash, keys, key_bytes, values, value_bytes, options_.ram_bytes <= 0);
}

void KvTiers::save(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes) {
  if (has_disk()) keep(hash, keys, key_bytes, values, value_bytes, true);
}

// A block into RAM (the oldest spilling to disk past ram_bytes), or straight to disk.
void KvTiers::keep(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes,
                   bool straight_to_disk) {
  const auto began = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_in += key_bytes + value_bytes;
  if (straight_to_disk && on_disk_.count(hash)) {
    mark_used_on_disk(hash, now_ns());  // held already: no copy
  } else if (straight_to_disk) {
    spill_to_disk(block_of(hash, keys, key_bytes, values, value_bytes));
  } else if (!in_ram_.count(hash)) {
    RamBlock block = block_of(hash, keys, key_bytes, values, value_bytes);
    ram_held_ += int64_t(block.bytes.size());
    in_ram_[block.hash] = ram_.insert(ram_.end(), std::move(block));
    while (ram_held_ > options_.ram_bytes && !ram_.empty()) {
      RamBlock& oldest = ram_.front();
      spill_to_disk(oldest);
      ram_held_ -= int64_t(oldest.bytes.size());
      in_ram_.erase(oldest.hash);
      ram_.pop_front();
    }
  }
  stats_.copy_seconds += seconds_since(began);
}

// With mutex_ held. A block already on disk is only marked used.
void KvTiers::spill_to_disk(const RamBlock& block) {
  if (options_.disk_dir.empty()) return;
  const int64_t used = now_ns();
  if (on_disk_.count(block.hash)) {
    mark_used_on_disk(block.hash, used);
    return;
  }
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.model_key = options_.model_key;
  header.format_key = options_.format_key;
  header.hash = block.hash;
  header.bytes = uint64_t(block.bytes.size());
  header.checksum = checksum_of(header, block.bytes.data(), block.bytes.size());
  const std::string path = file_of(block.hash);
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(reinterpret_cast<const char*>(block.bytes.data()), std::streamsize(block.bytes.size()));
    if (!out) {
      log_line(LogLevel::kWarning, "kv cache disk tier: cannot write " + temp + " (the block is dropped)");
      std::error_code ec;
      fs::remove(temp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);  // whole or absent, even if the process dies here
  if (ec) {
    fs::remove(temp, ec);
    return;
  }
  const int64_t bytes = int64_t(sizeof(header) + block.bytes.size());
  on_disk_[block.hash] = {used, bytes};
  disk_by_use_.emplace(used, block.hash);
  disk_held_ += bytes;
  trim_disk();
}

// With mutex_ held: a file on disk used now (its time too, the order of use after a restart).
void KvTiers::mark_used_on_disk(uint64_t hash, int64_t used) {
  auto it = on_disk_.find(hash);
  disk_by_use_.erase(std::find_if(disk_by_use_.lower_bound(it->second.first), disk_by_use_.end(),
                                  [&](const auto& e) { return e.second == hash; }));
  it->second.first = used;
  disk_by_use_.emplace(used, hash);
  std::error_code ec;
  fs::last_write_time(file_of(hash), fs::file_time_type(fs::file_time_type::duration(used)), ec);
}

// With mutex_ held: the least recently used files go past disk_bytes.
void KvTiers::trim_disk() {
  while (options_.disk_bytes > 0 && disk_held_ > options_.disk_bytes && !disk_by_use_.empty()) {
    const uint64_t hash = disk_by_use_.begin()->second;
    disk_by_use_.erase(disk_by_use_.begin());
    disk_held_ -= on_disk_[hash].second;
    on_disk_.erase(hash);
    std::error_code ec;
    fs::remove(file_of(hash), ec);
  }
}

std::string check_block_file(const uint8_t* file, size_t size, uint64_t model_key, uint64_t format_key, uint64_t hash,
                             size_t bytes) {
  FileHeader header{};
  if (size < sizeof(header)) return "cut short (no head)";
  std::memcpy(&header, file, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) return "not a KV block file";
  if (header.model_key != model_key || header.format_key != format_key) return "another model's or KV format's block";
  if (header.hash != hash || header.bytes != bytes) return "another block, or another size";
  if (size != sizeof(header) + bytes) return "cut short or too long";
  if (checksum_of(header, file + sizeof(header), bytes) != header.checksum)
    return "its checksum does not match (damaged)";
  return "";
}

size_t block_file_head_bytes() {
  return sizeof(FileHeader);
}

// With mutex_ held: the file's bytes, when its head and checksum say they are this block's; a
// file that is not is removed.
bool KvTiers::read_from_disk(uint64_t hash, size_t n, std::vector<uint8_t>& bytes) {
  auto it = on_disk_.find(hash);
  if (it == on_disk_.end()) return false;
  bytes.resize(n);
  const std::string path = file_of(hash);
  std::vector<uint8_t> file(sizeof(FileHeader) + bytes.size());
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(file.data()), std::streamsize(file.size()));
  size_t got = size_t(in.gcount());
  if (got == file.size() && in.peek() != std::char_traits<char>::eof()) ++got;  // longer than a block file
  const std::string wrong =
      check_block_file(file.data(), got, options_.model_key, options_.format_key, hash, bytes.size());
  if (wrong.empty()) {
    std::memcpy(bytes.data(), file.data() + sizeof(FileHeader), bytes.size());
    return true;
  }
  log_line(LogLevel::kWarning, "kv cache disk tier: skipped " + path + ": " + wrong);
  ++stats_.disk_rejected;
  disk_by_use_.erase(std::find_if(disk_by_use_.lower_bound(it->second.first), disk_by_use_.end(),
                                  [&](const auto& e) { return e.second == hash; }));
  disk_held_ -= it->second.second;
  on_disk_.erase(it);
  std::error_code ec;
  fs::remove(path, ec);
  return false;
}

bool KvTiers::take(uint64_t hash, uint8_t* keys, int64_t key_bytes, uint8_t* values, int64_t value_bytes) {
  if (!enabled()) return false;
  const auto began = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint8_t> from_disk;
  const std::vector<uint8_t>* bytes = nullptr;
  auto in_ram = in_ram_.find(hash);
  if (in_ram != in_ram_.end() && int64_t(in_ram->second->bytes.size()) == key_bytes + value_bytes) {
    bytes = &in_ram->second->bytes;
    ++stats_.ram_hits;
  } else {
    if (!read_from_disk(hash, size_t(key_bytes + value_bytes), from_disk)) {
      ++stats_.misses;
      return false;
    }
    bytes = &from_disk;
    ++stats_.disk_hits;
    mark_used_on_disk(hash, now_ns());
  }
  std::memcpy(keys, bytes->data(), size_t(key_bytes));
  if (value_bytes > 0) std::memcpy(values, bytes->data() + key_bytes, size_t(value_bytes));
  stats_.bytes_out += key_bytes + value_bytes;
  if (bytes != &from_disk) {  // back in the pool: RAM keeps no second copy (it comes again if evicted again)
    ram_held_ -= int64_t(in_ram->second->bytes.size());
    ram_.erase(in_ram->second);
    in_ram_.erase(in_ram);
  }
  stats_.copy_seconds += seconds_since(began);
  return true;
}

void KvTiers::flush_ram_to_disk(int64_t newer_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!has_disk()) return;
  const auto began = Clock::now();
  // The newest blocks that fit beside the newer files; the older ones are not written at all.
  auto first = ram_.end();
  int64_t room = options_.disk_bytes > 0 ? options_.disk_bytes - newer_bytes : INT64_MAX;
  while (first != ram_.begin()) {
    const int64_t bytes = file_bytes(int64_t(std::prev(first)->bytes.size()));
    if (bytes > room) break;
    room -= bytes;
    --first;
  }
  for (auto it = first; it != ram_.end(); ++it) spill_to_disk(*it);
  ram_.clear();
  in_ram_.clear();
  ram_held_ = 0;
  stats_.copy_seconds += seconds_since(began);
}

int64_t KvTiers::file_bytes(int64_t block_bytes) const {
  return int64_t(sizeof(FileHeader)) + block_bytes;
}

bool KvTiers::find(uint64_t hash) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_ram_.count(hash) || on_disk_.count(hash)) return true;
  ++stats_.misses;
  return false;
}

KvTierStats KvTiers::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  KvTierStats s = stats_;
  s.ram_bytes = ram_held_;
  s.disk_bytes = disk_held_;
  return s;
}

uint64_t content_key(const std::vector<std::string>& files) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<char> buffer(size_t(1) << 20);
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    XXH3_64bits_update(state, f.data(), 0);
    while (in) {
      in.read(buffer.data(), std::streamsize(buffer.size()));
      if (in.gcount() > 0) XXH3_64bits_update(state, buffer.data(), size_t(in.gcount()));
    }
  }
  const uint64_t key = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return key;
}

}  // namespace autoglm
