#!/usr/bin/env python3
"""Byte-for-byte regression test of the public HTTP responses of `autoglm serve`.

  api_bytes.py record --bin AUTOGLM --shared DIR --out tests/api_bytes/expected.txt
  api_bytes.py check  --bin AUTOGLM --shared DIR --expected tests/api_bytes/expected.txt [--actual FILE]

Starts one server per model configuration (qwen2-tiny, llama3-tiny, chatglm-tiny, stories260K.gguf, and
qwen2-tiny with the response cache on), sends a fixed list of deterministic requests (one at a time per
server, so the prefix cache and the id counters see the same order every run) and writes, for each: its
name, the request, the HTTP status, the response headers and the body exactly as bytes (SSE streams whole).
Only what legitimately changes between runs is masked: the digits of counter ids (chatcmpl-N, cmpl-N,
call_N_i), the random part of resp_/msg_/fc_ ids (numbered by first appearance, so references such as
previous_response_id stay checked), `created`/`created_at`, `step_running_s` of /health, the
Content-Length value when it equals the length of the (unmasked) body, and, in an n > 1 stream, the
interleaving of the choices' events (grouped by choice index, each choice's events kept in their order). `check` exits 1 with a unified diff
of the first differing responses.

Missing ../shared models: exit 77 (ctest's SKIP_RETURN_CODE), or 1 under CI (CI=true or
AUTOGLM_REQUIRE_SHARED=1). Python 3 standard library only.
"""

import argparse
import difflib
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

READY_TIMEOUT_S = 120.0      # bound on a server's start (the models are tiny: seconds)
REQUEST_TIMEOUT_S = 60.0     # bound on one request
SKIP = 77

# ----------------------------------------------------------------------------------------------
# Servers


class Server:
    """One `autoglm serve` process; its stderr is drained by a thread (the access log writes there)."""

    def __init__(self, key, binary, args):
        self.key = key
        self.args = [binary, 'serve'] + args + ['--port', '0', '-t', '2']
        self.proc = None
        self.port = None
        self.err = []
        self.ready = threading.Event()
        self.exited = threading.Event()
        self.lock = threading.Lock()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        listening = re.compile(rb'listening on http://127\.0\.0\.1:(\d+)')
        for line in self.proc.stderr:
            with self.lock:
                self.err.append(line)
            m = listening.search(line)
            if m:
                self.port = int(m.group(1))
            if line.startswith(b'ready:') and self.port is not None:
                self.ready.set()
        self.exited.set()
        self.ready.set()  # wake the waiter; it sees the exit

    def stderr_text(self):
        with self.lock:
            return b''.join(self.err[-40:]).decode('utf-8', 'replace')

    def wait_ready(self, deadline):
        if not self.ready.wait(max(0.0, deadline - time.monotonic())):
            raise RuntimeError('server %s not ready within %.0f s: %s\n%s' %
                               (self.key, READY_TIMEOUT_S, ' '.join(self.args), self.stderr_text()))
        if self.exited.is_set() or self.port is None:
            raise RuntimeError('server %s exited before "ready:" (status %s): %s\n%s' %
                               (self.key, self.proc.poll(), ' '.join(self.args), self.stderr_text()))

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def model_configs(shared, tmpdir):
    models = os.path.join(shared, 'models')
    qwen = os.path.join(models, 'hf', 'qwen2-tiny')
    cache_yaml = os.path.join(tmpdir, 'response_cache.yaml')
    with open(cache_yaml, 'w') as f:
        f.write('response_cache: {enabled: true}\n')
    return {
        'qwen': (qwen, ['-m', qwen]),
        'llama3': (os.path.join(models, 'hf', 'llama3-tiny'), ['-m', os.path.join(models, 'hf', 'llama3-tiny')]),
        'chatglm': (os.path.join(models, 'hf', 'chatglm-tiny'), ['-m', os.path.join(models, 'hf', 'chatglm-tiny')]),
        'stories': (os.path.join(models, 'stories260K.gguf'), ['-m', os.path.join(models, 'stories260K.gguf')]),
        'cache': (qwen, ['--config', cache_yaml, '-m', qwen]),
    }

