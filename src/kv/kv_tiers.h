// Where prefix-cache blocks go when the pool evicts them: host RAM (ram_bytes), and from there
// disk (disk_dir, disk_bytes), each least recently used first; a lookup the pool misses finds them
// here and copies them back instead of computing them again. The disk tier outlives the process:
// one file per block under <disk_dir>/<model key>-<format key>/, named by the block's chain hash
// (its tokens, the key's salt and the LoRA adapter), written whole under a temporary name and
// renamed, its header and bytes checksummed. A file that is corrupt or of another model or KV
// format is skipped with a warning, never loaded. One process at a time uses a model's folder (a
// lock file in it), so that its budget holds; another runs without the disk tier, warned; within a
// process the engines of one model share its tiers (open_kv_tiers). When the pool ends (a graceful
// stop, an unload), RAM's blocks and the pool's newest go to disk, within its budget.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace autoglm {

struct KvTierOptions {
  int64_t ram_bytes = 0;  // 0: no RAM tier
  std::string disk_dir;   // "": no disk tier
  int64_t disk_bytes = 0;
  uint64_t model_key = 0;   // the model's content
  uint64_t format_key = 0;  // the KV layout: type, rows, layers, block size
};

struct KvTierStats {
  int64_t ram_hits = 0, disk_hits = 0, misses = 0;  // lookups the pool missed
  int64_t ram_bytes = 0, disk_bytes = 0;            // held now
  int64_t bytes_in = 0, bytes_out = 0;              // copied into the tiers, and back to the pool
  int64_t disk_rejected = 0;                        // corrupt or foreign files skipped
  double copy_seconds = 0;                          // spent copying either way (disk included)
};

class KvTiers {
 public:
  explicit KvTiers(KvTierOptions options);
  ~KvTiers();
  KvTiers(const KvTiers&) = delete;
  KvTiers& operator=(const KvTiers&) = delete;
  bool enabled() const { return options_.ram_bytes > 0 || has_disk(); }
  bool has_disk() const { return !options_.disk_dir.empty(); }

  // A block evicted from the pool under `hash`: its bytes (keys, then values) kept.
  void put(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes);
  // The block of `hash` into `keys` and `values` (sizes as put): from RAM (which lets it go: the
  // pool holds it again, and puts it again if it evicts it again) or from disk (the file checked
  // first, and kept); false when neither holds it whole.
  bool take(uint64_t hash, uint8_t* keys, int64_t key_bytes, uint8_t* values, int64_t value_bytes);
  // Whether a tier holds `hash` (so that the pool makes room for it only then); a lookup that
  // finds none counts as a miss.
  bool find(uint64_t hash);
  KvTierStats stats() const;

  // At the pool's end: the blocks RAM holds go to disk, least recently used first, but those that
  // would not fit the disk budget beside `newer_bytes` of files still to come (the pool's, by
  // save); the newest are kept.
  void flush_ram_to_disk(int64_t newer_bytes = 0);
  // The bytes of a block's file, and the disk budget (0: none).
  int64_t file_bytes(int64_t block_bytes) const;
  int64_t disk_budget() const { return has_disk() ? options_.disk_bytes : 0; }
  void save(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes);

 private:
  struct RamBlock {
    uint64_t hash;
    std::vector<uint8_t> bytes;
  };
  static RamBlock block_of(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values,
                           int64_t value_bytes);
  void keep(uint64_t hash, const uint8_t* keys, int64_t key_bytes, const uint8_t* values, int64_t value_bytes,
            bool straight_to_disk);
  void spill_to_disk(const RamBlock& block);
  bool read_from_disk(uint64_t hash, size_t n, std::vector<uint8_t>& bytes);
  void trim_disk();
  void mark_used_on_disk(uint64_t hash, int64_t used);
  void index_disk();
  bool lock_folder();
  std::string file_of(uint64_t hash) const;

  KvTierOptions options_;
  std::string folder_;  // the disk tier's folder of this model and format
  int lock_fd_ = -1;    // holds the folder's lock while this process uses it
  mutable std::mutex mutex_;
  std::list<RamBlock> ram_;  // oldest first
  std::unordered_map<uint64_t, std::list<RamBlock>::iterator> in_ram_;
  int64_t ram_held_ = 0;
  // The disk tier's files by last use, oldest first (from their modification times at start).
  std::multimap<int64_t, uint64_t> disk_by_use_;
  std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> on_disk_;  // hash -> {last use, bytes}
  int64_t disk_held_ = 0, use_clock_ = 0;
  KvTierStats stats_;
};

// The tiers of a model's disk folder, shared by the engines of this process that use it (one lock,
// one budget); RAM-only tiers are an engine's own.
std::shared_ptr<KvTiers> open_kv_tiers(const KvTierOptions& options);

// Why a disk tier file's `size` bytes are not block `hash` of this model and KV format with
// `bytes` bytes after its head (wrong head, size or checksum); "" when they are.
std::string check_block_file(const uint8_t* file, size_t size, uint64_t model_key, uint64_t format_key, uint64_t hash,
                             size_t bytes);
size_t block_file_head_bytes();

// A key of files' content (a model's weights): their bytes hashed, in order.
uint64_t content_key(const std::vector<std::string>& files);

}  // namespace autoglm
