"""Rotary embedding frequencies (default, linear, llama3, longrope, proportional) and the per-forward cos/sin
table.

Both are tiny (rotary_dim / 2 numbers per position) and computed with the reference's float32
rounding, so RoPE matches transformers to the last bit instead of depending on a GPU's cos()."""

from __future__ import annotations

import math
import struct
from array import array

from ..errors import ModelFileError

SCALINGS = ("default", "linear", "llama3", "longrope", "proportional")


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Rotary:
    """One RoPE variant of a model (Gemma 3 has two: its sliding layers' and its full layers').
    table(first_pos, rows, long) is the cos/sin input of a forward over those positions; long
    (LongRoPE only) picks the long factors, which the engine uses for every key in its cache once
    a sequence is longer than long_after positions."""

    def __init__(
        self, rotary_dim: int, theta: float, scaling: dict | None, source="config.json", mrope_section: tuple = ()
    ):
        self.rotary_dim = rotary_dim
        # Qwen3.5's multimodal RoPE (Qwen3_5TextRotaryEmbedding): frequency i turns by the row position
        # where i % 3 == 1 and i < 3 * section[1], by the column where i % 3 == 2 and i < 3 * section[2],
        # else by the temporal one; None: plain positions only.
        self.streams = [_mrope_stream(i, mrope_section) for i in range(rotary_dim // 2)] if mrope_section else None
        exponents = [f32(f32(i) / rotary_dim) for i in range(0, rotary_dim, 2)]
        powers = [f32(theta**e) for e in exponents]
        base = [f32(1.0 / p) for p in powers]
        self.inv_freq, self.long_inv_freq, self.long_after, self.scale = base, None, None, 1.0
        kind = scaling["rope_type"] if scaling else "default"
        if kind == "llama3":
            self.inv_freq = _llama3(base, scaling)
        elif kind == "linear":
            self.inv_freq = [f32(f / scaling["factor"]) for f in base]
        elif kind == "longrope":
            self._longrope(powers, scaling, source)
        elif kind == "proportional":
            # Gemma 4's full layers: the first partial_rotary_factor of the frequencies, over the
            # whole head's denominator (not the turned dims' as partial rotary's), the rest still
            # (0: cos 1, sin 0), so dims i and i + head_dim / 2 pair as in a full rotation.
            turned = int(scaling.get("partial_rotary_factor", 1.0) * rotary_dim // 2)
            factor = scaling.get("factor", 1.0)
            self.inv_freq = [f32(f / factor) for f in base[:turned]] + [0.0] * (len(base) - turned)
        elif kind != "default":
            raise ModelFileError(source, f"unsupported rope scaling type {kind!r} (supported: {', '.join(SCALINGS)})")

    def _longrope(self, powers: list[float], s: dict, source) -> None:
        """Phi-3's LongRoPE as transformers computes it: frequencies divided by the short factors,
        or by the long ones for a sequence longer than the original context; cos and sin scaled by
        the attention factor either way."""
        half = len(powers)
        short, long = s.get("short_factor"), s.get("long_factor")
        original = s.get("original_max_position_embeddings") or 0
        for name, factors in (("short_factor", short), ("long_factor", long)):
            if not isinstance(factors, list) or len(factors) != half:
                raise ModelFileError(source, f"longrope {name} must be a list of {half} numbers")
        if original <= 0:
            raise ModelFileError(source, "longrope needs original_max_position_embeddings")
        self.inv_freq = [f32(1.0 / f32(f32(float(f)) * p)) for f, p in zip(short, powers)]
        self.long_inv_freq = [f32(1.0 / f32(f32(float(f)) * p)) for f, p in zip(long, powers)]
        self.long_after = original
        factor = s.get("factor") or s.get("max_position_embeddings", original) / original
        attention = s.get("attention_factor")
        if attention is None:
            attention = math.sqrt(1 + math.log(factor) / math.log(original)) if factor > 1 else 1.0
        self.scale = f32(attention)

    def table(self, first_pos: int, rows: int, long: bool = False) -> bytes:
        """[rows, rotary_dim / 2, 2] float32: (cos, sin) of the float32 angle pos * inv_freq."""
        inv_freq = self.long_inv_freq if long and self.long_inv_freq is not None else self.inv_freq
        # An array("f") rounds each angle to float32 as it stores it, and map() runs the products,
        # cos and sin at C speed: a prompt's 512 rows of the 8B took 10.5 ms one angle at a time in
        # Python (f32() through struct), host time in a forward that takes ~170 on an H200.
        angles = array("f")
        for pos in range(first_pos, first_pos + rows):
            angles.extend(map(float(pos).__mul__, inv_freq))  # pos * f, as a double, then stored as f32
        values = array("f", bytes(8 * len(angles)))
        values[0::2] = array("f", map(math.cos, angles))
        values[1::2] = array("f", map(math.sin, angles))
        if self.scale != 1.0:  # LongRoPE's attention factor: f32(cos) * f32(scale), as transformers rounds it
            values = array("f", [v * self.scale for v in values])
        return values.tobytes()

    def table_at(self, positions: list[tuple[int, int, int]]) -> bytes:
        """table's [rows, rotary_dim / 2, 2] float32 for rows at multimodal positions (t, h, w): frequency
        i turns by the angle f32(positions[r][streams[i]] * inv_freq[i]), as transformers computes it."""
        if self.streams is None or self.long_inv_freq is not None or self.scale != 1.0:
            raise ValueError("multimodal positions need a plain RoPE with mrope_section")
        angles = array("f")
        pairs = list(zip(self.streams, self.inv_freq))
        for at in positions:
            angles.extend([float(at[s]) * f for s, f in pairs])
        values = array("f", bytes(8 * len(angles)))
        values[0::2] = array("f", map(math.cos, angles))
        values[1::2] = array("f", map(math.sin, angles))
        return values.tobytes()

    @property
    def row_bytes(self) -> int:
        return self.rotary_dim * 4


def _mrope_stream(i: int, sections: tuple) -> int:
    """The position (0 temporal, 1 row, 2 column) that frequency i turns by (Rotary.streams)."""
    if i % 3 == 1 and i < 3 * sections[1]:
        return 1
    if i % 3 == 2 and i < 3 * sections[2]:
        return 2
    return 0


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
