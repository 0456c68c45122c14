"""LoRA adapters from Python, as transformers' PEFT integration names the calls."""
import json
import struct

import numpy as np
import pytest
from conftest import shared

from openautoglm import AutoModelForCausalLM


def write_peft(folder, n_embd, n_layer, rank=4, alpha=16.0, seed=1):
    """A PEFT folder changing q_proj and o_proj ([n_embd, n_embd] in a llama of n_head * head_dim = n_embd)."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(n_layer):
        for module in ("self_attn.q_proj", "self_attn.o_proj"):
            name = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{name}.lora_A.weight"] = rng.normal(0, 0.3, (rank, n_embd)).astype(np.float32)
            tensors[f"{name}.lora_B.weight"] = rng.normal(0, 0.3, (n_embd, rank)).astype(np.float32)
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        blobs.append(t.tobytes())
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    folder.mkdir()
    with open(folder / "adapter_model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": ["q_proj", "o_proj"]}
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return str(folder)


def test_adapters_load_switch_and_unload(stories, tmp_path):
    cfg = stories.config
    adapter = write_peft(tmp_path / "a", cfg["n_embd"], cfg["n_layer"])
    base = stories.generate("Once upon a time", max_new_tokens=24, ignore_eos=True)
    stories.load_adapter(adapter, adapter_name="a")
    assert [a["name"] for a in stories.adapters()] == ["a"]
    assert stories.active_adapters() == []
    stories.set_adapter("a")
    adapted = stories.generate("Once upon a time", max_new_tokens=24, ignore_eos=True)
    assert adapted != base
    ids = stories.tokenizer("Once upon a time")["input_ids"]
    with_adapter = stories(np.array([ids])).logits
    stories.disable_adapters()
    assert stories.generate("Once upon a time", max_new_tokens=24, ignore_eos=True) == base
    assert not np.array_equal(stories(np.array([ids])).logits, with_adapter)
    # The same adapter given at load applies to every request.
    preloaded = AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), threads=2, kv_memory_mib=16,
                                                     lora=[adapter + ":1.0"])
    assert preloaded.generate("Once upon a time", max_new_tokens=24, ignore_eos=True) == adapted
    stories.delete_adapter("a")
    assert stories.adapters() == []
    with pytest.raises(ValueError, match="no adapter 'a'"):
        stories.set_adapter("a")


def test_bad_adapters_say_what_is_wrong(stories, tmp_path):
    with pytest.raises(Exception, match="adapter_config.json"):
        stories.load_adapter(tmp_path, adapter_name="empty")
    with pytest.raises(ValueError, match="the scale after ':' must be a number"):
        AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), threads=2, lora=["x.gguf:big"])
