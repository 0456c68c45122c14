"""Opening the C++ runtime, with the checks Python users expect before it starts."""
import os

from . import _core

def open_runtime(path, options, tokenizer_only=False):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such model file or folder")
    opts = {k: v for k, v in options.items() if v is not None}
    if tokenizer_only:
        return _core.Runtime.open_tokenizer(path, opts)
    return _core.Runtime.open(path, opts)
