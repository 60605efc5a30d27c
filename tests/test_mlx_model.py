"""MLX affine 4-bit safetensors end to end on the tiny fixtures.

The fixture is quantized the way mlx-lm does it (every linear layer and embedding whose input
width is a multiple of the group: w ≈ scale * q + bias per group, 8 nibbles per uint32 word,
`quantization` in config.json); the same weights, dequantized, are saved as f32 safetensors. The
engine must give the same logits on both."""

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device
from safetensors.numpy import load_file, save_file

from py_engine.engine import Engine
from py_engine.errors import ModelFileError

FIXTURES = Path(__file__).parent / "fixtures"


def round_to(values: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(stored array, its float32 value): f16 as is, bf16 as uint16 bits (numpy has no bf16)."""
    if dtype == "f16":
        stored = values.astype(np.float16)
        return stored, stored.astype(np.float32)
    bits = values.astype(np.float32).view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def quantize(w: np.ndarray, group: int, dtype: str):
    n, k = w.shape
    g = w.reshape(n, k // group, group)
    lo, hi = g.min(-1), g.max(-1)
    scales, scale_values = round_to(np.maximum(hi - lo, 1e-8) / 15, dtype)
    biases, bias_values = round_to(lo, dtype)
    q = np.clip(np.round((g - bias_values[..., None]) / scale_values[..., None]), 0, 15).astype(np.uint32)
    packed = np.zeros((n, k // 8), np.uint32)
    flat = q.reshape(n, k // 8, 8)
    for j in range(8):
        packed |= flat[..., j] << (4 * j)
    restored = (scale_values[..., None] * q + bias_values[..., None]).reshape(n, k).astype(np.float32)
    return packed, scales, biases, restored


def convert(fixture: Path, out: Path, group: int, dtype: str) -> tuple[Path, Path]:
    mlx, plain = out / "mlx", out / "dequantized"
    shutil.copytree(fixture, plain)
    mlx.mkdir()
    cfg = json.loads((fixture / "config.json").read_text())
    quantized, dequantized = {}, {}
    for name, w in load_file(fixture / "model.safetensors").items():
        w = w.astype(np.float32)
        if w.ndim == 2 and w.shape[1] % group == 0:
            base = name[: -len(".weight")]
            packed, scales, biases, restored = quantize(w, group, dtype)
            quantized.update({name: packed, base + ".scales": scales, base + ".biases": biases})
            dequantized[name] = restored
        else:
            quantized[name] = dequantized[name] = w
    if dtype == "bf16":  # safetensors.numpy can't write bf16: write uint16 bits, then relabel the header
        save_file(quantized, mlx / "model.safetensors")
        relabel_bf16(mlx / "model.safetensors")
    else:
        save_file(quantized, mlx / "model.safetensors")
    (mlx / "config.json").write_text(json.dumps(dict(cfg, quantization={"group_size": group, "bits": 4})))
    save_file(dequantized, plain / "model.safetensors")
    return mlx, plain


def relabel_bf16(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    for name, entry in header.items():
        if name.endswith((".scales", ".biases")):
            entry["dtype"] = "BF16"
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + size :])


async def logits(path: Path, dev, ids):
    engine = await Engine.load(path, dev, max_rows=8, context=64, precision="exact")
    return engine, np.array(await engine.prompt_logits(ids))


@pytest.mark.parametrize(
    "fixture,group,dtype",
    [("qwen3-f32", 64, "bf16"), ("llama-f32", 32, "f16"), ("gemma3-f32", 32, "bf16"), ("phi3-f32", 32, "f16")],
)
def test_mlx_matches_its_dequantized_safetensors(fixture, group, dtype, tmp_path):
    mlx, plain = convert(FIXTURES / fixture, tmp_path, group, dtype)
    ids = json.loads((FIXTURES / fixture / "reference.json").read_text())["prompt_ids"]
    dev = device(False)[0]
    engine, got = asyncio.run(logits(mlx, dev, ids))
    _, want = asyncio.run(logits(plain, dev, ids))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert f"mlx4_{dtype}" in {t.dtype for t in engine.executor.graph.tensors if t.kind == "weight"}


def test_mlx_other_bits_refused(tmp_path):
    mlx, _ = convert(FIXTURES / "qwen3-f32", tmp_path, 64, "f16")
    cfg = json.loads((mlx / "config.json").read_text())
    (mlx / "config.json").write_text(json.dumps(dict(cfg, quantization={"group_size": 64, "bits": 3})))
    with pytest.raises(ModelFileError, match="bits=3"):
        asyncio.run(logits(mlx, device(False)[0], [1, 2]))
