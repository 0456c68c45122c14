// models_dir: the models a folder holds (autoglm/model_folder.h), each served on demand with the
// top-level keys.
#include "autoglm/model_folder.h"
#include "server/config/config.h"

namespace autoglm {

Result<std::vector<ServedModel>> scan_models_dir(const std::string& dir, const ServerConfig& top) {
  AUTOGLM_ASSIGN_OR_RETURN(std::vector<FolderModel> found, find_models(dir));
  std::vector<ServedModel> out;
  for (const FolderModel& f : found) {
    auto config = std::make_shared<ServerConfig>(top);
    if (config->runtime.mmproj.empty()) config->runtime.mmproj = f.mmproj;
    config->models.clear();
    config->dir_models.clear();
    config->routes.clear();
    config->served_model_name.clear();
    config->model = f.path;
    ServedModel m;
    m.name = f.name;
    m.config = std::move(config);
    m.on_demand = true;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace autoglm
