"""The GGUF tokenizer and config against HF transformers' GGUF loader.

Real files: SmolLM2-135M-Instruct (llama arch, "gpt2" tokenizer, pre "smollm") and
Qwen2.5-Coder-0.5B-Instruct (qwen2 arch, pre "qwen2"), fetched by py_engine.model_cache; the
references in tests/fixtures/gguf_tokenizer/ come from tools/make_gguf_tokenizer_refs.py.
Synthetic files (tests/gguf_synthetic.py): a SentencePiece ("llama") vocabulary with scores and
token types, small byte-level ones, and Gemma3 / Qwen3 configs, written with gguf-py's GGUFWriter;
transformers' answers for them are in tests/fixtures/gguf_tokenizer/synthetic.json, made by the
same tool, so no test here imports transformers or torch.
"""

import json
from functools import cache
from pathlib import Path

import pytest

from py_engine.errors import ModelFileError, UnsupportedArchitectureError
from py_engine.formats.gguf import read_gguf
from py_engine.formats.gguf_model import config_from_gguf
from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf

gguf = pytest.importorskip("gguf")
pytest.importorskip("numpy")  # gguf_synthetic writes numpy arrays

from gguf_synthetic import (  # noqa: E402
    BYTE_LEVEL_HF_PRES,
    BYTE_LEVEL_HF_TEXTS,
    BYTE_LEVEL_TOKENS,
    RECIPES,
    SPM_BY_HAND,
    SPM_HF_TEXTS,
    byte_level_tokenizer,
    recipe_digest,
    spm_tokenizer,
    write_gguf,
    write_synthetic,
)

FIXTURES = Path(__file__).parent / "fixtures" / "gguf_tokenizer"
MODELS = ["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"]


@cache
def model_path(name: str) -> Path:
    from py_engine.model_cache import ensure_model

    return ensure_model(name)  # a failed fetch fails the test: CI must see the real files


@cache
def reference(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@cache
def ours(name: str):
    return tokenizer_from_gguf(read_gguf(model_path(name)))


def expected_ids(entry: dict, key: str) -> list:
    # Where transformers' split differs from llama.cpp's, the reference also holds transformers'
    # ids under llama.cpp's split (see tools/make_gguf_tokenizer_refs.py); we follow llama.cpp.
    return entry.get(f"{key}_split_fixed", entry[key])


@pytest.mark.parametrize("name", MODELS)
def test_encode_decode_match_hf(name):
    tok, ref = ours(name), reference(name)
    assert len(ref["encode"]) >= 40
    for entry in ref["encode"]:
        text = entry["text"]
        assert tok.encode(text) == expected_ids(entry, "ids"), text
        assert tok.encode(text, add_special_tokens=True) == expected_ids(entry, "ids_with_special"), text
        assert tok.decode(entry["ids"]) == entry["decoded"], text
        assert tok.decode(entry["ids"], skip_special_tokens=True) == entry["decoded_skip_special"], text


def test_smollm_split_differs_from_hf_only_where_recorded():
    """The one known disagreement with transformers: "smollm" cuts \\p{N} characters off alone
    (llama.cpp, SmolLM's tokenizer.json); transformers' GGUF loader does not."""
    ref = reference("smollm2-135m-instruct")
    assert ref["tokenizer_ggml_pre"] == "smollm"
    differing = [entry["text"] for entry in ref["encode"] if "ids_split_fixed" in entry]
    assert differing == ["x² + y³ = z½ ① Ⅻ ٣"]
    assert not any("ids_split_fixed" in entry for entry in reference("qwen2.5-coder-0.5b-instruct")["encode"])


@pytest.mark.parametrize("name", MODELS)
def test_chat_template_matches_hf(name):
    tok, ref = ours(name), reference(name)
    for case in ref["chat"]:
        text = tok.apply_chat_template(case["messages"], add_generation_prompt=True)
        assert text == case["text"]
        assert tok.encode(text) == expected_ids(case, "ids")


@pytest.mark.parametrize("name", MODELS)
def test_special_tokens(name):
    tok, ref = ours(name), reference(name)
    special = ref["special"]
    assert tok.id_to_token(tok.bos_id) == special["bos_token"]
    assert tok.id_to_token(ref["config"]["eos_token_id"]) == special["eos_token"]
    # Besides eos, generation stops on the end-of-turn tokens llama.cpp recognises by their text.
    assert {tok.id_to_token(i) for i in tok.eos_ids} == {"<|im_end|>", "<|endoftext|>"}
    assert tok.vocab_size == ref["config"]["vocab_size"]


@pytest.mark.parametrize("name", MODELS)
def test_config_matches_hf(name):
    path = model_path(name)
    ref = reference(name)
    assert ref["file"] == path.name
    cfg, want = config_from_gguf(read_gguf(path)), ref["config"]
    assert cfg.vocab_size == want["vocab_size"]
    assert cfg.hidden_size == want["hidden_size"]
    assert cfg.intermediate_size == want["intermediate_size"]
    assert cfg.num_layers == want["num_hidden_layers"]
    assert cfg.num_heads == want["num_attention_heads"]
    assert cfg.num_kv_heads == want["num_key_value_heads"]
    assert cfg.head_dim == want["head_dim"]
    assert cfg.rms_norm_eps == want["rms_norm_eps"]
    assert cfg.rope_theta == want["rope_theta"]
    assert cfg.rope_scaling is None and want["rope_type"] == "default"
    assert cfg.max_position == want["max_position_embeddings"]
    assert cfg.tie_word_embeddings == want["tie_word_embeddings"]
    assert cfg.bos_token_id == want["bos_token_id"]
    assert cfg.eos_token_ids[0] == want["eos_token_id"]
    expected_arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[want["model_type"]]
    assert cfg.architecture == expected_arch
    assert cfg.attention_bias == (want["model_type"] == "qwen2")
    assert cfg.rope_interleaved == (want["model_type"] == "llama")


# ---- synthetic files (tests/gguf_synthetic.py) ----


@cache
def synthetic_reference(name: str) -> dict:
    """transformers' answers for gguf_synthetic.RECIPES[name], from tools/make_gguf_tokenizer_refs.py."""
    entry = json.loads((FIXTURES / "synthetic.json").read_text(encoding="utf-8"))["files"][name]
    assert entry["recipe_sha256"] == recipe_digest(name), (
        f"{name}: the recipe changed; run tools/make_gguf_tokenizer_refs.py --only synthetic"
    )
    return entry


def test_sentencepiece_by_hand(tmp_path):
    tok = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "spm.gguf", tokenizer=spm_tokenizer())))
    for text, ids in SPM_BY_HAND.items():
        assert tok.encode(text) == ids, text
        # The text starts with "▁" already, so none is prepended, but decoding strips one.
        assert tok.decode(ids) == (" a" if text == "  a" else text)
    assert tok.encode("hello", add_special_tokens=True) == [1, 278 + 1]  # BOS by default for "llama"
    assert tok.decode([1, 279, 2], skip_special_tokens=True) == "hello"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s>[user] hi</s>"
    assert (tok.bos_id, tok.eos_ids) == (1, {2})


