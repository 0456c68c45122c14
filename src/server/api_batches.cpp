// OpenAI's Files and Batch APIs over HTTP: POST/GET /v1/files, GET /v1/files/{id}[/content],
// DELETE /v1/files/{id}; POST/GET /v1/batches, GET /v1/batches/{id}, POST
// /v1/batches/{id}/cancel. Only the key that made a file or batch sees it.
#include "server/api.h"
#include "server/api/list_page.h"
#include "server/api/multipart.h"

namespace autoglm {
namespace {

std::string header(const HttpRequest& req, const std::string& name) {
  for (const auto& [k, v] : req.headers)
    if (k == name) return v;
  return "";
}

Reply jobs_off() {
  return error_reply(404, "files and batches are off: set jobs.data_dir in the configuration");
}

}  // namespace

int64_t ApiService::body_limit(const HttpRequest& head) const {
  const HttpRoute* route = find_route(head.method, path_of(head.target)).route;
  const bool upload = route && route->body == BodyLimit::kUpload && !config_.jobs.data_dir.empty();
  return upload ? std::max(config_.max_body_bytes, config_.jobs.max_file_bytes + (64 << 10)) : config_.max_body_bytes;
}

Reply ApiService::files_route(const HttpRequest& req, const std::string& key) {
  if (!batches_) return jobs_off();
  const std::string path = path_of(req.target);
  if (path == "/v1/files") {
    if (req.method == "POST") return upload_file(req, key);
    const PageQuery q = page_query(req.target);
    const std::string purpose = q.other.count("purpose") ? q.other.at("purpose") : "";
    auto page = batches_->files(key, purpose, q.after, q.limit + 1);
    if (!page) return store_error_reply("the files could not be read", page.status());
    return json_reply(200, page_json(*page, q.limit, file_json));
  }
  std::string id = path.substr(std::string("/v1/files/").size());
  const bool content = id.size() > 8 && id.compare(id.size() - 8, 8, "/content") == 0;
  if (content) id.resize(id.size() - 8);
  const auto file = batches_->file(id, key);
  if (!file || (content && req.method != "GET")) return error_reply(404, "no file '" + id + "'");
  if (req.method == "DELETE") {
    auto removed = batches_->remove_file(id, key);
    if (!removed) return store_error_reply("the file could not be deleted", removed.status());
    return json_reply(200, {{"id", id}, {"object", "file"}, {"deleted", *removed}});
  }
  if (!content) return json_reply(200, file_json(*file));
  auto bytes = batches_->file_content(id, key);
  if (!bytes) return store_error_reply("the file could not be read", bytes.status());
  Reply r;
  r.content_type = "application/jsonl";
  r.body = std::move(bytes).value();
  return r;
}

// POST /v1/files: multipart with `file` and `purpose` (batch); the file is checked line by line
// as batch input before it is stored.
Reply ApiService::upload_file(const HttpRequest& req, const std::string& key) {
  auto parts = parse_multipart(header(req, "content-type"), req.body);
  if (!parts) bad("file", parts.status().message());
  const FormPart* purpose = form_field(*parts, "purpose");
  if (!purpose) bad("purpose", "the form has no 'purpose' field");
  if (purpose->data != "batch") bad("purpose", "'purpose' must be \"batch\" (got \"" + purpose->data + "\")");
  const FormPart* file = form_field(*parts, "file");
  if (!file) bad("file", "the form has no 'file' field");
  if (int64_t(file->data.size()) > config_.jobs.max_file_bytes)
    return error_reply(
        413, "the file is larger than jobs.max_file_bytes (" + std::to_string(config_.jobs.max_file_bytes) + " bytes)",
        "file");
  auto stored = batches_->upload(key, file->filename.empty() ? "upload.jsonl" : file->filename, file->data);
  if (!stored && stored.status().code() == StatusCode::kInvalidArgument)
    bad("file", (file->filename.empty() ? "" : file->filename + ": ") + stored.status().message());
  if (!stored) return store_error_reply("the file could not be stored", stored.status());
  return json_reply(200, file_json(*stored));
}

Reply ApiService::batches_route(const HttpRequest& req, const std::string& key) {
  if (!batches_) return jobs_off();
  const std::string path = path_of(req.target);
  if (path == "/v1/batches") {
    if (req.method == "POST") return create_batch(req.body, key);
    const PageQuery q = page_query(req.target);
    auto page = batches_->list(key, q.after, q.limit + 1);
    if (!page) return store_error_reply("the batches could not be read", page.status());
    return json_reply(200, page_json(*page, q.limit, batch_json));
  }
  std::string id = path.substr(std::string("/v1/batches/").size());
  const bool cancel = id.size() > 7 && id.compare(id.size() - 7, 7, "/cancel") == 0;
  if (cancel) id.resize(id.size() - 7);
  if (cancel != (req.method == "POST")) return error_reply(404, "no route " + req.method + " " + path);
  if (!cancel) {
    const auto batch = batches_->get(id, key);
    if (!batch) return error_reply(404, "no batch '" + id + "'");
    return json_reply(200, batch_json(*batch));
  }
  auto cancelled = batches_->cancel(id, key);
  if (!cancelled) return store_error_reply("the batch could not be cancelled", cancelled.status());
  if (!*cancelled) return error_reply(404, "no batch '" + id + "'");
  return json_reply(200, batch_json(**cancelled));
}

// POST /v1/batches: {input_file_id, endpoint, completion_window: "24h", metadata}.
Reply ApiService::create_batch(const std::string& body, const std::string& key) {
  const json j = parse_body(body, config_.runtime.limits);
  for (const char* field : {"input_file_id", "endpoint", "completion_window"})
    if (!j.contains(field) || !j[field].is_string()) bad(field, std::string("'") + field + "' must be a string");
  const std::string endpoint = j["endpoint"];
  if (endpoint != "/v1/chat/completions" && endpoint != "/v1/completions")
    bad("endpoint", "'endpoint' must be \"/v1/chat/completions\" or \"/v1/completions\"");
  if (j["completion_window"] != "24h") bad("completion_window", "'completion_window' must be \"24h\"");
  const std::string metadata = metadata_text(j);
  auto batch = batches_->create(key, j["input_file_id"], endpoint, "24h", metadata);
  if (!batch && batch.status().code() == StatusCode::kNotFound) bad("input_file_id", batch.status().message());
  if (!batch && batch.status().code() == StatusCode::kInvalidArgument) bad("endpoint", batch.status().message());
  if (!batch) return store_error_reply("the batch could not be stored", batch.status());
  return json_reply(200, batch_json(*batch));
}

}  // namespace autoglm
