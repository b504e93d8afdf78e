"""Export the FID Inception-v3 (the 2015-12-05 TensorFlow weights) as a marspec evaluator pack.

  /usr/bin/python3 scripts/packs/export_inception.py --weights pt_inception-2015-12-05-6726825d.pth --out evaluators/inception
  /usr/bin/python3 scripts/packs/export_inception.py --random --seed 1 --out /tmp/inception   # tests only

The network is the one FID and IS are reported with: Inception-v3 as TensorFlow's 2015-12-05
graph has it, laid out the way the common PyTorch FID ports do (pytorch-fid's
pt_inception-2015-12-05 state dict: torchvision's Inception3 names, no auxiliary head, a
1008-class fc). It differs from torchvision's ImageNet Inception-v3 in four places, all faithful
to the TF graph: the average pools inside blocks A, C and the first E leave padding out of the
mean, and the last E block pools with max instead of average.

The ONNX graph takes `images` [N,3,299,299] float32 already resized to 299x299 (marspec does the
TF1 bilinear resize in Go, fid/resize.go) and scaled (x-128)/128 from 0-255 pixels, as the TF
graph's Sub/Mul nodes after its ResizeBilinear do (manifest `scale: inception`). It returns
`features` [N,2048] (pool3, what FID uses) and `logits` [N,1008]: pool3 times the fc weights
without the bias, as ADM's evaluator takes IS from the TF graph's softmax/logits/MatMul.

The pack is a folder with model.onnx and manifest.json (docs/evaluation.md); its manifest asks
for the TF1 resize (`input.resize: tf1_bilinear`), so marspec takes images of any size.
Only torch and onnx are needed (Debian's python3-torch, python3-onnx); the blocks are written
here rather than taken from torchvision so nothing else must be installed.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv(nn.Module):
    """Convolution without bias, then batch norm (TF's eps 0.001) and ReLU."""

    def __init__(self, cin, cout, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def avg_pool_3x3(x):
    # TF's SAME average pool divides by the pixels inside the image, not by 9
    return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class BlockA(nn.Module):  # Mixed_5b..5d (pytorch-fid's FIDInceptionA)
    def __init__(self, cin, pool_features):
        super().__init__()
        self.branch1x1 = Conv(cin, 64, 1)
        self.branch5x5_1 = Conv(cin, 48, 1)
        self.branch5x5_2 = Conv(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = Conv(cin, 64, 1)
        self.branch3x3dbl_2 = Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = Conv(96, 96, 3, padding=1)
        self.branch_pool = Conv(cin, pool_features, 1)

    def forward(self, x):
        return torch.cat([
            self.branch1x1(x),
            self.branch5x5_2(self.branch5x5_1(x)),
            self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
            self.branch_pool(avg_pool_3x3(x)),
        ], 1)


class BlockB(nn.Module):  # Mixed_6a: grid 35 -> 17
    def __init__(self, cin):
        super().__init__()
        self.branch3x3 = Conv(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = Conv(cin, 64, 1)
        self.branch3x3dbl_2 = Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = Conv(96, 96, 3, stride=2)

    def forward(self, x):
        return torch.cat([
            self.branch3x3(x),
            self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x))),
            F.max_pool2d(x, 3, stride=2),
        ], 1)


class BlockC(nn.Module):  # Mixed_6b..6e (FIDInceptionC): factorised 7x7
    def __init__(self, cin, c7):
        super().__init__()
        self.branch1x1 = Conv(cin, 192, 1)
        self.branch7x7_1 = Conv(cin, c7, 1)
        self.branch7x7_2 = Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = Conv(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = Conv(cin, c7, 1)
        self.branch7x7dbl_2 = Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = Conv(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = Conv(cin, 192, 1)

    def forward(self, x):
        d = x
        for m in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            d = m(d)
        return torch.cat([
            self.branch1x1(x),
            self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x))),
            d,
            self.branch_pool(avg_pool_3x3(x)),
        ], 1)