def test_sentencepiece_flags(tmp_path):
    no_prefix = write_gguf(tmp_path / "a.gguf", tokenizer=spm_tokenizer(add_space_prefix=False, add_bos=False))
    tok = tokenizer_from_gguf(read_gguf(no_prefix))
    assert tok.encode("hello world") == [278, 284]  # hello ▁world: no "▁" prepended
    assert tok.decode([278, 284]) == "hello world"
    assert tok.encode("hello", add_special_tokens=True) == [278]


def test_sentencepiece_matches_hf(tmp_path):
    tok = tokenizer_from_gguf(read_gguf(write_synthetic(tmp_path, "spm")))
    entries = synthetic_reference("spm")["encode"]
    assert [entry["text"] for entry in entries] == SPM_HF_TEXTS
    for entry in entries:
        text, ids = entry["text"], entry["ids"]
        assert tok.encode(text) == ids, text
        assert tok.encode(text, add_special_tokens=True) == entry["ids_with_special"], text
        assert tok.decode(ids) == entry["decoded"], text
        assert tok.decode(ids, skip_special_tokens=True) == entry["decoded_skip_special"], text


def test_byte_level_synthetic(tmp_path):
    tok = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "b.gguf", tokenizer=byte_level_tokenizer())))
    assert tok.encode("ab abc") == [6, 3, 9]  # ab Ġ abc: "a b" outranks "Ġ a", then "ab c"
    assert tok.encode(" abab") == [3, 6, 6]  # Ġ ab ab: there is no "Ġ ab" merge
    assert tok.encode("abc<|end|>a<|u|>") == [9, 10, 0, 12]
    # A control token spelled outside the byte alphabet is not matched in text (as in
    # transformers); it stays in the vocabulary under its byte-alphabet spelling.
    assert 11 not in tok.encode("<raw tok>")
    assert tok.token_to_id("<rawĠtok>") == 11
    assert tok.decode([9, 10, 0], skip_special_tokens=True) == "abca"
    assert tok.encode("12 12") == [13, 3, 13]  # GPT-2's split keeps " 12" together, but "Ġ1" is no merge
    smollm = write_gguf(tmp_path / "s.gguf", tokenizer=byte_level_tokenizer("smollm"))
    assert tokenizer_from_gguf(read_gguf(smollm)).encode("12 12") == [4, 5, 3, 4, 5]  # digits one by one


