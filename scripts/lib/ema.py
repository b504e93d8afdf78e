"""The exponential moving average every training script here keeps of its weights."""
import torch


def ema_update(ema, model, step, decay):
    """Moves ema toward model. The decay warms up as (1 + step) / (10 + step) up to `decay`, so a
    short run does not leave the average near the initialisation (algorithm.md §5)."""
    d = min(decay, (1 + step) / (10 + step))
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.mul_(d).add_(pm.detach(), alpha=1 - d)
