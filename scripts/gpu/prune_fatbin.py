"""Zeroes the GPU code of every architecture but one in a CUDA library's fat binary, so that the
library compresses to a fraction of its size (setup_ort.sh --gpu-parts --arch 90: ONNX Runtime's
CUDA provider goes from 190 MB of gzip parts to 46 MB of xz, which fits the two calls a lent GPU
machine's 64 MiB transfers allow).

  python3 scripts/gpu/prune_fatbin.py IN.so OUT.so --keep-arch 90

The file keeps its size and layout: only the payloads of the other architectures' entries in the
.nv_fatbin section become zeros; their headers stay, so the CUDA driver still reads the table and
loads the entry for its own GPU (sm_90 is the H100's and H200's) and never opens the others. A GPU
of another architecture cannot run the result: keep the unpruned library for those. Refuses a
library whose fat binary holds PTX (which a driver may compile for a newer GPU in place of a
missing cubin) or no cubin for the architecture kept.
"""
import argparse
import collections
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_CUBIN = 1, 2


def sections(data):
    """{name: (offset, size)} of an ELF64 little-endian file's sections."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = heads[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, offset, size in heads:
        end = data.index(b"\0", names + name)
        out[bytes(data[names + name:end]).decode()] = (offset, size)
    return out


def fatbin_entries(data, offset, size):
    """(kind, arch, payload offset, payload size) of every entry of the fat binaries in a section."""
    pos, end = offset, offset + size
    while pos + 16 <= end:
        magic, _version, header, length = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section, with padding between
            continue
        entry, stop = pos + header, pos + header + length
        while entry < stop:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            yield kind, arch, entry + entry_header, payload
            entry += entry_header + payload
        pos = stop


def prune(data, keep_arch):
    """Zeroes, in place, the payloads of the entries not for keep_arch; returns bytes kept and zeroed
    per (kind, arch)."""
    where = sections(data).get(".nv_fatbin")
    if where is None:
        raise ValueError("no .nv_fatbin section: not a CUDA library")
    entries = list(fatbin_entries(data, *where))
    kinds = collections.Counter((k, a) for k, a, _, _ in entries)
    if any(k == KIND_PTX for k, _ in kinds):
        raise ValueError("the fat binary holds PTX, which a driver may compile for other GPUs: pruning would change what runs")
    if not any(a == keep_arch for _, a in kinds):
        raise ValueError(f"no code for sm_{keep_arch} (has: {', '.join(f'sm_{a}' for a in sorted({a for _, a in kinds}))})")
    sizes = collections.Counter()
    for kind, arch, start, length in entries:
        if arch != keep_arch:
            data[start:start + length] = bytes(length)
        sizes[arch] += length
    return sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--keep-arch", type=int, required=True, help="the architecture kept, e.g. 90 for sm_90 (H100, H200)")
    args = ap.parse_args()
    with open(args.src, "rb") as f:
        data = bytearray(f.read())
    try:
        sizes = prune(data, args.keep_arch)
    except ValueError as e:
        sys.exit(f"prune_fatbin: {args.src}: {e}")
    with open(args.dst, "wb") as f:
        f.write(data)
    kept = sizes[args.keep_arch]
    print(f"prune_fatbin: kept sm_{args.keep_arch} ({kept / 1e6:.1f} MB); zeroed "
          + ", ".join(f"sm_{a} ({n / 1e6:.1f} MB)" for a, n in sorted(sizes.items()) if a != args.keep_arch))


if __name__ == "__main__":
    main()
