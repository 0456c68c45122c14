"""The package under test is build/python (or the installed one); models come from ../shared."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("AUTOGLM_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
if os.environ.get("AUTOGLM_PYTHON_PATH"):
    sys.path.insert(0, os.environ["AUTOGLM_PYTHON_PATH"])


def shared(rel):
    path = os.path.join(SHARED, rel)
    if not os.path.exists(path):  # in CI a missing ../shared is a failure, not a skip
        pytest.fail(f"{path} is missing (the tests read ../shared)")
    return path


@pytest.fixture(scope="session")
def stories():
    from openautoglm import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), threads=2, kv_memory_mib=32)
