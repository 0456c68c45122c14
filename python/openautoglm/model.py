"""AutoModelForCausalLM: generation through the continuous-batching engine, shaped like
transformers (generate, __call__ with .logits), plus chat, streaming, asyncio and callbacks."""
import asyncio
import base64
import concurrent.futures
import io
import json
import math
import os
import threading

from . import _core
from ._params import request_fields
from ._runtime import open_runtime
from .errors import OpenAutoGLMError
from .tokenizer import BatchEncoding, Tokenizer, _id_list, _text

_WAIT = 0.1  # seconds a wait on the engine holds before Python may raise KeyboardInterrupt


class CausalLMOutput(BatchEncoding):
    """model(input_ids).logits: a numpy array [batch, positions, vocab]."""


class GenerationResult(BatchEncoding):
    """text, token_ids, parts (the text typed: (kind, text, call index)), finish_reason, prompt_tokens,
    completion_tokens."""


def _image_url(part):
    """A transformers-style image part ({"type": "image", "url" | "path" | "image": ...}) as the
    runtime's image_url part: files and in-memory images (bytes, PIL) become data: URLs."""
    source = part.get("url") or part.get("path") or part.get("image")
    if isinstance(source, str) and (source.startswith(("data:", "http://", "https://", "file://"))):
        return {"type": "image_url", "image_url": {"url": source}}
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            data = f.read()
    elif isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    elif hasattr(source, "save"):  # a PIL image
        buffer = io.BytesIO()
        source.save(buffer, format="PNG")
        data = buffer.getvalue()
    else:
        raise ValueError(f"an image part needs 'url', 'path' or 'image' (a file, bytes or a PIL image), not {part!r}")
    return {"type": "image_url", "image_url": {"url": "data:application/octet-stream;base64," + base64.b64encode(data).decode()}}


