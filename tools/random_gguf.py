"""A GGUF with a real model's exact layout (metadata, tokenizer, tensor types) and random weights.

The lent GPU machine can't download models and takes at most 64 MiB of files, so benchmarks of
the real models' layouts ship only the header (a few MB) and rebuild the file there:

    python tools/random_gguf.py header REAL.gguf OUT.head     # here: metadata + tensor infos
    python tools/random_gguf.py expand OUT.head RANDOM.gguf   # there: the same file, random weights

Block formats get random quants and small valid f16 scales (random bytes would make NaN and
infinite scales); float vectors (norm weights, biases) get values near 1 and 0. numpy is fine here:
this is a desktop tool.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.formats.gguf import parse_gguf, read_gguf  # noqa: E402

# Byte offsets of the f16 scale fields inside one block, and the block's size.
SCALE_FIELDS = {
    "Q8_0": ((0,), 34),
    "Q4_0": ((0,), 18),
    "Q4_1": ((0, 2), 20),
    "Q5_0": ((0,), 22),
    "Q5_1": ((0, 2), 24),
    "Q4_K": ((0, 2), 144),
    "Q5_K": ((0, 2), 176),
    "Q6_K": ((208,), 210),
}


def header(src: Path, out: Path) -> None:
    gguf = read_gguf(src)
    with open(src, "rb") as f:
        out.write_bytes(f.read(gguf.data_offset))


def tensor_bytes(info, rng) -> bytes:
    if info.dtype == "F32":
        base = 1.0 if "norm" in info.name else 0.0
        return (base + 0.02 * rng.standard_normal(info.nbytes // 4)).astype(np.float32).tobytes()
    if info.dtype == "F16":
        return (0.02 * rng.standard_normal(info.nbytes // 2)).astype(np.float16).tobytes()
    if info.dtype not in SCALE_FIELDS:
        raise SystemExit(f"{info.name}: no random fill for {info.dtype}")
    fields, size = SCALE_FIELDS[info.dtype]
    blocks = rng.integers(0, 256, (info.nbytes // size, size), dtype=np.uint8)
    for at in fields:
        scales = (0.002 * (1 + rng.random(len(blocks)))).astype(np.float16)
        blocks[:, at : at + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.tobytes()


def expand(head: Path, out: Path, seed: int = 0) -> None:
    data = head.read_bytes()
    gguf = parse_gguf(lambda offset, count: data[offset : offset + count], 1 << 50, head)
    rng = np.random.default_rng(seed)
    with open(out, "wb") as f:
        f.write(data)
        for info in sorted(gguf.tensors.values(), key=lambda t: t.start):
            f.write(bytes(info.start - f.tell()))
            f.write(tensor_bytes(info, rng))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["header", "expand"])
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    (header if args.command == "header" else expand)(args.src, args.out)


if __name__ == "__main__":
    main()
