"""Real text on every machine: the Python standard library's own top-level sources as byte tokens
(vocabulary 256), in nanoGPT's train.bin format (a flat file of uint16 ids), which
`pipebench train --data tokens:FILE` reads; the last few modules (by name) held out as a second file.

    python scripts/stdlib_bytes.py TRAIN.bin HELD_OUT.bin [--held-out 10]
    python scripts/stdlib_bytes.py --score CHECKPOINT.pth HELD_OUT.bin [--seq-len 128]

The second form loads a checkpoint of tests/fixtures/byte_gpt2.py's `gpt2_small` into GPT2LMHeadModel
(strict) and prints its mean loss, in nats per byte, over the held-out file's whole sequences.
"""
from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

import numpy as np


def sources(held_out: int) -> tuple[list[Path], list[Path]]:
    """The standard library's top-level *.py files by name: (training files, the last `held_out`)."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    return files[:-held_out], files[-held_out:]


def write_tokens(files: list[Path], path: str | Path) -> int:
    """The files' bytes, one after another, as uint16 ids; returns how many."""
    ids = np.frombuffer(b"".join(f.read_bytes() for f in files), dtype=np.uint8).astype(np.uint16)
    ids.tofile(path)
    return len(ids)


def score(checkpoint: str, held_out: str, seq_len: int) -> float:
    """The mean next-byte loss (nats) of gpt2_small with `checkpoint`'s weights over `held_out`."""
    import sys

    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "fixtures"))
    from byte_gpt2 import gpt2_small

    model = gpt2_small()
    model.load_state_dict(torch.load(checkpoint))  # strict: every name GPT2LMHeadModel's own
    model.eval()
    ids = torch.from_numpy(np.fromfile(held_out, dtype=np.uint16).astype(np.int64))
    count = (len(ids) - 1) // seq_len
    total = 0.0
    with torch.no_grad():
        for start in range(0, count, 64):
            rows = range(start, min(start + 64, count))
            chunk = torch.stack([ids[i * seq_len:i * seq_len + seq_len + 1] for i in rows])
            logits = model(chunk[:, :-1]).logits
            total += F.cross_entropy(logits.reshape(-1, 256), chunk[:, 1:].reshape(-1), reduction="sum").item()
    return total / (count * seq_len)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="TRAIN.bin to write, or with --score the checkpoint")
    parser.add_argument("held", help="HELD_OUT.bin (written, or scored with --score)")
    parser.add_argument("--held-out", type=int, default=10, help="how many modules, the last by name, are held out")
    parser.add_argument("--score", action="store_true", help="score a checkpoint on the held-out file")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per sequence when scoring")
    args = parser.parse_args()
    if args.score:
        loss = score(args.first, args.held, args.seq_len)
        print(f"{args.first}: {loss:.4f} nats per byte on {args.held}")
        return
    training, held = sources(args.held_out)
    print(f"{args.first}: {write_tokens(training, args.first):,} bytes of {len(training)} modules; "
          f"{args.held}: {write_tokens(held, args.held):,} bytes of {', '.join(f.stem for f in held)}")


if __name__ == "__main__":
    main()
