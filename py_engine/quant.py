"""Weight formats the weight-reading kernels dequantize themselves (shaders/weights/<name>.wgsl).

Pure Python (it runs in Pyodide too). A weight matrix of N rows x K columns is uploaded exactly
as stored; this table says how many bytes that is and which K a format can hold.

- Float formats: "f32", "f16" (native f16, needs shader-f16), "f16_packed" (the same bytes read
  as u32 words: for devices without shader-f16) and "bf16". Rows are K elements back to back.
- ggml block formats, laid out as llama.cpp stores them: a row is K / block_elems blocks of
  block_bytes, rows back to back from byte 0.
- MLX affine 4-bit, "mlx4_f16" / "mlx4_bf16" (the dtype of its scales and biases), group G:
  one binding holds packed weights (N x K/8 u32 words, element k in bits 4*(k%8) of word k/8),
  then scales (N x K/G 16-bit), then biases (N x K/G 16-bit); w = scale * q + bias. A binding
  holding a slice of rows has its own three sections, with N = the rows it holds.

A binding's byte length is padded up to a multiple of 4 (the kernels read u32 words).
"""
from __future__ import annotations

from dataclasses import dataclass

MLX_GROUPS = (32, 64, 128)


@dataclass(frozen=True)
class WeightFormat:
    name: str
    block_elems: int  # a row's K must be a multiple of this (MLX: of the group instead)
    block_bytes: int
    is_float: bool
    is_mlx: bool = False

    def check_k(self, K: int, group: int = 64) -> None:
        """Raise ValueError unless rows of K elements can be stored in this format."""
        if self.is_mlx:
            if group not in MLX_GROUPS:
                raise ValueError(f"{self.name}: group size must be one of {MLX_GROUPS}, not {group}")
            if K <= 0 or K % group:
                raise ValueError(f"{self.name}: K = {K} is not a multiple of the group size {group}")
        elif K <= 0 or K % self.block_elems:
            raise ValueError(f"{self.name}: K = {K} is not a multiple of its {self.block_elems}-element block")

    def row_bytes(self, K: int, group: int = 64) -> int:
        """Bytes of one row (MLX: of its packed weights only; scales and biases are separate)."""
        self.check_k(K, group)
        return K // self.block_elems * self.block_bytes

    def matrix_bytes(self, N: int, K: int, group: int = 64) -> int:
        """Bytes of N rows, unpadded (MLX: all three sections)."""
        if self.is_mlx:
            return N * self.row_bytes(K, group) + 2 * N * (K // group) * 2
        return N * self.row_bytes(K, group)


FORMATS = {f.name: f for f in [
    WeightFormat("f32", 1, 4, True),
    WeightFormat("f16", 1, 2, True),
    WeightFormat("f16_packed", 2, 4, True),  # pairs of halves are read as one u32
    WeightFormat("bf16", 1, 2, True),
    WeightFormat("q8_0", 32, 34, False),
    WeightFormat("q4_0", 32, 18, False),
    WeightFormat("q4_1", 32, 20, False),
    WeightFormat("q5_0", 32, 22, False),
    WeightFormat("q5_1", 32, 24, False),
    WeightFormat("q4_k", 256, 144, False),
    WeightFormat("q5_k", 256, 176, False),
    WeightFormat("q6_k", 256, 210, False),
    WeightFormat("mlx4_f16", 8, 4, False, is_mlx=True),
    WeightFormat("mlx4_bf16", 8, 4, False, is_mlx=True),
]}

# GGUF tensor type names (gguf-py's GGMLQuantizationType) → our format names. "F16" maps to the
# native path; a loader on a device without shader-f16 picks "f16_packed" instead.
GGUF_TYPES = {
    "F32": "f32", "F16": "f16", "BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0", "Q4_1": "q4_1",
    "Q5_0": "q5_0", "Q5_1": "q5_1", "Q4_K": "q4_k", "Q5_K": "q5_k", "Q6_K": "q6_k",
}


def weight_format(name: str) -> WeightFormat:
    if name not in FORMATS:
        raise ValueError(f"unknown weight format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def check_k(name: str, K: int, group: int = 64) -> None:
    weight_format(name).check_k(K, group)
