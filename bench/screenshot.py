#!/usr/bin/env python3
"""Writes a screenshot-like PNG (lines of dark "text" on a light gradient) for the vision benchmarks.
Usage: /usr/bin/python3 bench/screenshot.py OUT.png WIDTH HEIGHT"""
import sys
from PIL import Image

path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
im = Image.new("RGB", (w, h))
px = im.load()
for y in range(h):
    for x in range(w):
        text = (y // 24) % 3 == 0 and (x // 9) % 5 != 0
        px[x, y] = (30, 30, 40) if text else (240 - y * 40 // h, 240 - x * 30 // w, 250)
im.save(path)
