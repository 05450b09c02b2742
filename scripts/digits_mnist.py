"""scikit-learn's handwritten digits (1,797 real 8x8 scans, bundled in its wheel) as MNIST IDX files, the
form `pipebench train --data mnist:DIR` reads, so that the recipe's task runs on real images with nothing
downloaded.

    python scripts/digits_mnist.py DIR [--test-fraction 0.2]

writes DIR/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (torchvision's MNIST raw layout). Each
8x8 image (values 0-16) is scaled bilinearly to 20x20 and centred in a 28x28 frame, as MNIST centres its
digits in a 20x20 box, and stretched to 0-255. The data set's own order is kept; its last `--test-fraction`
is the held-out split (t10k), the rest the training split. Then, for example:

    pipebench train --model convnet --data mnist:DIR --strategy pp-1f1b --epochs 20 --save MNIST.pth

Needs scikit-learn (`pip install pipebench[test]`).
"""
from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np

SIZE, BOX = 28, 20


def digits_28() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 28, 28) uint8, labels (1797,) uint8): scikit-learn's digits in MNIST's frame."""
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = torch.from_numpy(digits.images.astype(np.float32) / 16.0).unsqueeze(1)  # N, 1, 8, 8 in [0, 1]
    box = F.interpolate(small, size=(BOX, BOX), mode="bilinear", align_corners=False).clamp(0, 1)
    frame = F.pad(box, [(SIZE - BOX) // 2] * 4)  # centred, 4 pixels of background on each side
    images = (frame.squeeze(1) * 255).round().to(torch.uint8).numpy()
    return images, digits.target.astype(np.uint8)


def write_idx(path: Path, array: np.ndarray) -> None:
    """One IDX file: magic (0, 0, dtype 0x08 = ubyte, dimensions), each dimension big-endian, the bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_digits(folder: str | Path, test_fraction: float = 0.2) -> Path:
    """Write the digits under folder/MNIST/raw; return folder (what --data mnist: takes)."""
    images, labels = digits_28()
    held_out = round(len(images) * test_fraction)
    split = len(images) - held_out
    raw = Path(folder) / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    write_idx(raw / "train-images-idx3-ubyte", images[:split])
    write_idx(raw / "train-labels-idx1-ubyte", labels[:split])
    write_idx(raw / "t10k-images-idx3-ubyte", images[split:])
    write_idx(raw / "t10k-labels-idx1-ubyte", labels[split:])
    return Path(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="where MNIST/raw/ is written (the DIR of --data mnist:DIR)")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="the held-out share, the data's last")
    args = parser.parse_args()
    if not 0 < args.test_fraction < 1:
        parser.error(f"--test-fraction must be between 0 and 1 (got {args.test_fraction})")
    folder = write_digits(args.folder, args.test_fraction)
    print(f"wrote scikit-learn's digits as MNIST IDX files in {folder / 'MNIST' / 'raw'}")


if __name__ == "__main__":
    main()
