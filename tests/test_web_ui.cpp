// The web UI's files as the server serves them: every page and script, their types and
// security headers, no key needed for the files but the API still keyed, web_ui: false.
#include <gtest/gtest.h>

#include <string>

#include "server/web/web_assets.h"
#include "server_test_util.h"

namespace autoglm {
namespace {

class WebUi : public test::ServerTest {};

TEST(WebAssets, PathsMapToTheirFiles) {
  ASSERT_NE(web_asset_for("/"), nullptr);
  EXPECT_EQ(web_asset_for("/")->name, "index.html");
  EXPECT_EQ(web_asset_for("/dashboard")->name, "dashboard.html");
  EXPECT_EQ(web_asset_for("/ui/chat.js")->name, "chat.js");
  EXPECT_EQ(web_asset_for("/ui/nothing.js"), nullptr);
  EXPECT_EQ(web_asset_for("/ui/../CMakeLists.txt"), nullptr);
  EXPECT_EQ(web_asset_for("/index.html"), nullptr);
  EXPECT_TRUE(web_ui_path("/ui/anything"));
  EXPECT_FALSE(web_ui_path("/v1/models"));
}

// Every file a page loads is served (a page that names a file the binary lacks fails here).
TEST(WebAssets, EveryFileAPageLoadsIsEmbedded) {
  for (const WebAsset& a : web_assets()) {
    EXPECT_FALSE(a.bytes.empty()) << a.name;
    const std::string text(a.bytes);
    for (size_t at = 0; (at = text.find("/ui/", at)) != std::string::npos; ++at) {
      const size_t end = text.find_first_of("\"'", at);
      EXPECT_NE(web_asset_for(text.substr(at, end - at)), nullptr) << a.name << " loads " << text.substr(at, end - at);
    }
    for (size_t at = 0; (at = text.find("from './", at)) != std::string::npos; ++at) {
      const size_t end = text.find('\'', at + 8);
      EXPECT_NE(web_asset_for("/ui/" + text.substr(at + 8, end - at - 8)), nullptr) << a.name << " imports it";
    }
  }
}

TEST_F(WebUi, PagesAndFilesAreServedWithTheirTypesAndNoKey) {
  ServerConfig cfg;
  cfg.api_keys = {"secret"};
  start(cfg);
  const test::HttpResult page = get("/");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<title>Open-AutoGLM playground</title>"), std::string::npos);
  EXPECT_NE(page.header("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(page.header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(get("/dashboard").status, 200);
  const test::HttpResult script = get("/ui/chat.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_EQ(script.header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(get("/ui/app.css").header("Content-Type"), "text/css; charset=utf-8");
  // A file the UI does not have is a 404, not a generation or a 401.
  const test::HttpResult missing = get("/ui/missing.js");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_NE(missing.body.find("/ui/missing.js"), std::string::npos) << missing.body;
  EXPECT_EQ(get("/v1/models").status, 401);
  EXPECT_EQ(get("/v1/models", "secret").status, 200);
}

TEST_F(WebUi, OffMeansNotFound) {
  ServerConfig cfg;
  cfg.web_ui = false;
  start(cfg);
  const test::HttpResult page = get("/");
  EXPECT_EQ(page.status, 404);
  EXPECT_NE(page.body.find("web_ui: false"), std::string::npos) << page.body;
  EXPECT_EQ(get("/ui/chat.js").status, 404);
}

}  // namespace
}  // namespace autoglm