def test_byte_level_matches_hf(tmp_path):
    for pre in BYTE_LEVEL_HF_PRES:
        name = f"byte-level-{pre}"
        assert RECIPES[name]["tokenizer"]["pre"] == pre
        tok = tokenizer_from_gguf(read_gguf(write_synthetic(tmp_path, name)))
        entries = synthetic_reference(name)["encode"]
        assert [entry["text"] for entry in entries] == BYTE_LEVEL_HF_TEXTS
        for entry in entries:
            assert tok.encode(entry["text"]) == entry["ids"], (pre, entry["text"])


@pytest.mark.parametrize(
    "tokenizer,problem",
    [
        (byte_level_tokenizer("bogus-pre"), "unsupported tokenizer.ggml.pre 'bogus-pre'"),
        ({**byte_level_tokenizer(), "tokenizer_model": "bert"}, "unsupported tokenizer.ggml.model 'bert'"),
        ({k: v for k, v in byte_level_tokenizer().items() if k != "merges"}, "'tokenizer.ggml.merges'"),
        ({**byte_level_tokenizer(), "eos_token_id": 99}, "tokenizer.ggml.eos_token_id = 99 is not a token id"),
        ({**spm_tokenizer(), "scores": [0.0] * 3}, "tokenizer.ggml.scores has 3 entries"),
        ({}, "'tokenizer.ggml.model'"),
    ],
)
def test_bad_tokenizer_metadata(tmp_path, tokenizer, problem):
    path = write_gguf(tmp_path / "bad.gguf", tokenizer=tokenizer)
    with pytest.raises(ModelFileError) as err:
        tokenizer_from_gguf(read_gguf(path))
    assert problem in str(err.value) and str(path) in str(err.value)


# ---- config of other architectures, against transformers' AutoConfig (synthetic.json) ----


def test_gemma3_and_qwen3_config_match_hf(tmp_path):
    for name, arch, extra in (
        ("gemma3", "Gemma3ForCausalLM", {"sliding_window": 512, "qk_norm": True}),
        ("qwen3", "Qwen3ForCausalLM", {"sliding_window": 0, "qk_norm": True}),
    ):
        cfg = config_from_gguf(read_gguf(write_synthetic(tmp_path, name)))
        hf = synthetic_reference(name)["config"]
        assert cfg.architecture == arch
        assert (cfg.hidden_size, cfg.intermediate_size, cfg.num_layers) == (
            hf["hidden_size"],
            hf["intermediate_size"],
            hf["num_hidden_layers"],
        )
        assert (cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (
            hf["num_attention_heads"],
            hf["num_key_value_heads"],
            hf["head_dim"],
        )
        assert cfg.rms_norm_eps == hf["rms_norm_eps"]
        assert cfg.rope_theta == hf["rope_theta"]
        assert cfg.vocab_size == hf["vocab_size"] == len(BYTE_LEVEL_TOKENS)
        assert cfg.tie_word_embeddings == hf["tie_word_embeddings"]
        assert cfg.max_position == hf["max_position_embeddings"]
        assert cfg.rope_interleaved is False
        for field, value in extra.items():
            assert getattr(cfg, field) == value
        if arch.startswith("Gemma"):
            assert cfg.sliding_window == hf["sliding_window"]


def test_config_errors(tmp_path):
    path = write_gguf(tmp_path / "x.gguf", "falcon")
    with pytest.raises(UnsupportedArchitectureError, match="unsupported GGUF architecture 'falcon'"):
        config_from_gguf(read_gguf(path))
    writer = gguf.GGUFWriter(str(tmp_path / "y.gguf"), "llama")
    writer.add_block_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelFileError, match="missing metadata key 'llama.embedding_length'"):
        config_from_gguf(read_gguf(tmp_path / "y.gguf"))


def test_config_rope_and_partial_rotary(tmp_path):
    path = write_gguf(
        tmp_path / "r.gguf",
        metadata=[
            ("add_rope_dimension_count", 4),
            ("add_rope_scaling_type", gguf.RopeScalingType.LINEAR),
            ("add_rope_scaling_factor", 4.0),
            ("add_vocab_size", 8),
            ("add_key_length", 8),
        ],
    )
    cfg = config_from_gguf(read_gguf(path))
    assert cfg.head_dim == 8 and cfg.rotary_dim == 4 and cfg.partial_rotary_factor == 0.5
    assert cfg.rope_scaling == {"rope_type": "linear", "factor": 4.0}
    assert cfg.vocab_size == 8 and cfg.tie_word_embeddings and cfg.rope_interleaved
