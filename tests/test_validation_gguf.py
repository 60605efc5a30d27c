"""Validation of GGUF files past their header (formats/gguf_values.py, gguf_model.py, gguf_rope.py,
gguf_tensor_check.py, gguf_tokenizer.py): a metadata value of the wrong kind, out of range, not
finite, a per-layer array of the wrong length, a tensor whose shape the metadata contradicts, a
token array that does not match the vocabulary: each is a ModelFileError naming the file and the
key or tensor, never a raw Python exception or a silently accepted value.

Small valid files are written once with gguf-py; each case edits one value of the parsed file (as
the header reader returns it) and runs what loading runs. A few cases go through real files."""

import dataclasses
import logging
import math
import struct
from pathlib import Path

import pytest

from py_engine.errors import ModelFileError
from py_engine.formats.gguf import read_gguf
from py_engine.formats.gguf_model import config_from_gguf, hf_tensors, longrope_scaling
from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf
from py_engine.formats.model_files import read_model
from py_engine.formats.source import LocalModel

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")
from gguf_convert import write_metadata as write_dense_metadata  # noqa: E402
from gguf_convert_hybrids import write_metadata as write_hybrid_metadata  # noqa: E402
from gguf_synthetic import byte_level_tokenizer, spm_tokenizer, write_gguf, write_metadata  # noqa: E402
from tokenizer_vocab import gguf_metadata  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
NAN, INF = math.nan, math.inf


