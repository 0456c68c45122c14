// openautoglm._core: the public C++ API (include/autoglm) for Python. Thin on purpose: the
// transformers-shaped classes are Python (openautoglm/*.py). The GIL is released wherever the
// engine works or a stream waits.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>

#include "autoglm/model_folder.h"
#include "autoglm/runtime.h"
#include "autoglm/server.h"
#include "options.h"

namespace py = pybind11;

namespace autoglm::python {
namespace {

template <class T>
T value_or_raise(Result<T> r) {
  if (!r) raise(r.status());
  return std::move(r).value();
}

Conversation conversation(const std::string& messages_json, const std::string& tools_json,
                          const std::string& kwargs_json, bool add_generation_prompt) {
  Conversation c;
  c.messages_json = messages_json;
  c.tools_json = tools_json;
  c.template_kwargs_json = kwargs_json;
  c.add_generation_prompt = add_generation_prompt;
  return c;
}

py::dict event_dict(const StreamEvent& ev) {
  py::dict d;
  d["text"] = py::bytes(ev.text);  // a piece is whole UTF-8 (the engine holds partial characters back)
  d["tokens"] = ev.tokens;
  d["finished"] = ev.finished;
  d["finish_reason"] = ev.finished ? finish_reason_name(ev.finish_reason) : "";
  d["error"] = ev.error;
  py::list parts;  // the text typed: (kind, text, call index); a chat with tools has its calls here
  for (const OutputPart& p : ev.parts)
    parts.append(py::make_tuple(part_kind_name(p.kind), py::bytes(p.text), p.tool_index));
  d["parts"] = parts;
  if (ev.finished) {
    d["prompt_tokens"] = ev.prompt_tokens;
    d["cached_tokens"] = ev.cached_tokens;
    d["completion_tokens"] = ev.completion_tokens;
  }
  if (!ev.logprobs.empty()) {
    py::list lps;
    for (const TokenLogprob& lp : ev.logprobs) lps.append(py::make_tuple(lp.token, lp.logprob, lp.top));
    d["logprobs"] = lps;
  }
  return d;
}

// A request's stream of events; next() waits with the GIL released.
class Stream {
 public:
  explicit Stream(std::shared_ptr<StreamHandle> handle) : handle_(std::move(handle)) {}
  // The next event, or None when `timeout` seconds pass first (callers loop, so that Python
  // can raise KeyboardInterrupt between waits).
  py::object next(double timeout) {
    StreamEvent ev;
    bool got;
    {
      py::gil_scoped_release unlocked;
      got = handle_->next(ev, std::chrono::milliseconds(int64_t(timeout * 1000)));
    }
    if (!got) return py::none();
    return event_dict(ev);
  }
  void cancel() { handle_->cancel(); }