class BlockD(nn.Module):  # Mixed_7a: grid 17 -> 8
    def __init__(self, cin):
        super().__init__()
        self.branch3x3_1 = Conv(cin, 192, 1)
        self.branch3x3_2 = Conv(192, 320, 3, stride=2)
        self.branch7x7x3_1 = Conv(cin, 192, 1)
        self.branch7x7x3_2 = Conv(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = Conv(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = Conv(192, 192, 3, stride=2)

    def forward(self, x):
        s = x
        for m in (self.branch7x7x3_1, self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            s = m(s)
        return torch.cat([self.branch3x3_2(self.branch3x3_1(x)), s, F.max_pool2d(x, 3, stride=2)], 1)


class BlockE(nn.Module):  # Mixed_7b (FIDInceptionE_1, average pool) and 7c (FIDInceptionE_2, max pool)
    def __init__(self, cin, max_pool):
        super().__init__()
        self.max_pool = max_pool
        self.branch1x1 = Conv(cin, 320, 1)
        self.branch3x3_1 = Conv(cin, 384, 1)
        self.branch3x3_2a = Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = Conv(cin, 448, 1)
        self.branch3x3dbl_2 = Conv(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = Conv(cin, 192, 1)

    def forward(self, x):
        a = self.branch3x3_1(x)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        # the 2015 TF graph's last block pools with max here (a bug in the original, kept for
        # comparable numbers)
        pool = F.max_pool2d(x, 3, stride=1, padding=1) if self.max_pool else avg_pool_3x3(x)
        return torch.cat([
            self.branch1x1(x),
            self.branch3x3_2a(a), self.branch3x3_2b(a),
            self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d),
            self.branch_pool(pool),
        ], 1)


class FIDInception(nn.Module):
    """Inception-v3 of the 2015-12-05 TF graph, up to pool3 and the 1008-way logits."""

    def __init__(self):
        super().__init__()
        self.Conv2d_1a_3x3 = Conv(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = Conv(32, 32, 3)
        self.Conv2d_2b_3x3 = Conv(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = Conv(64, 80, 1)
        self.Conv2d_4a_3x3 = Conv(80, 192, 3)
        self.Mixed_5b = BlockA(192, 32)
        self.Mixed_5c = BlockA(256, 64)
        self.Mixed_5d = BlockA(288, 64)
        self.Mixed_6a = BlockB(288)
        self.Mixed_6b = BlockC(768, 128)
        self.Mixed_6c = BlockC(768, 160)
        self.Mixed_6d = BlockC(768, 160)
        self.Mixed_6e = BlockC(768, 192)
        self.Mixed_7a = BlockD(768)
        self.Mixed_7b = BlockE(1280, max_pool=False)
        self.Mixed_7c = BlockE(2048, max_pool=True)
        self.fc = nn.Linear(2048, 1008)

    def forward(self, x):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, stride=2)
        for name in ("5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"):
            x = getattr(self, "Mixed_" + name)(x)
        features = x.mean(dim=(2, 3))
        return features, features @ self.fc.weight.t()


def randomise(model, seed):
    """He-scaled convolutions and batch-norm statistics near (0, 1), so activations stay O(1)
    through all 94 layers and a relative comparison with ONNX Runtime means something."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5)
            elif isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(1 + 0.1 * torch.randn(c, generator=gen))
                m.bias.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
            elif isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / m.in_features ** 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))


def load_weights(model, path):
    """Loads a state dict with pytorch-fid's names; batch-norm counters and an auxiliary head
    (torchvision's layout has one) are not part of this network and are left out."""
    state = torch.load(path, map_location="cpu")
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    state = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked") and not k.startswith("AuxLogits.")}
    want = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    missing = sorted(set(want) - set(state))
    unexpected = sorted(set(state) - set(want))
    wrong = sorted(k for k in set(want) & set(state) if tuple(state[k].shape) != tuple(want[k].shape))
    if missing or unexpected or wrong:
        def some(keys):
            return ", ".join(keys[:5]) + (" and %d more" % (len(keys) - 5) if len(keys) > 5 else "")
        problems = []
        if missing:
            problems.append("missing %d (%s)" % (len(missing), some(missing)))
        if unexpected:
            problems.append("unexpected %d (%s)" % (len(unexpected), some(unexpected)))
        if wrong:
            problems.append("wrong shape %d (%s)" % (len(wrong), some(["%s %s, want %s" % (k, tuple(state[k].shape), tuple(want[k].shape)) for k in wrong])))
        sys.exit("%s is not an FID Inception state dict with pytorch-fid's names (pt_inception-2015-12-05): %s" % (path, "; ".join(problems)))
    # the counters (absent from older files) are all strict loading would miss; the rest was
    # checked above, tensor by tensor
    model.load_state_dict(state, strict=False)


def manifest(name, source):
    return {
        "format": "marspec-evaluator/1",
        "name": name,
        "input": {"height": 299, "width": 299, "channels": 3, "name": "images", "scale": "inception",
                  "resize": "tf1_bilinear"},
        "features": {"name": "features", "dim": 2048},
        "logits": {"name": "logits", "classes": 1008},
        "training": {"source": source},
    }


def export(model, out, name, source):
    model.eval()
    os.makedirs(out, exist_ok=True)
    x = torch.zeros(2, 3, 299, 299)
    with torch.no_grad():
        torch.onnx.export(model, (x,), os.path.join(out, "model.onnx"), opset_version=17,
                          input_names=["images"], output_names=["features", "logits"],
                          dynamic_axes={"images": {0: "N"}, "features": {0: "N"}, "logits": {0: "N"}})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest(name, source), f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", help="pt_inception-2015-12-05-*.pth (pytorch-fid's FID Inception weights)")
    ap.add_argument("--random", action="store_true", help="random weights, for tests: no FID made with them means anything")
    ap.add_argument("--seed", type=int, default=0, help="seed of --random")
    ap.add_argument("--out", required=True, help="evaluator folder to write (model.onnx, manifest.json)")
    args = ap.parse_args()
    if bool(args.weights) == args.random:
        sys.exit("give exactly one of --weights FILE and --random")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = FIDInception()
    if args.random:
        randomise(model, args.seed)
        name, source = "inception-random", "random weights, seed %d (tests only)" % args.seed
    else:
        load_weights(model, args.weights)
        name, source = "inception-2015-12-05", os.path.basename(args.weights)
    export(model, args.out, name, source)
    print(json.dumps({"out": args.out, "name": name}))


if __name__ == "__main__":
    main()
