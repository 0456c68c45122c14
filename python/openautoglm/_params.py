"""transformers-style generation arguments to the engine's request fields."""
import json

# Sampling defaults when do_sample=True, as transformers' GenerationConfig has them.
_SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": 0.0}
_FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty")
GENERATION_KWARGS = ("max_new_tokens", "do_sample", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                     "frequency_penalty", "presence_penalty", "stop", "seed", "json_schema", "grammar", "ignore_eos",
                     "speculative", "priority", "streamer", "pad_token_id", "eos_token_id", "attention_mask",
                     "skip_special_tokens", "min_pixels", "max_pixels")


def request_fields(kwargs):
    """The request dict for the engine; a ValueError names an unknown or ill-typed argument."""
    unknown = [k for k in kwargs if k not in GENERATION_KWARGS]
    if unknown:
        raise ValueError(f"generate: unknown argument '{unknown[0]}' (known: {', '.join(GENERATION_KWARGS)})")
    max_new = kwargs.get("max_new_tokens", 256)
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise ValueError(f"max_new_tokens: must be a positive integer, not {max_new!r}")
    r = {"max_tokens": max_new}
    do_sample = kwargs.get("do_sample", any(k in kwargs for k in ("temperature", "top_p", "top_k", "min_p")))
    if do_sample:
        for name, default in _SAMPLING_DEFAULTS.items():
            r[name] = kwargs.get(name, default)
    else:
        r["temperature"] = 0.0  # greedy, as transformers' default
    for name in ("repetition_penalty", "frequency_penalty", "presence_penalty"):
        if name in kwargs:
            r[name] = kwargs[name]
    for name in _FLOAT_FIELDS:
        if name in r and not isinstance(r[name], (int, float)):
            raise ValueError(f"{name}: must be a number, not {r[name]!r}")
    if "top_k" in r and not isinstance(r["top_k"], int):
        raise ValueError(f"top_k: must be an integer, not {r['top_k']!r}")
    if kwargs.get("seed") is not None:
        seed = kwargs["seed"]
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed: must be a non-negative integer, not {seed!r}")
        r["seed"] = seed
    stop = kwargs.get("stop")
    if stop is not None:
        stop = [stop] if isinstance(stop, str) else list(stop)
        if not all(isinstance(s, str) for s in stop):
            raise ValueError("stop: must be a string or a list of strings")
        r["stop"] = stop
    schema = kwargs.get("json_schema")
    if schema is not None:
        r["json_schema"] = schema if isinstance(schema, str) else json.dumps(schema)
    if kwargs.get("grammar") is not None:
        if schema is not None:
            raise ValueError("grammar: give json_schema or grammar, not both")
        r["grammar"] = str(kwargs["grammar"])
    for name in ("ignore_eos", "speculative", "skip_special_tokens"):
        if name in kwargs:
            r[name] = bool(kwargs[name])
    for name in ("min_pixels", "max_pixels"):  # a chat's images: the image processor's limits
        if kwargs.get(name) is not None:
            if not isinstance(kwargs[name], int) or kwargs[name] < 1:
                raise ValueError(f"{name}: must be a positive integer, not {kwargs[name]!r}")
            r[name] = kwargs[name]
    if "priority" in kwargs:
        r["priority"] = int(kwargs["priority"])
    return r
