#include "options.h"

#include <pybind11/stl.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace py = pybind11;

namespace autoglm::python {
namespace {

py::object error_class(const char* name) {
  return py::module_::import("openautoglm.errors").attr(name);
}

template <class Target>
using Setters = std::map<std::string, std::function<void(Target&, const py::handle&)>>;

// Applies each key of `d` through its setter; an unknown key names itself and the known ones.
template <class Target>
void apply(const py::dict& d, const Setters<Target>& setters, Target& target, const char* what) {
  for (const auto& [key, value] : d) {
    const std::string name = py::str(key);
    auto it = setters.find(name);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [k, unused] : setters) known += (known.empty() ? "" : ", ") + k;
      throw py::value_error(std::string(what) + ": unknown option '" + name + "' (known: " + known + ")");
    }
    try {
      it->second(target, value);
    } catch (const py::cast_error&) {
      throw py::value_error(std::string(what) + ": '" + name + "' has the wrong type (" +
                            std::string(py::str(py::type::of(value).attr("__name__"))) + ")");
    }
  }
}

// "PATH", "PATH:SCALE" or (PATH, SCALE), as the CLI's --lora.
LoraOption lora_option(const py::handle& v) {
  if (py::isinstance<py::tuple>(v) || py::isinstance<py::list>(v)) {
    auto t = v.cast<std::pair<std::string, float>>();
    return {t.first, t.second};
  }
  const std::string s = v.cast<std::string>();
  const size_t colon = s.rfind(':');
  if (colon != std::string::npos && colon > 0) {
    try {
      size_t used = 0;
      const float scale = std::stof(s.substr(colon + 1), &used);
      if (used == s.size() - colon - 1) return {s.substr(0, colon), scale};
    } catch (const std::exception&) {
    }
    throw py::value_error("lora: '" + s + "': the scale after ':' must be a number (PATH or PATH:SCALE)");
  }
  return {s, 1.0f};
}

template <class Target, class T>
std::function<void(Target&, const py::handle&)> field(T Target::*member) {
  return [member](Target& t, const py::handle& v) { t.*member = v.cast<T>(); };
}

// A closed set's value from its name, through its one parse; a refusal is a ValueError with the
// runtime's words (`prefix` names the setting as the runtime's errors do).
template <class T>
std::function<void(RuntimeOptions&, const py::handle&)> named(T RuntimeOptions::*member,
                                                              Result<T> (*parse)(std::string_view),
                                                              std::string prefix) {
  return [member, parse, prefix](RuntimeOptions& o, const py::handle& v) {
    auto parsed = parse(v.cast<std::string>());
    if (!parsed) raise(Status(parsed.status().code(), prefix + parsed.status().message()));
    o.*member = *parsed;
  };
}

const Setters<RuntimeOptions>& runtime_setters() {
  using O = RuntimeOptions;
  static const Setters<O> setters = {
      {"device", named(&O::device, &parse_device, "")},
      {"threads", field(&O::threads)},
      {"quantize", field(&O::quantize)},
      {"architecture", field(&O::architecture)},
      {"repack_weights", field(&O::repack_weights)},
      {"cpu_moe", field(&O::cpu_moe)},
      {"n_cpu_moe", field(&O::n_cpu_moe)},
      {"context_window", field(&O::context_window)},
      {"kv_type", named(&O::kv_type, &kv_type_from_name, "kv_cache.dtype: ")},
      {"kv_memory_mib", field(&O::kv_memory_mib)},
      {"kv_block_size", field(&O::kv_block_size)},
      {"prefix_cache", field(&O::prefix_cache)},
      {"cache_ram_mib", field(&O::cache_ram_mib)},
      {"cache_disk_dir", field(&O::cache_disk_dir)},
      {"cache_disk_mib", field(&O::cache_disk_mib)},
      {"chat_template", field(&O::chat_template)},
      {"mmproj", field(&O::mmproj)},
      {"allowed_local_dirs",
       [](O& o, const py::handle& v) { o.media.allowed_local_dirs = v.cast<std::vector<std::string>>(); }},
      {"max_running", field(&O::max_running)},
      {"max_batch_tokens", field(&O::max_batch_tokens)},
      {"max_queued", field(&O::max_queued)},
      {"speculative", named(&O::speculative, &spec_method_from_name, "speculative: ")},
      {"draft_model", field(&O::draft_model)},
      {"draft_quantize", field(&O::draft_quantize)},
      {"draft_max", field(&O::draft_max)},
      {"draft_min", field(&O::draft_min)},
      {"draft_p_min", field(&O::draft_p_min)},
      {"exit_layer", field(&O::exit_layer)},
      {"start_engine", field(&O::start_engine)},
      {"max_loras", field(&O::max_loras)},
      {"lora",
       [](O& o, const py::handle& v) {
         o.lora.clear();
         for (const py::handle& item : v.cast<py::list>()) o.lora.push_back(lora_option(item));
       }},
  };
  return setters;
}

