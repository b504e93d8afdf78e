"""8-bit PNG writing and reading (grey [H,W], RGB [H,W,3], RGBA [H,W,4]) with the standard library
and numpy only (no torch or PIL needed)."""
import struct
import zlib

import numpy as np


def write_png(path, img):
    h, w = img.shape[:2]
    colour = 2 if img.ndim == 3 else 0  # PNG colour types: 2 RGB, 0 grey
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # PNG colour type -> samples per pixel


def read_png(path):
    """An 8-bit, non-interlaced PNG as a uint8 array [H,W] (grey) or [H,W,C]; what Go's image/png
    and write_png write. Other depths, palettes and interlacing are refused by name."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = hdr
    if depth != 8 or colour not in CHANNELS or interlace:
        raise ValueError(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}: only 8-bit grey, RGB and alpha, not interlaced")
    bpp = CHANNELS[colour]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), np.int32)
    prev = np.zeros(w * bpp, np.int32)
    for r in range(h):
        kind, line = raw[r, 0], raw[r, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 255
        else:  # sub, average and Paeth depend on the pixel to the left: one pass along the row
            cur = np.zeros_like(line)
            for i in range(len(line)):
                left = cur[i - bpp] if i >= bpp else 0
                if kind == 1:
                    pred = left
                elif kind == 3:
                    pred = (left + prev[i]) >> 1
                elif kind == 4:
                    up, ul = prev[i], prev[i - bpp] if i >= bpp else 0
                    p = left + up - ul
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                else:
                    raise ValueError(f"{path}: row {r}: filter {kind} unknown")
                cur[i] = (line[i] + pred) & 255
        out[r], prev = cur, cur
    img = out.astype(np.uint8).reshape(h, w, bpp)
    return img[:, :, 0] if bpp == 1 else img
