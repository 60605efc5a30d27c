"""llama.cpp's hybrid GGUF architectures, qwen35 (Qwen3.5) and lfm2 (LFM2), read as the HF models:
the hybrid fixtures converted the way llama.cpp's converter does it (tests/gguf_convert_hybrids.py)
must give the HF config, every tensor the graph reads under its HF name, and the checkpoint's
values once the converter's documented transforms are undone here in numpy (the engine never
undoes them: the config's flags tell the kernels). Plus the two pre-tokenizers. No GPU needed.
"""

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf_convert import convert  # noqa: E402
from gguf_convert_hybrids import load_checkpoint, write_metadata  # noqa: E402
from gguf_synthetic import byte_level_tokenizer, write_gguf  # noqa: E402

from py_engine.errors import ModelFileError  # noqa: E402
from py_engine.formats.gguf import read_gguf  # noqa: E402
from py_engine.formats.gguf_hybrids import value_heads_tiled  # noqa: E402
from py_engine.formats.gguf_model import config_from_gguf, hf_tensors  # noqa: E402
from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf  # noqa: E402
from py_engine.models.config import config_from_hf  # noqa: E402
from py_engine.tokenizer.llama.pre import PRE_TOKENIZERS, SPLITS  # noqa: E402
from py_engine.tokenizer.llama.split import Splitter  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
HYBRIDS = [f"{family}-{dtype}" for family in ("qwen3_5", "lfm2") for dtype in ("f32", "bf16", "f16")]
SAME_FIELDS = (
    "architecture vocab_size hidden_size num_layers num_heads num_kv_heads head_dim rope_theta "
    "partial_rotary_factor max_position tie_word_embeddings sliding_window attention_bias layer_types "
    "linear_key_heads linear_value_heads linear_key_head_dim linear_value_head_dim conv_kernel conv_bias"
).split()
F32_ALWAYS = ("norm.weight", "conv1d.weight", "conv.conv.weight", ".A_log", ".dt_bias")


def converted(fixture: str, tmp_path: Path, quantize=False):
    path = convert(FIXTURES / fixture, tmp_path, quantize=quantize)
    hf_cfg = json.loads((FIXTURES / fixture / "config.json").read_text())
    return read_gguf(path), hf_cfg, load_checkpoint(FIXTURES / fixture / "model.safetensors")


@pytest.mark.parametrize("fixture", HYBRIDS)
def test_config_is_the_hf_config_with_the_gguf_flags(fixture, tmp_path):
    file, raw, weights = converted(fixture, tmp_path)
    got, want = config_from_gguf(file), config_from_hf(raw, fixture)
    for field in SAME_FIELDS:
        assert getattr(got, field) == getattr(want, field), field
    assert got.rms_norm_eps == pytest.approx(want.rms_norm_eps, rel=1e-6)  # stored as float32
    # LFM2's converter stores the auto-adjusted width (80), not the config's intermediate_size (112).
    gate = "model.layers.0.mlp.gate_proj.weight" if got.layer_types[0] != "conv" else None
    assert got.intermediate_size == weights[gate or "model.layers.0.feed_forward.w1.weight"][0].shape[0]
    assert got.qk_norm and not got.rope_interleaved
    qwen = fixture.startswith("qwen3_5")
    assert got.norm_weights_include_one == qwen
    assert got.a_is_log == (not qwen)  # LFM2 has no A; the default stands
    assert value_heads_tiled(got) == qwen  # 2 key heads, 6 value heads


@pytest.mark.parametrize("fixture", HYBRIDS)
def test_every_tensor_the_graph_reads_is_there(fixture, tmp_path):
    file, _, weights = converted(fixture, tmp_path)
    tensors = hf_tensors(file)
    assert set(tensors) == set(weights)  # and nothing left under a GGUF name
    for hf, (values, source_dtype) in weights.items():
        info = tensors[hf]
        want_shape = values.shape if values.ndim != 3 else (values.shape[0], values.shape[2])  # [C, 1, K]
        assert info.shape == want_shape, hf
        assert info.dtype == ("F32" if hf.endswith(F32_ALWAYS) else source_dtype), hf


