#include "tokenizer/hf_tokenizer.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "formats/json_file.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenize.h"

namespace autoglm {
namespace {

using nlohmann::json;

// The GGUF pre-tokenizer name of a known split regex (what `autoglm convert` writes).
std::string pre_name_for_regex(const std::string& regex) {
  static const std::pair<const char*, const char*> known[] = {
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       "llama-bpe"},
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       "qwen2"},
  };
  for (const auto& [pattern, name] : known)
    if (regex == pattern) return name;
  return "";
}

// The first Split regex of a pre_tokenizer object, if any.
std::string first_split_regex(const json& j) {
  if (!j.is_object()) return "";
  if (j.value("type", "") == "Split" && j.contains("pattern") && j["pattern"].contains("Regex"))
    return j["pattern"]["Regex"].is_string() ? j["pattern"]["Regex"].get<std::string>() : "";
  if (j.contains("pretokenizers") && j["pretokenizers"].is_array())
    for (const json& p : j["pretokenizers"])
      if (std::string r = first_split_regex(p); !r.empty()) return r;
  return "";
}

// A special token in tokenizer_config.json: a string, {"content": ...}, or null.
std::string token_text(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return "";
}

Status grow_to(Vocab& v, int64_t id) {
  if (id < 0 || id > (int64_t(1) << 24)) return corrupt("token id " + std::to_string(id) + " is out of range");
  if (id >= v.size()) {
    const size_t old = v.pieces.size();
    v.pieces.resize(size_t(id + 1));
    v.types.resize(size_t(id + 1), TokenType::kUnused);
    for (size_t i = old; i < v.pieces.size(); ++i) v.pieces[i] = "[PAD" + std::to_string(i) + "]";
  }
  return Status::ok();
}

Status read_model(const json& model, const std::string& where, Vocab& v) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") return unsupported(where + ".model.type '" + type + "' is not supported (BPE)");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return corrupt(where + ".model.vocab must be an object of token -> id");
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) return corrupt(where + ".model.vocab[\"" + token + "\"] is not an integer id");
    Status s = grow_to(v, id.get<int64_t>());
    if (!s) return corrupt(where + ".model.vocab[\"" + token + "\"]: " + s.message());
    v.pieces[id.get<size_t>()] = token;
    v.types[id.get<size_t>()] = TokenType::kNormal;
  }
  if (!model.contains("merges") || !model["merges"].is_array())
    return corrupt(where + ".model.merges must be an array");
  const json& merges = model["merges"];
  v.merge_rank.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    std::string key;
    if (m.is_string())
      key = m.get<std::string>();
    else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
      key = m[0].get<std::string>() + " " + m[1].get<std::string>();
    else
      return corrupt(where + ".model.merges[" + std::to_string(i) + "] is neither \"a b\" nor [\"a\", \"b\"]");
    v.merge_rank.emplace(std::move(key), int32_t(i));
  }
  v.ignore_merges = model.value("ignore_merges", false);
  v.byte_fallback = model.value("byte_fallback", false);
  v.fuse_unk = model.value("fuse_unk", false);
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty())
      return unsupported(where + ".model." + affix + " is not supported");
  return Status::ok();
}

Status read_added_tokens(const json& added, const std::string& where, Vocab& v, TextPipeline& p) {
  if (added.is_null()) return Status::ok();
  if (!added.is_array()) return corrupt(where + ".added_tokens must be an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string at = where + ".added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string())
      return corrupt(at + ": needs an integer \"id\" and a string \"content\"");
    const int64_t id = a["id"].get<int64_t>();
    Status s = grow_to(v, id);
    if (!s) return corrupt(at + ": " + s.message());
    v.pieces[size_t(id)] = a["content"].get<std::string>();
    v.types[size_t(id)] = a.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
    p.added_rules[int32_t(id)] = {a.value("lstrip", false), a.value("rstrip", false), a.value("single_word", false)};
  }
  return Status::ok();
}