def _chat_messages(messages):
    """The messages as JSON for the runtime, image parts of either shape as image_url parts."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            m = dict(m, content=[_image_url(p) if isinstance(p, dict) and p.get("type") == "image" else p
                                 for p in content])
        out.append(m)
    return json.dumps(out, ensure_ascii=False)


def _is_chat(prompt):
    return isinstance(prompt, (list, tuple)) and bool(prompt) and isinstance(prompt[0], dict)


def _assistant_message(parts):
    """The reply as OpenAI's message, from the stream's typed parts (the engine parsed the calls
    in the model family's format; nothing here reads the text again)."""
    content, reasoning, calls = [], [], []
    for kind, text, index in parts:
        if kind == "text":
            content.append(text)
        elif kind == "reasoning":
            reasoning.append(text)
        elif kind == "tool_call_begin":
            calls.append({"id": f"call_{index}", "type": "function", "function": {"name": text, "arguments": ""}})
        elif kind == "tool_call_arguments":
            calls[-1]["function"]["arguments"] += text
    message = {"role": "assistant", "content": "".join(content)}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    return message


class _Run:
    """One submitted request: its events until the last; cancelled when left early."""

    def __init__(self, stream):
        self.stream = stream
        self.finished = False

    def next_event(self, timeout=_WAIT):
        ev = self.stream.next(timeout)
        if ev is not None:
            ev["text"] = _text(ev["text"])
            ev["parts"] = [(kind, _text(text), index) for kind, text, index in ev["parts"]]
            if ev["finished"]:
                self.finished = True
                if ev["finish_reason"] == "error":
                    raise OpenAutoGLMError(ev["error"] or "generation failed")
        return ev

    def events(self):
        try:
            while not self.finished:
                ev = self.next_event()
                if ev is not None:
                    yield ev
        finally:
            self.cancel()

    def cancel(self):
        if not self.finished:
            self.stream.cancel()


class CausalLM:
    """A loaded model with its engine; see AutoModelForCausalLM.from_pretrained."""

    def __init__(self, runtime, name_or_path):
        self._rt = runtime
        self.name_or_path = name_or_path
        self.tokenizer = Tokenizer(runtime, name_or_path)
        self.config = runtime.info()
        self._adapter = ""  # the active LoRA adapter (set_adapter); "" none

    # --- requests -------------------------------------------------------------------------
    def _submit(self, prompt, kwargs, chat_tools=None, template_kwargs=None):
        fields = request_fields(kwargs)
        if self._adapter:
            fields["lora"] = self._adapter
        if _is_chat(prompt):
            fields["messages_json"] = _chat_messages(prompt)
            if chat_tools:
                fields["tools_json"] = json.dumps(chat_tools, ensure_ascii=False)
            if template_kwargs:
                fields["template_kwargs_json"] = json.dumps(template_kwargs, ensure_ascii=False)
        elif isinstance(prompt, str):
            fields["tokens"] = self.tokenizer.encode(prompt, add_special_tokens=True)
        else:
            fields["tokens"] = _id_list(prompt, "input_ids")
        return fields.get("tokens"), _Run(self._rt.submit(fields))

    def _collect(self, run, streamer=None):
        text, ids, parts, last = [], [], [], None
        try:
            for ev in run.events():
                text.append(ev["text"])
                ids.extend(ev["tokens"])
                parts.extend(ev["parts"])
                if streamer is not None and ev["text"]:
                    streamer.on_text(ev["text"])
                last = ev
        finally:
            if streamer is not None:
                streamer.end()
        return GenerationResult(text="".join(text), token_ids=ids, parts=parts, finish_reason=last["finish_reason"],
                                prompt_tokens=last.get("prompt_tokens", 0),
                                completion_tokens=last.get("completion_tokens", len(ids)))

    # --- transformers-shaped ----------------------------------------------------------------
    def generate(self, inputs, streamer=None, **kwargs):
        """Prompt ids followed by the continuation, as transformers returns them. `inputs`: ids
        (a list, or a numpy array [n] or [batch, n]), a text, or a list of texts or of id lists;
        a batch runs concurrently in the engine."""
        array_2d = hasattr(inputs, "ndim") and inputs.ndim == 2  # numpy in: numpy out
        if hasattr(inputs, "tolist"):
            inputs = inputs.tolist()
        batch = isinstance(inputs, (list, tuple)) and bool(inputs) and not isinstance(inputs[0], int) \
            and not _is_chat(inputs)
        prompts = list(inputs) if batch else [inputs]
        if batch and streamer is not None:
            raise ValueError("streamer: one prompt at a time")
        # All queued before any is read, and a batch admitted together: no engine step runs
        # until the last prompt is in (else the first ones would start alone).
        hold = self._rt.hold_steps() if batch else None
        try:
            runs = [self._submit(p, kwargs) for p in prompts]
        finally:
            if hold is not None:
                hold.release()
        outs = []
        try:
            for prompt_ids, run in runs:
                result = self._collect(run, streamer)
                outs.append(list(prompt_ids or []) + result["token_ids"])
        finally:
            for _, run in runs:
                run.cancel()
        if not batch:
            return outs[0]
        if array_2d and len({len(o) for o in outs}) == 1:
            import numpy as np

            return np.array(outs, dtype=np.int64)
        return outs

    def __call__(self, input_ids, **_ignored):
        """Logits of every position: .logits is [batch, positions, vocab] (float32)."""
        import numpy as np

        rows = input_ids.tolist() if hasattr(input_ids, "tolist") else input_ids
        if rows and isinstance(rows[0], int):
            rows = [rows]
        return CausalLMOutput(logits=np.stack([self._rt.logits(_id_list(r, "input_ids"), True, self._adapter) for r in rows]))

    def perplexity(self, text):
        """exp of the mean negative log-likelihood of each token after the first."""
        import numpy as np

        ids = self.tokenizer.encode(text)
        if len(ids) < 2:
            raise ValueError("text: needs at least two tokens for a perplexity")
        logits = self._rt.logits(ids, True, self._adapter).astype(np.float64)[:-1]
        top = logits.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        nll = log_z - logits[np.arange(len(ids) - 1), ids[1:]]
        return float(math.exp(nll.mean()))

    def chat(self, messages, tools=None, template_kwargs=None, **kwargs):
        """The assistant's reply: {'role', 'content'}; 'reasoning_content' when a thinking model's
        template marks thinking (its <think> text, apart from the answer); and, when it called
        tools, 'tool_calls' in OpenAI's shape."""
        _, run = self._submit(list(messages), kwargs, tools, template_kwargs)
        return _assistant_message(self._collect(run)["parts"])

    # --- streaming, asyncio, callbacks -------------------------------------------------------
    def stream(self, prompt, **kwargs):
        """Pieces of text as they are generated (prompt: text, ids or chat messages). Closing
        the iterator (or KeyboardInterrupt) cancels the request."""
        _, run = self._submit(prompt, kwargs)
        for ev in run.events():
            if ev["text"]:
                yield ev["text"]

    async def agenerate(self, prompt, **kwargs):
        """async for piece in model.agenerate(...): the engine is awaited off the event loop;
        cancelling the task (or aclose) cancels the request."""
        _, run = self._submit(prompt, kwargs)
        loop = asyncio.get_running_loop()
        try:
            while not run.finished:
                ev = await loop.run_in_executor(None, run.next_event, _WAIT)
                if ev is not None and ev["text"]:
                    yield ev["text"]
        finally:
            run.cancel()

    def submit(self, prompt, on_token=None, on_done=None, on_error=None, **kwargs):
        """Runs in the background; returns a concurrent.futures.Future of a GenerationResult.
        on_token(piece) for each piece, then on_done(result) or on_error(exception), on a worker
        thread. future.cancel() cancels the request."""
        _, run = self._submit(prompt, kwargs)
        future = GenerationFuture(run)

        def drain():
            try:
                class _Callbacks:
                    def on_text(self, piece):
                        if on_token:
                            on_token(piece)

                    def end(self):
                        pass

                result = self._collect(run, _Callbacks())
            except BaseException as e:  # noqa: BLE001 - handed to the future and on_error
                if not future.cancelled():
                    future.set_exception(e)
                if on_error:
                    on_error(e)
                return
            if not future.cancelled():
                future.set_result(result)
            if on_done:
                on_done(result)

        threading.Thread(target=drain, name="openautoglm-submit", daemon=True).start()
        return future

    def stats(self):
        return self._rt.stats()

    # --- LoRA adapters, as transformers' PEFT integration names them -------------------------
    def load_adapter(self, path, adapter_name="default", scale=1.0):
        """Loads a PEFT folder or a GGUF adapter under `adapter_name` (not yet active)."""
        self._rt.load_lora(adapter_name, os.fspath(path), float(scale))

    def set_adapter(self, adapter_name):
        """Generation, __call__ and perplexity run with this adapter from now on."""
        if adapter_name not in [a["name"] for a in self._rt.loras()]:
            raise ValueError(f"set_adapter: no adapter '{adapter_name}' (load_adapter first)")
        self._adapter = adapter_name

    def disable_adapters(self):
        """Back to the base model (the adapters stay loaded)."""
        self._adapter = ""

    def delete_adapter(self, adapter_name):
        self._rt.unload_lora(adapter_name)
        if self._adapter == adapter_name:
            self._adapter = ""

    def active_adapters(self):
        return [self._adapter] if self._adapter else []

    def adapters(self):
        """The loaded adapters: name, path, scale, resident, in_use."""
        return self._rt.loras()


class GenerationFuture(concurrent.futures.Future):
    """A Future whose cancel() also cancels the generation (it ends within one engine step)."""

    def __init__(self, run):
        super().__init__()
        self._run = run

    def cancel(self):
        self._run.cancel()
        return super().cancel()


class AutoModelForCausalLM:
    """AutoModelForCausalLM.from_pretrained(path, ...): a GGUF file or a Hugging Face folder."""

    @staticmethod
    def from_pretrained(path, device="cpu", quantize=None, threads=None, context_length=None, kv_cache_dtype=None,
                        **options):
        """Options beyond these are the runtime's (max_running, kv_memory_mib, chat_template,
        speculative, draft_model, draft_quantize, ...); an unknown one is a ValueError."""
        opts = dict(options)
        opts.update(device=device, quantize=quantize, threads=threads, context_window=context_length, kv_type=kv_cache_dtype)
        return CausalLM(open_runtime(path, opts), os.fspath(path))