# ----------------------------------------------------------------------------------------------
# The requests


def weather_tool(flat=False):
    params = {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}
    if flat:  # the Responses API's function tool shape
        return {'type': 'function', 'name': 'get_weather', 'description': 'Current weather of a city',
                'parameters': params}
    return {'type': 'function', 'function': {'name': 'get_weather', 'description': 'Current weather of a city',
                                             'parameters': params}}


def time_tool(flat=False):
    params = {'type': 'object', 'properties': {'zone': {'type': 'string', 'enum': ['UTC', 'CET']}},
              'required': ['zone']}
    if flat:
        return {'type': 'function', 'name': 'get_time', 'parameters': params}
    return {'type': 'function', 'function': {'name': 'get_time', 'parameters': params}}


USER = [{'role': 'user', 'content': 'Tell me a short story.'}]
WEATHER_Q = [{'role': 'user', 'content': 'What is the weather in Paris?'}]
TOOLS = [weather_tool(), time_tool()]
TOOL_FOLLOWUP = [
    {'role': 'user', 'content': 'What is the weather in Paris?'},
    {'role': 'assistant', 'content': None,
     'tool_calls': [{'id': 'call_1_0', 'type': 'function',
                     'function': {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}}]},
    {'role': 'tool', 'tool_call_id': 'call_1_0', 'content': '{"temp_c": 18, "sky": "cloudy"}'},
]
SCHEMA = {'type': 'object', 'properties': {'name': {'type': 'string', 'maxLength': 8},
                                            'age': {'type': 'integer', 'minimum': 0, 'maximum': 120}},
          'required': ['name', 'age'], 'additionalProperties': False}
G = {'temperature': 0}


def chat(**kw):
    body = {'messages': USER, 'max_tokens': 8}
    body.update(G)
    body.update(kw)
    return body


def comp(**kw):
    body = {'prompt': 'Once upon a time', 'max_tokens': 8}
    body.update(G)
    body.update(kw)
    return body


def tools_cases(server, prefix):
    """Tool calling on one model family."""
    return [
        (prefix + 'tools_required', server, 'POST', '/v1/chat/completions',
         chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required')),
        (prefix + 'tools_required_stream', server, 'POST', '/v1/chat/completions',
         chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required', stream=True)),
        (prefix + 'tools_named', server, 'POST', '/v1/chat/completions',
         chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS,
              tool_choice={'type': 'function', 'function': {'name': 'get_time'}})),
        (prefix + 'tools_named_stream', server, 'POST', '/v1/chat/completions',
         chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, stream=True,
              tool_choice={'type': 'function', 'function': {'name': 'get_weather'}})),
        (prefix + 'tools_followup', server, 'POST', '/v1/chat/completions',
         chat(messages=TOOL_FOLLOWUP, max_tokens=8, tools=TOOLS)),
    ]


def responses_body(**kw):
    body = {'input': 'Tell me a short story.', 'max_output_tokens': 8, 'temperature': 0}
    body.update(kw)
    return body


