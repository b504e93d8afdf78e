"""prune_fatbin.py on a small ELF file made here with a .nv_fatbin section holding two fat binaries
(cubins for sm_80 and sm_90, one of them compressed-flagged): the other architecture's payloads
become zeros, the kept ones and every header stay byte for byte, the file keeps its size; PTX or a
missing architecture is refused. Prints OK; exits non-zero on the first failure."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from gpu import prune_fatbin as pf


def entry(kind, arch, payload, flags=0):
    header = struct.pack("<HHIQI", kind, 0x0101, 64, len(payload), flags) + bytes(8) + struct.pack("<I", arch)
    return header + bytes(64 - len(header)) + payload


def fatbin(entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", pf.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf(section):
    """An ELF64 header, the section's bytes, a name table and three section headers (null,
    .nv_fatbin, .shstrtab): all prune_fatbin reads."""
    names = b"\0.nv_fatbin\0.shstrtab\0"
    data_off = 64
    names_off = data_off + len(section)
    shoff = (names_off + len(names) + 7) // 8 * 8
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, 3, 2)
    body = bytes(head) + section + names + bytes(shoff - names_off - len(names))
    sh = lambda name, off, size: struct.pack("<IIQQQQ", name, 1, 0, 0, off, size) + bytes(24)
    return bytearray(body + sh(0, 0, 0) + sh(1, data_off, len(section)) + sh(12, names_off, len(names)))


def main():
    p80a, p90a, p80b, p90b = b"\x11" * 40, b"\x22" * 24, b"\x33" * 16, b"\x44" * 32
    section = fatbin([entry(2, 80, p80a), entry(2, 90, p90a, flags=0x2000)]) + bytes(8) + fatbin([entry(2, 90, p90b), entry(2, 80, p80b)])
    data = elf(section)
    before = bytes(data)
    sizes = pf.prune(data, 90)
    assert len(data) == len(before), "size changed"
    assert sizes == {80: 56, 90: 56}, sizes
    got = bytes(data)
    for kept in (p90a, p90b):
        assert got.count(kept) == 1, "a kept payload changed"
    for gone in (p80a, p80b):
        assert gone not in got, "an sm_80 payload was kept"
    diff = [i for i in range(len(got)) if got[i] != before[i]]
    assert len(diff) == len(p80a) + len(p80b) and all(got[i] == 0 for i in diff), "bytes beyond the sm_80 payloads changed"
    for bad, want in ((elf(fatbin([entry(1, 90, b"ptx")])), "PTX"), (elf(fatbin([entry(2, 80, p80a)])), "no code for sm_90")):
        try:
            pf.prune(bad, 90)
        except ValueError as e:
            assert want in str(e), e
        else:
            sys.exit(f"want a refusal naming {want!r}")
    print("OK")


if __name__ == "__main__":
    main()
