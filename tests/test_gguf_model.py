"""GGUF models end to end on the tiny fixtures, and malformed GGUF through the CLI.

A tiny fixture is converted the way llama.cpp's converter does it (llama.cpp names, Llama Q/K rows
permuted for interleaved RoPE, matrices quantized by gguf-py to a mix of block formats, one
fused QKV spanning two formats). The same weights, dequantized by gguf-py, are saved as an f32
safetensors model. The engine must give the same logits on both: names, config, RoPE layout,
format segments and dequantization are all on the path. (The real models, against transformers,
are in test_real_models.py.)"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf_convert import convert  # noqa: E402
from gpu_harness import device  # noqa: E402
from test_gguf_reader import CASES  # noqa: E402

from py_engine.engine import Engine  # noqa: E402
from py_engine.models.builder import GraphBuilder  # noqa: E402
from py_engine.runtime import linear_plan  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
Q = gguf.GGMLQuantizationType


async def logits(path: Path, dev, ids):
    engine = await Engine.load(path, dev, max_rows=8, context=64, precision="exact")
    return engine, np.array(await engine.prompt_logits(ids))


# fixture -> block formats its GGUF must hold (Gemma's hidden 72 fits no 32-block: few are quantized)
GGUF_FIXTURES = {
    "llama-f32": {"q5_0", "q8_0", "q4_0", "q4_1", "q5_1"},
    "qwen2-f32": {"q5_0", "q8_0", "q4_0", "q4_1", "q5_1"},
    "gemma-f32": {"q4_1"},
    "gemma2-f32": {"q4_1"},
    "gemma3-f32": {"q4_1"},
    "gemma4-f32": {"q4_1"},  # gguf_gemma4.py: per-layer embeddings, KV sharing, rope_freqs
    "phi3-f32": {"q8_0", "q4_1", "q5_1", "q5_0"},
    "qwen3_5-f32": {
        "q5_0",
        "q8_0",
        "q4_0",
        "q4_1",
        "q5_1",
    },  # value heads tiled, A stored as -exp(A_log), (1 + w) norms with the 1 added
    "lfm2-f32": {"q5_0", "q8_0", "q4_0", "q4_1", "q5_1"},
}


@pytest.mark.parametrize("fixture", GGUF_FIXTURES)
def test_gguf_matches_its_dequantized_safetensors(fixture, tmp_path):
    """The prompt and 8 greedy tokens: past the sliding windows (8) and Phi-3's original context (16)."""
    path = convert(FIXTURES / fixture, tmp_path)
    ref = json.loads((FIXTURES / fixture / "reference.json").read_text())
    ids = ref["prompt_ids"] + ref["greedy"][:8]
    dev = device(False)[0]  # the f32 path: both sides compute in f32
    engine, got = asyncio.run(logits(path, dev, ids))
    _, want = asyncio.run(logits(tmp_path / "dequantized", dev, ids))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    formats = {t.dtype for t in engine.executor.graph.tensors if t.kind == "weight"}
    assert GGUF_FIXTURES[fixture] <= formats
    assert engine.cfg.rope_interleaved == (fixture.startswith("llama"))
    assert engine.rope_long == fixture.startswith("phi3")


def test_int8_prefill_near_exact(tmp_path, monkeypatch):
    """precision "fast": a 40-token prompt's forward runs its Q4_0 / Q4_1 / Q8_0 matmuls on int8
    (quantize_rows, matmul_int8; the fixture's rows are short of INT8_MATMUL_MIN_K, so the test
    lowers it), within int8's error of "exact" and not equal to it: one int8 level (the default,
    linear_plan.INT8_MATMUL_LEVELS) further from it than two."""
    monkeypatch.setattr(linear_plan, "INT8_MATMUL_MIN_K", 0)
    path = convert(FIXTURES / "llama-f32", tmp_path)
    ref = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
    ids = ((ref["prompt_ids"] + ref["greedy"]) * 4)[:40]
    dev = device(False)[0]

    async def run(precision, levels=1):
        monkeypatch.setattr(linear_plan, "INT8_MATMUL_LEVELS", levels)
        engine = await Engine.load(path, dev, max_rows=64, context=64, precision=precision)
        return engine, np.array(await engine.prompt_logits(ids))

    engine, one = asyncio.run(run("fast"))
    _, two = asyncio.run(run("fast", levels=2))
    _, exact = asyncio.run(run("exact"))
    int8_ops = [op for op in engine.executor.graph.ops if op.matmul_bind]
    assert len(int8_ops) >= 4 and "quantize_rows" in engine.executor.kernel_names(len(ids))
    err_one, err_two = (np.abs(fast - exact).max() / np.abs(exact).max() for fast in (one, two))
    assert 1e-6 < err_two < 3e-3, f"fast prefill (two int8 levels) off exact by {err_two:.2e}"
    assert 3 * err_two < err_one < 6e-2, f"fast prefill (one int8 level) off exact by {err_one:.2e}"


