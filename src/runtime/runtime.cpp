#include "autoglm/runtime.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/byte_size.h"
#include "core/cpu_features.h"
#include "core/json_request.h"
#include "core/log.h"
#include "core/read_file.h"
#include "engine/generator.h"
#include "engine/speculative.h"
#include "formats/gguf.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/cuda_api.h"
#include "kv/kv_tiers.h"
#include "model/kv_cache.h"
#include "runtime/model_description.h"
#include "runtime/prepared_request.h"
#include "runtime/reply_events.h"
#include "runtime/runtime_parts.h"
#include "sample/json_schema.h"
#include "tokenizer/hf_tokenizer.h"

namespace autoglm {
namespace {

using nlohmann::ordered_json;

double available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  long long kb = 0;
  while (meminfo >> key >> kb >> unit)
    if (key == "MemAvailable:") return double(kb) * 1024.0;
  return 0;
}

Result<ModelLoadOptions> load_options(const RuntimeOptions& o) {
  ModelLoadOptions m;
  m.device = o.device;
  m.arch_override = o.architecture;
  m.repack = o.repack_weights;
  m.file_load = {o.use_mmap, o.use_mlock};
  m.check_tensors = o.check_tensors;
  if (o.n_cpu_moe < 0) return invalid_argument("n_cpu_moe: " + std::to_string(o.n_cpu_moe) + " is negative");
  m.n_cpu_moe = o.cpu_moe ? kCpuMoeAllLayers : o.n_cpu_moe;
  m.progress = o.progress;
  if (!o.quantize.empty()) {
    const auto type = dtype_from_name(o.quantize);
    if (!type) return invalid_argument("quantize: '" + o.quantize + "' is not a weight type (q8_0, q4_0, q4_k, ...)");
    m.quantize = *type;
  }
  return m;
}

// The override (a built-in name or a file), else the model's own template, else chatml.
Status load_chat_template(Runtime::Parts& p) {
  const std::string& name = p.options.chat_template;
  const std::string& own = p.tokenizer->vocab().chat_template;
  if (!name.empty()) {
    p.template_origin = "chat_template '" + name + "'";
    if (auto builtin = ChatTemplate::builtin(name)) {
      p.chat_template = std::move(builtin).value();
      return Status::ok();
    }
    auto text = read_file(name);
    if (!text) return invalid_argument("chat_template: '" + name + "' is neither a built-in name nor a readable file");
    AUTOGLM_ASSIGN_OR_RETURN(p.chat_template, ChatTemplate::parse(*text));
    return Status::ok();
  }
  if (!own.empty()) {
    p.template_origin = p.model_path + ": tokenizer.chat_template";
    auto parsed = ChatTemplate::parse(own);
    if (!parsed) return Status(parsed.status().code(), p.template_origin + ": " + parsed.status().message());
    p.chat_template = std::move(parsed).value();
    return Status::ok();
  }
  p.template_origin = "the built-in chatml template";
  p.chat_template = std::move(ChatTemplate::builtin("chatml")).value();
  return Status::ok();
}

// A template that cannot render one user message (or is hostile) is refused when the
// runtime opens, not discovered by the first request.
Status dry_render(const Runtime::Parts& p) {
  PromptRequest hello;
  hello.messages = ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
  auto rendered = p.prompts->build(hello);
  if (!rendered)
    return invalid_argument(p.template_origin +
                            ": fails a dry render of one user message: " + rendered.status().message());
  return Status::ok();
}

// The draft model of speculative = "draft", with a KV format for the engine's KV type; for
// "mtp", the model's NextN block.
Status load_draft(Runtime::Parts& p) {
  if (p.engine_config.spec.method == SpecMethod::kMtp) {
    const Status st = check_mtp_layers(p.model_path, p.model->spec().n_nextn, int64_t(p.model->weights().nextn.size()));
    return st.is_ok() ? st : Status(st.code(), "speculative: " + st.message());
  }
  if (p.engine_config.spec.method != SpecMethod::kDraft) return Status::ok();
  const RuntimeOptions& o = p.options;
  const DraftSource source{o.draft_model, o.draft_quantize, p.pool.get(), p.model->layer_weight_type()};
  auto draft = load_draft_model(source, p.model_path, p.tokenizer->vocab());
  if (!draft) return Status(draft.status().code(), "speculative: " + draft.status().message());
  if (auto format = kv_format((*draft)->spec(), p.engine_config.kv_type); !format)
    return Status(format.status().code(), "speculative: draft model: kv_cache.dtype: " + format.status().message());
  p.draft = std::move(draft).value();
  return Status::ok();
}

// The control tokens among `markers` (each one token when the vocabulary has it as one).
std::vector<int32_t> control_tokens(const Tokenizer& tokenizer, const std::vector<std::string>& markers) {
  std::vector<int32_t> ids;
  for (const std::string& m : markers) {
    const std::vector<int32_t> t = tokenizer.encode(m, false, true);
    if (t.size() == 1 && tokenizer.vocab().types[size_t(t[0])] == TokenType::kControl) ids.push_back(t[0]);
  }
  return ids;
}

ReplyMarkers reply_markers(const Tokenizer& tokenizer, ToolCallFamily family, const std::string& template_source) {
  ReplyMarkers m;
  m.template_thinks = template_thinks(template_source);
  m.visible_control = control_tokens(tokenizer, tool_call_markers(family));
  const bool harmony = family == ToolCallFamily::kHarmony;  // its analysis message is the thinking
  m.think_open = tokenizer.encode(harmony ? "<|channel|>analysis<|message|>" : kThinkOpen, false, true);
  m.think_close = tokenizer.encode(harmony ? "<|end|>" : kThinkClose, false, true);
  m.think_control = control_tokens(tokenizer, {kThinkOpen, kThinkClose});
  const Vocab& v = tokenizer.vocab();
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.types[size_t(id)] == TokenType::kControl && !v.is_eog(id)) m.all_control.push_back(id);
  return m;
}

