#include "server/web/web_assets.h"

namespace autoglm {

bool web_ui_path(std::string_view path) {
  return path == "/" || path == "/dashboard" || path.starts_with("/ui/");
}

const WebAsset* web_asset_for(std::string_view path) {
  std::string_view name;
  if (path == "/")
    name = "index.html";
  else if (path == "/dashboard")
    name = "dashboard.html";
  else if (path.starts_with("/ui/"))
    name = path.substr(4);
  else
    return nullptr;
  for (const WebAsset& a : web_assets())
    if (a.name == name) return &a;
  return nullptr;
}

}  // namespace autoglm