// BOS/EOS from the post-processor (TemplateProcessing, or the BERT/RoBERTa ones).
void read_post_processor(const json& pp, Vocab& v) {
  if (!pp.is_object()) return;
  const std::string type = pp.value("type", "");
  if (type == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const json& p : pp["processors"]) read_post_processor(p, v);
    return;
  }
  if (type == "TemplateProcessing" && pp.contains("single") && pp["single"].is_array() && !pp["single"].empty()) {
    auto special_id = [&](const json& item) -> int32_t {
      if (!item.contains("SpecialToken")) return -1;
      const std::string name = item["SpecialToken"].value("id", "");
      const json& table = pp.value("special_tokens", json::object());
      if (table.contains(name) && table[name].contains("ids") && table[name]["ids"].is_array() &&
          !table[name]["ids"].empty() && table[name]["ids"][0].is_number_integer())
        return table[name]["ids"][0].get<int32_t>();
      return v.find(name);
    };
    const int32_t first = special_id(pp["single"].front());
    const int32_t last = pp["single"].size() > 1 ? special_id(pp["single"].back()) : -1;
    if (first >= 0) v.bos = first, v.add_bos = true;
    if (last >= 0) v.eos = last, v.add_eos = true;
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json& pair = pp.value(key, json());
      if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) continue;
      (std::string(key) == "cls" ? v.bos : v.eos) = pair[1].get<int32_t>();
      (std::string(key) == "cls" ? v.add_bos : v.add_eos) = true;
    }
  }
}

Status read_config(const json& c, const std::string& where, Vocab& v, TextPipeline& p) {
  if (!c.is_object()) return corrupt(where + ": expected a JSON object");
  auto id_of = [&](const char* key, int32_t& out) -> Status {
    if (!c.contains(key) || c[key].is_null()) return Status::ok();
    const std::string text = token_text(c[key]);
    const int32_t id = v.find(text);
    if (id < 0) return corrupt(where + ": " + key + " '" + text + "' is not a token of tokenizer.json");
    out = id;
    return Status::ok();
  };
  AUTOGLM_RETURN_IF_ERROR(id_of("bos_token", v.bos));
  AUTOGLM_RETURN_IF_ERROR(id_of("eos_token", v.eos));
  AUTOGLM_RETURN_IF_ERROR(id_of("pad_token", v.pad));
  AUTOGLM_RETURN_IF_ERROR(id_of("unk_token", v.unk));
  if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) v.add_bos = c["add_bos_token"].get<bool>();
  if (c.contains("add_eos_token") && c["add_eos_token"].is_boolean()) v.add_eos = c["add_eos_token"].get<bool>();
  p.clean_up_spaces = c.value("clean_up_tokenization_spaces", false);
  const json& tmpl = c.value("chat_template", json());
  if (tmpl.is_string()) {
    v.chat_template = tmpl.get<std::string>();
  } else if (tmpl.is_array()) {  // named templates: [{"name": ..., "template": ...}]
    for (const json& t : tmpl)
      if (t.is_object() && t.value("template", json()).is_string() &&
          (v.chat_template.empty() || t.value("name", "") == "default"))
        v.chat_template = t["template"].get<std::string>();
  } else if (!tmpl.is_null()) {
    return corrupt(where + ": chat_template must be a string or a list of {name, template}");
  }
  return Status::ok();
}

// Reads a file, following a symbolic link stored as a text file that holds only the
// relative path of its target (git does that where links cannot be made).
Result<std::string> read_following_link_file(const std::string& path) {
  AUTOGLM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  if (text.size() < 1024 && text.find_first_of("{\n") == std::string::npos && !text.empty()) {
    const auto target = std::filesystem::path(path).parent_path() / text;
    std::error_code ec;
    if (std::filesystem::is_regular_file(target, ec)) return read_file(target.string());
  }
  return text;
}

}  // namespace

