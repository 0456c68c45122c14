#include "runtime/chat_images.h"

#include <xxhash.h>

#include <filesystem>

#include "core/read_file.h"
#include "media/data_url.h"
#include "media/http_fetch.h"
#include "media/image_decode.h"
#include "media/image_preprocess.h"

namespace autoglm {
namespace {

namespace fs = std::filesystem;

constexpr double kFetchSeconds = 30;  // one remote image's whole fetch

Status part_error(const std::string& field, const std::string& why) {
  return Status(StatusCode::kInvalidArgument, "'" + field + "': " + why, field);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The URL of an image_url part ({"url": ...} or the URL itself); "" when it has none.
std::string part_url(const nlohmann::ordered_json& part) {
  const auto& u = part.contains("image_url") ? part["image_url"] : nlohmann::ordered_json();
  if (u.is_string()) return u.get<std::string>();
  if (u.is_object() && u.contains("url") && u["url"].is_string()) return u["url"].get<std::string>();
  return "";
}

// A file under one of the allowed folders (symbolic links resolved first).
Result<std::string> read_local(const std::string& field, const std::string& url, const ImageContext& c) {
  const std::string path = url.rfind("file://", 0) == 0 ? url.substr(7) : url;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  bool allowed = false;
  for (const std::string& dir : c.media->allowed_local_dirs) {
    const fs::path root = fs::weakly_canonical(dir, ec);
    const auto rel = real.lexically_relative(root);
    allowed = allowed || (!rel.empty() && rel.native().rfind("..", 0) != 0);
  }
  if (!allowed)
    return part_error(
        field, "local image paths are refused unless media.allowed_local_dirs holds their folder (" + path + ")");
  const auto size = fs::file_size(real, ec);
  if (ec) return part_error(field, "cannot read " + path + ": " + ec.message());
  if (int64_t(size) > c.limits->image_bytes)
    return part_error(field, "the image has " + std::to_string(size) + " bytes, more than limits.image_bytes (" +
                                 std::to_string(c.limits->image_bytes) + ")");
  auto bytes = read_file(real.string());
  if (!bytes) return part_error(field, bytes.status().message());
  return std::move(bytes).value();
}

// The host of an http(s) URL, lower-case, without port or credentials.
std::string url_host(const std::string& url) {
  const size_t start = url.find("://") + 3;
  std::string host = url.substr(start, url.find_first_of("/?#", start) - start);
  if (const size_t at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
  if (const size_t colon = host.rfind(':'); colon != std::string::npos && host.find(']') == std::string::npos)
    host = host.substr(0, colon);
  return lower(host);
}

Result<std::string> image_bytes(const std::string& field, const std::string& url, const ImageContext& c) {
  const std::string scheme = lower(url.substr(0, url.find(':') + 1));
  if (scheme == "data:") {
    auto parsed = parse_data_url(url, c.limits->image_bytes);
    if (!parsed)
      return part_error(
          field, parsed.status().message() + " (limits.image_bytes is " + std::to_string(c.limits->image_bytes) + ")");
    return std::move(parsed->bytes);
  }
  if (scheme == "http:" || scheme == "https:") {
    const std::string host = url_host(url);
    const auto& hosts = c.media->allowed_hosts;
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end())
      return part_error(field, "remote image URLs are refused: host '" + host + "' is not in media.allowed_hosts");
    auto parsed = parse_http_url(url);
    if (!parsed) return part_error(field, parsed.status().message());
    auto body = http_get(*parsed, c.limits->image_bytes, kFetchSeconds);
    if (!body)
      return part_error(
          field, body.status().message() + " (limits.image_bytes is " + std::to_string(c.limits->image_bytes) + ")");
    return std::move(body).value();
  }
  if (scheme == "file:" || (!url.empty() && url[0] == '/')) return read_local(field, url, c);
  return part_error(field,
                    "the image URL must be a data: URL (or an allowed file or host), not '" + url.substr(0, 40) + "'");
}

VisionPreprocess preprocess_of(const ImageContext& c) {
  VisionPreprocess p = c.projector->vision->spec().preprocess;
  const int64_t min = c.min_pixels ? c.min_pixels : c.media->min_pixels;
  const int64_t max = c.max_pixels ? c.max_pixels : c.media->max_pixels;
  if (min) p.min_pixels = min;
  if (max) p.max_pixels = max;
  return p;
}

ImageKey content_key(const Image& image, const VisionPreprocess& p) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  const int64_t header[] = {image.width, image.height, p.min_pixels, p.max_pixels};
  XXH3_128bits_update(state, header, sizeof header);
  XXH3_128bits_update(state, image.rgba.data(), image.rgba.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return {h.high64, h.low64};
}

// Decoded, preprocessed and encoded (or found in the cache).
Result<ChatImage> load_image(const std::string& field, const std::string& url, const ImageContext& c) {
  AUTOGLM_ASSIGN_OR_RETURN(const std::string bytes, image_bytes(field, url, c));
  auto image = decode_image(bytes, c.limits->image_pixels);
  if (!image)
    return part_error(
        field, image.status().message() + " (limits.image_pixels is " + std::to_string(c.limits->image_pixels) + ")");
  const VisionPreprocess pre = preprocess_of(c);
  const ImageKey key = content_key(*image, pre);
  ChatImage out{key.second, c.cache->find(key)};
  if (out.embedding) return out;
  auto patches = preprocess_image(*image, pre);
  if (!patches) return part_error(field, patches.status().message());
  TurnQueue::Seat seat(c.pool->turns());  // the tower's units take turns with the engines' steps
  TurnQueue::Turn turn = seat.take();
  VisionEncoder encoder(*c.projector->vision, *c.pool, [&] { turn.yield(); });
  auto embedding = encoder.encode(*patches);
  if (!embedding) return part_error(field, embedding.status().message());
  out.embedding = std::make_shared<const ImageEmbedding>(std::move(embedding).value());
  c.cache->put(key, out.embedding);
  return out;
}

bool is_image_part(const nlohmann::ordered_json& part) {
  if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) return false;
  const std::string type = part["type"].get<std::string>();
  return type == "image_url" || type == "image" || type == "input_image";
}

}  // namespace

Result<std::vector<ChatImage>> take_chat_images(nlohmann::ordered_json& messages, const ImageContext& c) {
  std::vector<ChatImage> images;
  for (size_t i = 0; i < messages.size(); ++i) {
    auto& content = messages[i]["content"];
    if (!content.is_array()) continue;
    for (size_t j = 0; j < content.size(); ++j) {
      if (!is_image_part(content[j])) continue;
      const std::string field = "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]";
      if (!c.projector)
        return part_error(field, "is an image, and this model reads text only (no projector: --mmproj)");
      if (int64_t(images.size()) >= c.limits->images_per_request)
        return part_error(
            field, "more images than limits.images_per_request (" + std::to_string(c.limits->images_per_request) + ")");
      const std::string url = part_url(content[j]);
      if (url.empty()) return part_error(field, "an image_url part needs image_url.url (a data: URL)");
      AUTOGLM_ASSIGN_OR_RETURN(ChatImage image, load_image(field, url, c));
      images.push_back(std::move(image));
      content[j] = {{"type", "image"}};
    }
  }
  return images;
}

Status expand_image_markers(std::vector<int32_t>& prompt, int32_t marker, const std::vector<ChatImage>& images,
                            std::vector<PromptImage>& placed) {
  const int64_t markers = std::count(prompt.begin(), prompt.end(), marker);
  if (markers != int64_t(images.size()))
    return Status(StatusCode::kInvalidArgument,
                  "the chat template placed " + std::to_string(markers) + " image markers for " +
                      std::to_string(images.size()) + " images (does it render image parts?)",
                  "messages");
  std::vector<int32_t> out;
  size_t next = 0;
  for (int32_t id : prompt) {
    if (id != marker) {
      out.push_back(id);
      continue;
    }
    const ChatImage& image = images[next++];
    placed.push_back({int64_t(out.size()), image.embedding->rows, image.embedding->cols, image.hash, image.embedding});
    out.insert(out.end(), size_t(image.embedding->n_tokens()), marker);
  }
  prompt = std::move(out);
  return Status::ok();
}

}  // namespace autoglm
