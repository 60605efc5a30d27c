"""Weight formats the weight-reading kernels dequantize themselves (shaders/weights/<name>.wgsl).

Pure Python (it runs in Pyodide too). A weight matrix of N rows x K columns is uploaded exactly
as stored; this table says how many bytes that is and which K a format can hold.

- Float formats: "f32", "f16" (native f16, needs shader-f16), "f16_packed" (the same bytes read
  as u32 words: for devices without shader-f16) and "bf16". Rows are K elements back to back.
- ggml block formats, uploaded as llama.cpp stores them: a row is K / block_elems blocks of
  block_bytes, rows back to back from byte 0. Formats whose blocks are not 16-byte multiples
  (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q6_K) are then repacked on the GPU, in place, by
  shaders/repack.wgsl: the binding's blocks, counted over all its rows, form chunks of
  REPACK_CHUNK blocks, and a chunk stores each field of its blocks apart (all quants, then all
  scales, ...), in the order of `repack`. A chunk of 8 even-sized blocks is a 16-byte multiple,
  so the quants of every block start 16-byte aligned; the last chunk may hold fewer blocks.
  Q4_K and Q5_K blocks (144 and 176 bytes) are already 16-byte multiples and stay as stored.
- MLX affine 4-bit, "mlx4_f16" / "mlx4_bf16" (the dtype of its scales and biases), group G:
  one binding holds packed weights (N x K/8 u32 words, element k in bits 4*(k%8) of word k/8),
  then scales (N x K/G 16-bit), then biases (N x K/G 16-bit); w = scale * q + bias. A binding
  holding a slice of rows has its own three sections, with N = the rows it holds.

A binding's byte length is padded up to a multiple of 16 (the kernels read 16-byte words).
"""

from __future__ import annotations

from dataclasses import dataclass

MLX_GROUPS = (32, 64, 128)
REPACK_CHUNK = 8  # blocks per repacked chunk; keep in step with shaders/repack.wgsl and the snippets


@dataclass(frozen=True)
class WeightFormat:
    name: str
    block_elems: int  # a row's K must be a multiple of this (MLX: of the group instead)
    block_bytes: int
    is_float: bool
    is_mlx: bool = False
    # w = scale * q + offset with an offset per block (a min or bias): the GEMV weighs it by the
    # x sum of each 32 weights, which it sums once per staged chunk (gemv.wgsl X_SUMS).
    has_offset: bool = False
    # The repacked chunk's fields in order, each (byte offset in the stored block, bytes); () = as stored.
    repack: tuple = ()

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


FORMATS = {
    f.name: f
    for f in [
        WeightFormat("f32", 1, 4, True),
        WeightFormat("f16", 1, 2, True),
        WeightFormat("f16_packed", 2, 4, True),  # pairs of halves are read as one u32
        WeightFormat("bf16", 1, 2, True),
        WeightFormat("q8_0", 32, 34, False, repack=((2, 32), (0, 2))),  # quants, d
        WeightFormat("q4_0", 32, 18, False, repack=((2, 16), (0, 2))),  # quants, d
        WeightFormat("q4_1", 32, 20, False, has_offset=True, repack=((4, 16), (0, 4))),  # quants, d|m
        WeightFormat("q5_0", 32, 22, False, repack=((6, 16), (2, 4), (0, 2))),  # low nibbles, high bits, d
        WeightFormat(
            "q5_1", 32, 24, False, has_offset=True, repack=((8, 16), (4, 4), (0, 4))
        ),  # low nibbles, high bits, d|m
        WeightFormat("q4_k", 256, 144, False, has_offset=True),
        WeightFormat("q5_k", 256, 176, False, has_offset=True),
        WeightFormat("q6_k", 256, 210, False, repack=((0, 128), (128, 64), (192, 16), (208, 2))),  # ql, qh, scales, d
        WeightFormat("mlx4_f16", 8, 4, False, is_mlx=True, has_offset=True),
        WeightFormat("mlx4_bf16", 8, 4, False, is_mlx=True, has_offset=True),
    ]
}

# GGUF tensor type names (gguf-py's GGMLQuantizationType) → our format names. "F16" maps to the
# native path; a loader on a device without shader-f16 picks "f16_packed" instead.
GGUF_TYPES = {
    "F32": "f32",
    "F16": "f16",
    "BF16": "bf16",
    "Q8_0": "q8_0",
    "Q4_0": "q4_0",
    "Q4_1": "q4_1",
    "Q5_0": "q5_0",
    "Q5_1": "q5_1",
    "Q4_K": "q4_k",
    "Q5_K": "q5_k",
    "Q6_K": "q6_k",
}


def weight_format(name: str) -> WeightFormat:
    if name not in FORMATS:
        raise ValueError(f"unknown weight format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]