# (name, server, method, path, body). body: dict (sent as JSON), bytes (sent as is) or None.
# A path or body may name an earlier response's id as {ref:NAME} (its top-level "id").
CASES = [
    # --- chat completions
    ('chat', 'qwen', 'POST', '/v1/chat/completions', chat()),
    ('chat_stream_usage', 'qwen', 'POST', '/v1/chat/completions',
     chat(stream=True, stream_options={'include_usage': True})),
    ('chat_stream_plain', 'qwen', 'POST', '/v1/chat/completions', chat(stream=True, max_tokens=4)),
    ('chat_seeded_sampling', 'qwen', 'POST', '/v1/chat/completions', chat(temperature=0.9, seed=42, top_p=0.9)),
    ('chat_n2', 'qwen', 'POST', '/v1/chat/completions', chat(n=2, temperature=0.8, seed=7, max_tokens=6)),
    ('chat_n2_stream', 'qwen', 'POST', '/v1/chat/completions',
     chat(n=2, temperature=0.8, seed=7, max_tokens=4, stream=True, stream_options={'include_usage': True})),
    ('chat_logprobs', 'qwen', 'POST', '/v1/chat/completions', chat(logprobs=True, top_logprobs=3, max_tokens=4)),
    ('chat_logprobs_stream', 'qwen', 'POST', '/v1/chat/completions',
     chat(logprobs=True, top_logprobs=2, max_tokens=3, stream=True)),
    ('chat_stop', 'qwen', 'POST', '/v1/chat/completions', chat(max_tokens=12, stop=['ion dom', 'never-seen'])),
    ('chat_stop_stream', 'qwen', 'POST', '/v1/chat/completions', chat(max_tokens=12, stop='nation', stream=True)),
    ('chat_max_tokens_1', 'qwen', 'POST', '/v1/chat/completions', chat(max_tokens=1)),
    ('chat_system_and_parts', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=[{'role': 'developer', 'content': 'Be brief.'},
                    {'role': 'user', 'content': [{'type': 'text', 'text': 'Hi '}, {'type': 'text', 'text': 'there'}]}],
          max_completion_tokens=6)),
    ('chat_json_schema', 'qwen', 'POST', '/v1/chat/completions',
     chat(max_tokens=24, response_format={'type': 'json_schema',
                                          'json_schema': {'name': 'person', 'schema': SCHEMA, 'strict': True}})),
    ('chat_json_schema_stream', 'qwen', 'POST', '/v1/chat/completions',
     chat(max_tokens=24, stream=True,
          response_format={'type': 'json_schema', 'json_schema': {'name': 'person', 'schema': SCHEMA}})),
    ('chat_json_object', 'qwen', 'POST', '/v1/chat/completions',
     chat(max_tokens=12, response_format={'type': 'json_object'})),
    # --- completions
    ('completions', 'qwen', 'POST', '/v1/completions', comp()),
    ('completions_stream', 'qwen', 'POST', '/v1/completions',
     comp(stream=True, stream_options={'include_usage': True})),
    ('completions_n2', 'qwen', 'POST', '/v1/completions', comp(n=2, temperature=0.7, seed=3, max_tokens=5)),
    ('completions_logprobs', 'qwen', 'POST', '/v1/completions', comp(logprobs=3, max_tokens=4)),
    ('completions_logprobs_stream', 'qwen', 'POST', '/v1/completions', comp(logprobs=2, max_tokens=3, stream=True)),
    ('completions_stop', 'qwen', 'POST', '/v1/completions', comp(max_tokens=12, stop=['e'])),
    ('completions_max_tokens_2', 'qwen', 'POST', '/v1/completions', comp(max_tokens=2, prompt=['In a land far away'])),
    # --- tools, Hermes/Qwen
] + tools_cases('qwen', 'qwen_') + [
    ('qwen_tools_required_stream_usage', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required', stream=True,
          stream_options={'include_usage': True})),
    ('qwen_tools_parallel_false', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required', parallel_tool_calls=False)),
    ('qwen_tools_parallel_false_stream', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required', parallel_tool_calls=False,
          stream=True)),
    ('qwen_tools_auto', 'qwen', 'POST', '/v1/chat/completions', chat(messages=WEATHER_Q, max_tokens=10, tools=TOOLS)),
    ('qwen_tools_none', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=6, tools=TOOLS, tool_choice='none')),
    ('qwen_tools_followup_stream', 'qwen', 'POST', '/v1/chat/completions',
     chat(messages=TOOL_FOLLOWUP, max_tokens=6, tools=TOOLS, stream=True)),
    # --- tools, Llama 3 JSON and GLM-4
] + tools_cases('llama3', 'llama3_') + tools_cases('chatglm', 'chatglm_') + [
    ('llama3_chat', 'llama3', 'POST', '/v1/chat/completions', chat()),
    ('chatglm_chat_stream', 'chatglm', 'POST', '/v1/chat/completions',
     chat(stream=True, stream_options={'include_usage': True})),
    # --- a GGUF model (stories260K: llama2-style vocabulary, no chat template of its own)
    ('stories_chat', 'stories', 'POST', '/v1/chat/completions', chat(max_tokens=12)),
    ('stories_completions_stream', 'stories', 'POST', '/v1/completions',
     comp(max_tokens=12, stream=True, stream_options={'include_usage': True})),
    ('stories_completions_stop', 'stories', 'POST', '/v1/completions', comp(max_tokens=24, stop=['.', '\n'])),
    ('stories_models', 'stories', 'GET', '/v1/models', None),
    # --- Responses API
    ('responses_plain', 'qwen', 'POST', '/v1/responses', responses_body()),
    ('responses_instructions', 'qwen', 'POST', '/v1/responses',
     responses_body(instructions='Answer in one word.', input=[
         {'type': 'message', 'role': 'user', 'content': [{'type': 'input_text', 'text': 'Hello'}]}])),
    ('responses_stream', 'qwen', 'POST', '/v1/responses', responses_body(stream=True, max_output_tokens=5)),
    ('responses_tool_required', 'qwen', 'POST', '/v1/responses',
     responses_body(input='What is the weather in Paris?', max_output_tokens=32,
                    tools=[weather_tool(True), time_tool(True)], tool_choice='required')),
    ('responses_tool_required_stream', 'qwen', 'POST', '/v1/responses',
     responses_body(input='What is the weather in Paris?', max_output_tokens=32, stream=True,
                    tools=[weather_tool(True), time_tool(True)], tool_choice='required',
                    parallel_tool_calls=False)),
    ('responses_tool_named', 'qwen', 'POST', '/v1/responses',
     responses_body(input='What time is it?', max_output_tokens=32, tools=[weather_tool(True), time_tool(True)],
                    tool_choice={'type': 'function', 'name': 'get_time'})),
    ('responses_function_call_output', 'qwen', 'POST', '/v1/responses',
     responses_body(max_output_tokens=6, tools=[weather_tool(True)], input=[
         {'type': 'message', 'role': 'user', 'content': 'What is the weather in Paris?'},
         {'type': 'function_call', 'call_id': 'call_9_0', 'name': 'get_weather', 'arguments': '{"city":"Paris"}'},
         {'type': 'function_call_output', 'call_id': 'call_9_0', 'output': '{"temp_c": 18}'}])),
    ('responses_json_schema', 'qwen', 'POST', '/v1/responses',
     responses_body(max_output_tokens=24, text={'format': {'type': 'json_schema', 'name': 'person',
                                                            'schema': SCHEMA, 'strict': True}})),
    ('responses_previous', 'qwen', 'POST', '/v1/responses',
     responses_body(input='And then?', previous_response_id='{ref:responses_plain}', max_output_tokens=6)),
    ('responses_previous_stream', 'qwen', 'POST', '/v1/responses',
     responses_body(input='Go on.', previous_response_id='{ref:responses_previous}', max_output_tokens=4,
                    stream=True)),
    ('responses_not_stored', 'qwen', 'POST', '/v1/responses', responses_body(store=False, max_output_tokens=3)),
    ('responses_get', 'qwen', 'GET', '/v1/responses/{ref:responses_previous}', None),
    ('responses_get_tool', 'qwen', 'GET', '/v1/responses/{ref:responses_tool_required}', None),
    ('responses_get_not_stored', 'qwen', 'GET', '/v1/responses/{ref:responses_not_stored}', None),
    ('responses_delete', 'qwen', 'DELETE', '/v1/responses/{ref:responses_instructions}', None),
    ('responses_get_deleted', 'qwen', 'GET', '/v1/responses/{ref:responses_instructions}', None),
    ('responses_previous_unknown', 'qwen', 'POST', '/v1/responses',
     responses_body(previous_response_id='resp_doesnotexist')),
    # --- response cache (its own server): miss then hit, non-streamed and streamed, and tools
    ('cache_chat_miss', 'cache', 'POST', '/v1/chat/completions', chat(max_tokens=10)),
    ('cache_chat_hit', 'cache', 'POST', '/v1/chat/completions', chat(max_tokens=10)),
    ('cache_chat_hit_streamed', 'cache', 'POST', '/v1/chat/completions',
     chat(max_tokens=10, stream=True, stream_options={'include_usage': True})),
    ('cache_chat_stream_miss', 'cache', 'POST', '/v1/chat/completions',
     chat(max_tokens=9, stream=True, stream_options={'include_usage': True})),
    ('cache_chat_stream_hit', 'cache', 'POST', '/v1/chat/completions',
     chat(max_tokens=9, stream=True, stream_options={'include_usage': True})),
    ('cache_chat_stream_hit_unstreamed', 'cache', 'POST', '/v1/chat/completions', chat(max_tokens=9)),
    ('cache_completions_miss', 'cache', 'POST', '/v1/completions', comp(seed=5, temperature=0.8)),
    ('cache_completions_hit', 'cache', 'POST', '/v1/completions', comp(seed=5, temperature=0.8)),
    ('cache_completions_hit_stream', 'cache', 'POST', '/v1/completions',
     comp(seed=5, temperature=0.8, stream=True)),
    ('cache_tools_miss', 'cache', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required')),
    ('cache_tools_hit', 'cache', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required')),
    ('cache_tools_hit_stream', 'cache', 'POST', '/v1/chat/completions',
     chat(messages=WEATHER_Q, max_tokens=32, tools=TOOLS, tool_choice='required', stream=True)),
    ('cache_n2_logprobs_miss', 'cache', 'POST', '/v1/chat/completions',
     chat(n=2, seed=11, temperature=0.7, max_tokens=3, logprobs=True, top_logprobs=2)),
    ('cache_n2_logprobs_hit', 'cache', 'POST', '/v1/chat/completions',
     chat(n=2, seed=11, temperature=0.7, max_tokens=3, logprobs=True, top_logprobs=2)),
    ('cache_bypass_body', 'cache', 'POST', '/v1/chat/completions', chat(max_tokens=10, cache=False)),
    ('cache_unseeded_sampling', 'cache', 'POST', '/v1/chat/completions',
     chat(max_tokens=1, temperature=1.0, top_k=1)),
    # --- embeddings, tokenizer, models, health
    ('embeddings_string', 'qwen', 'POST', '/v1/embeddings', {'input': 'hello world'}),
    ('embeddings_list_dims', 'qwen', 'POST', '/v1/embeddings', {'input': ['a', 'b c'], 'dimensions': 4}),
    ('embeddings_tokens_base64', 'qwen', 'POST', '/v1/embeddings',
     {'input': [[14990, 1879]], 'encoding_format': 'base64'}),
    ('tokenize', 'qwen', 'POST', '/tokenize', {'content': 'hello world <|im_start|>'}),
    ('tokenize_pieces', 'qwen', 'POST', '/tokenize',
     {'content': 'Héllo, 世界!', 'add_special': False, 'with_pieces': True}),
    ('detokenize', 'qwen', 'POST', '/detokenize', {'tokens': [14990, 1879, 0]}),
    ('models', 'qwen', 'GET', '/v1/models', None),
    ('model_by_id', 'qwen', 'GET', '/v1/models/qwen2-tiny', None),
    ('model_unknown_id', 'qwen', 'GET', '/v1/models/nope', None),
    ('health', 'qwen', 'GET', '/health', None),
    ('ready', 'qwen', 'GET', '/ready', None),
    # --- errors
    ('err_bad_temperature', 'qwen', 'POST', '/v1/chat/completions', chat(temperature=-1)),
    ('err_temperature_type', 'qwen', 'POST', '/v1/chat/completions', chat(temperature='hot')),
    ('err_unknown_model', 'qwen', 'POST', '/v1/chat/completions', chat(model='no-such-model')),
    ('err_malformed_json', 'qwen', 'POST', '/v1/chat/completions', b'{"messages": [}'),
    ('err_messages_missing', 'qwen', 'POST', '/v1/chat/completions', {'max_tokens': 4}),
    ('err_bad_tool_choice', 'qwen', 'POST', '/v1/chat/completions',
     chat(tools=TOOLS, tool_choice='sometimes')),
    ('err_tool_choice_unknown_fn', 'qwen', 'POST', '/v1/chat/completions',
     chat(tools=TOOLS, tool_choice={'type': 'function', 'function': {'name': 'nope'}})),
    ('err_bad_n', 'qwen', 'POST', '/v1/chat/completions', chat(n=0)),
    ('err_bad_top_logprobs', 'qwen', 'POST', '/v1/chat/completions', chat(logprobs=True, top_logprobs=99)),
    ('err_prompt_missing', 'qwen', 'POST', '/v1/completions', {'max_tokens': 4}),
    ('err_responses_bad_input', 'qwen', 'POST', '/v1/responses', {'input': 5}),
    ('err_embeddings_empty', 'qwen', 'POST', '/v1/embeddings', {'input': []}),
    ('err_unknown_route', 'qwen', 'GET', '/v1/nothing', None),
    ('err_wrong_method', 'qwen', 'GET', '/v1/chat/completions', None),
]

# ----------------------------------------------------------------------------------------------
# Masking

RANDOM_ID = re.compile(rb'\b(resp|msg|fc)_([A-Za-z0-9_-]{16,})')
COUNTER_ID = re.compile(rb'"(chatcmpl|cmpl)-\d+"')
CALL_ID = re.compile(rb'"call_\d+_(\d+)"')
CREATED = re.compile(rb'"(created|created_at)":\d+')
STEP_S = re.compile(rb'"step_running_s":[-+0-9.eE]+')
# Requests holding a model: the one before may still hold it while its connection closes.
IN_USE = re.compile(rb'"in_use":\d+')


class Masker:
    """Masks volatile parts; random ids get numbers in order of first appearance (the same id: the same
    number, so a previous_response_id or a stored response is checked to be the one made before)."""

    def __init__(self):
        self.ids = {}

    def _random(self, m):
        whole = m.group(0)
        if whole not in self.ids:
            self.ids[whole] = len(self.ids) + 1
        return m.group(1) + b'_<ID' + str(self.ids[whole]).encode() + b'>'

    def mask(self, data):
        data = RANDOM_ID.sub(self._random, data)
        data = COUNTER_ID.sub(lambda m: b'"' + m.group(1) + b'-<N>"', data)
        data = CALL_ID.sub(lambda m: b'"call_<N>_' + m.group(1) + b'"', data)
        data = CREATED.sub(lambda m: b'"' + m.group(1) + b'":<T>', data)
        data = STEP_S.sub(b'"step_running_s":<T>', data)
        data = IN_USE.sub(b'"in_use":<N>', data)
        return data

# ----------------------------------------------------------------------------------------------
# Running


def send(port, method, path, body):
    if isinstance(body, dict):
        payload = json.dumps(body, ensure_ascii=False).encode()
    else:
        payload = body
    headers = {}
    if payload is not None:
        headers['Content-Type'] = 'application/json'
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        data = resp.read()  # the whole body: every SSE event of a stream, to [DONE]
        return resp.status, resp.reason, resp.getheaders(), data
    finally:
        conn.close()


def group_choices(data):
    """An n > 1 stream with its events grouped by choice index, each choice's own events in their order
    (how the choices' events interleave depends on timing); events without choices (usage, [DONE]) last.
    Other bodies are returned as they are."""
    events = data.split(b'\n\n')
    tail = events.pop() if events and events[-1] == b'' else None
    keyed = []
    for ev in events:
        key = float('inf')
        if ev.startswith(b'data: {'):
            try:
                choices = json.loads(ev[6:]).get('choices') or []
            except ValueError:
                choices = []
            if choices and isinstance(choices[0], dict) and isinstance(choices[0].get('index'), int):
                key = min(c.get('index', 0) for c in choices)
        keyed.append((key, ev))
    if not any(k not in (0, float('inf')) for k, _ in keyed):
        return data, False
    keyed.sort(key=lambda kv: kv[0])  # stable
    out = b'\n\n'.join(ev for _, ev in keyed)
    return out + (b'\n\n' if tail is not None else b''), True


def resolve_refs(value, ids):
    if isinstance(value, str):
        return re.sub(r'\{ref:([a-z0-9_]+)\}', lambda m: ids[m.group(1)], value)
    if isinstance(value, dict):
        return {k: resolve_refs(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, ids) for v in value]
    return value


def top_level_id(data):
    try:
        return json.loads(data).get('id')
    except (ValueError, AttributeError):
        pass
    for line in data.split(b'\n'):  # a stream: the id of its first event's response
        if line.startswith(b'data: {'):
            try:
                ev = json.loads(line[6:])
            except ValueError:
                continue
            return (ev.get('response') or ev).get('id')
    return None


def run_case(case, ports, ids, masker):
    name, server, method, path, body = case
    path = resolve_refs(path, ids)
    body = resolve_refs(body, ids)
    status, reason, headers, data = send(ports[server], method, path, body)
    rid = top_level_id(data)
    if rid:
        ids[name] = rid
    out = [b'### case: ' + name.encode() + b' [' + server.encode() + b']\n']
    out.append(b'> ' + masker.mask(('%s %s' % (method, path)).encode()) + b'\n')
    if isinstance(body, dict):
        out.append(b'> ' + masker.mask(json.dumps(body, ensure_ascii=False).encode()) + b'\n')
    elif body is not None:
        out.append(b'> ' + body + b'\n')
    out.append(('< %d %s\n' % (status, reason)).encode())
    for k, v in headers:
        lk = k.lower()
        if lk == 'date':
            v = '<date>'
        elif lk == 'content-length' and v == str(len(data)):
            v = '<body length>'
        out.append(('< %s: %s\n' % (k, v)).encode('utf-8', 'surrogateescape'))
    regrouped = False
    if dict((k.lower(), v) for k, v in headers).get('content-type', '').startswith('text/event-stream'):
        data, regrouped = group_choices(data)
    masked = masker.mask(data)
    if regrouped:
        out.append(b'< (events grouped by choice index: the interleaving of the choices depends on timing)\n')
    out.append(b'< body %d bytes:\n' % len(masked))
    out.append(masked)
    out.append(b'\n### end\n')
    return b''.join(out)


def run_all(binary, shared):
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise SystemExit('api_bytes: %s is not an executable' % binary)
    tmpdir = tempfile.mkdtemp(prefix='api-bytes-')
    configs = model_configs(shared, tmpdir)
    missing = sorted({path for path, _ in configs.values() if not os.path.exists(path)})
    if missing:
        msg = 'api_bytes: shared test data is absent: %s' % ', '.join(missing)
        if os.environ.get('CI') == 'true' or os.environ.get('AUTOGLM_REQUIRE_SHARED') == '1':
            print(msg + ' (in CI: a failure)', file=sys.stderr)
            sys.exit(1)
        print(msg + ': skipped', file=sys.stderr)
        sys.exit(SKIP)
    servers = {key: Server(key, binary, args) for key, (_, args) in configs.items()}
    started = time.monotonic()
    try:
        for s in servers.values():
            s.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        for s in servers.values():
            s.wait_ready(deadline)
        ports = {key: s.port for key, s in servers.items()}
        ids, masker, out = {}, Masker(), []
        for case in CASES:
            try:
                out.append(run_case(case, ports, ids, masker))
            except Exception as e:  # a dead server or a timeout: say which request and what the server said
                s = servers[case[1]]
                raise RuntimeError('request %s failed: %r\nserver %s (status %s) stderr:\n%s' %
                                   (case[0], e, case[1], s.proc.poll(), s.stderr_text()))
        for key, s in servers.items():
            if s.proc.poll() is not None:
                raise RuntimeError('server %s exited during the run (status %s):\n%s' %
                                   (key, s.proc.poll(), s.stderr_text()))
        return b''.join(out), time.monotonic() - started
    finally:
        for s in servers.values():
            s.stop()
        for f in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, f))
        os.rmdir(tmpdir)

