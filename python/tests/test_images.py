"""Images in chat(): OpenAI image_url parts and transformers' {"type": "image", "path" | "image" | "url"}
parts, on a random GLM-4.1V-shaped model and its projector (autoglm create-model)."""
import base64
import os
import struct
import subprocess
import zlib

import pytest


def png(w, h, seed):
    """A w x h RGB PNG written here (no Pillow needed)."""
    rows = b"".join(b"\0" + bytes(((x * 7 + seed * 40) % 256, (y * 5) % 256, 128) [c] for x in range(w) for c in range(3))
                   for y in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def vlm(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vlm") / "glm4v-tiny.gguf")
    subprocess.run([os.environ["AUTOGLM_BIN"], "create-model", "--arch", "glm4v", "--preset", "tiny", "--type", "f16",
                    "-o", path], check=True, capture_output=True)
    return path


def test_image_parts_of_both_shapes_give_the_same_reply(vlm, tmp_path):
    from openautoglm import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(vlm, threads=2, kv_memory_mib=32)
    assert model.config["projector_type"] == "glm4v"
    image = png(84, 112, 1)
    (tmp_path / "shot.png").write_bytes(image)
    url = "data:image/png;base64," + base64.b64encode(image).decode()
    text = {"type": "text", "text": "What is on the screen?"}
    shapes = [{"type": "image_url", "image_url": {"url": url}}, {"type": "image", "path": str(tmp_path / "shot.png")},
              {"type": "image", "image": image}]
    replies = [model.chat([{"role": "user", "content": [part, text]}], max_new_tokens=6) for part in shapes]
    assert replies[0] == replies[1] == replies[2]
    other = model.chat([{"role": "user", "content": [{"type": "image", "image": png(84, 112, 2)}, text]}],
                       max_new_tokens=6, min_pixels=28 * 28 * 2, max_pixels=28 * 28 * 40)
    assert other["role"] == "assistant"


def test_an_image_to_a_text_only_runtime_names_the_part(vlm):
    from openautoglm import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(vlm, threads=2, kv_memory_mib=16, mmproj="none")
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]"):
        model.chat([{"role": "user", "content": [{"type": "image", "image": png(56, 56, 1)}]}], max_new_tokens=2)
