"""Random weight matrices in every format of py_engine/runtime/quant.py, as stored, with their float32
dequantization as reference: gguf-py's for the ggml formats, numpy for the others."""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from py_engine.runtime.quant import weight_format

# Byte offsets of the f16 scale fields in a ggml block. Random bytes there could be inf / NaN or
# absurdly large, so they are drawn as sensible f16 values instead; every other byte is random.
F16_FIELDS = {
    "q8_0": (0,),
    "q4_0": (0,),
    "q4_1": (0, 2),
    "q5_0": (0,),
    "q5_1": (0, 2),
    "q4_k": (0, 2),
    "q5_k": (0, 2),
    "q6_k": (208,),
}


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """The top 16 bits of float32 values (truncated: any bf16 will do as test data)."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


class QuantMatrix:
    """N x K weights in format `fmt`. raw(start, stop) is the binding for rows start .. stop (for
    MLX its own three sections); ref is the float32 dequantization of all rows."""

    def __init__(self, fmt: str, N: int, K: int, rng: np.random.Generator, group: int = 64):
        self.fmt, self.N, self.K, self.group = fmt, N, K, group
        info = weight_format(fmt)
        info.check_k(K, group)
        if fmt == "f32":
            self._rows = rng.standard_normal((N, K), dtype=np.float32)
            self.ref = self._rows.copy()
        elif fmt in ("f16", "f16_packed"):
            self._rows = rng.standard_normal((N, K)).astype(np.float16)
            self.ref = self._rows.astype(np.float32)
        elif fmt == "bf16":
            self._rows = bf16_bits(rng.standard_normal((N, K)))
            self.ref = bf16_value(self._rows)
        elif info.is_mlx:
            self._init_mlx(rng)
        else:
            blocks = K // info.block_elems
            raw = rng.integers(0, 256, (N, blocks, info.block_bytes), dtype=np.uint8)
            for at in F16_FIELDS[fmt]:
                raw[..., at : at + 2] = rng.normal(0, 0.01, (N, blocks, 1)).astype(np.float16).view(np.uint8)
            self._rows = raw.reshape(N, -1)
            self.ref = dequantize(self._rows, GGMLQuantizationType[fmt.upper()])
        assert self.ref.shape == (N, K) and self.ref.dtype == np.float32

    def _init_mlx(self, rng):
        N, K, G = self.N, self.K, self.group
        q = rng.integers(0, 16, (N, K), dtype=np.uint32)
        words = np.zeros((N, K // 8), np.uint32)
        for i in range(8):  # weight k sits in bits 4 (k % 8) of word k / 8
            words |= q[:, i::8] << np.uint32(4 * i)
        scales = rng.normal(0, 0.02, (N, K // G))
        biases = rng.normal(0, 0.1, (N, K // G))
        if self.fmt == "mlx4_f16":
            half = lambda v: v.astype(np.float16)  # noqa: E731
            value = lambda h: h.astype(np.float32)  # noqa: E731
        else:
            half, value = bf16_bits, bf16_value
        self._words, self._scales, self._biases = words, half(scales), half(biases)
        s = np.repeat(value(self._scales), G, axis=1)
        b = np.repeat(value(self._biases), G, axis=1)
        self.ref = s * q.astype(np.float32) + b  # float32, in MLX's order

    def raw(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        rows = slice(start, self.N if stop is None else stop)
        if weight_format(self.fmt).is_mlx:
            parts = (self._words[rows], self._scales[rows], self._biases[rows])
            return np.concatenate([np.ascontiguousarray(a).view(np.uint8).ravel() for a in parts])
        return np.ascontiguousarray(self._rows[rows]).view(np.uint8).ravel()


def repack_reference(raw: np.ndarray, fmt: str) -> np.ndarray:
    """quant.py's repacked layout, in numpy: chunks of REPACK_CHUNK blocks, each field of a
    chunk's blocks stored together, fields in `repack` order. Formats without one: unchanged."""
    from py_engine.runtime.quant import FORMATS, REPACK_CHUNK

    info = FORMATS[fmt]
    if not info.repack:
        return raw
    blocks = raw.size // info.block_bytes
    stored = raw[: blocks * info.block_bytes].reshape(blocks, info.block_bytes)
    out = []
    for first in range(0, blocks, REPACK_CHUNK):
        chunk = stored[first : first + REPACK_CHUNK]
        out += [chunk[:, offset : offset + size].ravel() for offset, size in info.repack]
    return np.concatenate(out + [raw[blocks * info.block_bytes :]])


def int8_activations(x: np.ndarray, levels: int = 2) -> np.ndarray:
    """shaders/gemv.wgsl's Q8_ACT quantization of float32 activations [rows, K], per 32 along K,
    in float64: s = 2^(e - 6) for max |x| = f * 2^e (f in [0.5, 1)), t = x / s, q1 = round(t),
    q2 = round((t - q1) * 254) (ties to even, as WGSL's round; float32, exact but for the one
    rounded product, as the GPU computes them), x ~ (s / 254) * (254 q1 + q2): what the int8
    GEMV multiplies, bit for bit. levels=1: quantize_rows.wgsl's one level (X_LEVELS 1, llama.cpp's
    q8_1), q1 = round(x * (127 / max |x|)) in float32, x ~ (max |x| / 127) * q1."""
    blocks = x.astype(np.float32).reshape(*x.shape[:-1], -1, 32)
    if levels == 1:
        top = np.abs(blocks).max(-1, keepdims=True)
        inv = np.divide(np.float32(127), top, out=np.zeros_like(top), where=top > 0)
        q1 = np.clip(np.round(blocks * inv), -127, 127)
        return (top.astype(np.float64) / 127 * q1).reshape(x.shape)
    exp = np.maximum(np.frexp(np.abs(blocks).max(-1, keepdims=True))[1], -100)
    t = blocks * np.ldexp(np.float32(1), 6 - exp).astype(np.float32)
    q1 = np.round(t)
    q2 = np.round((t - q1) * np.float32(254))
    value = np.ldexp(1.0, exp - 6) / 254 * (254 * q1.astype(np.float64) + q2)
    return value.reshape(x.shape)
