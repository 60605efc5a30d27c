"""llama.cpp's `gemma4` GGUF architecture (py_engine/formats/gguf_gemma4.py) on the Gemma 4 fixture
converted the way llama.cpp's converter writes it (tests/gguf_convert_gemma4.py; llama.cpp itself
ran that f32 file within 1.5e-3 of transformers, its GELU table's error, with the same greedy
tokens): transformers' logits and greedy tokens from the GGUF, the config transformers reads, every
tensor under its HF name with the checkpoint's values, and what the loader refuses. The
quantized conversion against its dequantized weights is test_gguf_model's; the tokenizer
test_gguf_tokenizer's. The E2B layout for the speed comparison (tools/make_gemma4_layout.py) must
read as E2B's config.
"""

import asyncio
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf_convert import convert  # noqa: E402
from gguf_convert_hybrids import load_checkpoint  # noqa: E402
from gpu_harness import device  # noqa: E402
from test_parity import run  # noqa: E402

from py_engine.errors import ModelFileError  # noqa: E402
from py_engine.formats.gguf import GGUFFile, read_gguf  # noqa: E402
from py_engine.formats.gguf_model import config_from_gguf, hf_tensors, proportional_rope  # noqa: E402
from py_engine.formats.safetensors import TensorInfo  # noqa: E402
from py_engine.models.config import config_from_hf  # noqa: E402
from py_engine.models.config_check import check_config  # noqa: E402
from py_engine.models.tensor_check import check_tensors  # noqa: E402

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SAME_FIELDS = (
    "architecture vocab_size hidden_size intermediate_size num_layers num_heads num_kv_heads head_dim "
    "global_head_dim rope_theta local_rope_theta local_rope_scaling partial_rotary_factor max_position "
    "tie_word_embeddings sliding_window layer_types final_logit_softcapping per_layer_input_size "
    "per_layer_vocab kv_shared_layers double_wide_mlp norm_weights_include_one qk_norm attention_bias"
).split()


def converted(fixture: str, tmp_path: Path, quantize=False) -> tuple[GGUFFile, Path]:
    path = convert(FIXTURES / fixture, tmp_path, quantize=quantize)
    return read_gguf(path), path


def reader(path: Path):
    data = path.read_bytes()
    return lambda start, length: data[start : start + length]


def full_config(file: GGUFFile, path: Path):
    """config_from_gguf with the RoPE read_model takes from rope_freqs.weight."""
    cfg = config_from_gguf(file)
    cfg.rope_scaling = proportional_rope(file, cfg, reader(path))
    return cfg


def test_gguf_matches_transformers(tmp_path):
    """The f32 conversion: the prompt's last logits and 16 greedy tokens (past the sliding window)."""
    path = convert(FIXTURES / "gemma4-f32", tmp_path, quantize=False)
    ref = json.loads((FIXTURES / "gemma4-f32" / "reference.json").read_text())
    logits, tokens = asyncio.run(run(path, device(False)[0], 5, ref))
    want = np.array(ref["logits"])
    assert np.abs(logits - want).max() <= 1e-3 * np.abs(want).max()
    assert tokens == ref["greedy"]


@pytest.mark.parametrize("fixture", ["gemma4-f32", "gemma4-bf16"])
def test_config_is_the_hf_config(fixture, tmp_path):
    file, path = converted(fixture, tmp_path)
    got = full_config(file, path)
    want = config_from_hf(json.loads((FIXTURES / fixture / "config.json").read_text()), fixture)
    for field in SAME_FIELDS:
        assert getattr(got, field) == getattr(want, field), field
    assert got.rms_norm_eps == pytest.approx(want.rms_norm_eps, rel=1e-6)  # stored as float32
    assert got.rope_scaling == {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    assert {k: want.rope_scaling[k] for k in got.rope_scaling} == got.rope_scaling
    assert got.rotary_dim == want.rotary_dim == 24 and not got.rope_interleaved
    assert [got.kv_owner(i) for i in range(5)] == [0, 1, 2, 1, 2]
    assert (got.bos_token_id, got.eos_token_ids) == (2, [1, 6, 7])  # not </s> (8): a normal token in Gemma 4


@pytest.mark.parametrize("fixture", ["gemma4-f32", "gemma4-bf16"])
def test_tensors_are_the_checkpoints(fixture, tmp_path):
    """Every checkpoint tensor under its HF name with its values (norms unchanged: no 1 added;
    bf16 matrices kept bf16), and nothing else but rope_freqs.weight."""
    file, path = converted(fixture, tmp_path)
    weights = load_checkpoint(FIXTURES / fixture / "model.safetensors")
    tensors = hf_tensors(file)
    assert set(tensors) == set(weights) | {"rope_freqs.weight"}
    data = path.read_bytes()
    for hf, (values, dtype) in weights.items():
        info = tensors[hf]
        assert info.dtype == (dtype if values.ndim == 2 else "F32"), hf
        raw = np.frombuffer(data[info.start : info.start + info.nbytes], np.uint8)
        stored = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[info.dtype]).reshape(values.shape)
        np.testing.assert_array_equal(stored, values, err_msg=hf)


