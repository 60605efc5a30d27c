"""A GGUF model's RoPE scaling as HF's rope_scaling dict: from the `<arch>.rope.scaling.*` keys,
or (Phi-3's LongRoPE) from its rope_factors_short / _long tensors. Every value is checked here,
so that the dict a ModelConfig carries is complete and the rotary tables can trust it."""

from __future__ import annotations

import math
import struct

from ..errors import ModelFileError
from .gguf import GGUFFile
from .gguf_values import Metadata

# rope.scaling.type values: those llama.cpp writes, and what we make of them.
SCALING_TYPES = ("none", "linear", "yarn", "longrope", "llama3")


def rope_scaling_from_keys(meta: Metadata, arch: str) -> dict | None:
    """HF's rope_scaling dict from the rope.scaling.* keys. Llama 3.1+ files carry their llama3
    scaling as a `rope_freqs.weight` tensor (a divisor per frequency) instead of keys; that tensor
    is kept under its own name by `hf_tensors`, and is not described here."""
    k = arch + ".rope."
    kind = meta.string(k + "scaling.type", None)
    factor = meta.number(k + "scaling.factor", None)
    if factor is not None and factor < 0:
        meta.fail(k + "scaling.factor", f"is {factor}: a scaling factor is positive (or 0 for none)")
    if kind is None:
        # Old files only have rope.scale_linear.
        linear = meta.number(k + "scale_linear", None, positive=True)
        return None if linear in (None, 1.0) else {"rope_type": "linear", "factor": linear}
    if kind not in SCALING_TYPES:
        meta.fail(k + "scaling.type", f"is {kind!r:.60}; llama.cpp knows {', '.join(SCALING_TYPES)}")
    if kind in ("none", "longrope") or (kind == "linear" and factor in (None, 0.0, 1.0)):
        return None  # LongRoPE's factors are tensors: longrope_scaling
    if not factor:
        meta.fail(k + "scaling.factor", f"is needed, and positive, for {kind} scaling")
    scaling = {"rope_type": kind, "factor": factor}
    original = meta.integer(k + "scaling.original_context_length", None, minimum=1)
    if original is not None:
        scaling["original_max_position_embeddings"] = original
    if kind == "llama3":  # not written by llama.cpp's converter (it stores rope_freqs.weight), but accepted
        if original is None:
            meta.fail(k + "scaling.original_context_length", "is needed for llama3 scaling")
        scaling["low_freq_factor"] = meta.number(k + "scaling.low_freq_factor", 1.0, positive=True)
        scaling["high_freq_factor"] = meta.number(k + "scaling.high_freq_factor", 4.0, positive=True)
        if scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
            meta.fail(k + "scaling.high_freq_factor", "should be more than rope.scaling.low_freq_factor")
    elif kind == "yarn":
        for name, hf_name in (
            ("yarn_beta_fast", "beta_fast"),
            ("yarn_beta_slow", "beta_slow"),
            ("yarn_log_multiplier", "mscale"),
        ):
            value = meta.number(f"{k}scaling.{name}", None)
            if value is not None:
                scaling[hf_name] = value
    return scaling


def longrope_scaling(gguf: GGUFFile, read) -> dict | None:
    """A Phi-3 file's LongRoPE (HF's rope_scaling dict), from its rope_factors_short / _long
    tensors (rotary_dim / 2 positive floats each, read with read(start, length); their length is
    checked against the config by gguf_tensor_check) and rope.scaling keys; None without those
    tensors. The attention factor defaults to 1, as llama.cpp's does."""
    tensors, meta = gguf.tensors, Metadata(gguf.metadata, gguf.path)
    if "rope_factors_long.weight" not in tensors or "rope_factors_short.weight" not in tensors:
        return None
    factors = {}
    for which in ("short", "long"):
        name = f"rope_factors_{which}.weight"
        info = tensors[name]
        if info.dtype != "F32" or len(info.shape) != 1:
            raise ModelFileError(gguf.path, f"{name} should be a 1-D F32 tensor, not {info.dtype} {list(info.shape)}")
        data = read(info.start, info.nbytes)
        if len(data) != 4 * info.shape[0]:
            raise ModelFileError(gguf.path, f"{name}: read {len(data)} bytes of {4 * info.shape[0]}: truncated")
        values = list(struct.unpack(f"<{info.shape[0]}f", data))
        bad = next((v for v in values if not (math.isfinite(v) and v > 0)), None)
        if bad is not None:
            raise ModelFileError(gguf.path, f"{name} holds {bad}: RoPE factors are positive numbers")
        factors[which] = values
    if len(factors["short"]) != len(factors["long"]):
        raise ModelFileError(gguf.path, "rope_factors_short.weight and rope_factors_long.weight differ in length")
    arch = meta.string("general.architecture")
    context = meta.integer(f"{arch}.context_length", minimum=1)
    original = meta.integer(f"{arch}.rope.scaling.original_context_length", context, minimum=1)
    return {
        "rope_type": "longrope",
        "short_factor": factors["short"],
        "long_factor": factors["long"],
        "original_max_position_embeddings": original,
        "attention_factor": meta.number(f"{arch}.rope.scaling.attn_factor", 1.0, positive=True),
    }
