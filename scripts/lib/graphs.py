"""The two graphs a pack holds, as the modules torch.onnx exports: the MAR transformer with the
pack's input names (tokens, mask, class ids, class-drop flags -> z for every position) and the
diffusion head (x_t, t, z -> the head's output). Shared by export.py (the Fashion-MNIST
models) and export_mar.py (official MAR checkpoints)."""
import inspect

import torch


def onnx_export(*args, **kwargs):
    """torch.onnx.export with the TorchScript exporter: torch 2.9+ defaults to the dynamo one,
    which needs onnxscript and traces the masked encoder differently."""
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    return torch.onnx.export(*args, **kwargs)


class TransformerGraph(torch.nn.Module):
    """transformer.onnx. compact: the encoder runs over the known tokens only (MAR packs; the
    embedded Fashion-MNIST graphs were exported without it and are kept as they are)."""

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