// The chat template (checked by a dry render) and the prompt builder over it.
Status prepare_prompts(Runtime::Parts& p) {
  AUTOGLM_RETURN_IF_ERROR(load_chat_template(p));
  p.chat_template->set_limits(p.options.limits.template_steps, size_t(p.options.limits.template_output_bytes));
  if (p.options.cancel_renders) p.chat_template->set_cancel_flag(p.options.cancel_renders);
  std::optional<ToolCallFamily> family;
  if (!p.options.tool_call_format.empty()) {
    family = tool_call_family_from_name(p.options.tool_call_format);
    if (!family) {
      std::string names;
      for (const std::string& n : tool_call_format_names()) names += (names.empty() ? "" : ", ") + n;
      return invalid_argument("tool_call_format: '" + p.options.tool_call_format + "' is not a format (" + names + ")");
    }
  }
  p.prompts =
      std::make_unique<PromptBuilder>(*p.chat_template, *p.tokenizer, GrammarLimits::of(p.options.limits), family);
  p.reply_markers = reply_markers(*p.tokenizer, p.prompts->family(), p.chat_template->source());
  return dry_render(p);
}

// The model's own pooling: a sentence-transformers folder's, a GGUF's pooling_type, else last.
Pooling model_pooling(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {  // sentence-transformers' pooling module
    auto text = read_file(model_path + "/1_Pooling/config.json");
    if (!text) return Pooling::kLast;
    const auto config = nlohmann::json::parse(*text, nullptr, false);
    if (config.is_object() && config.value("pooling_mode_mean_tokens", false)) return Pooling::kMean;
    return Pooling::kLast;
  }
  auto gguf = GgufFile::open(model_path);
  if (!gguf) return Pooling::kLast;
  const auto arch = (*gguf)->get_string("general.architecture");
  const auto type = arch ? (*gguf)->get_int(*arch + ".pooling_type") : std::nullopt;
  return type && *type == 1 ? Pooling::kMean : Pooling::kLast;  // llama.cpp: 1 mean, 3 last
}

}  // namespace

namespace {

// The memory a KV budget given as a fraction shares: the host's available memory, or the
// GPU's free memory once the weights are on it.
double available_bytes(const Device& device) {
  if (device.kind == DeviceKind::kCpu) return available_memory_bytes();
  auto info = cuda::device_info(device.index);
  return info ? double(info->free_bytes) : 0.0;
}

// Keys and values of one block of positions, every layer.
int64_t kv_block_bytes(const ModelSpec& spec, const KvFormat& format, int64_t block_size) {
  return spec.n_layer * block_size * (format.k_row_bytes + format.value_bytes());
}

}  // namespace

