// The models a folder holds, named as llama-server's router names them (the file, or the folder of
// a model that needs several files).
#include "autoglm/model_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>
#include <system_error>

namespace autoglm {
namespace {

namespace fs = std::filesystem;

bool starts_with_mmproj(const std::string& file) {
  std::string lower = file;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return lower.rfind("mmproj", 0) == 0 || lower.find(".mmproj.") != std::string::npos;
}

// A file whose weights are a model of their own: *.gguf, not a projector, the first shard of a
// split file ("-00001-of-00003.gguf").
bool is_model_file(const fs::path& p) {
  const std::string file = p.filename().string();
  if (p.extension() != ".gguf" || file.empty() || file[0] == '.' || starts_with_mmproj(file)) return false;
  static const std::regex kLaterShard(R"(-0*([0-9]+)-of-[0-9]+\.gguf$)");
  std::smatch shard;
  return !std::regex_search(file, shard, kLaterShard) || shard[1].str() == "1";
}

std::vector<fs::path> sorted_entries(const fs::path& dir, std::error_code& ec) {
  std::vector<fs::path> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// A file at the folder's top pairs only with its own projector (X.mmproj.gguf): the folder is
// shared, and the runtime would otherwise take its one mmproj-*.gguf for every model there.
std::string top_level_projector(const fs::path& model) {
  fs::path own = model;
  own.replace_extension(".mmproj.gguf");
  std::error_code ec;
  return fs::is_regular_file(own, ec) ? own.string() : "none";
}

FolderModel top_level_model(const fs::path& p) {
  return {p.filename().string(), p.string(), top_level_projector(p)};
}

}  // namespace

Result<std::vector<FolderModel>> find_models(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return invalid_argument("'" + dir + "' is not a folder");
  const std::vector<fs::path> entries = sorted_entries(dir, ec);
  if (ec) return io_error("'" + dir + "' cannot be read: " + ec.message());
  std::vector<FolderModel> out;
  for (const fs::path& p : entries) {
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (fs::is_regular_file(p, ec)) {
      if (is_model_file(p)) out.push_back(top_level_model(p));
      continue;
    }
    if (!fs::is_directory(p, ec)) continue;
    if (fs::is_regular_file(p / "config.json", ec)) {  // a Hugging Face folder
      out.push_back({name, p.string(), ""});
      continue;
    }
    std::vector<fs::path> files;
    for (const fs::path& f : sorted_entries(p, ec))
      if (fs::is_regular_file(f, ec) && is_model_file(f)) files.push_back(f);
    if (files.size() == 1) out.push_back({name, files.front().string(), ""});  // its projector is found beside it
    if (files.size() > 1)
      for (const fs::path& f : files)
        out.push_back({name + "/" + f.filename().string(), f.string(), top_level_projector(f)});
  }
  return out;
}

}  // namespace autoglm