void set_sampling(Request& r, const char* name, const py::handle& v) {
  SamplingParams& s = r.sampling;
  const std::string n = name;
  if (n == "temperature") s.temperature = v.cast<float>();
  if (n == "top_k") s.top_k = v.cast<int32_t>();
  if (n == "top_p") s.top_p = v.cast<float>();
  if (n == "min_p") s.min_p = v.cast<float>();
  if (n == "repetition_penalty") s.repetition_penalty = v.cast<float>();
  if (n == "frequency_penalty") s.frequency_penalty = v.cast<float>();
  if (n == "presence_penalty") s.presence_penalty = v.cast<float>();
  if (n == "seed" && !v.is_none()) s.seed = v.cast<uint64_t>();
}

const Setters<Request>& request_setters() {
  static const Setters<Request> setters = [] {
    Setters<Request> s = {
        {"tokens", field(&Request::tokens)},
        {"text", field(&Request::text)},
        {"max_tokens", field(&Request::max_tokens)},
        {"stop", field(&Request::stop)},
        {"priority", field(&Request::priority)},
        {"top_logprobs", field(&Request::top_logprobs)},
        {"ignore_eos", field(&Request::ignore_eos)},
        {"speculative", field(&Request::speculative)},
        {"skip_special_tokens", field(&Request::skip_special_tokens)},
        {"lora", field(&Request::lora)},
        {"json_schema",
         [](Request& r, const py::handle& v) {
           r.constraint = {ConstraintKind::kJsonSchema, v.cast<std::string>(), "json_schema"};
         }},
        {"grammar",
         [](Request& r, const py::handle& v) {
           r.constraint = {ConstraintKind::kGbnf, v.cast<std::string>(), "grammar"};
         }},
        {"messages_json",
         [](Request& r, const py::handle& v) {
           if (!r.chat) r.chat.emplace();
           r.chat->messages_json = v.cast<std::string>();
         }},
        {"tools_json",
         [](Request& r, const py::handle& v) {
           if (!r.chat) r.chat.emplace();
           r.chat->tools_json = v.cast<std::string>();
         }},
        {"min_pixels",
         [](Request& r, const py::handle& v) {
           if (!r.chat) r.chat.emplace();
           r.chat->min_pixels = v.cast<int64_t>();
         }},
        {"max_pixels",
         [](Request& r, const py::handle& v) {
           if (!r.chat) r.chat.emplace();
           r.chat->max_pixels = v.cast<int64_t>();
         }},
        {"template_kwargs_json",
         [](Request& r, const py::handle& v) {
           if (!r.chat) r.chat.emplace();
           r.chat->template_kwargs_json = v.cast<std::string>();
         }},
    };
    for (const char* name : {"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                             "presence_penalty", "seed"})
      s[name] = [name](Request& r, const py::handle& v) { set_sampling(r, name, v); };
    return s;
  }();
  return setters;
}

}  // namespace

void raise(const Status& status) {
  const std::string& m = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: throw py::value_error(m);
    case StatusCode::kNotFound: PyErr_SetString(PyExc_FileNotFoundError, m.c_str()); break;
    case StatusCode::kIoError: PyErr_SetString(PyExc_OSError, m.c_str()); break;
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported: PyErr_SetString(error_class("ModelFormatError").ptr(), m.c_str()); break;
    case StatusCode::kResourceExhausted: PyErr_SetString(error_class("BusyError").ptr(), m.c_str()); break;
    default: PyErr_SetString(error_class("OpenAutoGLMError").ptr(), m.c_str()); break;
  }
  throw py::error_already_set();
}

RuntimeOptions runtime_options(const py::dict& options) {
  RuntimeOptions o;
  apply(options, runtime_setters(), o, "options");
  return o;
}

Request request_from(const py::dict& request) {
  Request r;
  apply(request, request_setters(), r, "generate");
  return r;
}

}  // namespace autoglm::python
