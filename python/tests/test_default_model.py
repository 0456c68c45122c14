"""The default model: `python3 main.py --config config/default.yaml` as written and AutoGLMService(config=...)
serve what scripts/serve.sh serves (scripts/default-model.sh) when nothing names a model, and say which."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from conftest import ROOT, shared

from openautoglm import AutoGLMService

DEFAULT_CONFIG = os.path.join(ROOT, "config", "default.yaml")
BUNDLED = os.path.normpath(os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf"))  # default-model.sh's


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, url, err_path, timeout=120):
    """Polls GET url/ready until 200; fails with the server's stderr if it exits or the time runs out."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"main.py exited with {proc.returncode} before ready:\n{open(err_path).read()}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:
            last = e
        time.sleep(0.1)  # a poll interval; the order comes from /ready's state
    pytest.fail(f"main.py not ready at {url}/ready within {timeout}s (last: {last}):\n{open(err_path).read()}")


def test_main_py_as_written_serves_the_default_model(tmp_path):
    bundled = shared("models/stories260K.gguf")  # the default when ../shared is there (it is in CI)
    assert os.path.samefile(bundled, BUNDLED)
    port = free_port()
    env = dict(os.environ)
    if os.environ.get("AUTOGLM_PYTHON_PATH"):  # the package importable: build/python, else the installed one
        env["PYTHONPATH"] = os.environ["AUTOGLM_PYTHON_PATH"]
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "main.py", "--config", "config/default.yaml", "--port", str(port)],
                                cwd=ROOT, stdout=out, stderr=err, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(proc, url, err_path)
        req = urllib.request.Request(url + "/v1/completions", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"prompt": "Once upon a time", "max_tokens": 8,
                                                      "temperature": 0}).encode())
        with urllib.request.urlopen(req, timeout=60) as r:
            reply = json.loads(r.read())
        assert reply["usage"]["completion_tokens"] == 8 and reply["choices"][0]["text"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, open(err_path).read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = err_path.read_text()
    assert "model: ../shared/models/stories260K.gguf (trained stories260K from ../shared)" in stderr, stderr
    assert f"serving {BUNDLED}, the default of {os.path.join(ROOT, 'scripts', 'default-model.sh')}" in stderr, stderr
    assert "openautoglm: stopped" in out_path.read_text()


def test_service_with_the_default_config_serves_the_default_model(capfd):
    shared("models/stories260K.gguf")
    with AutoGLMService(config=DEFAULT_CONFIG, threads=2, kv_cache={"memory_mib": 32}).start(port=0) as svc:
        assert svc.model_path == BUNDLED
    assert "(trained stories260K from ../shared)" in capfd.readouterr().err


def fake_checkout(tmp_path, with_cli):
    """A checkout with no ../shared beside it: scripts/default-model.sh falls back to create-model."""
    repo = tmp_path / "checkout"
    (repo / "scripts").mkdir(parents=True)
    (repo / "config").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "default-model.sh"), repo / "scripts")
    shutil.copy(DEFAULT_CONFIG, repo / "config")
    if with_cli:
        build = os.path.dirname(os.environ.get("AUTOGLM_PYTHON_PATH") or os.path.join(ROOT, "build", "python"))
        cli = os.path.join(build, "src", "cli", "autoglm")
        if not os.path.exists(cli):
            pytest.skip(f"{cli} is not built")
        (repo / "build" / "src" / "cli").mkdir(parents=True)
        os.symlink(cli, repo / "build" / "src" / "cli" / "autoglm")
    return repo


def test_without_shared_the_default_is_a_create_model_tiny_model(tmp_path, capfd):
    repo = fake_checkout(tmp_path, with_cli=True)
    with AutoGLMService(config=str(repo / "config" / "default.yaml"), threads=1,
                        kv_cache={"memory_mib": 16}).start(port=0) as svc:
        assert svc.model_path == str(repo / "build" / "tiny-random.gguf")
    err = capfd.readouterr().err
    assert "../shared absent: a random-weight tiny model from create-model" in err, err
    assert f"serving {repo / 'build' / 'tiny-random.gguf'}" in err, err


def test_no_default_is_an_error_naming_model(tmp_path, monkeypatch):
    repo = fake_checkout(tmp_path, with_cli=False)  # no ../shared and no CLI to write a model
    with pytest.raises(ValueError, match=r"model: no model given .*default-model\.sh found no default"):
        AutoGLMService(config=str(repo / "config" / "default.yaml")).start(port=0)
    outside = tmp_path / "elsewhere"  # not in a checkout at all
    outside.mkdir()
    (outside / "c.yaml").write_text("port: 0\n")
    monkeypatch.chdir(outside)
    with pytest.raises(ValueError, match=r"model: no model given .* no Open-AutoGLM repository"):
        AutoGLMService(config=str(outside / "c.yaml")).start()