 private:
  std::shared_ptr<StreamHandle> handle_;
};

py::dict info_dict(const ModelInfo& i) {
  py::dict d;
  d["path"] = i.path;
  d["architecture"] = i.architecture;
  d["n_params"] = i.n_params;
  d["n_vocab"] = i.n_vocab;
  d["n_ctx_train"] = i.n_ctx_train;
  d["n_ctx"] = i.n_ctx;
  d["n_layer"] = i.n_layer;
  d["n_embd"] = i.n_embd;
  d["has_chat_template"] = i.has_chat_template;
  d["projector_path"] = i.projector_path;  // a vision-language model's projector ("": text only)
  d["projector_type"] = i.projector_type;
  return d;
}

py::array_t<float> logits_array(Runtime& rt, const std::vector<int32_t>& ids, bool all_positions,
                                const std::string& lora) {
  Result<std::vector<float>> r = invalid_argument("");
  {
    py::gil_scoped_release unlocked;
    r = rt.logits(ids, all_positions, lora);
  }
  std::vector<float> values = value_or_raise(std::move(r));
  const py::ssize_t vocab = rt.info().n_vocab;
  py::array_t<float> out({py::ssize_t(values.size()) / vocab, vocab});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// A runtime ends (its engine stops; with a disk tier its cached prefixes are written out) with the
// GIL released, so that Python's other threads go on meanwhile; at the interpreter's exit, held.
struct EndWithoutGil {
  void operator()(Runtime* runtime) const {
    if (runtime == nullptr) return;
    if (PyGILState_Check() && !interpreter_finalizing()) {
      py::gil_scoped_release unlocked;
      delete runtime;
    } else {
      delete runtime;
    }
  }
};
using RuntimeHolder = std::unique_ptr<Runtime, EndWithoutGil>;

RuntimeHolder open_runtime(const std::string& path, const py::dict& options, bool tokenizer_only) {
  RuntimeOptions o = runtime_options(options);
  Result<std::unique_ptr<Runtime>> r = invalid_argument("");
  {
    py::gil_scoped_release unlocked;
    r = tokenizer_only ? Runtime::open_tokenizer(path, o) : Runtime::open(path, o);
  }
  return RuntimeHolder(value_or_raise(std::move(r)).release());
}

std::unique_ptr<Server> start_server(const std::string& config_path,
                                     const std::vector<std::pair<std::string, std::string>>& overrides,
                                     const std::vector<std::string>& api_keys) {
  ServerOptions o;
  o.config_path = config_path;
  o.overrides = overrides;
  o.api_keys = api_keys;
  Result<std::unique_ptr<Server>> r = invalid_argument("");
  {
    py::gil_scoped_release unlocked;
    r = Server::start(o);
  }
  return value_or_raise(std::move(r));
}

}  // namespace
}  // namespace autoglm::python

PYBIND11_MODULE(_core, m) {
  using namespace autoglm;
  using namespace autoglm::python;
  m.doc() = "openautoglm's bindings of the public C++ API (use the classes of the openautoglm package)";
  m.def("version", [] { return std::string(autoglm::version()); });
  m.def("cuda_built", &autoglm::cuda_built);
  m.def("available_devices", &autoglm::available_devices);
  m.def(
      "find_models",
      [](const std::string& dir) {
        py::list out;
        for (const FolderModel& f : value_or_raise(find_models(dir))) {
          py::dict d;
          d["name"] = f.name;
          d["path"] = f.path;
          d["mmproj"] = f.mmproj;
          out.append(d);
        }
        return out;
      },
      py::arg("dir"));

  py::class_<Stream>(m, "Stream").def("next", &Stream::next, py::arg("timeout") = 0.1).def("cancel", &Stream::cancel);

  // Runtime::hold_steps as a Python object: the engines stay between steps until release().
  struct StepHold {
    std::shared_ptr<void> hold;
  };
  py::class_<StepHold>(m, "StepHold").def("release", [](StepHold& h) { h.hold.reset(); });

  py::class_<Runtime, RuntimeHolder>(m, "Runtime")
      .def_static(
          "open", [](const std::string& p, const py::dict& o) { return open_runtime(p, o, false); }, py::arg("path"),
          py::arg("options") = py::dict())
      .def_static(
          "open_tokenizer", [](const std::string& p, const py::dict& o) { return open_runtime(p, o, true); },
          py::arg("path"), py::arg("options") = py::dict())
      .def("encode", &Runtime::encode, py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = false)
      .def(
          "decode",
          [](const Runtime& rt, const std::vector<int32_t>& ids, bool special) {
            return py::bytes(rt.decode(ids, special));
          },
          py::arg("ids"), py::arg("special") = false)
      .def("token_piece", [](const Runtime& rt, int32_t id) { return py::bytes(rt.token_piece(id)); })
      .def("vocab_size", &Runtime::vocab_size)
      .def("special_tokens",
           [](const Runtime& rt) {
             const SpecialTokens s = rt.special_tokens();
             py::dict d;
             d["bos"] = s.bos;
             d["eos"] = s.eos;
             d["end_of_generation"] = s.end_of_generation;
             return d;
           })
      .def(
          "render_chat",
          [](const Runtime& rt, const std::string& messages, const std::string& tools, const std::string& kwargs,
             bool add_generation_prompt) {
            return py::bytes(
                value_or_raise(rt.render_chat(conversation(messages, tools, kwargs, add_generation_prompt))));
          },
          py::arg("messages_json"), py::arg("tools_json") = "", py::arg("template_kwargs_json") = "",
          py::arg("add_generation_prompt") = true)
      .def(
          "chat_tokens",
          [](const Runtime& rt, const std::string& messages, const std::string& tools, const std::string& kwargs,
             bool add_generation_prompt) {
            return value_or_raise(rt.chat_tokens(conversation(messages, tools, kwargs, add_generation_prompt)));
          },
          py::arg("messages_json"), py::arg("tools_json") = "", py::arg("template_kwargs_json") = "",
          py::arg("add_generation_prompt") = true)
      .def(
          "parse_reply",
          [](const Runtime& rt, const std::string& messages, const std::string& tools, const std::string& text,
             bool cut_short) {
            const AssistantMessage a =
                value_or_raise(rt.parse_reply(conversation(messages, tools, "", true), text, cut_short));
            py::list calls;
            for (const ToolCall& c : a.tool_calls) {
              py::dict call;
              call["id"] = c.id;
              call["name"] = c.name;
              call["arguments"] = c.arguments;
              calls.append(call);
            }
            py::dict d;
            d["content"] = py::bytes(a.content);
            d["tool_calls"] = calls;
            return d;
          },
          py::arg("messages_json"), py::arg("tools_json"), py::arg("text"), py::arg("cut_short") = false)
      .def("logits", &logits_array, py::arg("ids"), py::arg("all_positions") = true, py::arg("lora") = "")
      .def(
          "load_lora",
          [](Runtime& rt, const std::string& name, const std::string& path, float scale) {
            Status st = invalid_argument("");
            {
              py::gil_scoped_release unlocked;
              st = rt.load_lora(name, path, scale);
            }
            if (!st.is_ok()) raise(st);
          },
          py::arg("name"), py::arg("path"), py::arg("scale") = 1.0f)
      .def("unload_lora",
           [](Runtime& rt, const std::string& name) {
             const Status st = rt.unload_lora(name);
             if (!st.is_ok()) raise(st);
           })
      .def("loras",
           [](const Runtime& rt) {
             py::list out;
             for (const LoraInfo& i : rt.loras()) {
               py::dict d;
               d["name"] = i.name;
               d["path"] = i.path;
               d["scale"] = i.scale;
               d["resident"] = i.resident;
               d["in_use"] = i.in_use;
               out.append(d);
             }
             return out;
           })
      .def("info", [](const Runtime& rt) { return info_dict(rt.info()); })
      .def("stats",
           [](const Runtime& rt) {
             const RuntimeStats s = rt.stats();
             py::dict d;
             d["prompt_tokens"] = s.prompt_tokens;
             d["generated_tokens"] = s.generated_tokens;
             d["prefix_hit_tokens"] = s.prefix_hit_tokens;
             d["steps"] = s.steps;
             d["running"] = s.running;
             d["waiting"] = s.waiting;
             d["kv_tier_ram_hits"] = s.kv_tier_ram_hits;
             d["kv_tier_disk_hits"] = s.kv_tier_disk_hits;
             d["kv_tier_ram_bytes"] = s.kv_tier_ram_bytes;
             d["kv_tier_disk_bytes"] = s.kv_tier_disk_bytes;
             return d;
           })
      .def("hold_steps",
           [](Runtime& rt) {
             py::gil_scoped_release unlocked;  // waits for the step in progress
             return StepHold{rt.hold_steps()};
           })
      .def("submit", [](Runtime& rt, const py::dict& request) {
        return Stream(value_or_raise(rt.submit(request_from(request))));
      });

  py::class_<Server>(m, "Server")
      .def_static("start", &start_server, py::arg("config_path"), py::arg("overrides"), py::arg("api_keys"))
      .def_property_readonly("host", &Server::host)
      .def_property_readonly("port", &Server::port)
      .def_property_readonly("model_path", &Server::model_path)
      .def("stop", [](Server& s) {
        py::gil_scoped_release unlocked;
        s.stop();
      });
}
