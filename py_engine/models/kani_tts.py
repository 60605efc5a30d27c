"""Kani-TTS-2 (nineninesix/kani-tts-2-en: an LFM2-350M fine-tune, its license Liquid AI's LFM1.0, "other",
not Apache) as the LFM2 graph it is (models/lfm2.py), and the three things it changes there:

- frame-level positions: a text token advances the position by 1, an audio frame (its 4 tokens share
  one position) by `audio_step` (0.5 in newer models: a float position), as kani-tts-2's
  compute_frame_level_positions: position(p) = (text tokens before p) + (audio tokens before p) // 4 x
  audio_step. RoPE tables are the host's in this engine (models/rope.py), so positions cost nothing on
  the GPU: frame_positions() and rope_rows() fill a forward's table (py_engine/speech/kani_engine.py);
- learnable per-layer RoPE: each attention layer turns by the base frequencies times its own
  alpha = alpha_min + (alpha_max - alpha_min) sigmoid(alpha_weight) (LearnableRotaryEmbedding), float32
  as torch computes it: a RoPE table per attention layer (learnable_rope_table: the graph binds them;
  learnable_inv_freq: the engine fills them);
- the vocabulary above the text's (audio tokens from audio_tokens_start, tokens_per_frame codebooks of
  the codec's codebook size each) and the optional speaker embedding row: py_engine/speech/kani_*.py.
"""

from __future__ import annotations

import math
from array import array

from ..runtime.graph import Tensor
from .rope import f32

ALPHA = "model.learnable_rope_layers.{}.alpha_weight"


def rope_table_name(cfg, layer: int) -> str:
    """The RoPE table attention layer `layer` of a learnable-RoPE model reads: the builder's own
    for the first attention layer (so no table goes unbound), one of its own for each other."""
    first = next(i for i in range(cfg.num_layers) if cfg.layer_type(i) == "full_attention")
    return "cos_sin" if layer == first else f"cos_sin.{layer}"


def learnable_rope_table(b, layer: int) -> Tensor | None:
    """Attention layer `layer`'s RoPE table where the model's RoPE is learnable (Kani-TTS-2:
    ModelConfig.learnable_rope); None for plain LFM2 (the model's one table). Its frequencies are the
    base ones until the engine scales them (learnable_inv_freq): the alpha is a weight, read on the
    host at load."""
    if not b.cfg.learnable_rope:
        return None
    name = rope_table_name(b.cfg, layer)
    return b.cos_sin if name == "cos_sin" else b.rope_table(name, b.cfg.rope_theta, b.cfg.rope_scaling)


def learnable_inv_freq(base: list[float], alpha_weight: float, alpha_min: float, alpha_max: float) -> list[float]:
    """LearnableRotaryEmbedding.inv_freq: base x alpha, alpha = alpha_min + (alpha_max - alpha_min)
    sigmoid(w), each step rounded to float32 as torch computes it (python floats meet a float32 tensor
    as float32)."""
    sigmoid = f32(1.0 / (1.0 + math.exp(-alpha_weight)))
    alpha = f32(f32(f32(alpha_max - alpha_min) * sigmoid) + f32(alpha_min))
    return [f32(f * alpha) for f in base]


def frame_positions(tokens: list[int], first: int, rows: int, audio_start: int, per_frame: int, step: float):
    """The positions of cache rows first .. first + rows - 1 holding tokens[first:first + rows]:
    (text tokens before the row) + (audio tokens before it) // per_frame x step."""
    audio = sum(1 for t in tokens[:first] if t >= audio_start)
    out = []
    for p in range(first, first + rows):
        out.append((p - audio) + (audio // per_frame) * step)
        audio += tokens[p] >= audio_start
    return out


def rope_rows(inv_freq: list[float], positions: list[float]) -> bytes:
    """A RoPE table's rows ([rows, rotary_dim / 2, 2] float32 cos, sin) at these positions: the
    float32 angle f32(position x f), as Rotary.table rounds it (an f32 position times an f32
    frequency is exact in a double, so this is torch's float32 product)."""
    angles = array("f")
    for position in positions:
        angles.extend(map(float(position).__mul__, inv_freq))
    values = array("f", bytes(8 * len(angles)))
    values[0::2] = array("f", map(math.cos, angles))
    values[1::2] = array("f", map(math.sin, angles))
    return values.tobytes()