def hf_head_order(stored: np.ndarray, axis: int, key_heads: int, value_heads: int, head_dim: int) -> np.ndarray:
    """Undo the tiled value-head order: HF head j = g * r + v (key head g, its v-th value head) is
    stored head v * key_heads + g."""
    per_key = value_heads // key_heads
    heads = np.arange(value_heads)
    stored_head = (heads % per_key) * key_heads + heads // per_key
    index = (stored_head[:, None] * head_dim + np.arange(head_dim)).reshape(-1)
    return np.take(stored, index, axis=axis)


def hf_order(hf: str, stored: np.ndarray, raw: dict) -> np.ndarray:
    """A Qwen3.5 tensor as stored, its value heads put back in HF's order."""
    nk, nv = raw["linear_num_key_heads"], raw["linear_num_value_heads"]
    dv, qk = raw["linear_value_head_dim"], 2 * nk * raw["linear_key_head_dim"]
    if hf.endswith((".in_proj_qkv.weight", ".conv1d.weight")):
        return np.concatenate([stored[:qk], hf_head_order(stored[qk:], 0, nk, nv, dv)])
    if hf.endswith(".in_proj_z.weight"):
        return hf_head_order(stored, 0, nk, nv, dv)
    if hf.endswith((".in_proj_a.weight", ".in_proj_b.weight", ".A_log", ".dt_bias")):
        return hf_head_order(stored, 0, nk, nv, 1)
    if hf.endswith(".out_proj.weight"):
        return hf_head_order(stored, 1, nk, nv, dv)
    return stored


@pytest.mark.parametrize("fixture", HYBRIDS)
def test_values_read_back_through_the_gguf_path(fixture, tmp_path):
    file, raw, weights = converted(fixture, tmp_path)
    data = Path(file.path).read_bytes()
    for hf, info in hf_tensors(file).items():
        raw_bytes = np.frombuffer(data[info.start : info.start + info.nbytes], np.uint8)
        stored = gguf.quants.dequantize(raw_bytes, gguf.GGMLQuantizationType[info.dtype]).reshape(info.shape)
        want = weights[hf][0].reshape(info.shape)
        if fixture.startswith("qwen3_5"):
            # The reordering is undone; the value changes are made to the checkpoint's values (in
            # float32, as the converter makes them: undoing them would round).
            stored = hf_order(hf, stored, raw)
            if hf.endswith(".A_log"):  # ssm_a holds A = -exp(A_log)
                want = -np.exp(want)
            elif hf.endswith("norm.weight") and ".linear_attn." not in hf:  # (1 + w) norms hold 1 + w
                want = want + np.float32(1)
        np.testing.assert_array_equal(stored, want, err_msg=hf)