namespace {

Result<std::unique_ptr<Tokenizer>> parse_checked(const std::string& tokenizer_text, const std::string& config_text,
                                                 const std::string& where) {
  const std::string tok_where = where + "/tokenizer.json";
  const std::string cfg_where = where + "/tokenizer_config.json";
  AUTOGLM_ASSIGN_OR_RETURN(json t, parse_json(tokenizer_text, tok_where));
  if (!t.is_object() || !t.contains("model") || !t["model"].is_object())
    return corrupt(tok_where + ": no \"model\" object");
  Vocab v;
  v.kind = TokenizerKind::kBpe;
  v.add_space_prefix = false;
  TextPipeline p;
  AUTOGLM_RETURN_IF_ERROR(read_model(t["model"], tok_where, v));
  AUTOGLM_RETURN_IF_ERROR(read_added_tokens(t.value("added_tokens", json()), tok_where, v, p));
  if (v.pieces.empty()) return corrupt(tok_where + ": the vocabulary is empty");
  v.index.reserve(v.pieces.size());
  for (size_t i = 0; i < v.pieces.size(); ++i)
    if (v.types[i] != TokenType::kUnused) v.index[v.pieces[i]] = int32_t(i);  // added tokens win over the model's

  v.byte_tokens.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.byte_tokens[size_t(b)] = v.find(name);
    if (v.byte_fallback && v.byte_tokens[size_t(b)] >= 0) v.types[size_t(v.byte_tokens[size_t(b)])] = TokenType::kByte;
  }
  if (const json& unk = t["model"].value("unk_token", json()); unk.is_string()) {
    v.unk = v.find(unk.get<std::string>());
    if (v.unk < 0) return corrupt(tok_where + ": model.unk_token '" + unk.get<std::string>() + "' is not a token");
    if (v.types[size_t(v.unk)] == TokenType::kNormal) v.types[size_t(v.unk)] = TokenType::kUnknown;
  }

  AUTOGLM_ASSIGN_OR_RETURN(p.normalizer,
                           Normalizer::from_json(t.value("normalizer", json()), tok_where + ": normalizer"));
  const json& pre = t.value("pre_tokenizer", json());
  AUTOGLM_ASSIGN_OR_RETURN(p.pre, PreTokenizer::from_json(pre, tok_where + ": pre_tokenizer"));
  AUTOGLM_ASSIGN_OR_RETURN(p.decoder, Decoder::from_json(t.value("decoder", json()), tok_where + ": decoder"));
  v.byte_level = p.pre->byte_level();
  v.pre = pre_name_for_regex(first_split_regex(pre));
  read_post_processor(t.value("post_processor", json()), v);

  if (!config_text.empty()) {
    AUTOGLM_ASSIGN_OR_RETURN(json c, parse_json(config_text, cfg_where));
    AUTOGLM_RETURN_IF_ERROR(read_config(c, cfg_where, v, p));
  }
  if (v.add_bos && v.bos < 0) v.add_bos = false;
  if (v.add_eos && v.eos < 0) v.add_eos = false;
  if (v.eot < 0) v.eot = guess_end_of_turn(v);
  apply_harmony_ends(v);
  return std::make_unique<Tokenizer>(std::move(v), std::move(p));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> parse_hf_tokenizer(const std::string& tokenizer_text, const std::string& config_text,
                                                      const std::string& where) {
  try {
    return parse_checked(tokenizer_text, config_text, where);
  } catch (const nlohmann::json::exception& e) {  // a field with a value of the wrong type
    return corrupt(where + "/tokenizer.json or tokenizer_config.json: a field has a value of the wrong type (" +
                   e.what() + ")");
  }
}

Result<std::unique_ptr<Tokenizer>> load_hf_tokenizer(const std::string& dir) {
  AUTOGLM_ASSIGN_OR_RETURN(std::string tokenizer_text, read_following_link_file(dir + "/tokenizer.json"));
  auto config_text = read_following_link_file(dir + "/tokenizer_config.json");
  return parse_hf_tokenizer(tokenizer_text, config_text ? *config_text : std::string(), dir);
}

}  // namespace autoglm
