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
from gpu_harness import device  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402
from test_gguf_reader import CASES  # noqa: E402

from py_engine.engine import Engine  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
Q = gguf.GGMLQuantizationType
# Per llama.cpp tensor kind: a mix of block formats (ffn_down's K = 112 fits no 32-block: F16).
TYPES = {
    "token_embd": Q.Q5_0,
    "attn_q": Q.Q8_0,
    "attn_k": Q.Q8_0,
    "attn_v": Q.Q4_0,
    "attn_output": Q.Q4_1,
    "ffn_gate": Q.Q5_1,
    "ffn_up": Q.Q5_1,
    "ffn_down": Q.F16,
    "output": Q.Q8_0,
}
HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def gguf_name(hf: str) -> str:
    if hf.startswith("model.layers."):
        _, _, layer, rest = hf.split(".", 3)
        module, kind = rest.rsplit(".", 1)
        return f"blk.{layer}.{HF_TO_GGUF[module]}.{kind}"
    return {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }[hf]


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter: each head's rows reordered so RoPE pairs are adjacent."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert(fixture: Path, out: Path) -> Path:
    """Write out/model.gguf and, with the dequantized weights, out/dequantized/ (f32 safetensors)."""
    cfg = json.loads((fixture / "config.json").read_text())
    arch = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}[cfg["architectures"][0]]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    writer = gguf.GGUFWriter(out / "model.gguf", arch)
    writer.add_block_count(cfg["num_hidden_layers"])
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    writer.add_rope_freq_base(theta)
    writer.add_vocab_size(cfg["vocab_size"])
    dequantized = {}
    for hf, w in load_file(fixture / "model.safetensors").items():
        name = gguf_name(hf)
        w = w.astype(np.float32)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            w = permute(w, heads if "attn_q" in name else kv_heads)
        qtype = TYPES.get(name.split(".")[-2], Q.F32) if w.ndim == 2 else Q.F32
        data = gguf.quants.quantize(w, qtype)
        writer.add_tensor(name, data, raw_dtype=qtype)
        restored = gguf.quants.dequantize(data, qtype).reshape(w.shape).astype(np.float32)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            restored = unpermute(restored, heads if "attn_q" in name else kv_heads).copy()
        dequantized[hf] = restored
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    plain = out / "dequantized"
    plain.mkdir()
    cfg["rope_parameters"] = {"rope_theta": theta, "rope_type": "default"}  # GGUF keeps llama3 scaling elsewhere
    (plain / "config.json").write_text(json.dumps(cfg))
    save_file(dequantized, plain / "model.safetensors")
    return out / "model.gguf"


async def logits(path: Path, dev, ids):
    engine = await Engine.load(path, dev, max_rows=8, context=64)
    return engine, np.array(await engine.prompt_logits(ids))


@pytest.mark.parametrize("fixture", ["llama-f32", "qwen2-f32"])
def test_gguf_matches_its_dequantized_safetensors(fixture, tmp_path):
    path = convert(FIXTURES / fixture, tmp_path)
    ids = json.loads((FIXTURES / fixture / "reference.json").read_text())["prompt_ids"]
    dev = device(False)[0]  # the f32 path: both sides compute in f32
    engine, got = asyncio.run(logits(path, dev, ids))
    _, want = asyncio.run(logits(tmp_path / "dequantized", dev, ids))
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    formats = {t.dtype for t in engine.executor.graph.tensors if t.kind == "weight"}
    assert {"q5_0", "q8_0", "q4_0", "q4_1", "q5_1"} <= formats
    assert engine.cfg.rope_interleaved == (fixture.startswith("llama"))


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