int64_t kv_pool_bytes(const ModelSpec& spec, const EngineConfig& c) {
  auto format = kv_format(spec, c.kv_type);
  return format ? c.kv_blocks * kv_block_bytes(spec, *format, c.block_size) : 0;
}

Result<EngineConfig> engine_config_for(const ModelSpec& spec, const RuntimeOptions& o, double available_bytes) {
  EngineConfig ec;
  ec.n_ctx = spec.n_ctx_train > 0
                 ? std::min<int64_t>(o.context_window, std::max<int64_t>(spec.n_ctx_train, o.context_window))
                 : o.context_window;
  ec.block_size = o.kv_block_size;
  ec.kv_type = kv_dtype(o.kv_type);
  auto format = kv_format(spec, ec.kv_type);
  if (!format) return Status(format.status().code(), "kv_cache.dtype: " + format.status().message());
  const double bytes_per_block = double(kv_block_bytes(spec, *format, o.kv_block_size));
  const double budget = o.kv_memory_fraction > 0 ? o.kv_memory_fraction * available_bytes : o.kv_memory_mib * 1048576.0;
  ec.kv_blocks = std::max<int64_t>(2, int64_t(budget / bytes_per_block));
  if (o.kv_memory_fraction <= 0 && o.kv_memory_mib <= 0) {  // whole windows, drafts included
    const int64_t positions = ec.n_ctx + std::max<int64_t>(o.draft_max, 0) + 1;
    ec.kv_blocks = std::max<int64_t>(1, o.max_running) * ((positions + ec.block_size - 1) / ec.block_size);
  }
  ec.max_batch_tokens = o.max_batch_tokens;
  ec.max_running = o.max_running;
  ec.max_queued = o.max_queued;
  ec.max_step_ms = o.max_step_ms;
  ec.spec.method = o.speculative;
  ec.spec.draft_max = o.draft_max;
  ec.spec.draft_min = o.draft_min;
  ec.spec.p_min = o.draft_p_min;
  ec.spec.exit_layer = o.exit_layer;
  if (ec.spec.method != SpecMethod::kDraft && (!o.draft_model.empty() || !o.draft_quantize.empty()))
    return invalid_argument("speculative: a draft model or draft_quantize only with the method draft");
  if (auto s = validate_spec_config(ec.spec, spec.n_layer); !s.is_ok())
    return Status(s.code(), "speculative: " + s.message());
  ec.prefix_cache = o.prefix_cache;
  ec.kv_tiers.ram_bytes = int64_t(o.cache_ram_mib * 1048576.0);
  ec.kv_tiers.disk_dir = o.cache_disk_dir;
  ec.kv_tiers.disk_bytes = int64_t(o.cache_disk_mib * 1048576.0);
  ec.profile = o.profile;
  ec.limits = o.limits;
  return ec;
}

namespace {

// What a disk tier's files are kept for: the model's content (every file of a folder), how its
// weights were re-encoded, the architecture it runs as and the kernel set (whose sums round their
// own way), so a file never serves a model that would compute other bits.
uint64_t tier_model_key(const std::string& model_path, const RuntimeOptions& o) {
  std::vector<std::string> files;
  if (std::filesystem::is_directory(model_path)) {
    for (const auto& e : std::filesystem::directory_iterator(model_path))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(model_path);
  }
  std::string how = o.quantize + "\n" + o.architecture + "\n" + cpu::kernel_isa();
  how.resize((how.size() + 3) / 4 * 4, '\0');  // whole int32 words, every byte counted
  return BlockPool::chain_hash(content_key(files), reinterpret_cast<const int32_t*>(how.data()),
                               int64_t(how.size() / 4));
}

}  // namespace

Runtime::Runtime() : parts_(std::make_unique<Parts>()) {}

Runtime::~Runtime() = default;

