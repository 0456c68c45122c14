#include "runtime/lora_registry.h"

namespace autoglm {
namespace {

// An adapter is in use while a request holds its set (the registry holds one reference).
bool idle(const std::shared_ptr<const LoraSet>& set) {
  return set && set.use_count() == 1 && set->front().use_count() == 1;  // a stacked set holds the adapter
}

}  // namespace

Status LoraRegistry::all_in_use() const {
  return resource_exhausted("max_loras (" + std::to_string(max_resident_) +
                            ") adapters are resident and all in use; try again when one is idle");
}

int64_t LoraRegistry::resident_count() const {
  int64_t n = 0;
  for (const auto& [name, e] : entries_) n += e.set != nullptr;
  return n;
}

bool LoraRegistry::make_room(int64_t room, const std::string& keep) {
  if (max_resident_ <= 0) return true;
  while (resident_count() + room > max_resident_) {
    Entry* oldest = nullptr;
    for (auto& [name, e] : entries_)
      if (name != keep && idle(e.set) && (!oldest || e.last_used < oldest->last_used)) oldest = &e;
    if (!oldest) return false;
    oldest->set.reset();
  }
  return true;
}

Status LoraRegistry::add(const std::string& name, const std::string& path, float scale) {
  if (name.empty()) return invalid_argument("lora_name: must not be empty");
  AUTOGLM_ASSIGN_OR_RETURN(auto adapter, load_lora(path, base_, scale));  // outside the lock: it reads files
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.count(name)) return invalid_argument("lora_name: an adapter named '" + name + "' is already loaded");
  if (!make_room(1, name)) return all_in_use();
  entries_[name] = {path, scale, std::make_shared<const LoraSet>(LoraSet{adapter}), ++clock_};
  return Status::ok();
}

Status LoraRegistry::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!entries_.erase(name)) return not_found("no LoRA adapter '" + name + "'");
  return Status::ok();  // requests holding it finish with it
}

Result<std::shared_ptr<const LoraSet>> LoraRegistry::acquire(const std::string& name) {
  std::string path;
  float scale;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return not_found("no LoRA adapter '" + name + "'");
    it->second.last_used = ++clock_;
    if (it->second.set) return it->second.set;
    path = it->second.path;
    scale = it->second.scale;
  }
  AUTOGLM_ASSIGN_OR_RETURN(auto adapter, load_lora(path, base_, scale));  // evicted earlier: read again
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return not_found("no LoRA adapter '" + name + "' (unloaded meanwhile)");
  if (it->second.set) return it->second.set;  // another request read it first
  if (!make_room(1, name)) return all_in_use();
  it->second.set = std::make_shared<const LoraSet>(LoraSet{adapter});
  return it->second.set;
}

std::vector<LoraRegistry::Info> LoraRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Info> out;
  for (const auto& [name, e] : entries_)
    out.push_back(
        {name, e.path, e.scale, e.set != nullptr, e.set ? e.set->front()->bytes() : 0, e.set && !idle(e.set)});
  return out;
}

bool LoraRegistry::contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.count(name) > 0;
}

}  // namespace autoglm