def test_proportional_rope_comes_from_rope_freqs(tmp_path):
    """1 for the frequencies that turn, >= 1e20 for the still ones: anything else is refused, as
    is a file with full layers and no rope_freqs.weight."""
    file, path = converted("gemma4-f32", tmp_path)
    cfg, info = config_from_gguf(file), file.tensors["rope_freqs.weight"]

    def rope(values):
        data = struct.pack(f"<{len(values)}f", *values)
        return proportional_rope(file, cfg, lambda start, length: data if start == info.start else b"")

    assert rope([1.0] * 12)["partial_rotary_factor"] == 1.0
    assert rope([1.0] * 6 + [1e20] * 6)["partial_rotary_factor"] == 0.5
    for bad in ([1.0] * 3 + [1e10] * 9, [1.0, 2.0] + [1e30] * 10, [1.0] * 3 + [1e30, 1.0] + [1e30] * 7):
        with pytest.raises(ModelFileError, match="rope_freqs.weight holds"):
            rope(bad)
    del file.tensors["rope_freqs.weight"]
    with pytest.raises(ModelFileError, match="missing tensor 'rope_freqs.weight'"):
        rope([1.0] * 12)


@pytest.mark.parametrize(
    "key, value, problem",
    [
        # layer 3 (sliding) would read layer 1 in llama.cpp, layer 2 in transformers
        ("attention.sliding_window_pattern", [False, True, True, True, False], "read layer 1's KV in llama.cpp"),
        ("attention.shared_kv_layers", 4, "needs two layers with KV"),
        ("feed_forward_length", [40, 80, 40, 40, 40], "twice it in the shared-KV layers only"),
        ("rope.dimension_count_swa", 8, "sliding layers turn it all"),
        ("rope.dimension_count", 12, "full layers turn all 24"),
        ("attention.value_length_swa", 8, "differs from key_length_swa"),
        ("embedding_length_per_layer_input", None, "missing metadata key 'gemma4.embedding_length_per_layer_input'"),
    ],
)
def test_what_the_loader_refuses(key, value, problem, tmp_path):
    file, _ = converted("gemma4-f32", tmp_path)
    if value is None:
        del file.metadata["gemma4." + key]
    else:
        file.metadata["gemma4." + key] = value
    with pytest.raises(ModelFileError, match=problem):
        config_from_gguf(file)


def test_double_wide_mlp_of_the_shared_layers(tmp_path):
    file, _ = converted("gemma4-f32", tmp_path)
    file.metadata["gemma4.feed_forward_length"] = [40, 40, 40, 80, 80]
    with pytest.raises(ModelFileError, match="'blk.3.ffn_down.weight' has shape"):  # the file's are 40 wide
        config_from_gguf(file)
    for name in ("ffn_gate", "ffn_up", "ffn_down"):
        for layer in (3, 4):
            info = file.tensors[f"blk.{layer}.{name}.weight"]
            shape = (80, 48) if name != "ffn_down" else (48, 80)
            file.tensors[info.name] = TensorInfo(info.name, info.dtype, shape, info.start, info.nbytes, info.path)
    cfg = config_from_gguf(file)
    assert cfg.double_wide_mlp and [cfg.layer_intermediate(i) for i in range(5)] == [40, 40, 40, 80, 80]


def test_e2b_layout_reads_as_e2b(tmp_path):
    """tools/make_gemma4_layout.py's table, as a header: E2B's config (8 heads over 1 KV head of 256
    / 512 dims, every fifth layer full, 20 shared-KV layers reading layers 13 and 14, MLPs of 6144
    and 12288), every tensor under an HF name the checks accept, Q4_K_M's formats."""
    sys.path.insert(0, str(ROOT / "tools"))
    from make_gemma4_layout import E2B, layout

    table = layout(E2B)
    metadata = {key: entry["value"] for key, entry in table["kv"].items()}
    tensors, start = {}, 0
    for row in table["tensors"]:
        kind = {0: "F32", 30: "BF16", 12: "Q4_K", 14: "Q6_K"}[row["type"]]
        tensors[row["name"]] = TensorInfo(row["name"], kind, tuple(row["shape"][::-1]), start, row["nbytes"], "e2b")
        start += row["nbytes"]
    file = GGUFFile("e2b.gguf", 3, 32, 0, metadata, tensors)
    cfg = config_from_gguf(file)
    freqs = struct.pack("<256f", *table["tensors"][0]["values"])
    cfg.rope_scaling = proportional_rope(file, cfg, lambda start, length: freqs)
    assert (cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads) == (1536, 35, 8, 1)
    assert (cfg.head_dim, cfg.global_head_dim, cfg.per_layer_input_size, cfg.vocab_size) == (256, 512, 256, 262144)
    assert [i for i in range(35) if cfg.layer_types[i] == "full_attention"] == [4, 9, 14, 19, 24, 29, 34]
    assert {cfg.kv_owner(i) for i in range(15, 35)} == {13, 14} and cfg.rope_scaling["partial_rotary_factor"] == 0.25
    assert [cfg.layer_intermediate(i) for i in (14, 15)] == [6144, 12288] and cfg.final_logit_softcapping == 30.0
    named = hf_tensors(file)
    check_tensors(cfg, named, "e2b.gguf")
    assert len(named) == 601 and [name for name in named if not name.startswith("model.")] == ["rope_freqs.weight"]
    kinds = [info.dtype for info in tensors.values()]
    assert (kinds.count("Q6_K"), kinds.count("Q4_K"), kinds.count("BF16"), kinds.count("F32")) == (36, 281, 1, 283)
    try:
        check_config(cfg, "e2b.gguf")
    except ModelFileError as err:  # until the attention kernels take head_dim 512
        assert "global_head_dim" in str(err)
