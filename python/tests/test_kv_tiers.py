"""The prefix cache's disk tier through the Python package: a new model object over the same files finds
the blocks an earlier one evicted, and generates the same text from them."""
from conftest import shared

from openautoglm import AutoModelForCausalLM

STORY = "Once upon a time there was a little girl named Lily." + " She went to the park with her mom." * 12
OTHER = "Tom had a big red ball and a small dog named Max." + " They ran and played in the sun all day." * 12


def open_model(tmp_path):
    # A pool of a few blocks: one other story evicts the first one's.
    return AutoModelForCausalLM.from_pretrained(shared("models/stories260K.gguf"), threads=2, kv_memory_mib=0.15,
                                                cache_disk_dir=str(tmp_path / "kv"), cache_disk_mib=64)


def test_disk_tier_serves_a_new_model_object(tmp_path):
    first = open_model(tmp_path)
    story = first.generate(STORY, max_new_tokens=12)
    first.generate(OTHER, max_new_tokens=12)
    assert first.stats()["kv_tier_disk_bytes"] > 0, "nothing was evicted to disk"
    del first
    again = open_model(tmp_path)
    assert again.generate(STORY, max_new_tokens=12) == story
    assert again.stats()["kv_tier_disk_hits"] > 0
