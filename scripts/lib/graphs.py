"""The graphs a pack holds, as the modules torch.onnx exports: the MAR transformer with the
pack's input names (tokens, mask, class ids, class-drop flags -> z for every position), the
diffusion head (x_t, t, z -> the head's output) and the optional picked transformer (z at
chosen positions only). Shared by export.py (the Fashion-MNIST models), export_mar.py (official
MAR checkpoints) and the pack tools."""
import inspect

import torch


def onnx_export(*args, **kwargs):
    """torch.onnx.export with the TorchScript exporter: torch 2.9+ defaults to the dynamo one,
    which needs onnxscript and traces the masked encoder differently."""
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    return torch.onnx.export(*args, **kwargs)


class TransformerGraph(torch.nn.Module):
    """transformer.onnx. compact: the encoder runs over the known tokens only (what every pack
    tool exports now; without it, the masked-key graph that compact_transformer.py compares)."""

    def __init__(self, mar, compact=False):
        super().__init__()
        self.mar, self.compact = mar, compact

    def forward(self, tokens, mask, class_ids, drop_class):
        if self.compact:
            return self.mar.forward_compact(tokens, mask, class_ids, drop_class)
        return self.mar.forward_keep(tokens, mask, class_ids, drop_class)


class HeadGraph(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x_t, t, z):
        return self.net(x_t, t, z)


class PickedTransformerGraph(torch.nn.Module):
    """transformer_picked.onnx: transformer.onnx's inputs and at [B, K] (int64 positions) ->
    z [B, K, W] at those positions only (marmodel.MAR.forward_picked)."""

    def __init__(self, mar):
        super().__init__()
        self.mar = mar

    def forward(self, tokens, mask, class_ids, drop_class, at):
        return self.mar.forward_picked(tokens, mask, class_ids, drop_class, at)
