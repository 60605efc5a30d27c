"""Rotary.table (py_engine/models/rope.py), the cos/sin input of every forward, against numpy: the
float32 angle pos * inv_freq (one rounding of the exact product, as transformers' float32 matmul
gives it), its cos and sin rounded to float32, interleaved; LongRoPE's long factors and attention
scale; positions past 2^24, where float32 no longer holds every integer."""

import numpy as np
import pytest

from py_engine.models.rope import Rotary

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}  # fmt: skip
LONGROPE = {"rope_type": "longrope", "short_factor": [1.0 + i / 100 for i in range(48)],
            "long_factor": [2.0 + i / 50 for i in range(48)], "original_max_position_embeddings": 4096,
            "max_position_embeddings": 131072}  # fmt: skip


@pytest.mark.parametrize("rotary_dim,theta,scaling", [(64, 1e5, None), (128, 5e5, LLAMA3), (96, 1e4, LONGROPE)])
@pytest.mark.parametrize("first,rows,long", [(0, 1, False), (4000, 512, False), (5, 300, True), (2**24 + 3, 7, False)])
def test_table_is_numpys_float32(rotary_dim, theta, scaling, first, rows, long):
    rotary = Rotary(rotary_dim, theta, scaling)
    inv_freq = rotary.long_inv_freq if long and rotary.long_inv_freq is not None else rotary.inv_freq
    positions = np.arange(first, first + rows, dtype=np.float64)[:, None]
    angles = (positions * np.array(inv_freq, np.float64)[None, :]).astype(np.float32).astype(np.float64)
    want = np.stack([np.cos(angles), np.sin(angles)], -1).astype(np.float32)
    if rotary.scale != 1.0:
        want = (want.astype(np.float64) * rotary.scale).astype(np.float32)
    got = np.frombuffer(rotary.table(first, rows, long), np.float32).reshape(rows, rotary_dim // 2, 2)
    assert got.tobytes() == want.tobytes()


def test_multimodal_table():
    """Qwen3.5's interleaved MRoPE (Rotary.table_at): frequency i turns by t, h or w as
    Qwen3_5TextRotaryEmbedding assigns them; where the three positions are equal, the plain table's bytes."""
    rotary = Rotary(64, 1e7, None, mrope_section=(11, 11, 10))
    assert rotary.streams[:6] == [0, 1, 2, 0, 1, 2] and rotary.streams[-3:] == [2, 0, 1]
    assert rotary.streams.count(1) == 11 and rotary.streams.count(2) == 10
    assert rotary.table_at([(p, p, p) for p in range(40, 47)]) == rotary.table(40, 7)
    got = np.frombuffer(rotary.table_at([(5, 9, 2)]), np.float32).reshape(32, 2)
    angles = np.array([(5, 9, 2)[s] * f for s, f in zip(rotary.streams, rotary.inv_freq)]).astype(np.float32)
    assert (
        got.tobytes()
        == np.stack([np.cos(angles.astype(np.float64)), np.sin(angles.astype(np.float64))], -1)
        .astype(np.float32)
        .tobytes()
    )
