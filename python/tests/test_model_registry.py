"""ModelRegistry: a folder of models loaded on demand, named as the server names them; the least
recently used idle model unloaded past max_loaded, an idle one asleep after sleep_idle_seconds, a model
that fails to load answering with its reason and harming no other."""
import os
import time

import pytest
from conftest import shared

from openautoglm import ModelFormatError, ModelRegistry, OpenAutoGLMError

STORIES, RANDOM, QWEN, BROKEN = "a-stories.gguf", "b-random.gguf", "qwen2-tiny", "broken.gguf"


@pytest.fixture
def folder(tmp_path):
    os.symlink(os.path.abspath(shared("models/stories260K.gguf")), tmp_path / STORIES)
    os.symlink(os.path.abspath(shared("models/llama-2-tiny-random.gguf")), tmp_path / RANDOM)
    os.symlink(os.path.abspath(shared("models/hf/qwen2-tiny")), tmp_path / QWEN)
    (tmp_path / BROKEN).write_bytes(b"GGUF but not really")
    (tmp_path / "mmproj-vision.gguf").write_bytes(b"a projector is no model of its own")
    (tmp_path / "notes.txt").write_text("not a model")
    return tmp_path


def wait_for(predicate, what, seconds=60):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {seconds} s for {what}")
        time.sleep(0.02)


def value(registry, name):
    return registry.status(name)["value"]


def test_lists_the_folder_as_the_server_names_it_and_loads_on_first_use(folder):
    with ModelRegistry(folder, threads=2, kv_memory_mib=16) as registry:
        assert registry.names() == [STORIES, RANDOM, BROKEN, QWEN]  # by name; no projector, no text file
        assert {m["id"]: m["status"]["value"] for m in registry.list_models()} == {
            STORIES: "unloaded", RANDOM: "unloaded", QWEN: "unloaded", BROKEN: "unloaded"}
        assert QWEN in registry and "notes.txt" not in registry and len(registry) == 4
        model = registry[RANDOM]
        assert value(registry, RANDOM) == "loaded" and value(registry, STORIES) == "unloaded"
        assert registry[RANDOM] is model  # loaded once
        assert model.generate("Hello", max_new_tokens=4, do_sample=False)
        assert registry[QWEN].config["architecture"] == "qwen2"  # a Hugging Face folder loads the same way
        with pytest.raises(KeyError, match="a-stories.gguf"):  # names what the folder holds
            registry["gpt-4"]
    with pytest.raises(NotADirectoryError, match="nowhere"):
        ModelRegistry(folder / "nowhere")


def test_a_model_that_fails_to_load_answers_with_its_reason_and_harms_no_other(folder):
    with ModelRegistry(folder, threads=2, kv_memory_mib=16) as registry:
        with pytest.raises(ModelFormatError) as first:
            registry[BROKEN]
        status = registry.status(BROKEN)
        assert status["value"] == "failed" and status["failed"] and status["reason"] == str(first.value)
        with pytest.raises(OpenAutoGLMError, match="'broken.gguf' failed to load.*load\\(\\) tries again"):
            registry[BROKEN]  # the same answer, without loading again
        assert registry[STORIES].generate("Once upon a time", max_new_tokens=4, do_sample=False)
        with pytest.raises(ModelFormatError):
            registry.load(BROKEN)  # tries again, and fails again


def test_past_max_loaded_the_least_recently_used_idle_model_unloads(folder):
    with ModelRegistry(folder, max_loaded=2, threads=2, kv_memory_mib=16) as registry:
        registry[STORIES]
        registry[RANDOM]
        registry[QWEN]  # a third: the least recently used (stories) makes room
        assert [value(registry, n) for n in (STORIES, RANDOM, QWEN)] == ["unloaded", "loaded", "loaded"]
        registry[RANDOM]  # now qwen is the least recently used
        registry[STORIES]
        assert [value(registry, n) for n in (STORIES, RANDOM, QWEN)] == ["loaded", "loaded", "unloaded"]
        registry.unload(STORIES)
        assert value(registry, STORIES) == "unloaded"
        with pytest.raises(ValueError, match="is not loaded"):
            registry.unload(STORIES)


def test_a_model_with_a_generation_in_flight_is_not_unloaded_to_make_room(folder):
    with ModelRegistry(folder, max_loaded=1, threads=2, kv_memory_mib=16) as registry:
        stories = registry[STORIES]
        hold = stories._rt.hold_steps()  # the engine waits between steps: the request stays in flight
        try:
            future = stories.submit("Once upon a time", max_new_tokens=8, do_sample=False)
            wait_for(lambda: registry.status(STORIES)["in_use"] == 1, "the request to be in flight")
            registry[RANDOM]
            assert value(registry, STORIES) == "loaded" and value(registry, RANDOM) == "loaded"  # past max_loaded
        finally:
            hold.release()
        assert future.result(timeout=120).text
        wait_for(lambda: registry.status(STORIES)["in_use"] == 0, "the request to end")
        registry[QWEN]  # the next load: both idle ones go
        assert [value(registry, n) for n in (STORIES, RANDOM, QWEN)] == ["unloaded", "unloaded", "loaded"]


def test_an_idle_model_sleeps_and_wakes_on_the_next_use(folder):
    with ModelRegistry(folder, sleep_idle_seconds=1.0, threads=2, kv_memory_mib=16) as registry:
        text = registry[STORIES].generate("Once upon a time", max_new_tokens=6, do_sample=False)
        wait_for(lambda: value(registry, STORIES) == "sleeping", "the model to fall asleep")
        woke = registry[STORIES]
        assert value(registry, STORIES) == "loaded"
        assert woke.generate("Once upon a time", max_new_tokens=6, do_sample=False) == text
    with pytest.raises(OpenAutoGLMError, match="the registry is closed"):
        registry[STORIES]


def test_a_model_kept_by_its_caller_comes_back_the_same_not_a_copy(folder):
    with ModelRegistry(folder, max_loaded=1, threads=2, kv_memory_mib=16) as registry:
        kept = registry[STORIES]
        registry[RANDOM]
        assert value(registry, STORIES) == "unloaded"
        assert registry[STORIES] is kept


def test_per_model_options_go_on_top_of_the_shared_ones(folder):
    with ModelRegistry(folder, models={STORIES: {"context_length": 64}}, threads=2, kv_memory_mib=16,
                       context_length=128) as registry:
        assert registry[STORIES].config["n_ctx"] == 64
        assert registry[RANDOM].config["n_ctx"] == 128
    with pytest.raises(KeyError, match="'gpt-4' is not in"):
        ModelRegistry(folder, models={"gpt-4": {}})
