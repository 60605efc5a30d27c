"""The GGUF tokenizer against llama.cpp, and the GGUF config against HF transformers' GGUF loader.

Real files: SmolLM2-135M-Instruct (llama arch, "gpt2" tokenizer, pre "smollm"),
Qwen2.5-Coder-0.5B-Instruct (qwen2 arch, pre "qwen2") and Gemma-3-270M ("llama" SentencePiece
tokenizer with Gemma's vocabulary), fetched by py_engine.model_cache; the references in
tests/fixtures/gguf_tokenizer/ come from tools/make_gguf_tokenizer_refs.py: ids and decodings from
llama.cpp, chat template text and configs from transformers. Synthetic files
(tests/gguf_synthetic.py): a SentencePiece ("llama") vocabulary with scores and token types, small
byte-level ones, and Gemma3 / Qwen3 configs, written with gguf-py's GGUFWriter; their references
are in tests/fixtures/gguf_tokenizer/synthetic.json, made by the same tool, so no test here needs
llama.cpp, transformers or torch.
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
    BYTE_LEVEL_PRES,
    BYTE_LEVEL_TEXTS,
    BYTE_LEVEL_TOKENS,
    GEMMA4_TEXTS,
    RECIPES,
    SPM_BY_HAND,
    SPM_REFERENCE_TEXTS,
    byte_level_tokenizer,
    gemma4_tokenizer,
    recipe_digest,
    spm_tokenizer,
    tokenizer_digest,
    write_gguf,
    write_synthetic,
)
from tokenizer_vocab import assert_matches_llama_cpp  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "gguf_tokenizer"
CHAT_MODELS = ["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"]
# Gemma's 262144-token vocabulary takes a second to read.
MODELS = [*CHAT_MODELS, pytest.param("gemma-3-270m", marks=pytest.mark.slow)]


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


@pytest.mark.parametrize("name", MODELS)
def test_encode_decode_match_llama_cpp(name):
    tok, ref = ours(name), reference(name)
    assert len(ref["encode"]) >= 40
    assert_matches_llama_cpp(tok, ref["encode"])
    # Generation stops where llama.cpp's does: eos, end-of-turn and FIM tokens.
    assert tok.eos_ids == set(ref["eog"])


@pytest.mark.parametrize("name", CHAT_MODELS)
def test_chat_template_matches_hf_and_tokenizes_like_llama_cpp(name):
    tok, ref = ours(name), reference(name)
    assert ref["chat"]
    for case in ref["chat"]:
        text = tok.apply_chat_template(case["messages"], add_generation_prompt=True)
        assert text == case["text"]
        assert tok.encode(text) == case["ids"]


@pytest.mark.parametrize("name", MODELS)
def test_special_tokens(name):
    tok, ref = ours(name), reference(name)
    special = ref["special"]
    assert tok.id_to_token(tok.bos_id) == special["bos_token"]
    assert tok.id_to_token(ref["config"]["eos_token_id"]) == special["eos_token"]
    assert tok.vocab_size == ref["config"]["vocab_size"]


@pytest.mark.parametrize("name", CHAT_MODELS)
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
    # Decoding strips the "▁" prepended to the text, but keeps those after special tokens.
    spaced = {"<s>hello</s>": "<s> hello</s>", "hello<|user|>world": "hello<|user|> world"}
    for text, ids in SPM_BY_HAND.items():
        assert tok.encode(text) == ids, text
        assert tok.decode(ids) == spaced.get(text, text)
    assert tok.encode("hello", add_special_tokens=True) == [1, 278 + 1]  # BOS by default for "llama"
    assert tok.decode([1, 279, 2], skip_special_tokens=True) == " hello"  # only a leading "▁" is stripped
    assert tok.decode([279, 298, 259, 261]) == "hello<ctrl> b"
    assert tok.decode([279, 298, 259, 261], skip_special_tokens=True) == "hello b"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s>[user] hi</s>"
    assert (tok.bos_id, tok.eos_ids) == (1, {2})


def test_sentencepiece_flags(tmp_path):
    no_prefix = write_gguf(tmp_path / "a.gguf", tokenizer=spm_tokenizer(add_space_prefix=False, add_bos=False))
    tok = tokenizer_from_gguf(read_gguf(no_prefix))
    assert tok.encode("hello world") == [278, 284]  # hello ▁world: no "▁" prepended
    assert tok.decode([278, 284]) == "hello world"
    assert tok.encode("hello", add_special_tokens=True) == [278]


def test_sentencepiece_matches_llama_cpp(tmp_path):
    tok = tokenizer_from_gguf(read_gguf(write_synthetic(tmp_path, "spm")))
    entries = synthetic_reference("spm")["encode"]
    assert [entry["text"] for entry in entries] == SPM_REFERENCE_TEXTS
    assert_matches_llama_cpp(tok, entries)


def test_byte_level_synthetic(tmp_path):
    tok = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "b.gguf", tokenizer=byte_level_tokenizer())))
    assert tok.encode("ab abc") == [6, 3, 9]  # ab Ġ abc: "a b" outranks "Ġ a", then "ab c"
    assert tok.encode(" abab") == [3, 6, 6]  # Ġ ab ab: there is no "Ġ ab" merge
    assert tok.encode("abc<|end|>a<|u|>") == [9, 10, 0, 12]
    # A control token spelled outside the byte alphabet is matched in text all the same.
    assert tok.encode("a<raw tok>") == [0, 11]
    assert tok.decode([9, 10, 0], skip_special_tokens=True) == "abca"
    assert tok.decode([0, 3, 6]) == "a ab"
    assert tok.encode("12 12") == [13, 3, 13]  # GPT-2's split keeps " 12" together, but "Ġ1" is no merge
    smollm = write_gguf(tmp_path / "s.gguf", tokenizer=byte_level_tokenizer("smollm"))
    assert tokenizer_from_gguf(read_gguf(smollm)).encode("12 12") == [4, 5, 3, 4, 5]  # digits one by one


def test_byte_level_matches_llama_cpp(tmp_path):
    for pre in BYTE_LEVEL_PRES:
        name = f"byte-level-{pre}"
        assert RECIPES[name]["tokenizer"]["pre"] == pre
        tok = tokenizer_from_gguf(read_gguf(write_synthetic(tmp_path, name)))
        entries = synthetic_reference(name)["encode"]
        assert [entry["text"] for entry in entries] == BYTE_LEVEL_TEXTS
        assert_matches_llama_cpp(tok, entries)


def test_default_bos_follows_llama_cpp(tmp_path):
    """Without tokenizer.ggml.add_bos_token: BOS for SentencePiece and the Llama-3 family of
    pre-tokenizers, none for other byte-level ones."""
    for tokenizer, adds_bos in (
        (spm_tokenizer(), True),
        (byte_level_tokenizer("llama-bpe"), True),
        (byte_level_tokenizer("tekken"), True),
        (byte_level_tokenizer("qwen2"), False),
        (byte_level_tokenizer("default"), False),
    ):
        tok = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "x.gguf", tokenizer=tokenizer)))
        assert (tok.encode("a", add_special_tokens=True)[0] == tok.bos_id) == adds_bos, tokenizer.get("pre")


def test_special_id_outside_the_vocabulary_is_ignored(tmp_path, caplog):
    """llama.cpp warns and keeps its default (11 for "gpt2" vocabularies)."""
    path = write_gguf(tmp_path / "x.gguf", tokenizer={**byte_level_tokenizer(), "eos_token_id": 99})
    tok = tokenizer_from_gguf(read_gguf(path))
    assert 11 in tok.eos_ids and "tokenizer.ggml.eos_token_id = 99 is not a token id" in caplog.text


def test_user_defined_space_runs_are_matched_whole(tmp_path):
    """MPT's vocabulary has user-defined tokens for runs of spaces; llama.cpp cuts them out of the
    text before splitting, longest first."""
    tokens = [*BYTE_LEVEL_TOKENS, "  ", "   "]
    mpt = {**byte_level_tokenizer("mpt"), "tokens": tokens, "types": [1] * 10 + [3, 3, 4, 1, 4, 4]}
    tok = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "mpt.gguf", tokenizer=mpt)))
    assert tok.encode("a     b") == [0, 15, 14, 1]  # a, "   ", "  ", b
    assert tok.decode([0, 15, 14, 1]) == "a     b"


@pytest.mark.parametrize(
    "tokenizer,problem",
    [
        (byte_level_tokenizer("bogus-pre"), "unknown tokenizer.ggml.pre 'bogus-pre': llama.cpp does not know"),
        ({**byte_level_tokenizer(), "tokenizer_model": "rwkv"}, "unsupported tokenizer.ggml.model 'rwkv'"),
        ({k: v for k, v in byte_level_tokenizer().items() if k != "merges"}, "'tokenizer.ggml.merges'"),
        # llama.cpp's BERT default SEP (102) lies outside this vocabulary.
        ({**byte_level_tokenizer(), "tokenizer_model": "bert"}, "adds a SEP token but has none"),
        ({**spm_tokenizer(), "scores": [0.0] * 3}, "tokenizer.ggml.scores has 3 entries"),
        ({}, "'tokenizer.ggml.model'"),
    ],
)
def test_bad_tokenizer_metadata(tmp_path, tokenizer, problem):
    path = write_gguf(tmp_path / "bad.gguf", tokenizer=tokenizer)
    with pytest.raises(ModelFileError) as err:
        tokenizer_from_gguf(read_gguf(path))
    assert problem in str(err.value) and str(path) in str(err.value)


# ---- Gemma 4's "gemma4" tokenizer model (gguf_synthetic.gemma4_tokenizer, gemma4.json) ----


@cache
def gemma4_reference() -> dict:
    ref = json.loads((FIXTURES / "gemma4.json").read_text(encoding="utf-8"))
    assert ref["recipe_sha256"] == tokenizer_digest(gemma4_tokenizer(320)), (
        "the Gemma 4 vocabulary changed; run tools/make_gguf_tokenizer_refs.py --only gemma4"
    )
    return ref


def gemma4_file(tmp_path, **extra):
    return tokenizer_from_gguf(
        read_gguf(write_gguf(tmp_path / "gemma4.gguf", tokenizer=gemma4_tokenizer(320, **extra)))
    )


def test_gemma4_matches_llama_cpp(tmp_path):
    """Spaces as "▁" merged across words (no split but at newlines), runs of newlines that are
    tokens taken whole ("\n\n\n": no merge makes it), byte fallback to <0xNN> (and <0xNN> decoded
    back to its byte), special tokens in text, BOS added though the file says not to, the file's
    tokenizer.ggml.pre ("default") ignored, and </s> a normal token (not an end of generation)."""
    tok, ref = gemma4_file(tmp_path), gemma4_reference()
    assert [entry["text"] for entry in ref["encode"]] == GEMMA4_TEXTS
    assert_matches_llama_cpp(tok, ref["encode"])
    assert tok.eos_ids == set(ref["tokens"]["eog"]) == {1, 6, 7}  # <eos>, <turn|>, <|tool_response>
    assert (tok.bos_id, ref["load"]["add_bos"]) == (2, True)


def test_gemma4_matches_transformers_but_where_llama_cpp_differs(tmp_path):
    """The same vocabulary and merges in transformers' Gemma pipeline give the same ids, except a
    newline run no merge makes (llama.cpp takes "\n\n\n" whole, transformers "\n\n" + "\n"); its
    decoding differs only where llama.cpp cleans up spaces (" ." and " 's")."""
    tok = gemma4_file(tmp_path)
    for entry in gemma4_reference()["encode"]:
        text, hf_ids = entry["text"], entry["hf_ids"]
        if text in ("\n\n\n", "x\n\n\ny \n\n\n "):  # runs of exactly three newlines
            assert tok.encode(text) != hf_ids and 12 in tok.encode(text) and 12 not in hf_ids, text
        else:
            assert tok.encode(text) == hf_ids, text
        if " ." not in text and " '" not in text:
            assert tok.decode(hf_ids) == entry["hf_decoded"], text


def test_gemma4_stream_decodes_byte_tokens_as_the_whole_text(tmp_path):
    tok = gemma4_file(tmp_path)
    text = "héllo 😀 日本\n\n\n ok"
    ids = tok.encode(text)
    stream = tok.stream_decoder(skip_special_tokens=False)
    assert "".join(stream.push(i) for i in ids) + stream.flush() == tok.decode(ids) == text


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