# ----------------------------------------------------------------------------------------------
# Comparing


def split_cases(blob):
    """[(name, bytes of the whole record)] of a recorded file."""
    cases, pos = [], 0
    head = re.compile(rb'### case: (\S+) \[[a-z0-9]+\]\n')
    blen = re.compile(rb'< body (\d+) bytes:\n')
    while pos < len(blob):
        m = head.match(blob, pos)
        if not m:
            raise ValueError('malformed record at byte %d: %r' % (pos, blob[pos:pos + 80]))
        b = blen.search(blob, m.end())
        if not b:
            raise ValueError('record %s has no body line' % m.group(1).decode())
        end = b.end() + int(b.group(1))
        if blob[end:end + 9] != b'\n### end\n':
            raise ValueError('record %s: body length does not match' % m.group(1).decode())
        cases.append((m.group(1).decode(), blob[pos:end + 9]))
        pos = end + 9
    return cases


def first_difference(a, b):
    i = 0
    n = min(len(a), len(b))
    while i < n and a[i] == b[i]:
        i += 1
    lo = max(0, i - 60)
    show = lambda s: s[lo:i + 60].decode('utf-8', 'backslashreplace')
    return i, show(a), show(b)


def compare(expected, actual, max_shown=6):
    exp, act = split_cases(expected), split_cases(actual)
    exp_d, act_d = dict(exp), dict(act)
    report, differing = [], []
    for name, rec in exp:
        if name not in act_d:
            differing.append(name + ' (missing from the actual run)')
        elif act_d[name] != rec:
            differing.append(name)
    for name, _ in act:
        if name not in exp_d:
            differing.append(name + ' (not in the expected file: record again?)')
    if not differing and [n for n, _ in exp] != [n for n, _ in act]:
        differing.append('(the cases are in another order)')
    if not differing:
        return None
    report.append('%d of %d responses differ: %s\n' % (len(differing), len(exp), ', '.join(differing)))
    shown = 0
    for name, rec in exp:
        if shown >= max_shown:
            report.append('... (%d more; --max-shown)\n' % (len(differing) - shown))
            break
        if name not in act_d or act_d[name] == rec:
            continue
        shown += 1
        a, b = rec, act_d[name]
        at, ea, eb = first_difference(a, b)
        lines_a = a.decode('utf-8', 'backslashreplace').splitlines(True)
        lines_b = b.decode('utf-8', 'backslashreplace').splitlines(True)
        report.append('\n=== %s: first difference at byte %d of the record\n  expected: ...%s...\n  actual:   ...%s...\n'
                      % (name, at, ea, eb))
        report.extend(difflib.unified_diff(lines_a, lines_b, 'expected/' + name, 'actual/' + name, n=2))
    return ''.join(r if r.endswith('\n') else r + '\n' for r in report)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='mode', required=True)
    for mode in ('record', 'check'):
        p = sub.add_parser(mode)
        p.add_argument('--bin', required=True, help='the autoglm binary')
        p.add_argument('--shared', required=True, help='the shared test data folder (../shared)')
        if mode == 'record':
            p.add_argument('--out', required=True)
        else:
            p.add_argument('--expected', required=True)
            p.add_argument('--actual', help='also write what this run answered here')
            p.add_argument('--max-shown', type=int, default=6, help='differing responses shown in full')
    args = ap.parse_args()
    try:
        blob, took = run_all(os.path.abspath(args.bin), os.path.abspath(args.shared))
    except RuntimeError as e:
        print('api_bytes: %s' % e, file=sys.stderr)
        return 1
    if args.mode == 'record':
        with open(args.out, 'wb') as f:
            f.write(blob)
        print('api_bytes: recorded %d responses to %s in %.1f s' % (len(CASES), args.out, took))
        return 0
    if args.actual:
        with open(args.actual, 'wb') as f:
            f.write(blob)
    with open(args.expected, 'rb') as f:
        expected = f.read()
    report = compare(expected, blob, args.max_shown)
    if report is None:
        print('api_bytes: %d responses byte-identical (%.1f s)' % (len(CASES), took))
        return 0
    sys.stdout.write(report)
    sys.stdout.flush()
    print('api_bytes: FAILED (%.1f s)' % took, file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
