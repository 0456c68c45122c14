"""The exceptions of openautoglm. Bad arguments raise ValueError naming the parameter, a
missing model FileNotFoundError; these are the package's own."""


class OpenAutoGLMError(RuntimeError):
    """A failure inside the engine (the message says which)."""


class ModelFormatError(OpenAutoGLMError, ValueError):
    """A model or tokenizer file that is corrupt, or of a format or architecture not supported."""


class BusyError(OpenAutoGLMError):
    """The engine's queue is full; retry later."""
