"""Write a tiny evaluator folder for checks that only need a run to be cheap to score: 32x32
colour input (256x256 images resized as the Inception evaluator resizes them), 8 random
features, 4 classes, and an 8-d reference.npz beside it. Its FIDs mean nothing.

  /usr/bin/python3 scripts/tests/tiny_evaluator.py OUT [NAME]
"""
import json
import os
import sys

import numpy as np
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 4, stride=4)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        f = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return f, self.fc(f)


def main(out, name="tiny-test"):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.onnx.export(Net(), (torch.randn(2, 3, 32, 32),), os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=["images"], output_names=["features", "logits"],
                      dynamic_axes={"images": {0: "B"}, "features": {0: "B"}, "logits": {0: "B"}})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"format": "marspec-evaluator/1", "name": name,
                   "input": {"height": 32, "width": 32, "channels": 3, "name": "images", "scale": "unit", "resize": "tf1_bilinear"},
                   "features": {"name": "features", "dim": 8}, "logits": {"name": "logits", "classes": 4}}, f)
    np.savez(os.path.join(out, "reference.npz"), mu=np.zeros(8), sigma=np.eye(8))


if __name__ == "__main__":
    main(*sys.argv[1:3])
