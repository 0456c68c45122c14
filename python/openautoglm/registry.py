"""ModelRegistry: a folder of models loaded on demand, as `autoglm serve --models-dir` serves them.

    from openautoglm import ModelRegistry
    with ModelRegistry("models/", max_loaded=2, threads=4, cache_ram_mib=512) as registry:
        print(registry.list_models())                    # every model, with its status
        model = registry["qwen2.5-1.5b-q4_k_m.gguf"]  # loaded on first use
        print(model.generate("Hello", max_new_tokens=8))
"""
import os
import threading
import time
import weakref

from . import _core
from .errors import OpenAutoGLMError
from .model import AutoModelForCausalLM

_DEFAULT_MAX_LOADED = 4  # llama-server's router's, and `autoglm serve --models-dir`'s


class _Entry:
    """One model of the folder: where it is and where it stands (the registry's lock guards it)."""

    def __init__(self, found):
        self.name = found["name"]
        self.path = found["path"]
        self.mmproj = found["mmproj"]
        self.model = None
        self.dropped = None  # a weak reference to the model once unloaded: alive while a caller holds it
        self.activity = 0  # its prompt and generated tokens so far: a change is a use
        self.status = "unloaded"  # loading, loaded, sleeping, failed
        self.reason = ""  # the last load's error, while failed
        self.last_used = 0.0
        self.load_lock = threading.Lock()  # one load of a model at a time


