"""AutoTokenizer: a model's tokenizer and chat template, shaped like transformers'."""
import json
import os

from . import _core
from ._runtime import open_runtime


def _text(raw):
    return raw.decode("utf-8", errors="replace")


def _id_list(ids, name="ids"):
    """A flat list of ints from a list, tuple or 1-D numpy array."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    if isinstance(ids, int):
        ids = [ids]
    try:
        out = [int(i) for i in ids]
    except TypeError:
        raise ValueError(f"{name}: must be a sequence of token ids") from None
    return out


class BatchEncoding(dict):
    """The result of calling a tokenizer: input_ids (and attention_mask), as keys and attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Tokenizer:
    """Encodes and decodes text and renders conversations with the model's chat template."""

    def __init__(self, runtime, name_or_path):
        self._rt = runtime
        self.name_or_path = name_or_path
        special = runtime.special_tokens()
        self.bos_token_id = special["bos"] if special["bos"] >= 0 else None
        self.eos_token_id = special["eos"] if special["eos"] >= 0 else None
        self.end_of_generation_ids = list(special["end_of_generation"])
        self.pad_token_id = self.eos_token_id

    @classmethod
    def from_pretrained(cls, path, **options):
        """A GGUF file, or a folder with tokenizer.json (and tokenizer_config.json)."""
        return cls(open_runtime(path, options, tokenizer_only=True), os.fspath(path))

    @property
    def vocab_size(self):
        return self._rt.vocab_size()

    def __len__(self):
        return self.vocab_size

    @property
    def bos_token(self):
        return None if self.bos_token_id is None else _text(self._rt.token_piece(self.bos_token_id))

    @property
    def eos_token(self):
        return None if self.eos_token_id is None else _text(self._rt.token_piece(self.eos_token_id))

    def encode(self, text, add_special_tokens=True):
        """Token ids; special-token strings in the text become their ids (as transformers)."""
        if not isinstance(text, str):
            raise ValueError(f"text: must be a str, not {type(text).__name__}")
        return self._rt.encode(text, add_special_tokens, True)

    def __call__(self, text, add_special_tokens=True, return_tensors=None, padding=False):
        batch = not isinstance(text, str)
        texts = list(text) if batch else [text]
        ids = [self.encode(t, add_special_tokens) for t in texts]
        masks = [[1] * len(i) for i in ids]
        if padding and ids:
            width = max(len(i) for i in ids)
            pad = self.pad_token_id if self.pad_token_id is not None else 0
            masks = [[0] * (width - len(i)) + m for i, m in zip(ids, masks)]
            ids = [[pad] * (width - len(i)) + i for i in ids]  # left padding, for generation
        if return_tensors is None:
            return BatchEncoding(input_ids=ids if batch else ids[0], attention_mask=masks if batch else masks[0])
        if return_tensors != "np":
            raise ValueError(f"return_tensors: '{return_tensors}' is not supported (None or 'np')")
        if len({len(i) for i in ids}) > 1:
            raise ValueError("return_tensors='np': the texts have different lengths; pass padding=True")
        import numpy as np

        return BatchEncoding(input_ids=np.array(ids, dtype=np.int64), attention_mask=np.array(masks, dtype=np.int64))

    def decode(self, ids, skip_special_tokens=False):
        return _text(self._rt.decode(_id_list(ids), not skip_special_tokens))

    def batch_decode(self, sequences, skip_special_tokens=False):
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def convert_ids_to_tokens(self, ids):
        single = isinstance(ids, int)
        pieces = [_text(self._rt.token_piece(i)) for i in _id_list(ids)]
        return pieces[0] if single else pieces

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=True, tokenize=True,
                            return_tensors=None, **template_kwargs):
        """The conversation rendered by the chat template: its ids (tokenize=True) or its text."""
        if not isinstance(messages, (list, tuple)):
            raise ValueError("messages: must be a list of {'role': ..., 'content': ...} dicts")
        args = (json.dumps(list(messages), ensure_ascii=False), json.dumps(tools, ensure_ascii=False) if tools else "",
                json.dumps(template_kwargs, ensure_ascii=False) if template_kwargs else "", add_generation_prompt)
        if not tokenize:
            return _text(self._rt.render_chat(*args))
        ids = self._rt.chat_tokens(*args)
        if return_tensors == "np":
            import numpy as np

            return np.array([ids], dtype=np.int64)
        if return_tensors is not None:
            raise ValueError(f"return_tensors: '{return_tensors}' is not supported (None or 'np')")
        return ids


class AutoTokenizer:
    """AutoTokenizer.from_pretrained(path): the tokenizer of a GGUF file or a Hugging Face folder."""

    @staticmethod
    def from_pretrained(path, **options):
        return Tokenizer.from_pretrained(path, **options)


__all__ = ["AutoTokenizer", "Tokenizer", "BatchEncoding", "_core"]
