#!/usr/bin/env python3
"""Another user's inter-token latency while the server encodes an image: one text-only chat streams
(ignore_eos) while a second request sends a screenshot; the stream's gaps before, during and after the
encode are printed (p50, p99, max). The tower takes turns with the engine on the shared thread pool and yields
between units of work, so the stream's gaps during the encode should stay near a unit's time, not the
encode's.

Usage: /usr/bin/python3 bench/vision_itl_during_encode.py MODEL.gguf [WIDTHxHEIGHT]
(needs build/; the model's projector beside it as MODEL.mmproj.gguf; Debian's python3 with python3-pil)"""
import base64, io, json, os, subprocess, sys, threading, time, urllib.request
from PIL import Image

model = sys.argv[1]
w, h = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "560x1232").split("x"))
bin_ = os.environ.get("AUTOGLM_BIN", "build/src/cli/autoglm")
port = 18500 + os.getpid() % 400
buf = io.BytesIO()
Image.new("RGB", (w, h), (200, 220, 240)).save(buf, "PNG")
image_url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()

def post(body, stream=False):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return urllib.request.urlopen(req)

def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")

server = subprocess.Popen([bin_, "serve", "-m", model, "-t", "2", "--port", str(port), "-c", "8192"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models")
            break
        except OSError:
            time.sleep(0.2)
    name = os.path.basename(model)
    arrivals, encode = [], {}

    def send_image():
        encode["start"] = time.monotonic()
        post({"model": name, "max_tokens": 1, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": "What is this?"}]}]}).read()
        encode["end"] = time.monotonic()

    # Tokens are counted by their logprobs entries, with control tokens shown: a random model's
    # text has runs of control tokens and partial UTF-8 that send no content for a while.
    stream = post({"model": name, "stream": True, "max_tokens": 100000, "ignore_eos": True, "temperature": 0,
                   "logprobs": True, "skip_special_tokens": False,
                   "messages": [{"role": "user", "content": "Count on."}]})
    image_thread = None
    for line in stream:
        if not line.startswith(b"data: {"):
            continue
        choices = json.loads(line[6:])["choices"]
        tokens = ((choices[0].get("logprobs") or {}).get("content") or []) if choices else []
        arrivals.extend([time.monotonic()] * len(tokens))
        if len(arrivals) >= 50 and image_thread is None:
            image_thread = threading.Thread(target=send_image)
            image_thread.start()
        if "end" in encode and arrivals[-1] > encode["end"] + 3:
            break
    image_thread.join()
    stream.close()
    gaps = [(b, b - a) for a, b in zip(arrivals, arrivals[1:])]
    for label, keep in (("before", lambda t: t < encode["start"]),
                        ("during", lambda t: encode["start"] <= t <= encode["end"]),
                        ("after", lambda t: t > encode["end"])):
        g = [1000 * d for t, d in gaps if keep(t)]
        print(f"{label:6} the image ({len(g)} gaps): p50 {percentile(g, 0.5):.1f} ms, p99 {percentile(g, 0.99):.1f} ms, "
              f"max {max(g) if g else float('nan'):.1f} ms")
    print(f"image request: {encode['end'] - encode['start']:.1f} s ({w}x{h})")
    longest = sorted(gaps, key=lambda g: -g[1])[:3]
    print("longest gaps (ending at s after the image was sent): " +
          ", ".join(f"{1000 * d:.0f} ms at {t - encode['start']:.1f} s" for t, d in longest))
finally:
    server.terminate()
    server.wait()