namespace {

// options.lora, stacked in order; an error names the adapter.
Status load_default_loras(Runtime::Parts& p) {
  if (p.options.lora.empty()) return Status::ok();
  LoraSet set;
  for (const LoraOption& o : p.options.lora) {
    auto adapter = load_lora(o.path, *p.model, o.scale);
    if (!adapter) return Status(adapter.status().code(), "lora: " + adapter.status().message());
    set.push_back(std::move(adapter).value());
  }
  p.default_lora = std::make_shared<const LoraSet>(std::move(set));
  return Status::ok();
}

// A GPU's KV pool must fit in its free memory (`free`; the host's may overcommit; a GPU's
// allocation would fail in the engine's constructor): an error names the budget and what is free.
Status check_kv_fits(const Model& model, const EngineConfig& config, double free) {
  if (auto s = kv_type_runs_on(config.kv_type, model.device()); !s.is_ok())
    return Status(s.code(), "kv_cache.dtype: " + s.message());
  if (model.device().kind == DeviceKind::kCpu) return Status::ok();
  const double kv = double(kv_pool_bytes(model.spec(), config));
  if (kv <= free) return Status::ok();
  return resource_exhausted("kv_cache: a pool of " + format_bytes(kv) + " does not fit in the " + format_bytes(free) +
                            " free on " + device_name(model.device()) +
                            " (lower kv_cache.memory_mib or kv_cache.fraction)");
}

// Where the memory of a GPU went, once at start-up (the cpu's is the mapped file and the KV pool).
void log_device_memory(const Runtime::Parts& p) {
  const Device& device = p.model->device();
  if (device.kind == DeviceKind::kCpu) return;
  const auto info = cuda::device_info(device.index);
  log_line(LogLevel::kInfo, device_name(device) +
                                (info ? " (" + info->name + ", " + format_bytes(double(info->total_bytes)) + ")" : "") +
                                ": weights " + format_bytes(double(p.model->placed_weights()->bytes())) + ", KV pool " +
                                format_bytes(double(kv_pool_bytes(p.model->spec(), p.engine_config))) + " (" +
                                std::to_string(p.engine_config.kv_blocks) + " blocks), free " +
                                (info ? format_bytes(double(info->free_bytes)) : std::string("unknown")));
}

// Loads the model into `rt`, on its pool when it has one (a runtime opened beside another).
Result<std::unique_ptr<Runtime>> load_into(std::unique_ptr<Runtime> rt, const std::string& model_path,
                                           const RuntimeOptions& options) {
  if (options.log) set_log_sink(options.log);
  Runtime::Parts& p = runtime_parts(*rt);
  p.model_path = model_path;
  p.options = options;
  p.pooling = model_pooling(model_path);
  AUTOGLM_ASSIGN_OR_RETURN(const ModelLoadOptions load, load_options(options));
  AUTOGLM_ASSIGN_OR_RETURN(p.model, Model::load(model_path, load));
  AUTOGLM_ASSIGN_OR_RETURN(p.tokenizer, p.model->load_tokenizer());
  if (p.tokenizer->n_vocab() > p.model->spec().n_vocab)
    return corrupt(model_path + ": the tokenizer has " + std::to_string(p.tokenizer->n_vocab()) +
                   " tokens but the model only " + std::to_string(p.model->spec().n_vocab) + " logits");
  AUTOGLM_RETURN_IF_ERROR(prepare_prompts(p));
  AUTOGLM_ASSIGN_OR_RETURN(p.projector, load_projector(model_path, options, *p.model, *p.tokenizer));
  if (p.projector) p.image_cache = std::make_unique<ImageCache>(options.media.embedding_cache_mib << 20);
  const double available = available_bytes(p.model->device());
  AUTOGLM_ASSIGN_OR_RETURN(p.engine_config, engine_config_for(p.model->spec(), options, available));
  if (!options.cache_disk_dir.empty()) p.engine_config.kv_tiers.model_key = tier_model_key(model_path, options);
  AUTOGLM_RETURN_IF_ERROR(check_kv_fits(*p.model, p.engine_config, available));
  AUTOGLM_RETURN_IF_ERROR(load_default_loras(p));
  p.loras = std::make_unique<LoraRegistry>(*p.model, options.max_loras);
  if (!p.pool)
    p.pool = std::make_shared<ThreadPool>(options.threads > 0 ? options.threads : physical_core_count(),
                                          options.pin_threads);
  if (!options.start_engine) return rt;
  AUTOGLM_RETURN_IF_ERROR(load_draft(p));
  p.engine = std::make_unique<Engine>(*p.model, *p.tokenizer, *p.pool, p.engine_config, p.draft.get());
  log_device_memory(p);
  return rt;
}

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::open(const std::string& model_path, const RuntimeOptions& options) {
  return load_into(std::unique_ptr<Runtime>(new Runtime()), model_path, options);
}

Result<std::unique_ptr<Runtime>> Runtime::open_beside(const Runtime& other, const std::string& model_path,
                                                      const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->parts_->pool = other.parts_->pool;
  if (!rt->parts_->pool) return invalid_argument("open_beside: the other runtime has no threads (a tokenizer only)");
  return load_into(std::move(rt), model_path, options);
}

Result<std::unique_ptr<Runtime>> Runtime::open_tokenizer(const std::string& path, const RuntimeOptions& options) {
  if (!std::filesystem::is_directory(path)) {  // a model file: its weights stay mapped, unused
    RuntimeOptions o = options;
    o.start_engine = false;
    o.repack_weights = false;
    o.quantize.clear();
    return open(path, o);
  }
  if (options.log) set_log_sink(options.log);
  std::unique_ptr<Runtime> rt(new Runtime());
  Parts& p = *rt->parts_;
  p.model_path = path;
  p.options = options;
  p.options.start_engine = false;
  AUTOGLM_ASSIGN_OR_RETURN(p.tokenizer, load_hf_tokenizer(path));
  AUTOGLM_RETURN_IF_ERROR(prepare_prompts(p));
  return rt;
}

std::vector<int32_t> Runtime::encode(const std::string& text, bool add_special, bool parse_special) const {
  return parts_->tokenizer->encode(text, add_special, parse_special);
}

std::string Runtime::decode(const std::vector<int32_t>& ids, bool special) const {
  return parts_->tokenizer->decode(ids, special);
}

std::string Runtime::token_piece(int32_t id) const {
  return parts_->tokenizer->token_to_piece(id, true);
}

int32_t Runtime::vocab_size() const {
  return int32_t(parts_->tokenizer->n_vocab());
}

SpecialTokens Runtime::special_tokens() const {
  const Vocab& v = parts_->tokenizer->vocab();
  return {v.bos, v.eos, v.eog_ids()};
}

Result<std::string> Runtime::render_chat(const Conversation& chat) const {
  AUTOGLM_ASSIGN_OR_RETURN(PromptRequest conversation, prompt_request(chat, parts_->options.limits));
  AUTOGLM_ASSIGN_OR_RETURN(Prompt prompt, parts_->prompts->build(conversation));
  return prompt.text;
}

Result<std::vector<int32_t>> Runtime::chat_tokens(const Conversation& chat) const {
  AUTOGLM_ASSIGN_OR_RETURN(PromptRequest conversation, prompt_request(chat, parts_->options.limits));
  AUTOGLM_ASSIGN_OR_RETURN(Prompt prompt, parts_->prompts->build(conversation));
  return prompt.ids;
}

Result<AssistantMessage> Runtime::parse_reply(const Conversation& chat, const std::string& text, bool cut_short) const {
  AssistantMessage m;
  if (chat.tools_json.empty()) {
    m.content = text;
    return m;
  }
  AUTOGLM_ASSIGN_OR_RETURN(PromptRequest conversation, prompt_request(chat, parts_->options.limits));
  ToolCallParser parser(parts_->prompts->family(), tool_function_names(conversation.tools), "call_");
  parser.set_tools(nlohmann::json(conversation.tools));
  m.content = parser.push(text).content;
  m.content += parser.finish(cut_short).content;
  m.tool_calls = parser.calls();
  return m;
}

Result<std::shared_ptr<const LoraSet>> lora_for(Runtime::Parts& p, const std::string& name) {
  if (name.empty()) return p.default_lora;
  if (!p.loras) return unsupported("lora: the runtime has no model");
  auto named = p.loras->acquire(name);
  if (!named) return Status(named.status().code(), "lora: " + named.status().message());
  if (!p.default_lora) return named;
  LoraSet stacked = *p.default_lora;
  stacked.insert(stacked.end(), (*named)->begin(), (*named)->end());
  return std::shared_ptr<const LoraSet>(std::make_shared<const LoraSet>(std::move(stacked)));
}

Status Runtime::load_lora(const std::string& name, const std::string& path, float scale) {
  if (!parts_->loras) return unsupported("load_lora: the runtime has no model");
  return parts_->loras->add(name, path, scale);
}

Status Runtime::unload_lora(const std::string& name) {
  if (!parts_->loras) return not_found("no LoRA adapter '" + name + "'");
  return parts_->loras->remove(name);
}

std::vector<LoraInfo> Runtime::loras() const {
  std::vector<LoraInfo> out;
  if (!parts_->loras) return out;
  for (const auto& i : parts_->loras->list()) out.push_back({i.name, i.path, i.scale, i.resident, i.in_use, i.bytes});
  return out;
}

Result<std::vector<float>> Runtime::logits(const std::vector<int32_t>& tokens, bool all_positions,
                                           const std::string& lora) {
  Parts& p = *parts_;
  if (!p.model) return unsupported("logits: the runtime was opened for the tokenizer only");
  if (tokens.empty()) return invalid_argument("tokens: none given");
  for (int32_t t : tokens)
    if (t < 0 || t >= p.model->spec().n_vocab)
      return invalid_argument("tokens: id " + std::to_string(t) + " is outside the vocabulary");
  TurnQueue::Seat seat(p.pool->turns());
  auto turn = seat.take();  // between the engines' steps
  AUTOGLM_ASSIGN_OR_RETURN(auto adapters, lora_for(p, lora));
  Generator generator(*p.model, *p.tokenizer, *p.pool, int64_t(tokens.size()) + 1, p.engine_config.kv_type);
  generator.set_lora(std::move(adapters));
  return generator.evaluate(tokens, all_positions);
}

bool cuda_built() {
  return cuda::built();
}

std::vector<std::string> available_devices() {
  std::vector<std::string> devices = {"cpu"};
  auto count = cuda::device_count();
  const int n = count ? *count : 0;
  for (int i = 0; i < n; ++i) devices.push_back(device_name(Device{DeviceKind::kCuda, i}));
  return devices;
}

std::string Runtime::describe() const {
  if (!parts_->model) return "";
  std::string text = describe_model(parts_->model_path, *parts_->model, parts_->tokenizer->vocab());
  if (parts_->projector) text += describe_projector(parts_->projector->path, *parts_->projector->vision);
  return text;
}

std::string Runtime::op_profile_table() const {
  if (!parts_->engine || !parts_->options.profile) return "";
  return parts_->engine->op_profile().table();
}

std::string Runtime::draft_op_profile_table() const {
  if (!parts_->engine || !parts_->options.profile) return "";
  const OpProfile* draft = parts_->engine->draft_profile();
  return draft ? draft->table() : "";
}

Runtime::Parts& runtime_parts(Runtime& runtime) {
  return *runtime.parts_;
}

ModelInfo Runtime::info() const {
  ModelInfo i;
  i.path = parts_->model_path;
  i.has_chat_template = !parts_->tokenizer->vocab().chat_template.empty();
  i.n_vocab = parts_->tokenizer->n_vocab();
  if (!parts_->model) return i;
  const ModelSpec& s = parts_->model->spec();
  i.architecture = s.arch;
  i.n_params = parts_->model->n_params();
  i.n_vocab = s.n_vocab;
  i.n_ctx_train = s.n_ctx_train;
  i.n_ctx = parts_->engine_config.n_ctx;
  i.n_layer = int32_t(s.n_layer);
  i.n_embd = int32_t(s.n_embd);
  i.device = device_name(parts_->model->device());
  if (const PlacedWeights* placed = parts_->model->placed_weights()) i.device_weight_bytes = placed->bytes();
  if (parts_->engine) i.kv_bytes = kv_pool_bytes(s, parts_->engine_config);
  const GenerationDefaults& d = parts_->model->generation_defaults();
  i.sampling_defaults = {d.temperature, d.top_p, d.repetition_penalty, d.top_k, d.greedy};
  i.pooling = parts_->pooling;
  if (parts_->projector) {
    i.projector_path = parts_->projector->path;
    i.projector_type = projector_type_name(parts_->projector->vision->spec().projector);
  }
  return i;
}

}  // namespace autoglm
