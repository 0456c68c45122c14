"""AutoGLMService in-process, python main.py, and errors as named Python exceptions."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, shared

import openautoglm
from openautoglm import AutoGLMService, AutoModelForCausalLM, AutoTokenizer, ModelFormatError


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read().decode()


def test_service_answers_chat_completions_and_stops():
    svc = AutoGLMService(model_path=shared("models/stories260K.gguf"), config=os.path.join(ROOT, "config/default.yaml"),
                         threads=2, kv_cache={"memory_mib": 32})
    svc.start(port=0)
    try:
        url = svc.url + "/v1/chat/completions"
        body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "temperature": 0}
        reply = json.loads(post(url, body))
        assert reply["choices"][0]["message"]["role"] == "assistant"
        assert reply["usage"]["completion_tokens"] == 16
        stream = post(url, {**body, "stream": True})
        chunks = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: {")]
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == \
            reply["choices"][0]["message"]["content"]
        assert stream.rstrip().endswith("data: [DONE]")
    finally:
        svc.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(url.replace("/v1/chat/completions", "/health"), timeout=2)
    svc.stop()  # idempotent


def test_main_py_serves_with_the_config(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"model: {shared('models/stories260K.gguf')}\nport: 0\nthreads: 1\n")
    env = dict(os.environ, PYTHONPATH=os.environ.get("AUTOGLM_PYTHON_PATH", ""))
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "main.py"), "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        line = ""
        deadline = time.time() + 60
        while "serving http" not in line and time.time() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "main.py exited"
        url = line.split("serving ")[1].strip()
        assert json.loads(post(url + "/v1/completions", {"prompt": "Once", "max_tokens": 4}))["choices"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_errors_are_named_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        AutoModelForCausalLM.from_pretrained(str(tmp_path / "nope.gguf"))
    devices = openautoglm.available_devices()
    assert devices[0] == "cpu" and all(d.startswith("cuda:") for d in devices[1:])
    with pytest.raises(ValueError, match="device: 'gpu' is not a device"):
        AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), device="gpu")
    if not openautoglm._core.cuda_built():  # a CUDA build without a GPU says no device instead
        with pytest.raises(ValueError, match="device: cuda:0: this build has no CUDA backend"):
            AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), device="cuda")
    with pytest.raises(ValueError, match="device: cuda:7"):
        AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), device="cuda:7")
    with pytest.raises(ValueError, match="unknown option 'max_runing'"):
        AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), max_runing=4)
    with pytest.raises(ValueError, match="quantize"):
        AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), quantize="q9_9")
    with pytest.raises(FileNotFoundError):
        AutoGLMService(model_path=str(tmp_path / "missing.gguf"))


def test_bad_generation_arguments_name_the_parameter(stories):
    for kwargs, culprit in [({"max_new_tokens": 0}, "max_new_tokens"), ({"temperatur": 1}, "temperatur"),
                            ({"do_sample": True, "temperature": "hot"}, "temperature"), ({"stop": [1]}, "stop"),
                            ({"json_schema": {"type": "nope"}}, "json_schema")]:
        with pytest.raises(ValueError, match=culprit):
            stories.generate("Once", **kwargs)
    with pytest.raises(ValueError, match="prompt: token id 99999"):
        stories.generate([1, 99999], max_new_tokens=2)
    assert stories.generate("Once", max_new_tokens=2)  # the model still works


def test_corrupted_model_files_raise_and_the_interpreter_survives(tmp_path):
    good = open(shared("models/stories260K.gguf"), "rb").read()
    cases = {"truncated.gguf": good[: len(good) // 3], "garbage.gguf": b"GGUF" + os.urandom(4096),
             "empty.gguf": b"", "header.gguf": good[:24] + b"\xff" * 64 + good[88:]}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises((ModelFormatError, ValueError, OSError)) as info:
            AutoModelForCausalLM.from_pretrained(str(path))
        assert name in str(info.value) or "gguf" in str(info.value).lower(), str(info.value)
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises((ModelFormatError, ValueError)):
        AutoTokenizer.from_pretrained(str(folder))


def test_json_schema_and_chat_tool_calls(stories):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}}, "required": ["name"]}
    ids = stories.generate("Once", max_new_tokens=40, json_schema=schema)
    text = stories.tokenizer.decode(ids[len(stories.tokenizer.encode("Once")):], skip_special_tokens=True)
    assert isinstance(json.loads(text)["name"], str)
    reply = stories.chat([{"role": "user", "content": "Hi"}], max_new_tokens=8)
    assert reply["role"] == "assistant" and isinstance(reply["content"], str)


def test_version_and_stubs_exist():
    assert openautoglm.__version__
    stub = os.path.join(os.path.dirname(openautoglm.__file__), "__init__.pyi")
    assert os.path.exists(stub)


def test_chat_returns_tool_calls_in_openai_shape(stories):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    grammar = "root ::= " + json.dumps(call)  # the model is made to write the call (stories260K uses chatml)
    reply = stories.chat([{"role": "user", "content": "Weather in Paris?"}], tools=tools, grammar=grammar,
                         max_new_tokens=200)
    assert reply["content"] == ""
    assert len(reply["tool_calls"]) == 1
    fn = reply["tool_calls"][0]
    assert fn["type"] == "function" and fn["id"].startswith("call_")
    assert fn["function"]["name"] == "get_weather" and json.loads(fn["function"]["arguments"]) == {"city": "Paris"}
    plain = stories.chat([{"role": "user", "content": "Hi"}], tools=tools, grammar='root ::= "Hello there"')
    assert plain == {"role": "assistant", "content": "Hello there"}
    # chat reads the stream's typed parts (the engine parsed the call); the raw text is still there.
    _, run = stories._submit([{"role": "user", "content": "Weather in Paris?"}],
                             {"grammar": grammar, "max_new_tokens": 200}, tools, None)
    result = stories._collect(run)
    assert [kind for kind, _, _ in result["parts"]] == ["tool_call_begin", "tool_call_arguments", "tool_call_end"]
    assert result["parts"][0][1] == "get_weather" and result["parts"][0][2] == 0
    assert result["finish_reason"] == "tool_calls"
    assert result["text"] == call


def test_chat_returns_a_thinking_models_reasoning_apart(tmp_path):
    from openautoglm import AutoModelForCausalLM

    config = json.load(open(shared("models/hf-tokenizers/qwen3/tokenizer_config.json")))
    template = tmp_path / "qwen3.jinja"  # Qwen3's own template marks thinking with <think>
    template.write_text(config["chat_template"])
    model = AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), threads=2, kv_memory_mib=16,
                                                 chat_template=str(template))
    grammar = 'root ::= "<think>Greet back.</think>\\n\\nHello there"'
    reply = model.chat([{"role": "user", "content": "Hi"}], grammar=grammar, max_new_tokens=64)
    assert reply == {"role": "assistant", "content": "Hello there", "reasoning_content": "Greet back."}