def test_decode_gemv_on_quantized_input_near_its_own_quantizing(tmp_path, monkeypatch):
    """precision "fast": decode-sized forwards (12 rows) whose GEMVs read x quantized once by a
    quantize_rows dispatch (gemv.wgsl Q8_INPUT; the fixture's matrices are short of
    GEMV_Q8_INPUT_WEIGHTS, so the test lowers it) give the logits of GEMVs that quantize x in
    every workgroup: the same int8 values, the RMS factor summed in another order. Where the GEMV
    before writes x in whole 32s a workgroup (the O projection, gate | up, down), it quantizes x
    itself (gemv.wgsl Q8_OUTPUT) instead of a quantize_rows dispatch: the same logits, bit for bit."""
    path = convert(FIXTURES / "llama-f32", tmp_path)
    ref = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
    ids = ((ref["prompt_ids"] + ref["greedy"]) * 2)[:12]
    dev = device(False)[0]

    async def run(threshold):
        monkeypatch.setattr(linear_plan, "GEMV_Q8_INPUT_WEIGHTS", threshold)
        engine = await Engine.load(path, dev, max_rows=16, context=64, precision="fast")
        return engine, np.array(await engine.prompt_logits(ids))

    _, in_workgroups = asyncio.run(run(linear_plan.GEMV_Q8_INPUT_WEIGHTS))
    engine, on_input = asyncio.run(run(0))
    ops = engine.executor.graph.ops
    assert sum(op.kernel == "linear" and op.defines["Q8_INPUT"] for op in ops) >= 4
    assert sum(op.kernel == "linear" and op.defines["Q8_OUTPUT"] for op in ops) >= 3
    assert engine.executor.kernel_names(len(ids)).count("quantize_rows") >= 1
    err = np.abs(on_input - in_workgroups).max() / np.abs(in_workgroups).max()
    assert err < 1e-5, f"the GEMV on quantize_rows' x off its own quantizing by {err:.2e}"
    monkeypatch.setattr(GraphBuilder, "gemv_quantizes", lambda *_: None)
    engine, by_dispatch = asyncio.run(run(0))
    assert engine.executor.kernel_names(len(ids)).count("quantize_rows") >= 4
    assert np.array_equal(on_input, by_dispatch), "the GEMV's own quantizing differs from quantize_rows'"


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "py_engine", *map(str, args)], capture_output=True, text=True, timeout=300
    )


MALFORMED = ["bad_magic", "version_1", "truncated_metadata_value", "data_past_end", "unknown_ggml_type"]


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_gguf_is_one_clear_line(case, tmp_path):
    content, problem = CASES[case]
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    result = cli("generate", "--model", path, "--ids", "1,2", "--json")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert str(path) in lines[0] and problem in lines[0]


def test_a_gguf_is_known_by_its_magic_not_its_name(tmp_path):
    """A GGUF called model.bin is read as GGUF (not taken for an HF folder); a .gguf with another
    magic still reaches the GGUF reader, which says what is wrong."""
    from py_engine.formats.source import open_source

    renamed = tmp_path / "model.bin"
    renamed.write_bytes(convert(FIXTURES / "llama-f32", tmp_path).read_bytes())
    assert open_source(renamed).kind == "gguf"
    result = cli("generate", "--model", renamed, "--ids", "1,2", "--max-new-tokens", "2", "--json")
    assert result.returncode == 0, result.stderr
    (tmp_path / "other.bin").write_bytes(b"PK\x03\x04 not a model")
    assert open_source(tmp_path / "other.bin").kind == "hf"
    (tmp_path / "bad.gguf").write_bytes(b"PK\x03\x04 not a model")
    assert open_source(tmp_path / "bad.gguf").kind == "gguf"


def test_unsupported_quant_type_is_one_clear_line(tmp_path):
    """A known ggml type we have no kernel for (Q2_K) is refused by name, not misread."""
    path = convert(FIXTURES / "qwen2-f32", tmp_path)
    data = bytearray(path.read_bytes())
    reader = gguf.GGUFReader(path)
    field = next(t for t in reader.tensors if t.name == "blk.0.attn_output.weight")
    del reader
    info_at = data.index(b"blk.0.attn_output.weight") + len("blk.0.attn_output.weight")
    type_at = info_at + 4 + 8 * len(field.shape)  # after n_dims and the dims
    data[type_at : type_at + 4] = int(Q.Q2_K).to_bytes(4, "little")
    broken = tmp_path / "q2k.gguf"
    broken.write_bytes(bytes(data))
    result = cli("generate", "--model", broken, "--ids", "1,2", "--json")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Q2_K" in lines[0] and "blk.0.attn_output.weight" in lines[0], result.stderr