class ModelRegistry:
    """ModelRegistry(models_dir, max_loaded=4, sleep_idle_seconds=0, models=None, **options).

    Each GGUF file and Hugging Face folder under models_dir is a model, named as the server names it
    (names(), list_models()). registry[name] loads it on first use with `options` (those of
    AutoModelForCausalLM.from_pretrained; `models` gives one model its own on top: {name: {...}}).
    Past max_loaded (0: no limit) the least recently used model with no generation in flight is
    unloaded first; with sleep_idle_seconds a model unused for that long is unloaded ("sleeping") and
    loads again when next asked for. A model that failed to load raises its error again until
    load(name) tries again. An unloaded model's memory goes when the last reference to it does; asked
    for while a caller still holds it, it is that same model again, not a second copy."""

    def __init__(self, models_dir, *, max_loaded=None, sleep_idle_seconds=0, models=None, **options):
        folder = os.fspath(models_dir)
        if not os.path.isdir(folder):
            raise NotADirectoryError(f"{folder}: no such folder of models")
        if max_loaded is not None and max_loaded < 0:
            raise ValueError(f"max_loaded must be >= 0 (0: no limit), not {max_loaded}")
        if sleep_idle_seconds < 0:
            raise ValueError(f"sleep_idle_seconds must be >= 0 (0: never), not {sleep_idle_seconds}")
        self.models_dir = folder
        self._entries = {found["name"]: _Entry(found) for found in _core.find_models(folder)}
        own = dict(models or {})
        for name in own:
            self._entry(name)  # a name the folder does not hold is a KeyError now, not at first use
        self._own_options = own
        self._options = options
        self.max_loaded = _DEFAULT_MAX_LOADED if max_loaded is None else max_loaded
        self.sleep_idle_seconds = sleep_idle_seconds
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._sleeper = None
        if sleep_idle_seconds > 0:  # the thread holds the registry weakly: dropped, it is collected
            self._sleeper = threading.Thread(target=_sleep_idle, args=(weakref.ref(self), self._closed),
                                             name="openautoglm-registry-sleep", daemon=True)
            self._sleeper.start()

    # --- what the folder holds --------------------------------------------------------------
    def names(self):
        return list(self._entries)

    def __contains__(self, name):
        return name in self._entries

    def __iter__(self):
        return iter(self.names())

    def __len__(self):
        return len(self._entries)

    def status(self, name):
        """{"value": loaded|loading|unloaded|sleeping|failed, "in_use", "reason" (when failed)}: the
        shape of the server's /v1/models status."""
        entry = self._entry(name)
        with self._lock:
            status = {"value": entry.status, "in_use": self._in_flight(entry)}
            if entry.status == "failed":
                status.update(failed=True, reason=entry.reason)
        return status

    def list_models(self):
        """[{"id", "path", "status"}] for each model, by name."""
        return [{"id": name, "path": entry.path, "status": self.status(name)} for name, entry in self._entries.items()]

    # --- loading and unloading --------------------------------------------------------------
    def __getitem__(self, name):
        return self.get(name)

    def get(self, name):
        """The model, loaded now if it is not (unloaded or asleep); a failed one raises its error."""
        entry = self._entry(name)
        with self._lock:
            if entry.status == "failed":
                raise _failed(entry)
        return self._load(entry, retry=False)

    def load(self, name):
        """Loads the model (a failed one tries again) and returns it."""
        return self._load(self._entry(name), retry=True)

    def unload(self, name):
        """Unloads a loaded model; ValueError when it is not loaded."""
        entry = self._entry(name)
        with self._lock:
            if entry.status != "loaded":
                raise ValueError(f"the model '{name}' is not loaded (it is {entry.status})")
            dropped = self._drop(entry, "unloaded")
        del dropped  # the runtime ends here, outside the lock

    def close(self):
        """Unloads every model (and stops the idle timer); the registry loads none after."""
        self._closed.set()
        if self._sleeper is not None and self._sleeper is not threading.current_thread():
            self._sleeper.join()
        with self._lock:
            dropped = [self._drop(e, "unloaded") for e in self._entries.values() if e.status == "loaded"]
        del dropped

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- inside -----------------------------------------------------------------------------
    def _entry(self, name):
        entry = self._entries.get(name)
        if entry is None:
            raise KeyError(f"the model '{name}' is not in {self.models_dir}; it holds: {', '.join(self._entries) or 'none'}")
        return entry

    def _load(self, entry, retry):
        with entry.load_lock:
            with self._lock:
                self._check_open()
                if entry.status == "loaded":
                    entry.last_used = time.monotonic()
                    return entry.model
                if entry.status == "failed" and not retry:
                    raise _failed(entry)
                dropped = self._make_room(besides=entry)
                held = entry.dropped() if entry.dropped is not None else None
                if held is not None:  # unloaded while a caller kept it: the same model again, not a copy
                    self._mark_loaded(entry, held)
                    return held
                entry.status = "loading"
            del dropped  # the runtimes made room for end outside the lock
            try:
                model = AutoModelForCausalLM.from_pretrained(entry.path, **self._options_of(entry))
            except BaseException as e:
                with self._lock:
                    entry.status, entry.reason = "failed", str(e) or type(e).__name__
                raise
            with self._lock:
                self._mark_loaded(entry, model)
                if self._closed.is_set():  # closed while it loaded
                    self._drop(entry, "unloaded")
                    raise _closed()
            return model

    def _check_open(self):
        if self._closed.is_set():
            raise _closed()

    def _mark_loaded(self, entry, model):
        """With the lock held: the model is the entry's, used now."""
        stats = model.stats()
        entry.model, entry.status, entry.reason, entry.dropped = model, "loaded", "", None
        entry.activity = stats["prompt_tokens"] + stats["generated_tokens"]  # the base of _look
        entry.last_used = time.monotonic()

    def _options_of(self, entry):
        options = dict(self._options)
        if entry.mmproj and "mmproj" not in options:
            options["mmproj"] = entry.mmproj
        options.update(self._own_options.get(entry.name, {}))
        return options

    @staticmethod
    def _in_flight(entry):
        """Generations the model runs or queues (with the registry's lock held)."""
        if entry.model is None:
            return 0
        stats = entry.model.stats()
        return stats["running"] + stats["waiting"]

    def _make_room(self, besides):
        """With the lock held: past max_loaded, the least recently used idle models go (one with a
        generation in flight stays; the load goes past max_loaded, and it goes at a later load).
        Returns them, to end outside the lock."""
        if self.max_loaded <= 0:
            return []
        taken = [e for e in self._entries.values() if e.status in ("loaded", "loading") and e is not besides]
        now = time.monotonic()
        idle = sorted((e for e in taken if e.status == "loaded" and self._look(e, now)), key=lambda e: e.last_used)
        dropped = []
        while len(taken) >= self.max_loaded and idle:
            oldest = idle.pop(0)
            dropped.append(self._drop(oldest, "unloaded"))
            taken.remove(oldest)
        return dropped

    @staticmethod
    def _drop(entry, status):
        """With the lock held: the entry lets its model go (returned: the caller ends it after the lock)."""
        model = entry.model
        if model is not None:
            entry.dropped = weakref.ref(model)
        entry.model, entry.status = None, status
        return model

    @staticmethod
    def _look(entry, now):
        """With the lock held, for a loaded model, from one read of its stats: a model that generated
        since the last look was used now (callers may keep the model and use it without the registry);
        returns whether it is idle (no generation running or queued)."""
        stats = entry.model.stats()
        activity = stats["prompt_tokens"] + stats["generated_tokens"]
        if activity != entry.activity:
            entry.activity, entry.last_used = activity, now
        return stats["running"] + stats["waiting"] == 0

    def _put_idle_to_sleep(self):
        now = time.monotonic()
        with self._lock:
            dropped = []
            for entry in self._entries.values():
                if entry.status != "loaded":
                    continue
                if self._look(entry, now) and now - entry.last_used >= self.sleep_idle_seconds:
                    dropped.append(self._drop(entry, "sleeping"))
        del dropped


def _sleep_idle(registry_ref, closed):
    """The idle timer's thread: it holds the registry only while it looks."""
    while True:
        registry = registry_ref()
        if registry is None:
            return
        period = min(1.0, registry.sleep_idle_seconds / 2)
        del registry
        if closed.wait(period):
            return
        registry = registry_ref()
        if registry is None:
            return
        registry._put_idle_to_sleep()
        del registry


def _closed():
    return OpenAutoGLMError("the registry is closed")


def _failed(entry):
    return OpenAutoGLMError(f"the model '{entry.name}' failed to load: {entry.reason} (load() tries again)")
