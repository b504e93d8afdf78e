"""Fashion-MNIST from Debian's dataset-fashion-mnist, tokenized as marspec's packs expect."""
import gzip
import os

import numpy as np

# MARSPEC_FMNIST: another folder with the four .gz files (a lent GPU machine has no Debian package)
ROOT = os.environ.get("MARSPEC_FMNIST", "/usr/share/datasets/fashion-mnist")
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
PATCH = 4


def load(split="train"):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(f"{ROOT}/{prefix}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(f"{ROOT}/{prefix}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return images, labels.astype(np.int64)


def load_generated(folders):
    """Images written by `marspec generate` (NNNN_classC_slug.png, 28x28 grey) and their class
    labels, read back from the file names: a target's samples, for distilling a draft."""
    import os
    import re

    from PIL import Image

    name = re.compile(r"^\d+_class(\d+)_.*\.png$")
    images, labels = [], []
    for folder in folders:
        for f in sorted(os.listdir(folder)):
            m = name.match(f)
            if not m:
                continue
            img = np.asarray(Image.open(os.path.join(folder, f)).convert("L"), dtype=np.uint8)
            if img.shape != (28, 28):
                raise ValueError(f"{folder}/{f}: {img.shape}, want 28x28")
            images.append(img)
            labels.append(int(m.group(1)))
    if not images:
        raise ValueError(f"no NNNN_classC_*.png images in {folders}")
    return np.stack(images), np.array(labels, dtype=np.int64)


def tokenize(images_u8):
    """[N,28,28] uint8 -> [N,49,16] float in [-1,1]; token[i*4+j] = pixel[gy*4+i][gx*4+j]."""
    import torch  # here, so loading images needs only numpy

    x = torch.from_numpy(images_u8.astype(np.float32) / 127.5 - 1.0)
    n = x.shape[0]
    x = x.reshape(n, 7, PATCH, 7, PATCH).permute(0, 1, 3, 2, 4)
    return x.reshape(n, 49, PATCH * PATCH)


def untokenize(tokens):
    import torch

    n = tokens.shape[0]
    x = tokens.reshape(n, 7, 7, PATCH, PATCH).permute(0, 1, 3, 2, 4).reshape(n, 28, 28)
    return ((x.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).numpy()
