"""8-bit PNG writing (grey [H,W] or RGB [H,W,3]) with the standard library only (no torch needed)."""
import struct
import zlib


def write_png(path, img):
    h, w = img.shape[:2]
    colour = 2 if img.ndim == 3 else 0  # PNG colour types: 2 RGB, 0 grey
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
