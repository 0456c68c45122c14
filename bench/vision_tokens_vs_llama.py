#!/usr/bin/env python3
"""Greedy tokens of a vision-language model through autoglm and through llama.cpp 2026-09's
llama-mtmd-cli, side by side on the same GGUF + projector, for several images and prompts; where
they part, autoglm's top1-top2 logit margin at that step (from the server's top_logprobs) says
whether a legitimate difference in rounding may flip it.

llama.cpp is run with -fa off -ctk f32 -ctv f32 (float attention in the tower and an f32 KV
cache, as autoglm computes them). Images are made at sizes the processors keep (multiples of
28) unless --resize is given: llama.cpp's own bicubic resize is not Pillow's (which the Hugging
Face processors and autoglm use), so resized images differ in their pixels before any model code.

Usage: /usr/bin/python3 bench/vision_tokens_vs_llama.py MODEL.gguf [--resize] [-n 6]
(needs build/ and the anchor's llama-mtmd-cli; Debian's python3 with python3-pil)"""
import argparse, base64, io, json, os, random, subprocess, sys, tempfile, time, urllib.request
from PIL import Image

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--resize", action="store_true", help="also images that both tools resize")
ap.add_argument("-n", type=int, default=6)
args = ap.parse_args()
bin_ = os.environ.get("AUTOGLM_BIN", "build/src/cli/autoglm")
mtmd = os.path.expanduser(os.environ.get("LLAMA_BIN", "~/.cache/llama-anchor/build/bin")) + "/llama-mtmd-cli"
mmproj = args.model[: -len(".gguf")] + ".mmproj.gguf"
prompts = ["What is on the screen?", "Describe this picture in detail.", "Tap the button"]
sizes = [(224, 224), (448, 336), (336, 672), (560, 1232)] + ([(300, 500), (640, 480)] if args.resize else [])
tmp = tempfile.mkdtemp()

def make_image(i, w, h):
    random.seed(i)
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 7 + i * 40) % 256, (y * 5 + random.randint(0, 60)) % 256, ((x + y) * 3 + i * 90) % 256)
    path = f"{tmp}/img{i}.png"
    im.save(path)
    return path

def ours(port, path, prompt):
    url = "data:image/png;base64," + base64.b64encode(open(path, "rb").read()).decode()
    body = {"model": "m", "max_tokens": args.n, "temperature": 0, "logprobs": True, "top_logprobs": 2,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": prompt}]}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    steps = json.load(urllib.request.urlopen(req))["choices"][0]["logprobs"]["content"]
    return [(bytes(s["bytes"]), s["top_logprobs"][0]["logprob"] - s["top_logprobs"][1]["logprob"]) for s in steps]

def llama(path, prompt):
    out = subprocess.run([mtmd, "-m", args.model, "--mmproj", mmproj, "--image", path, "-p", prompt, "-n",
                          str(args.n), "-t", "2", "--temp", "0", "--jinja", "-fa", "off", "-ctk", "f32", "-ctv", "f32"],
                         capture_output=True).stdout
    return out[1:] if out.startswith(b"\n") else out  # the CLI prints a newline before the text

port = 18000 + os.getpid() % 1000
server = subprocess.Popen([bin_, "serve", "-m", args.model, "--mmproj", mmproj, "--served-model-name", "m", "-t", "2",
                           "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models")
            break
        except OSError:
            time.sleep(0.2)
    agree = total = 0
    for i, (w, h) in enumerate(sizes):
        path = make_image(i, w, h)
        for prompt in prompts:
            steps, theirs = ours(port, path, prompt), llama(path, prompt)
            matched, at = 0, theirs
            for piece, _ in steps:
                if not at.startswith(piece):
                    break
                matched, at = matched + 1, at[len(piece):]
            total += 1
            agree += matched == len(steps)
            where = "all equal" if matched == len(steps) else \
                f"part at step {matched + 1}, where autoglm's top1-top2 margin is {steps[matched][1]:.4f}"
            print(f"{w}x{h} {prompt!r}: {matched}/{len(steps)} tokens equal ({where})")
    print(f"{agree}/{total} continuations equal in all {args.n} tokens")
finally:
    server.terminate()
    server.wait()
