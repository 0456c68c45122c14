"""openautoglm: the Open-AutoGLM inference engine from Python.

    from openautoglm import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained("model.gguf")
    model = AutoModelForCausalLM.from_pretrained("model.gguf")
    ids = model.generate(tok("Once upon a time")["input_ids"], max_new_tokens=32)
    print(tok.decode(ids))
"""
from . import _core
from .errors import BusyError, ModelFormatError, OpenAutoGLMError
from .model import AutoModelForCausalLM, CausalLM, CausalLMOutput, GenerationFuture, GenerationResult
from .registry import ModelRegistry
from .service import AutoGLMService
from .streamer import TextIteratorStreamer, TextStreamer
from .tokenizer import AutoTokenizer, BatchEncoding, Tokenizer

__version__ = _core.version()


def available_devices():
    """The devices a model can run on here: ["cpu"], then "cuda:0", ... for each GPU of a CUDA build."""
    return _core.available_devices()


__all__ = ["available_devices", "AutoGLMService", "AutoModelForCausalLM", "AutoTokenizer", "BatchEncoding", "BusyError", "CausalLM",
           "CausalLMOutput", "GenerationFuture", "GenerationResult", "ModelFormatError", "ModelRegistry", "OpenAutoGLMError",
           "TextIteratorStreamer", "TextStreamer", "Tokenizer"]
