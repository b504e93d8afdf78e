"""Train the Fashion-MNIST evaluator for FID/IS (a small CNN) and export it to ONNX.

  /usr/bin/python3 scripts/train/train_evaluator.py --out models/evaluator --epochs 6
Writes model.onnx (input `images` [N,1,28,28] in [-1,1]; outputs `features` [N,128], the
penultimate activations used for FID, and `logits` [N,10], whose softmax is used for IS) and
manifest.json, and prints the test accuracy.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/: imports name their folder (scripts/README.md)
from lib import fmnist


class Evaluator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1)
        self.fc = nn.Linear(128 * 3 * 3, 128)
        self.head = nn.Linear(128, 10)

    def features(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)   # 14
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)   # 7
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)   # 3
        return F.relu(self.fc(x.flatten(1)))

    def forward(self, x):
        f = self.features(x)
        return f, self.head(f)


def to_input(images_u8):
    return torch.from_numpy(images_u8.astype(np.float32) / 127.5 - 1.0)[:, None]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    xtr, ytr = fmnist.load("train")
    xte, yte = fmnist.load("test")
    xtr_t, ytr_t = to_input(xtr), torch.from_numpy(ytr)
    xte_t, yte_t = to_input(xte), torch.from_numpy(yte)
    model = Evaluator()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=args.epochs * (60000 // 128 + 1))
    start = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(60000)
        for i in range(0, 60000, 128):
            idx = perm[i:i + 128]
            x = xtr_t[idx]
            # light augmentation: random horizontal flips keep garments garments
            flip = torch.rand(len(idx)) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            _, logits = model(x)
            loss = F.cross_entropy(logits, ytr_t[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        acc = accuracy(model, xte_t, yte_t)
        print(json.dumps(dict(epoch=epoch + 1, test_accuracy=round(acc, 4), minutes=round((time.time() - start) / 60, 2))), flush=True)
    model.eval()
    os.makedirs(args.out, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, (xte_t[:2],), os.path.join(args.out, "model.onnx"), opset_version=17,
                          input_names=["images"], output_names=["features", "logits"],
                          dynamic_axes={"images": {0: "N"}, "features": {0: "N"}, "logits": {0: "N"}})
    manifest = {"format": "marspec-evaluator/1", "name": "fmnist-cnn",
                "input": {"height": 28, "width": 28, "channels": 1, "name": "images",
                          "scale": "minus1_1"},
                "features": {"name": "features", "dim": 128}, "logits": {"name": "logits", "classes": 10},
                "test_accuracy": round(accuracy(model, xte_t, yte_t), 4),
                "training": {"epochs": args.epochs, "minutes": round((time.time() - start) / 60, 1),
                             "data": "fashion-mnist train (60k), flips"}}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    print(json.dumps(manifest))


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            _, logits = model(x[i:i + 1000])
            correct += (logits.argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


if __name__ == "__main__":
    main()
