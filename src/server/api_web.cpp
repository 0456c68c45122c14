// The web UI's pages and files (server/web_assets.h), unless web_ui is off.
#include "server/api.h"
#include "server/web/web_assets.h"

namespace autoglm {

Reply ApiService::web_page(const std::string& path) {
  const WebAsset* asset = config_.web_ui ? web_asset_for(path) : nullptr;
  if (!asset) return error_reply(404, config_.web_ui ? "no file " + path : "the web UI is off (web_ui: false)");
  Reply r;
  r.content_type = std::string(asset->content_type);
  r.body = std::string(asset->bytes);
  // The pages load only their own scripts and talk only to this server.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace autoglm
