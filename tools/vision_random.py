"""A GGUF with random weights from a layout ({"kv", "tensors"}, .gpu-bench/gguf_shape.py's JSON form), written a
tensor at a time so that a 3 GB file never sits in memory whole (tools/vision_layouts.py's writer; needs
llama.cpp's gguf-py and numpy).

The values are small and finite in every format, so both engines' logits stay finite through 34 layers: a block
format's scale fields are set so that a weight stays below ~0.05 (random bytes would make NaN and huge f16
scales), f16 / f32 matrices are N(0, 0.02), norm weights 1 + N(0, 0.02) (llama.cpp's files hold Gemma's 1 + w
already), biases N(0, 0.02). Speed does not depend on the values: each format's random blocks come from one pool
of POOL_BYTES, repeated from a different offset in each tensor, because drawing 3 GB of random numbers took
about a minute on a CPU and writing them a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

POOL_BYTES = 1 << 25
# Per block format: (elements, bytes) a block, the byte offsets of its f16 scales, and the largest scale that
# keeps |w| below ~0.05 (Q4_0: d * 8; Q8_0: d * 127; Q4_K: d * 63 * 15 with 6-bit scales; Q6_K: d * 127 * 32).
BLOCKS = {
    2: ((32, 18), (0,), 6e-3),  # Q4_0
    8: ((32, 34), (0,), 4e-4),  # Q8_0
    12: ((256, 144), (0, 2), 5e-5),  # Q4_K: d and dmin
    14: ((256, 210), (208,), 1.2e-5),  # Q6_K
}
F32, F16 = 0, 1


class Pools:
    def __init__(self, seed: int = 0):
        self.rng, self.pools, self.turn = np.random.default_rng(seed), {}, 0

    def pool(self, kind: int) -> np.ndarray:
        if kind not in self.pools:
            if kind == F16:
                self.pools[kind] = (0.02 * self.rng.standard_normal(POOL_BYTES // 2, dtype=np.float32)).astype(
                    np.float16
                )
            else:
                (_, size), scales, largest = BLOCKS[kind]
                blocks = self.rng.integers(0, 256, (POOL_BYTES // size, size), dtype=np.uint8)
                for at in scales:
                    d = (largest * (0.5 + 0.5 * self.rng.random(len(blocks)))).astype(np.float16)
                    blocks[:, at : at + 2] = d.view(np.uint8).reshape(-1, 2)
                self.pools[kind] = blocks
        return self.pools[kind]

    def take(self, kind: int, count: int) -> np.ndarray:
        """count items (blocks, or f16 values) of the kind's pool, cycled from this tensor's offset."""
        pool = self.pool(kind)
        self.turn += 1
        start = (self.turn * 7919) % len(pool)
        return np.resize(np.concatenate((pool[start:], pool[:start])), (count, *pool.shape[1:]))


def layout_of(t: dict) -> tuple[list[int], np.dtype, int, object]:
    """(numpy shape, dtype, bytes, raw ggml type or None) of a tensor's data: the ggml shape reversed, a block
    format's as rows of bytes."""
    shape, kind = t["shape"], t["type"]
    rows, count = [int(n) for n in reversed(shape)], int(np.prod(shape))
    if kind in (F32, F16):
        dtype = np.dtype(np.float32 if kind == F32 else np.float16)
        return rows, dtype, count * dtype.itemsize, None
    if kind not in BLOCKS:
        raise SystemExit(f"{t['name']}: no random fill for ggml type {kind}")
    (elements, size), _, _ = BLOCKS[kind]
    if shape[0] % elements:
        raise SystemExit(f"{t['name']}: rows of {shape[0]} are no multiple of type {kind}'s {elements}")
    return rows[:-1] + [shape[0] // elements * size], np.dtype(np.uint8), count // elements * size, kind


def values(t: dict, pools: Pools) -> np.ndarray:
    rows, _, nbytes, _ = layout_of(t)
    kind, count = t["type"], int(np.prod(t["shape"]))
    if kind == F32:
        data = 0.02 * pools.rng.standard_normal(count, dtype=np.float32)
        if t["name"].endswith(("norm.weight", "ln1.weight", "ln2.weight", "post_ln.weight")):
            data += 1.0
        return data.reshape(rows)
    if kind == F16:
        return pools.take(F16, count).reshape(rows)
    size = BLOCKS[kind][0][1]
    return pools.take(kind, nbytes // size).reshape(rows)


def write_gguf(layout: dict, path: Path) -> None:
    """The layout's GGUF at path (written to path.part first: a run cut short leaves no half file)."""
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter

    meta = layout["kv"]
    part = path.with_name(path.name + ".part")
    writer = GGUFWriter(part, meta["general.architecture"]["value"])
    for key, entry in meta.items():
        if key == "general.architecture":  # GGUFWriter writes it
            continue
        if entry["type"] == "array":
            writer.add_key_value(key, entry["value"], GGUFValueType.ARRAY, sub_type=GGUFValueType(entry["sub"]))
        else:
            writer.add_key_value(key, entry["value"], GGUFValueType(entry["type"]))
    for t in layout["tensors"]:  # every tensor's info goes in the header, before any data
        shape, dtype, nbytes, raw = layout_of(t)
        writer.add_tensor_info(t["name"], shape, dtype, nbytes, None if raw is None else GGMLQuantizationType(raw))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    pools = Pools()
    for t in layout["tensors"]:
        writer.write_tensor_data(values(t, pools))
    writer.close()
    part.rename(path)
