"""MAR-style model (transformer + diffusion head) with state-dict names of the official MAR code.

Written for marspec: small enough to train on a CPU, same structure as MAR so the same export
path serves official checkpoints. The encoder drops masked tokens while training (fast; all rows
of a batch share one mask count) and masks them as attention keys in `forward_keep` (export:
rows of one batch may differ in how many tokens they know). `forward_compact` is the export path
that does what MAR's own sampler does, at any per-row counts: the encoder sees only the known
tokens (padded to the row that knows most), not the whole sequence.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_bias=None):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * self.scale) @ k.transpose(-2, -1)
        if key_bias is not None:  # [b, n] additive bias on keys: 0 keep, large negative drop
            att = att + key_bias[:, None, None, :]
        att = att.softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, n, c))


    def forward_queries(self, x, queries):
        """forward without key bias for the rows queries [b, k, c] only, keys and values from
        every row of x [b, n, c]: the qkv weight's first third makes the queries, the rest the
        keys and values."""
        b, n = x.shape[:2]
        c = self.qkv.in_features  # a Python int, so the export folds the weight's slices into constants
        h, d = self.heads, c // self.heads
        w, bias = self.qkv.weight, self.qkv.bias
        kv = F.linear(x, w[c:], bias[c:]).reshape(b, n, 2, h, d).permute(2, 0, 3, 1, 4)
        q = F.linear(queries, w[:c], bias[:c]).reshape(b, -1, h, d).transpose(1, 2)
        att = ((q * self.scale) @ kv[0].transpose(-2, -1)).softmax(dim=-1)
        return self.proj((att @ kv[1]).transpose(1, 2).reshape(b, -1, c))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x, key_bias=None):
        x = x + self.attn(self.norm1(x), key_bias)
        return x + self.mlp(self.norm2(x))


def timestep_embedding(t, dim=256, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepEmbedder(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(256, hidden), nn.SiLU(), nn.Linear(hidden, hidden))

    def forward(self, t):
        return self.mlp(timestep_embedding(t))


def modulate(x, shift, scale):
    return x * (1 + scale) + shift


class ResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.in_ln = nn.LayerNorm(ch, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(ch, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(ch, 3 * ch))

    def forward(self, x, y):
        shift, scale, gate = self.adaLN_modulation(y).chunk(3, dim=-1)
        return x + gate * self.mlp(modulate(self.in_ln(x), shift, scale))


class FinalLayer(nn.Module):
    def __init__(self, ch, out_ch):
        super().__init__()
        self.norm_final = nn.LayerNorm(ch, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(ch, out_ch)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(ch, 2 * ch))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=-1)
        # Written out rather than calling norm_final: torch 1.13 exports a LayerNorm without
        # affine parameters as an invalid ONNX node. Same math, same (empty) state dict entry.
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        normed = (x - mu) / torch.sqrt(var + self.norm_final.eps)
        return self.linear(modulate(normed, shift, scale))


class SimpleMLPAdaLN(nn.Module):
    def __init__(self, in_channels, model_channels, out_channels, z_channels, num_res_blocks):
        super().__init__()
        self.in_channels = in_channels
        self.time_embed = TimestepEmbedder(model_channels)
        self.cond_embed = nn.Linear(z_channels, model_channels)
        self.input_proj = nn.Linear(in_channels, model_channels)
        self.res_blocks = nn.ModuleList([ResBlock(model_channels) for _ in range(num_res_blocks)])
        self.final_layer = FinalLayer(model_channels, out_channels)
        # MAR zero-initialises the modulations and the output layer.
        for b in self.res_blocks:
            nn.init.zeros_(b.adaLN_modulation[-1].weight)
            nn.init.zeros_(b.adaLN_modulation[-1].bias)
        nn.init.zeros_(self.final_layer.adaLN_modulation[-1].weight)
        nn.init.zeros_(self.final_layer.adaLN_modulation[-1].bias)
        nn.init.zeros_(self.final_layer.linear.weight)
        nn.init.zeros_(self.final_layer.linear.bias)
        nn.init.normal_(self.time_embed.mlp[0].weight, std=0.02)
        nn.init.normal_(self.time_embed.mlp[2].weight, std=0.02)

    def forward(self, x, t, c):
        y = self.time_embed(t) + self.cond_embed(c)
        x = self.input_proj(x)
        for b in self.res_blocks:
            x = b(x, y)
        return self.final_layer(x, y)


class DiffLoss(nn.Module):
    def __init__(self, token_dim, z_channels, width, depth):
        super().__init__()
        self.net = SimpleMLPAdaLN(token_dim, width, token_dim * 2, z_channels, depth)


class MAR(nn.Module):
    def __init__(self, seq_len=49, token_dim=16, width=128, enc_depth=3, dec_depth=3, heads=4,
                 buffer_size=4, num_classes=10, head_width=128, head_depth=2, label_drop=0.1):
        super().__init__()
        self.seq_len, self.token_dim, self.buffer_size = seq_len, token_dim, buffer_size
        self.label_drop = label_drop
        self.class_emb = nn.Embedding(num_classes, width)
        self.fake_latent = nn.Parameter(torch.zeros(1, width))
        self.z_proj = nn.Linear(token_dim, width)
        self.z_proj_ln = nn.LayerNorm(width, eps=1e-6)
        self.encoder_pos_embed_learned = nn.Parameter(torch.zeros(1, seq_len + buffer_size, width))
        self.encoder_blocks = nn.ModuleList([Block(width, heads) for _ in range(enc_depth)])
        self.encoder_norm = nn.LayerNorm(width, eps=1e-6)
        self.decoder_embed = nn.Linear(width, width)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, width))
        self.decoder_pos_embed_learned = nn.Parameter(torch.zeros(1, seq_len + buffer_size, width))
        self.decoder_blocks = nn.ModuleList([Block(width, heads) for _ in range(dec_depth)])
        self.decoder_norm = nn.LayerNorm(width, eps=1e-6)
        self.diffusion_pos_embed_learned = nn.Parameter(torch.zeros(1, seq_len, width))
        self.diffloss = DiffLoss(token_dim, width, head_width, head_depth)
        self._init()

    def _init(self):
        for p in [self.class_emb.weight, self.fake_latent, self.mask_token,
                  self.encoder_pos_embed_learned, self.decoder_pos_embed_learned,
                  self.diffusion_pos_embed_learned]:
            nn.init.normal_(p, std=0.02)
        for m in list(self.encoder_blocks.modules()) + list(self.decoder_blocks.modules()) + \
                [self.z_proj, self.decoder_embed]:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def _class_vec(self, class_ids, drop):
        emb = self.class_emb(class_ids)
        return torch.where(drop[:, None] > 0.5, self.fake_latent.expand_as(emb), emb)

    def _embed(self, tokens, class_ids, drop):
        b = tokens.shape[0]
        x = self.z_proj(tokens)
        buf = self._class_vec(class_ids, drop)[:, None, :].expand(b, self.buffer_size, -1)
        x = torch.cat([buf, x], dim=1) + self.encoder_pos_embed_learned
        return self.z_proj_ln(x)

    def _decode(self, x_full):
        x = x_full + self.decoder_pos_embed_learned
        for blk in self.decoder_blocks:
            x = blk(x)
        x = self.decoder_norm(x)[:, self.buffer_size:]
        return x + self.diffusion_pos_embed_learned

    def forward_drop(self, tokens, mask, class_ids, drop):
        """Training path: every row has the same number of known tokens; masked ones are dropped."""
        b, width = tokens.shape[0], self.class_emb.weight.shape[1]
        x = self._embed(tokens, class_ids, drop)
        keep = torch.cat([torch.zeros(b, self.buffer_size), mask], dim=1) < 0.5
        n_keep = int(keep[0].sum())
        x = x[keep].reshape(b, n_keep, width)
        for blk in self.encoder_blocks:
            x = blk(x)
        x = self.decoder_embed(self.encoder_norm(x))
        full = self.mask_token.expand(b, self.seq_len + self.buffer_size, width).clone()
        full[keep] = x.reshape(-1, width)
        return self._decode(full)

    def forward_keep(self, tokens, mask, class_ids, drop):
        """Export path: masked tokens stay in the sequence but are never attended to."""
        depth = len(self.encoder_blocks)
        return self.finish_from(self.encode_until(tokens, mask, class_ids, drop, depth), mask, depth)

    def forward_compact(self, tokens, mask, class_ids, drop):
        """forward_keep's z with the encoder run over the known tokens only, as MAR's sampler does:
        at MAR's schedules most of the sequence is masked for most AR steps, and the encoder's
        work is proportional to the rows it sees (_encode_compact)."""
        return self._decode(self._encode_compact(tokens, mask, class_ids, drop))

    def forward_picked(self, tokens, mask, class_ids, drop, at):
        """forward_compact's z at the positions at [b, k] (int64, 0..seq_len-1) of each row only:
        [b, k, width]. Every decoder block but the last needs every position (attention is
        bidirectional), but only the picked rows of the last one are read by the head: there
        keys and values come from every position and queries, the projection, the MLP and the
        norm from the picked ones alone. A row may name a position twice."""
        x = self._encode_compact(tokens, mask, class_ids, drop) + self.decoder_pos_embed_learned
        for blk in self.decoder_blocks[:-1]:
            x = blk(x)
        last = self.decoder_blocks[-1]
        width = x.shape[2]
        rows = (at + self.buffer_size)[:, :, None].expand(-1, -1, width)
        picked = torch.gather(x, 1, rows)
        picked = picked + last.attn.forward_queries(last.norm1(x), last.norm1(picked))
        picked = picked + last.mlp(last.norm2(picked))
        pos = self.diffusion_pos_embed_learned.expand(x.shape[0], -1, -1)
        return self.decoder_norm(picked) + torch.gather(pos, 1, at[:, :, None].expand(-1, -1, width))

    def _encode_compact(self, tokens, mask, class_ids, drop):
        """The decoder's input [b, buffer + seq_len, width], the encoder run over the buffer and
        the known tokens only. Rows that know fewer tokens than the row that
        knows most are padded with masked positions, hidden as attention keys, and their
        outputs are overwritten by the mask token, so z is forward_keep's up to summation order. Exports with a dynamic row count (TopK, Slice, GatherElements,
        ScatterElements)."""
        full_mask, _ = self._full_mask(mask)
        b, seq = full_mask.shape
        x = self._embed(tokens, class_ids, drop)
        width = x.shape[2]
        n_keep = (1 - full_mask).sum(dim=1).max().to(torch.int64)
        kept_first = torch.argsort(full_mask, dim=1)[:, :n_keep]  # known (0) before masked (1)
        pad = torch.gather(full_mask, 1, kept_first)
        rows = kept_first[:, :, None].expand(-1, -1, width)
        x = torch.gather(x, 1, rows)
        for blk in self.encoder_blocks:
            x = blk(x, pad * -1e9)
        x = self.decoder_embed(self.encoder_norm(x))
        full = self.mask_token.expand(b, seq, width).scatter(1, rows, x)
        m = full_mask[:, :, None]
        return full * (1 - m) + self.mask_token * m  # the padding wrote to masked positions

    def _full_mask(self, mask):
        """The mask over buffer + tokens (buffer rows always known) and its attention key bias."""
        full_mask = torch.cat([torch.zeros(mask.shape[0], self.buffer_size), mask], dim=1)
        return full_mask, full_mask * -1e9

    def encode_until(self, tokens, mask, class_ids, drop, depth):
        """forward_keep's encoder state after blocks 0..depth-1 (early exits start here)."""
        x = self._embed(tokens, class_ids, drop)
        _, key_bias = self._full_mask(mask)
        for blk in self.encoder_blocks[:depth]:
            x = blk(x, key_bias)
        return x

    def finish_from(self, hidden, mask, depth):
        """The rest of forward_keep from encode_until's state at `depth`: z for every position."""
        full_mask, key_bias = self._full_mask(mask)
        x = hidden
        for blk in self.encoder_blocks[depth:]:
            x = blk(x, key_bias)
        x = self.decoder_embed(self.encoder_norm(x))
        m = full_mask[:, :, None]
        x = x * (1 - m) + self.mask_token * m
        return self._decode(x)


PRESETS = {
    # transformer compute per token ~ depth * width^2: draft/target = (4*64^2)/(6*128^2) = 1/6
    "target": dict(width=128, enc_depth=3, dec_depth=3, heads=4, head_width=128, head_depth=2),
    "draft": dict(width=64, enc_depth=2, dec_depth=2, heads=4, head_width=64, head_depth=2),
    "tiny": dict(width=32, enc_depth=1, dec_depth=1, heads=2, head_width=32, head_depth=1),
    # for the GPU machine
    "target-gpu": dict(width=256, enc_depth=6, dec_depth=6, heads=8, head_width=256, head_depth=3),
}
