"""Pixel statistics of a PNG (8-bit RGB or RGBA, not interlaced), with zlib and numpy only.

Usage: png_stats.py FILE [#rrggbb ...]  ->  {"width", "height", "colors": distinct colors,
    "non_white": fraction of pixels that are not white,
    "count": {"#rrggbb": pixels within 24 of that colour in each channel, for each one asked}}
(The tolerance takes in a line's anti-aliased core; a colour blended at a quarter opacity
over white is far outside it.)
"""
import json
import struct
import sys
import zlib

import numpy as np


def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and color in (2, 6) and interlace == 0, "unsupported PNG"
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(w * bpp, dtype=np.int32)
        cur = np.zeros(w * bpp, dtype=np.int32)
        for x in range(w * bpp):
            a = cur[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 0:
                v = line[x]
            elif f == 1:
                v = line[x] + a
            elif f == 2:
                v = line[x] + b
            elif f == 3:
                v = line[x] + (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                v = line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)
            cur[x] = v & 0xFF
        out[y] = cur
    return out.reshape(h, w, bpp)[:, :, :3]


img = decode(sys.argv[1])
flat = img.reshape(-1, 3)
colors = len(np.unique(flat[:, 0] * 65536 + flat[:, 1] * 256 + flat[:, 2]))
non_white = float(np.mean(np.any(flat < 250, axis=1)))
count = {}
for hex_color in sys.argv[2:]:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
    count[hex_color] = int(np.sum(np.all(np.abs(flat - rgb) <= 24, axis=1)))
print(json.dumps({"width": img.shape[1], "height": img.shape[0], "colors": colors,
                  "non_white": non_white, "count": count}))