def fixture_header(path: Path, arch: str, fixture: str, tensors: dict) -> Path:
    """A header with a fixture's config (the converter's keys), a byte-level vocabulary and
    `tensors` (name -> shape, filled with ones)."""
    import json

    cfg = json.loads((FIXTURES / f"{fixture}-f32" / "config.json").read_text())
    writer = gguf.GGUFWriter(str(path), arch)
    (write_hybrid_metadata if arch in ("qwen35", "lfm2") else write_dense_metadata)(writer, arch, cfg)
    tokenizer = byte_level_tokenizer(arch if arch in ("qwen35", "lfm2") else "gpt-2")
    writer.add_tokenizer_model(tokenizer["tokenizer_model"])
    writer.add_string("tokenizer.ggml.pre", tokenizer["pre"])
    writer.add_token_list(tokenizer["tokens"])
    writer.add_token_merges(tokenizer["merges"])
    for name, shape in tensors.items():
        writer.add_tensor(name, np.ones(shape, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("validation")
    # BASE_METADATA: 1 block, hidden 16, 2 heads of 8, 2 KV heads.
    llama_tensors = {"token_embd.weight": (8, 16), "blk.0.attn_q.weight": (16, 16), "rope_freqs.weight": (4,)}
    return {
        "llama": write_gguf(
            folder / "llama.gguf",
            tokenizer=spm_tokenizer(),
            tensors={name: np.ones(shape, np.float32) for name, shape in llama_tensors.items()},
        ),
        "bpe": write_gguf(folder / "bpe.gguf", tokenizer=byte_level_tokenizer()),
        "t5": write_metadata(folder / "t5.gguf", gguf_metadata("unigram")),
        "gemma2": fixture_header(folder / "gemma2.gguf", "gemma2", "gemma2", {"blk.0.attn_norm.weight": (72,)}),
        "phi3": fixture_header(
            folder / "phi3.gguf", "phi3", "phi3", {"rope_factors_long.weight": (4,), "rope_factors_short.weight": (4,)}
        ),
        "lfm2": fixture_header(folder / "lfm2.gguf", "lfm2", "lfm2", {"blk.0.shortconv.conv.weight": (64, 3)}),
        "qwen35": fixture_header(folder / "qwen35.gguf", "qwen35", "qwen3_5", {"blk.0.ssm_a": (6,)}),
    }


def edited(path: Path, metadata=None, tensors=None):
    """The parsed file with metadata keys set (None: removed) and tensors' shapes replaced."""
    parsed = read_gguf(path)
    for key, value in (metadata or {}).items():
        if value is None:
            parsed.metadata.pop(key, None)
        else:
            parsed.metadata[key] = value
    for name, shape in (tensors or {}).items():
        parsed.tensors[name] = dataclasses.replace(parsed.tensors[name], shape=shape)
    return parsed


def expect_error(load, parsed, problem: str) -> None:
    with pytest.raises(ModelFileError) as caught:
        load(parsed)
    assert caught.value.path == parsed.path, caught.value
    assert problem in caught.value.problem, caught.value.problem


# ---- the config: kinds, ranges, per-layer arrays ----

CONFIG_CASES = {
    "kv_heads_zero": ("llama", {"llama.attention.head_count_kv": 0}, "'llama.attention.head_count_kv' is 0, outside"),
    "eps_nan": ("llama", {"llama.attention.layer_norm_rms_epsilon": NAN}, "is nan: it should be a finite number"),
    "eps_negative": ("llama", {"llama.attention.layer_norm_rms_epsilon": -1e-5}, "it should be positive"),
    "theta_infinite": ("llama", {"llama.rope.freq_base": INF}, "'llama.rope.freq_base' is inf"),
    "array_for_a_count": ("llama", {"llama.embedding_length": [16]}, "should be an integer, got an array of 1"),
    "string_for_a_count": ("llama", {"llama.block_count": "1"}, "should be an integer, got a string ('1')"),
    "float_for_a_count": ("llama", {"llama.context_length": 128.0}, "should be an integer, got a float"),
    "bool_for_a_count": ("llama", {"llama.feed_forward_length": True}, "should be an integer, got a bool"),
    "string_for_a_float": ("llama", {"llama.attention.layer_norm_rms_epsilon": "1e-5"}, "should be a number"),
    "array_for_the_architecture": ("llama", {"general.architecture": ["llama"]}, "should be a string"),
    "absurd_block_count": (
        "llama",
        {"llama.block_count": 2**32 - 1},
        "'llama.block_count' is 4294967295, outside 1..512",
    ),
    "head_counts_per_layer_too_few": ("llama", {"llama.attention.head_count": []}, "0 per-layer values for 1 layers"),
    "head_counts_per_layer_differ": (
        "llama",
        {"llama.block_count": 2, "llama.attention.head_count": [2, 4]},
        "per-layer values [2, 4] differ",
    ),
    "zero_key_length": ("llama", {"llama.attention.key_length": 0}, "'llama.attention.key_length' is 0, outside"),
    "value_length_differs": ("llama", {"llama.attention.value_length": 4}, "value_length 4 differs from key_length 8"),
    "odd_rotary_dims": ("llama", {"llama.rope.dimension_count": 3}, "RoPE needs an even count"),
    "rotary_past_the_head": ("llama", {"llama.rope.dimension_count": 64}, "is 64, outside 2..8"),
    "fewer_dims_than_heads": ("llama", {"llama.embedding_length": 1}, "embedding_length 1 is less than"),
    "vocab_size_zero": ("llama", {"llama.vocab_size": 0}, "'llama.vocab_size' is 0, outside"),
    "unknown_scaling": ("llama", {"llama.rope.scaling.type": "bogus"}, "is 'bogus'; llama.cpp knows"),
    "llama3_without_context": (
        "llama",
        {"llama.rope.scaling.type": "llama3", "llama.rope.scaling.factor": 8.0},
        "original_context_length' is needed for llama3",
    ),
    "negative_scaling": (
        "llama",
        {"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": -2.0},
        "a scaling factor is positive",
    ),
    "scaling_factor_nan": ("llama", {"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": NAN}, "is nan"),
    "window_pattern_too_short": (
        "gemma2",
        {"gemma2.attention.sliding_window_pattern": [True]},
        "gemma2.attention.sliding_window_pattern has 1 entries, expected 2",
    ),
    "window_pattern_not_flags": (
        "gemma2",
        {"gemma2.attention.sliding_window_pattern": ["x", "y"]},
        "item 0 is a string",
    ),
    "softcap_nan": ("gemma2", {"gemma2.attn_logit_softcapping": NAN}, "'gemma2.attn_logit_softcapping' is nan"),
    "lfm2_kv_heads_wrong_length": (
        "lfm2",
        {"lfm2.attention.head_count_kv": [0, 2]},
        "has 2 per-layer values for 3 layers",
    ),
    "lfm2_kv_heads_all_zero": ("lfm2", {"lfm2.attention.head_count_kv": [0, 0, 0]}, "leaves no attention layer"),
    "lfm2_kv_heads_a_string": ("lfm2", {"lfm2.attention.head_count_kv": "2"}, "should be an integer, got a string"),
    "qwen35_no_layers_left": ("qwen35", {"qwen35.nextn_predict_layers": 3}, "leaves no layers of the model's own"),
    "qwen35_mtp_past_blocks": ("qwen35", {"qwen35.nextn_predict_layers": 9}, "is 9, outside 0..3"),
    "qwen35_zero_key_heads": ("qwen35", {"qwen35.ssm.group_count": 0}, "'qwen35.ssm.group_count' is 0, outside"),
    "qwen35_recurrent_flags_not_flags": (
        "qwen35",
        {"qwen35.attention.recurrent_layers": [1.5, 0, 1]},
        "item 0 is a float",
    ),
    "qwen35_interval_array": ("qwen35", {"qwen35.full_attention_interval": [2]}, "got an array of 1 values"),
}


@pytest.mark.parametrize("name", list(CONFIG_CASES))
def test_bad_config_values(files, name):
    base, metadata, problem = CONFIG_CASES[name]
    expect_error(config_from_gguf, edited(files[base], metadata), problem)


# ---- tensors against the metadata ----

TENSOR_CASES = {
    "q_rows": ("llama", {"blk.0.attn_q.weight": (15, 16)}, "tensor 'blk.0.attn_q.weight' has shape [15, 16]"),
    "q_rank": ("llama", {"blk.0.attn_q.weight": (256,)}, "the metadata makes it [16, 16]"),
    "embedding_columns": ("llama", {"token_embd.weight": (8, 15)}, "tensor 'token_embd.weight' has shape [8, 15]"),
    "rope_freqs_length": ("llama", {"rope_freqs.weight": (3,)}, "tensor 'rope_freqs.weight' has shape [3]"),
    "gemma_norm": ("gemma2", {"blk.0.attn_norm.weight": (64,)}, "the metadata makes it [72]"),
    "conv_kernel": ("lfm2", {"blk.0.shortconv.conv.weight": (64, 4)}, "the metadata makes it [64, 3]"),
    "ssm_a": ("qwen35", {"blk.0.ssm_a": (2,)}, "tensor 'blk.0.ssm_a' has shape [2]"),
    "longrope_factors": ("phi3", {"rope_factors_long.weight": (5,)}, "makes it [4]"),
}


@pytest.mark.parametrize("name", list(TENSOR_CASES))
def test_tensor_shapes_against_the_metadata(files, name):
    base, tensors, problem = TENSOR_CASES[name]
    expect_error(config_from_gguf, edited(files[base], tensors=tensors), problem)


@pytest.mark.parametrize("bad", [0.0, -1.0, NAN, INF])
def test_longrope_factors_must_be_positive_numbers(files, bad):
    parsed = read_gguf(files["phi3"])
    data = bytearray(Path(parsed.path).read_bytes())
    start = parsed.tensors["rope_factors_short.weight"].start
    data[start + 4 : start + 8] = struct.pack("<f", bad)
    with pytest.raises(ModelFileError, match="rope_factors_short.weight holds"):
        longrope_scaling(parsed, lambda offset, length: bytes(data[offset : offset + length]))
    parsed.metadata["phi3.rope.scaling.attn_factor"] = NAN
    with pytest.raises(ModelFileError, match="attn_factor"):
        longrope_scaling(parsed, lambda offset, length: Path(parsed.path).read_bytes()[offset : offset + length])


def test_a_layer_number_of_thousands_of_digits_is_no_layer(files):
    parsed = read_gguf(files["llama"])
    info = parsed.tensors.pop("blk.0.attn_q.weight")
    parsed.tensors["blk." + "9" * 5000 + ".attn_q.weight"] = info
    assert "blk." + "9" * 5000 + ".attn_q.weight" in hf_tensors(parsed)


def test_end_of_generation_ids_stay_in_the_vocabulary(files):
    parsed = edited(files["llama"], {"tokenizer.ggml.eos_token_id": 10**6, "tokenizer.ggml.bos_token_id": 10**6})
    cfg = config_from_gguf(parsed)
    assert cfg.bos_token_id is None and all(0 <= i < cfg.vocab_size for i in cfg.eos_token_ids)


# ---- the tokenizer ----

TOKENIZER_CASES = {
    "tokens_not_strings": ("bpe", {"tokenizer.ggml.tokens": [1, 2, 3]}, "should be an array of strings, but item 0"),
    "tokens_a_string": ("bpe", {"tokenizer.ggml.tokens": "abc"}, "should be an array of strings, got a string"),
    "tokens_empty": ("bpe", {"tokenizer.ggml.tokens": []}, "'tokenizer.ggml.tokens' is an empty array"),
    "model_an_array": ("bpe", {"tokenizer.ggml.model": ["gpt2"]}, "'tokenizer.ggml.model' should be a string"),
    "scores_too_long": ("llama", {"tokenizer.ggml.scores": [0.0] * 400}, "tokenizer.ggml.scores has 400 entries"),
    "scores_nan": ("llama", {"tokenizer.ggml.scores": [NAN] * 298}, "but item 0 is a float (nan)"),
    "types_too_short": ("llama", {"tokenizer.ggml.token_type": [1]}, "tokenizer.ggml.token_type has 1 entries"),
    "types_floats": ("llama", {"tokenizer.ggml.token_type": [1.0] * 298}, "should be an array of integers"),
    "byte_token_misspelled": ("llama", {"tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "<0xZZ>"]}, ""),
    "eos_a_string": ("bpe", {"tokenizer.ggml.eos_token_id": "10"}, "should be a token id, got a string"),
    "add_bos_an_int": ("bpe", {"tokenizer.ggml.add_bos_token": 1}, "'tokenizer.ggml.add_bos_token' should be a bool"),
    "template_a_number": ("bpe", {"tokenizer.chat_template": 7}, "'tokenizer.chat_template' should be a string"),
    "merges_not_strings": ("bpe", {"tokenizer.ggml.merges": [[1, 2]]}, "should be an array of strings"),
    "merge_without_space": ("bpe", {"tokenizer.ggml.merges": ["ab"]}, "tokenizer.ggml.merges[0]: bad merge 'ab'"),
    "merge_of_unknown_tokens": ("bpe", {"tokenizer.ggml.merges": ["x y"]}, "missing from the vocab"),
    "charsmap_garbage": ("t5", {"tokenizer.ggml.precompiled_charsmap": [1, 2, 3, 4, 5]}, "charsmap is malformed"),
    "charsmap_not_bytes": ("t5", {"tokenizer.ggml.precompiled_charsmap": [1000]}, "holds 1000: not a byte"),
    "unknown_pre": ("bpe", {"tokenizer.ggml.pre": "bogus"}, "unknown tokenizer.ggml.pre 'bogus'"),
}


@pytest.mark.parametrize("name", list(TOKENIZER_CASES))
def test_bad_tokenizer_values(files, name):
    base, metadata, problem = TOKENIZER_CASES[name]
    parsed = edited(files[base], metadata)
    if name == "byte_token_misspelled":  # a byte token (type 6) llama.cpp would read a byte from
        parsed.metadata["tokenizer.ggml.scores"] = [0.0] * 4
        parsed.metadata["tokenizer.ggml.token_type"] = [2, 3, 3, 6]
        problem = "makes token 3 ('<0xZZ>') a byte, not spelled <0xNN>"
    expect_error(tokenizer_from_gguf, parsed, problem)


def test_special_ids_outside_the_vocabulary_are_ignored_as_llama_cpp_does(files, caplog):
    parsed = edited(files["llama"], {"tokenizer.ggml.bos_token_id": 10**6, "tokenizer.ggml.eos_token_id": 2**32 - 1})
    with caplog.at_level(logging.WARNING, logger="wisp"):
        tokenizer = tokenizer_from_gguf(parsed)
    assert tokenizer.bos_id == 1 and all(0 <= i < tokenizer.vocab_size for i in tokenizer.eos_ids)  # the defaults
    assert "bos_token_id = 1000000 is not a token id" in caplog.text


def test_charsmap_whose_trie_leads_out_of_itself_matches_nothing(files):
    """A trie node pointing past the array (SentencePiece would read past it) is no entry."""
    blob = struct.pack("<I", 4) + struct.pack("<I", 0xFFFFFC00) + b"x\0"
    tokenizer = tokenizer_from_gguf(edited(files["t5"], {"tokenizer.ggml.precompiled_charsmap": list(blob)}))
    assert tokenizer.decode(tokenizer.encode("Hello")) == "Hello"


# ---- real files, through read_model ----


@pytest.mark.parametrize(
    "metadata,problem",
    [
        ([("add_head_count_kv", 0)], "'llama.attention.head_count_kv' is 0"),
        ([("add_layer_norm_rms_eps", NAN)], "'llama.attention.layer_norm_rms_epsilon' is nan"),
        ([("add_head_count", [2, 2, 2])], "has 3 per-layer values for 1 layers"),
    ],
)
def test_bad_files_name_the_file_and_the_key(tmp_path, metadata, problem):
    path = write_gguf(tmp_path / "bad.gguf", metadata=metadata)
    with pytest.raises(ModelFileError) as caught:
        read_model(LocalModel(path))
    assert caught.value.path == str(path) and problem in caught.value.problem
