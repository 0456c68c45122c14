"""AutoGLMService: the OpenAI-compatible server in this process."""
import json
import os
import signal
import threading

from . import _core
from ._default_model import NO_MODEL, default_model, find_repository


class AutoGLMService:
    """AutoGLMService(model_path=..., config="config/default.yaml", **overrides).run(port=8080).

    Overrides are configuration keys (max_running=4, kv_cache={"dtype": "q8_0"}, or dotted:
    **{"speculative.method": "ngram"}); they win over the file's.

    When neither model_path nor the configuration (nor an override) names a model, it serves the
    default `scripts/serve.sh` serves: that of scripts/default-model.sh in the Open-AutoGLM repository
    the configuration file sits in (else `repository`'s, else the current folder's), and says which
    on stderr; outside a repository that is a ValueError naming `model`."""

    def __init__(self, model_path=None, device="cpu", config=None, *, repository=None, **overrides):
        if config is not None and not os.path.exists(config):
            raise FileNotFoundError(f"{config}: no such configuration file")
        if model_path is not None:
            if not os.path.exists(model_path):
                raise FileNotFoundError(f"{model_path}: no such model file or folder")
            overrides["model"] = os.fspath(model_path)
        overrides["device"] = device
        self.config = config
        self.repository = repository
        self._overrides = overrides
        self._server = None

    def start(self, host=None, port=None):
        """Listens and loads the model; returns once it serves (port 0 picks a free port)."""
        if self._server is not None:
            raise RuntimeError("the service is already started")
        overrides = dict(self._overrides)
        if host is not None:
            overrides["host"] = host
        if port is not None:
            overrides["port"] = port
        pairs = [(k.replace("__", "."), json.dumps(v)) for k, v in overrides.items()]
        try:
            self._server = _core.Server.start(self.config or "", pairs, [])
        except ValueError as e:  # raised before anything binds or loads
            if not str(e).startswith(NO_MODEL):
                raise
            repository = find_repository(self.config, self.repository, os.getcwd())
            pairs.append(("model", json.dumps(default_model(repository))))
            self._server = _core.Server.start(self.config or "", pairs, [])
        return self

    @property
    def host(self):
        return self._server.host

    @property
    def port(self):
        return self._server.port

    @property
    def model_path(self):
        """The (first) model served: the configuration's, the argument's, or the default; None until started."""
        return self._server.model_path if self._server is not None else None

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def stop(self):
        """Drains the requests in flight (the configured grace period), then stops. Idempotent."""
        if self._server is not None:
            self._server.stop()
            self._server = None

    def run(self, host=None, port=None):
        """Serves until SIGINT (Ctrl-C) or SIGTERM, then stops cleanly."""
        stop = threading.Event()
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        # The handlers are in place before "serving" is announced: a signal right after it stops cleanly.
        try:
            self.start(host, port)
            print(f"openautoglm: serving {self.url}", flush=True)
            while not stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.stop()
        print("openautoglm: stopped", flush=True)

    def __enter__(self):
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
