"""The embedded target, frozen, as the parts trained on top of it use it (scripts/train/early_exit.py,
scripts/train/distill_head.py): its weights loaded without gradients, and the random contexts it is
run on."""
import torch

from packs.export import load_model


def load_target(path):
    """The target checkpoint's EMA model (export.load_model) with every parameter frozen."""
    mar, ck = load_model(path)
    for p in mar.parameters():
        p.requires_grad_(False)
    return mar, ck


def sample_masks(b, seq_len, gen=None):
    """Per row, a uniform count of 1..seq_len unknown tokens over a random order."""
    order = torch.argsort(torch.rand(b, seq_len, generator=gen), dim=1)
    rank = torch.argsort(order, dim=1)
    counts = torch.randint(1, seq_len + 1, (b, 1), generator=gen)
    return (rank < counts).float()
