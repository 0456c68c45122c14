// Named LoRA adapters over one base model: registered with a path and scale, loaded when
// registered (so a bad file is refused at once), kept resident up to a bound and, past it,
// the least recently used adapter that no request holds is unloaded, to be read again when
// a request names it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autoglm/status.h"
#include "model/lora.h"

namespace autoglm {

class LoraRegistry {
 public:
  struct Info {
    std::string name, path;
    float scale = 1;
    bool resident = false;
    int64_t bytes = 0;  // of A and B, when resident
    bool in_use = false;
  };

  // `max_resident` <= 0: no bound.
  LoraRegistry(const Model& base, int64_t max_resident) : base_(base), max_resident_(max_resident) {}

  // Errors: the adapter's (naming the file and tensor), or a name already taken.
  Status add(const std::string& name, const std::string& path, float scale);
  Status remove(const std::string& name);  // kNotFound
  // The adapter as a one-entry set, read again if it was unloaded; kNotFound for an unknown
  // name, kResourceExhausted when max_resident adapters are all in use.
  Result<std::shared_ptr<const LoraSet>> acquire(const std::string& name);
  std::vector<Info> list() const;
  bool contains(const std::string& name) const;
  int64_t max_resident() const { return max_resident_; }

 private:
  struct Entry {
    std::string path;
    float scale = 1;
    std::shared_ptr<const LoraSet> set;  // null: not resident
    uint64_t last_used = 0;
  };
  // Unloads idle adapters, least recently used first, until `room` more fit; false if they do not.
  bool make_room(int64_t room, const std::string& keep);
  int64_t resident_count() const;
  Status all_in_use() const;

  const Model& base_;
  const int64_t max_resident_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace autoglm
