"""Rotary embedding frequencies (incl. llama3 scaling) and the per-forward cos/sin table.

Both are tiny (head_dim/2 numbers per position) and computed with the reference's float32
rounding, so RoPE matches transformers to the last bit instead of depending on a GPU's cos()."""

from __future__ import annotations

import math
import struct
from array import array

from ..errors import ModelFileError


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def inv_frequencies(rotary_dim: int, theta: float, scaling: dict | None) -> list[float]:
    base = [f32(1.0 / f32(theta ** f32(f32(i) / rotary_dim))) for i in range(0, rotary_dim, 2)]
    if scaling is None:
        return base
    kind = scaling["rope_type"]
    if kind == "llama3":
        return _llama3(base, scaling)
    if kind == "linear":
        return [f32(f / scaling["factor"]) for f in base]
    raise ModelFileError("config.json", f"unsupported rope scaling type {kind!r} (supported: default, linear, llama3)")


def _llama3(inv_freq: list[float], s: dict) -> list[float]:
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    out = []
    for f in inv_freq:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f32(f / factor))
        else:
            smooth = (old_len / wavelen - low) / (high - low)
            out.append(f32((1 - smooth) * f / factor + smooth * f))
    return out


def cos_sin_table(inv_freq: list[float], first_pos: int, rows: int) -> bytes:
    """[rows, len(inv_freq), 2] float32: (cos, sin) of the float32 angle pos * inv_freq."""
    values = array("f")
    for pos in range(first_pos, first_pos + rows):
        for f in inv_freq:
            angle = f32(pos * f)
            values.append(math.cos(angle))
            values.append(math.sin(angle))
    return values.tobytes()
