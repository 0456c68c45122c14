"""The model served when neither the configuration nor the arguments name one.

One rule for `scripts/serve.sh`, `python3 main.py` and `AutoGLMService`: the repository's
scripts/default-model.sh (../shared/models/stories260K.gguf when present, else a random-weight tiny model
written by `autoglm create-model`; it says which on stderr). The repository is the Open-AutoGLM checkout
the configuration file sits in (or the `repository` given, e.g. main.py's folder); outside one there
is no default, and the error names `model`."""
import os
import subprocess
import sys

SCRIPT = os.path.join("scripts", "default-model.sh")
NO_MODEL = "model: no model given (the 'model' key, 'models', 'models_dir', -m/--model or --models-dir)"


def find_repository(*starts):
    """The first folder, from each start upward, that holds scripts/default-model.sh; None if none does."""
    for start in starts:
        if not start:
            continue
        folder = os.path.abspath(start)
        if os.path.isfile(folder):
            folder = os.path.dirname(folder)
        while True:
            if os.path.isfile(os.path.join(folder, SCRIPT)):
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def default_model(repository):
    """The default model's absolute path, from `repository`'s scripts/default-model.sh (ValueError naming
    `model` when there is none). Says on stderr which model and why."""
    if repository is None:
        raise ValueError(f"{NO_MODEL}; no Open-AutoGLM repository (with {SCRIPT}) around the configuration "
                         "file to take the default model from")
    script = os.path.join(repository, SCRIPT)
    r = subprocess.run(["bash", script], cwd=repository, capture_output=True, text=True)
    path = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if r.returncode != 0 or not path:
        raise ValueError(f"{NO_MODEL}, and {script} found no default: {r.stderr.strip() or f'exit {r.returncode}'}")
    sys.stderr.write(r.stderr)
    path = os.path.normpath(os.path.join(repository, path))
    print(f"openautoglm: no model in the configuration or arguments: serving {path}, the default of {script}",
          file=sys.stderr, flush=True)
    return path
