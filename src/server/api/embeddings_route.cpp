#include "server/api/embeddings_route.h"

#include "core/base64.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace autoglm {
namespace {

// The inputs as token lists; errors name input or input[i].
std::vector<std::vector<int32_t>> read_inputs(const json& body, const Runtime& prompts) {
  if (!body.contains("input")) bad("input", "'input' is required");
  const json& in = body["input"];
  auto tokens_of = [](const json& list, const std::string& where) {
    std::vector<int32_t> ids;
    for (const json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX)
        bad(where, "'" + where + "' must be a string or a list of token ids");
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    return ids;
  };
  auto text_of = [&](const json& s, const std::string& where) {
    if (s.get_ref<const std::string&>().empty()) bad(where, "the input is empty");
    return prompts.prompt_tokens(check_utf8(s.get<std::string>(), where));
  };
  std::vector<std::vector<int32_t>> inputs;
  if (in.is_string()) {
    inputs.push_back(text_of(in, "input"));
  } else if (in.is_array() && !in.empty() && in[0].is_number_integer()) {
    inputs.push_back(tokens_of(in, "input"));
  } else if (in.is_array() && !in.empty()) {
    if (in.size() > 2048) bad("input", "at most 2048 inputs per request");
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string where = "input[" + std::to_string(i) + "]";
      if (in[i].is_string())
        inputs.push_back(text_of(in[i], where));
      else if (in[i].is_array())
        inputs.push_back(tokens_of(in[i], where));
      else
        bad(where, "'" + where + "' must be a string or a list of token ids");
    }
  } else {
    bad("input", "'input' must be a string, a list of strings, or token ids (a list, or a list of lists)");
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty()) bad(inputs.size() == 1 ? "input" : "input[" + std::to_string(i) + "]", "the input is empty");
  return inputs;
}

}  // namespace

Reply embeddings_reply(const json& body, const EmbeddingsContext& ctx) {
  const std::vector<std::vector<int32_t>> inputs = read_inputs(body, ctx.runtime);
  const size_t dimensions = size_t(integer_param(body, "dimensions", 1, ctx.n_embd, ctx.n_embd));
  std::string format = "float";
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    if (!body["encoding_format"].is_string()) bad("encoding_format", "'encoding_format' must be float or base64");
    format = body["encoding_format"];
    if (format != "float" && format != "base64") bad("encoding_format", "'encoding_format' must be float or base64");
  }
  int64_t tokens = 0;
  for (const auto& ids : inputs) tokens += int64_t(ids.size());
  auto vectors = ctx.runtime.embed(inputs, ctx.pooling, dimensions);
  if (!vectors) {
    const std::string& m = vectors.status().message();
    const size_t bracket = m.find(']');
    if (vectors.status().code() == StatusCode::kInvalidArgument)
      bad(m.rfind("input[", 0) == 0 && bracket != std::string::npos && inputs.size() > 1 ? m.substr(0, bracket + 1)
                                                                                         : "input",
          m);
    return error_reply(500, m, "", "server_error");
  }
  json data = json::array();
  for (size_t i = 0; i < vectors->size(); ++i) {
    const std::vector<float>& v = (*vectors)[i];
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64")
      item["embedding"] = base64_encode(v.data(), v.size() * sizeof(float));  // little-endian hosts only
    else
      item["embedding"] = v;
    data.push_back(std::move(item));
  }
  Reply r;
  r.prompt_tokens = tokens;
  r.body = json{{"object", "list"},
                {"data", std::move(data)},
                {"model", ctx.model_name},
                {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
               .dump();
  return r;
}

}  // namespace autoglm