@pytest.mark.parametrize("fixture", ["qwen3_5-f32", "lfm2-f32"])
def test_quantized_conversion_dequantizes_to_the_checkpoint(fixture, tmp_path):
    """gguf_convert's block-format mix, and its dequantized/ copy (transforms undone) for tests
    that compare the two models."""
    file, _, weights = converted(fixture, tmp_path, quantize=True)
    assert {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"} <= {t.dtype for t in file.tensors.values()}
    plain = load_checkpoint(tmp_path / "dequantized" / "model.safetensors")
    for hf, (values, _) in weights.items():
        assert np.abs(plain[hf][0] - values).max() <= 0.1 * np.abs(values).max() + 1e-6, hf


def qwen35_file(tmp_path: Path, blocks: int, tensors: dict, extra=None) -> Path:
    """A qwen35 header like the fixture's with `blocks` blocks, extra `qwen35.*` keys (a count or
    a list) and zero tensors of the given shapes."""
    raw = json.loads((FIXTURES / "qwen3_5-f32" / "config.json").read_text())
    writer = gguf.GGUFWriter(str(tmp_path / "synthetic.gguf"), "qwen35")
    write_metadata(writer, "qwen35", {**raw, "num_hidden_layers": blocks})
    for key, value in (extra or {}).items():
        (writer.add_array if isinstance(value, list) else writer.add_uint32)(f"qwen35.{key}", value)
    for name, shape in {"token_embd.weight": (384, 64), **tensors}.items():
        writer.add_tensor(name, np.zeros(shape, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tmp_path / "synthetic.gguf"


def test_qwen35_mtp_blocks_are_not_layers(tmp_path):
    """Qwen3.5's multi-token-prediction block is appended as blk.3 (nextn_predict_layers 1): the
    model has 3 layers, and blk.3's tensors keep their GGUF names."""
    path = qwen35_file(
        tmp_path,
        4,
        {"blk.0.attn_norm.weight": (64,), "blk.3.attn_norm.weight": (64,), "blk.3.nextn.eh_proj.weight": (64, 128)},
        {"nextn_predict_layers": 1},
    )
    file = read_gguf(path)
    cfg = config_from_gguf(file)
    assert cfg.num_layers == 3 and cfg.layer_types == ["linear_attention", "full_attention", "linear_attention"]
    names = set(hf_tensors(file))
    assert "model.layers.0.input_layernorm.weight" in names
    assert {"blk.3.attn_norm.weight", "blk.3.nextn.eh_proj.weight"} <= names


def test_qwen35_per_layer_recurrent_flags_win_over_the_interval(tmp_path):
    path = qwen35_file(tmp_path, 3, {}, {"attention.recurrent_layers": [False, True, True]})
    assert config_from_gguf(read_gguf(path)).layer_types == ["full_attention", "linear_attention", "linear_attention"]


def test_qwen35_value_heads_that_do_not_share_out_are_refused(tmp_path):
    file = read_gguf(qwen35_file(tmp_path, 3, {}))
    file.metadata["qwen35.ssm.time_step_rank"] = 5  # 5 value heads over 2 key heads
    with pytest.raises(ModelFileError, match="time_step_rank"):
        config_from_gguf(file)


def test_lfm2_head_counts_per_layer_must_fit_the_layers(tmp_path):
    file, _, _ = converted("lfm2-f32", tmp_path)
    file.metadata["lfm2.attention.head_count_kv"] = [0, 2]
    with pytest.raises(ModelFileError, match="head_count_kv"):
        config_from_gguf(file)
    file.metadata["lfm2.attention.head_count_kv"] = 2  # one count: every layer attends
    assert config_from_gguf(file).layer_types == ["full_attention"] * 3


# ---- pre-tokenizers ----
# llama.cpp's own cuts of both are in tests/fixtures/gguf_tokenizer/splits.json
# (test_tokenizer_llama_split.py); these few are worked out by hand from the regexes, to show what
# sets each apart: qwen35 keeps combining marks (\p{M}) in words, lfm2 is llama3's (digits in
# threes, BOS added).
HAND_SPLITS = {
    "qwen35": {
        "nai\u0308ve": ["nai\u0308ve"],
        "x\u0301!!": ["x\u0301", "!!"],
        " 12345": [" ", "1", "2", "3", "4", "5"],
    },
    "lfm2": {"nai\u0308ve": ["nai", "\u0308ve"], "x\u0301!!": ["x", "\u0301!!"], " 12345": [" ", "123", "45"]},
}


@pytest.mark.parametrize("pre", HAND_SPLITS)
def test_pre_tokenizer_of_a_gguf_file(pre, tmp_path):
    path = write_gguf(tmp_path / "vocab.gguf", tokenizer=byte_level_tokenizer(pre=pre))
    tokenizer = tokenizer_from_gguf(read_gguf(path))
    assert tokenizer._vocab.pre == PRE_TOKENIZERS[pre]
    assert PRE_TOKENIZERS[pre].add_bos == (pre == "lfm2")
    assert PRE_TOKENIZERS[pre].clean_spaces == (pre == "lfm2")
    assert tokenizer.encode("ab abc") == [6, 3, 9]  # "ab" | "Ġ" "abc": Ġ+ab has no merge
    splitter = Splitter(SPLITS[PRE_TOKENIZERS[pre].split][0])
    for text, pieces in HAND_SPLITS[pre].items():
        assert splitter(text) == pieces, text
