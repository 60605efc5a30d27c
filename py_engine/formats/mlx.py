"""MLX affine-quantized safetensors (mlx-lm's `quantization: {bits, group_size}` in config.json).

A quantized linear layer `X` is stored as three tensors: `X.weight` (uint32, [N, K * bits / 32],
eight 4-bit values per word, lowest bits first), `X.scales` and `X.biases` ([N, K / group], the
model's float dtype); w = scale * q + bias. Here the three become one logical tensor of shape
[N, K] whose dtype names the format, so the graph builder treats it like any other weight and the
uploader copies the three byte ranges to the GPU as they are (see shaders/weights/mlx4_*.wgsl).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError
from .safetensors import TensorInfo

SCALE_DTYPES = {"F16": "MLX4_F16", "BF16": "MLX4_BF16"}
GROUP_SIZES = (32, 64, 128)


@dataclass(frozen=True)
class MlxQuantized:
    name: str
    dtype: str  # "MLX4_F16" | "MLX4_BF16"
    shape: tuple  # logical [N, K]
    group: int
    packed: TensorInfo
    scales: TensorInfo
    biases: TensorInfo
    path: str

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales.nbytes + self.biases.nbytes


def mlx_tensors(tensors: dict, quantization, config_path) -> dict:
    """`tensors` with every (weight, scales, biases) triple replaced by one MlxQuantized."""
    if not isinstance(quantization, dict):
        raise ModelFileError(config_path, f"quantization should be an object, got {quantization!r}")
    bits, group = quantization.get("bits"), quantization.get("group_size", 64)
    if not _is_int(bits) or not _is_int(group) or bits != 4 or group not in GROUP_SIZES:
        raise ModelFileError(
            config_path,
            f"MLX quantization bits={bits!r} group_size={group!r} is not supported "
            f"(supported: bits 4, group_size {', '.join(map(str, GROUP_SIZES))})",
        )
    out = dict(tensors)
    for name, scales in tensors.items():
        if not name.endswith(".scales"):
            continue
        base = name[: -len(".scales")]
        packed, biases = tensors.get(base + ".weight"), tensors.get(base + ".biases")
        if packed is None or biases is None:
            raise ModelFileError(scales.path, f"{name} has no matching {base}.weight and {base}.biases")
        n, words = packed.shape if len(packed.shape) == 2 else (0, 0)
        k = words * 8
        if (
            packed.dtype != "U32"
            or n <= 0
            or words <= 0
            or k % group
            or scales.dtype not in SCALE_DTYPES
            or biases.dtype != scales.dtype
            or scales.shape != (n, k // group)
            or biases.shape != scales.shape
        ):
            raise ModelFileError(
                packed.path,
                f"{base}: weight {packed.dtype}{list(packed.shape)}, scales "
                f"{scales.dtype}{list(scales.shape)}, biases {biases.dtype}"
                f"{list(biases.shape)} are not MLX 4-bit with group {group}",
            )
        for suffix in (".weight", ".scales", ".biases"):
            del out[base + suffix]
        out[base + ".weight"] = MlxQuantized(
            base + ".weight", SCALE_DTYPES[scales.dtype], (n, k), group, packed, scales, biases, packed.path
        )
    return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
