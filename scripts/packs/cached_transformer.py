"""The MAR transformer with a cache across AR steps (LazyMAR-style, training-free): the graph
transformer_cached.onnx, a PyTorch reference of the cached sampling sequence, and the pack entry.

  /usr/bin/python3 scripts/packs/cached_transformer.py --pack models/target            # add the graph to a pack
  /usr/bin/python3 scripts/packs/cached_transformer.py --pack models/target --fixture mar/testdata/cache_target.json

Design (docs/cache.md): between AR steps few tokens change, so most of the transformer's work is
the same as the previous step's. One call of the cached graph runs, through every block, only
  - encoder queries Q: the positions given (on a lazy step: the tokens revealed since the last
    call; on a full pass: the buffer and every known token), attending to the cached encoder
    K/V of the positions `enc_keep` marks plus their own fresh K/V;
  - decoder queries R: the positions given (on a lazy step: the tokens just revealed, the tokens
    to predict now and the stalest others; on a full pass: all of buffer + L), attending to the
    cached decoder K/V that `dec_keep` marks plus their own fresh K/V,
and returns z at R and the fresh K/V (and encoder outputs) of Q and R, which the caller writes
into its cache. With nothing kept and Q, R covering everything it is the full transformer
(forward_compact) up to summation order; the approximation is only in what a lazy step keeps.
The cache lives with the caller (Go: mar/cache.go), so one graph serves full and lazy calls and
the pack holds the weights twice, not three times.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)

NEG = -1e9  # additive attention bias of a key that is not there

INPUTS = ["tokens", "mask", "class_ids", "drop_class", "enc_kv", "enc_out", "enc_keep", "dec_kv", "dec_keep",
          "enc_pos", "enc_valid", "dec_pos", "dec_valid", "dec_src"]
OUTPUTS = ["z", "enc_kv_new", "enc_out_new", "dec_kv_new"]
FORMAT = "marspec-cache/1"
FILE = "transformer_cached.onnx"


def attend(blk, x, k_cached, v_cached, bias_cached, valid):
    """One pre-norm block for the queries x [B, N, W]: keys and values are the cached ones
    [B, C, W] (bias_cached: 0 keep, NEG drop) followed by the queries' own (valid 1/0).
    Returns the block's output and the queries' fresh k, v (what a later call may cache)."""
    attn = blk.attn
    b, n, w = x.shape
    heads = attn.heads
    hd = w // heads
    q, k, v = attn.qkv(blk.norm1(x)).chunk(3, dim=-1)
    keys = torch.cat([k_cached, k], dim=1)
    vals = torch.cat([v_cached, v], dim=1)
    bias = torch.cat([bias_cached, (1 - valid) * NEG], dim=1)  # [B, C+N]

    def split(t):
        return t.reshape(b, t.shape[1], heads, hd).permute(0, 2, 1, 3)

    att = (split(q) * attn.scale) @ split(keys).transpose(-2, -1) + bias[:, None, None, :]
    out = (att.softmax(dim=-1) @ split(vals)).transpose(1, 2).reshape(b, n, w)
    x = x + attn.proj(out)
    return x + blk.mlp(blk.norm2(x)), k, v


def gather_rows(t, idx):
    """t [B, N, W] at idx [B, M] -> [B, M, W]."""
    return torch.gather(t, 1, idx[:, :, None].expand(-1, -1, t.shape[2]))


class CachedTransformer(nn.Module):
    """transformer_cached.onnx over marmodel.MAR's weights (inputs: INPUTS, outputs: OUTPUTS).

    tokens [B,L,D], mask [B,L] (1 = unknown), class_ids [B], drop_class [B]: the context now.
    enc_kv [B,E,2,C,W], enc_out [B,C,W], enc_keep [B,C]; dec_kv [B,Dd,2,C,W], dec_keep [B,C]: the
    cache, indexed by position over buffer + L (C = S), or a dummy C = 1 with nothing kept.
    enc_pos/enc_valid [B,Q]: encoder queries (positions over buffer + L; known ones).
    dec_pos/dec_valid [B,R]: decoder queries; dec_src [B,R]: where a known query's decoder input
    is in concat(enc_out, enc_out_new) (unknown queries take the mask token).
    z [B,R,W]; enc_kv_new [B,E,2,Q,W]; enc_out_new [B,Q,W]; dec_kv_new [B,Dd,2,R,W]."""

    def __init__(self, mar):
        super().__init__()
        self.mar = mar

    def forward(self, tokens, mask, class_ids, drop_class, enc_kv, enc_out, enc_keep, dec_kv, dec_keep,
                enc_pos, enc_valid, dec_pos, dec_valid, dec_src):
        m = self.mar
        full_mask = torch.cat([torch.zeros(mask.shape[0], m.buffer_size), mask], dim=1)  # [B, S]
        x = gather_rows(m._embed(tokens, class_ids, drop_class), enc_pos)
        keep = (1 - enc_keep) * NEG
        enc_new = []
        for i, blk in enumerate(m.encoder_blocks):
            x, k, v = attend(blk, x, enc_kv[:, i, 0], enc_kv[:, i, 1], keep, enc_valid)
            enc_new.append(torch.stack([k, v], dim=1))
        enc_out_new = m.decoder_embed(m.encoder_norm(x))
        src = gather_rows(torch.cat([enc_out, enc_out_new], dim=1), dec_src)
        unknown = torch.gather(full_mask, 1, dec_pos)[:, :, None]
        x = src * (1 - unknown) + m.mask_token * unknown
        x = x + m.decoder_pos_embed_learned[0][dec_pos]
        keep = (1 - dec_keep) * NEG
        dec_new = []
        for i, blk in enumerate(m.decoder_blocks):
            x, k, v = attend(blk, x, dec_kv[:, i, 0], dec_kv[:, i, 1], keep, dec_valid)
            dec_new.append(torch.stack([k, v], dim=1))
        token_pos = torch.clamp(dec_pos - m.buffer_size, min=0)  # buffer queries' z is not used
        z = m.decoder_norm(x) + m.diffusion_pos_embed_learned[0][token_pos]
        return z, torch.stack(enc_new, dim=1), enc_out_new, torch.stack(dec_new, dim=1)


def width(mar):
    return mar.class_emb.weight.shape[1]


def sample_inputs(mar, b=2, seed=0):
    """A full pass's inputs (dummy cache of one entry) over two rows knowing different counts."""
    L, D, W, S = mar.seq_len, mar.token_dim, width(mar), mar.seq_len + mar.buffer_size
    E, Dd = len(mar.encoder_blocks), len(mar.decoder_blocks)
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randn(b, L, D, generator=g)
    mask = torch.ones(b, L)
    mask[0, : L // 3] = 0
    known = [torch.nonzero(torch.cat([torch.zeros(mar.buffer_size), mask[r]]) == 0)[:, 0] for r in range(b)]
    q = max(len(k) for k in known)
    enc_pos = torch.zeros(b, q, dtype=torch.int64)
    enc_valid = torch.zeros(b, q)
    dec_src = torch.zeros(b, S, dtype=torch.int64)
    for r, k in enumerate(known):
        enc_pos[r, : len(k)] = k
        enc_valid[r, : len(k)] = 1
        dec_src[r, k] = 1 + torch.arange(len(k))  # after the one dummy cache entry
    return (tokens, mask, torch.tensor([0, 1], dtype=torch.int64)[:b], torch.tensor([0.0, 1.0])[:b],
            torch.zeros(b, E, 2, 1, W), torch.zeros(b, 1, W), torch.zeros(b, 1),
            torch.zeros(b, Dd, 2, 1, W), torch.zeros(b, 1),
            enc_pos, enc_valid, torch.arange(S)[None].repeat(b, 1), torch.ones(b, S), dec_src)


def export_graph(mar, path):
    from lib.graphs import onnx_export
    axes = {"tokens": {0: "B"}, "mask": {0: "B"}, "class_ids": {0: "B"}, "drop_class": {0: "B"},
            "enc_kv": {0: "B", 3: "C"}, "enc_out": {0: "B", 1: "C"}, "enc_keep": {0: "B", 1: "C"},
            "dec_kv": {0: "B", 3: "C"}, "dec_keep": {0: "B", 1: "C"},
            "enc_pos": {0: "B", 1: "Q"}, "enc_valid": {0: "B", 1: "Q"},
            "dec_pos": {0: "B", 1: "R"}, "dec_valid": {0: "B", 1: "R"}, "dec_src": {0: "B", 1: "R"},
            "z": {0: "B", 1: "R"}, "enc_kv_new": {0: "B", 3: "Q"}, "enc_out_new": {0: "B", 1: "Q"},
            "dec_kv_new": {0: "B", 3: "R"}}
    with torch.no_grad():
        onnx_export(CachedTransformer(mar).eval(), sample_inputs(mar), path, opset_version=17,
                    input_names=INPUTS, output_names=OUTPUTS, dynamic_axes=axes)


def manifest_entry(mar):
    return {"file": FILE, "format": FORMAT, "encoder_blocks": len(mar.encoder_blocks),
            "decoder_blocks": len(mar.decoder_blocks)}


EXTERNAL_DATA = FILE + ".data"  # the graph's weights when it is over protobuf's 2 GB (MAR-H)


def add_to_pack(mar, pack, external=False):
    """Writes PACK/transformer_cached.onnx from mar's weights and names it in the manifest;
    its weights go to transformer_cached.onnx.data when torch had to put them outside the
    graph (over 2 GB) or external is asked for, as export_mar.py does for transformer.onnx."""
    import tempfile
    with tempfile.TemporaryDirectory(dir=pack) as tmp:
        graph = os.path.join(tmp, FILE)
        export_graph(mar, graph)
        dest, data = os.path.join(pack, FILE), os.path.join(pack, EXTERNAL_DATA)
        if os.path.exists(data):
            os.remove(data)
        if not external and os.listdir(tmp) == [FILE]:
            os.replace(graph, dest)
        else:
            import onnx
            onnx.save_model(onnx.load(graph), dest, save_as_external_data=True, all_tensors_to_one_file=True,
                            location=EXTERNAL_DATA, size_threshold=0)
    path = os.path.join(pack, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    manifest["cache"] = manifest_entry(mar)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest["cache"]


# ---- the reference: a cached sampling sequence, plainly, one image at a time ----

def schedule(step, num_steps, settings):
    """What AR step `step` of `num_steps` runs: "full" (and keeps a cache for a lazy step next),
    "plain" (a full pass whose cache no step uses) or "lazy". Full: the first `full_steps`
    steps and every `refresh_every`-th after them. Mirrors mar.CacheSettings.Kind."""
    def is_full(k):
        return k < settings["full_steps"] or (k - settings["full_steps"]) % settings["refresh_every"] == 0
    if not is_full(step):
        return "lazy"
    if step + 1 < num_steps and not is_full(step + 1):
        return "full"
    return "plain"


class ReferenceCache:
    """One image's cache over positions 0..S-1 (buffer first), as mar/cache.go keeps it."""

    def __init__(self, mar):
        S, W = mar.seq_len + mar.buffer_size, width(mar)
        E, Dd = len(mar.encoder_blocks), len(mar.decoder_blocks)
        self.enc_kv = torch.zeros(1, E, 2, S, W)
        self.enc_out = torch.zeros(1, S, W)
        self.enc_has = torch.zeros(S)  # 1 = encoder K/V and output cached
        self.dec_kv = torch.zeros(1, Dd, 2, S, W)
        self.fresh = torch.full((S,), -1)  # the step the decoder K/V of a position was computed at
        self.diff = None  # z - z_uncond of the last full pass [L, W]


def stalest(cache, exclude, count, buffer):
    """The `count` token positions (not buffer, not in exclude) whose decoder K/V are oldest,
    ties by position: the extra tokens a lazy step recomputes. Mirrors mar.stalestPositions."""
    cands = [p for p in range(buffer, cache.fresh.shape[0]) if p not in exclude]
    cands.sort(key=lambda p: (int(cache.fresh[p]), p))
    return cands[:count]


def run_cached(mar, tokens, mask, cls, drop, cache, enc_q, dec_q, full):
    """One CachedTransformer call for one image; writes the fresh K/V into cache; z at dec_q."""
    S = mar.seq_len + mar.buffer_size
    W = width(mar)
    g = CachedTransformer(mar)
    if full:
        enc_kv, enc_out = torch.zeros(1, cache.enc_kv.shape[1], 2, 1, W), torch.zeros(1, 1, W)
        dec_kv, keep_e, keep_d = torch.zeros(1, cache.dec_kv.shape[1], 2, 1, W), torch.zeros(1, 1), torch.zeros(1, 1)
        base = 1
    else:
        enc_kv, enc_out, dec_kv = cache.enc_kv, cache.enc_out, cache.dec_kv
        keep_e = cache.enc_has[None].clone()
        keep_d = torch.ones(1, S)
        keep_d[0, dec_q] = 0
        base = S
    src = torch.zeros(1, len(dec_q), dtype=torch.int64)
    for i, p in enumerate(dec_q):
        # a known position not queried now reads its cached encoder output; an unknown one
        # takes the mask token (its index only has to be in range)
        src[0, i] = base + enc_q.index(p) if p in enc_q else (0 if full else p)
    z, ekv, eout, dkv = g(tokens, mask, torch.tensor([cls]), torch.tensor([drop]), enc_kv, enc_out, keep_e, dec_kv, keep_d,
                          torch.tensor([enc_q]), torch.ones(1, len(enc_q)), torch.tensor([dec_q]), torch.ones(1, len(dec_q)), src)
    for i, p in enumerate(enc_q):
        cache.enc_kv[0, :, :, p] = ekv[0, :, :, i]
        cache.enc_out[0, p] = eout[0, i]
        cache.enc_has[p] = 1
    return z[0], dkv


def reference_sequence(mar, tokens, order, sizes, cls, settings, guided):
    """z (and z_uncond) at the positions each AR step predicts, for one image whose tokens are
    revealed in `order` with step `sizes` (values from `tokens`, fixed: no head needed), under
    the cache settings. Returns a list per step of [n, W] tensors (z, zu or None)."""
    buf, L = mar.buffer_size, mar.seq_len
    S = L + buf
    mask = torch.ones(1, L)
    caches = [ReferenceCache(mar), ReferenceCache(mar)]  # class half, "no class" half
    out, known, prev_new = [], 0, []
    for step, size in enumerate(sizes):
        kind = schedule(step, len(sizes), settings)
        predict = [p + buf for p in order[known:known + size]]
        halves = [0, 1] if guided and (kind != "lazy" or not settings["cfg_reuse"]) else [0]
        zs = []
        for h in halves:
            c = caches[h]
            if kind == "lazy":
                dec_q = list(dict.fromkeys(prev_new + predict))
                dec_q += stalest(c, set(dec_q), settings["recompute"], buf)
                z, dkv = run_cached(mar, tokens, mask, cls, float(h), c, prev_new, dec_q, False)
            else:
                enc_q = [p for p in range(S) if p < buf or mask[0, p - buf] == 0]
                z, dkv = run_cached(mar, tokens, mask, cls, float(h), c, enc_q, list(range(S)), True)
                dec_q = list(range(S))
            for i, p in enumerate(dec_q):
                c.dec_kv[0, :, :, p] = dkv[0, :, :, i]
                c.fresh[p] = step
            zs.append({p: z[i] for i, p in enumerate(dec_q)})
        if guided and kind != "lazy":
            caches[0].diff = torch.stack([zs[0][p + buf] - zs[1][p + buf] for p in range(L)])
        zc = torch.stack([zs[0][p] for p in predict])
        if not guided:
            zu = None
        elif len(zs) == 2:
            zu = torch.stack([zs[1][p] for p in predict])
        else:
            zu = zc - caches[0].diff[[p - buf for p in predict]]
        out.append((zc, zu))
        for p in predict:
            mask[0, p - buf] = 0
        prev_new = predict
        known += size
    return out


def write_fixture(mar, path, seed=7):
    """The reference's z per step for a few settings, in mar/cache_test.go's layout."""
    L, D = mar.seq_len, mar.token_dim
    g = torch.Generator().manual_seed(seed)
    tokens = torch.rand(1, L, D, generator=g) * 2 - 1
    order = torch.randperm(L, generator=g).tolist()
    cases = []
    for num_iter, settings, guided in [
            (16, dict(full_steps=2, refresh_every=4, recompute=3, cfg_reuse=True), True),
            (16, dict(full_steps=2, refresh_every=4, recompute=3, cfg_reuse=False), True),
            (12, dict(full_steps=1, refresh_every=5, recompute=0, cfg_reuse=True), False),
            (10, dict(full_steps=1, refresh_every=1, recompute=0, cfg_reuse=True), True)]:
        sizes = [L // num_iter + (1 if i < L % num_iter else 0) for i in range(num_iter)]  # any split will do
        with torch.no_grad():
            seq = reference_sequence(mar, tokens, order, sizes, 3, settings, guided)
        cases.append(dict(num_iter=num_iter, settings=settings, guided=guided, sizes=sizes,
                          z=[[float(v) for v in zc.reshape(-1)] for zc, _ in seq],
                          z_uncond=[[float(v) for v in zu.reshape(-1)] if zu is not None else [] for _, zu in seq]))
    with open(path, "w") as f:
        json.dump(dict(seq_len=L, token_dim=D, width=width(mar), class_id=3, tokens=[float(v) for v in tokens.reshape(-1)],
                       order=order, cases=cases), f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", required=True, help="pack folder to read the weights from (and add the graph to)")
    ap.add_argument("--fixture", help="write the reference's cached sequences here instead of touching the pack")
    args = ap.parse_args()
    from packs.ckpt_from_pack import rebuild
    torch.set_num_threads(1)
    mar, _ = rebuild(args.pack)
    if args.fixture:
        write_fixture(mar, args.fixture)
        print(f"wrote {args.fixture}")
        return
    entry = add_to_pack(mar, args.pack)
    size = os.path.getsize(os.path.join(args.pack, FILE))
    print(json.dumps(dict(entry, bytes=size)))


if __name__ == "__main__":
    sys.exit(main())
