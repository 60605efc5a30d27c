"""llama.cpp's pre-tokenizers (GGUF `tokenizer.ggml.pre`): our tables against llama.cpp's source and
our splits against its unicode_regex_split, both recorded in tests/fixtures/gguf_tokenizer/splits.json
by tools/make_tokenizer_split_refs.py."""

import json
from functools import cache
from pathlib import Path

import pytest

from py_engine.tokenizer.llama.pre import PRE_TOKENIZERS, SPLITS
from py_engine.tokenizer.llama.split import Splitter

FIXTURE = Path(__file__).parent / "fixtures" / "gguf_tokenizer" / "splits.json"


@cache
def reference() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_every_pre_tokenizer_llama_cpp_knows_and_no_other():
    names = reference()["names"]
    assert set(PRE_TOKENIZERS) == set(names)
    for name, (llama_type, flags) in names.items():
        ours = PRE_TOKENIZERS[name]
        regexes, byte_encode = reference()["types"][llama_type]
        assert SPLITS[ours.split] == (tuple(regexes), byte_encode), name
        assert ours.ignore_merges == ("ignore_merges" in flags), name
        assert ours.add_bos == ("add_bos" in flags), name
        assert ours.clean_spaces == ("keep_spaces" not in flags), name
        assert ours.escape_whitespaces == ("escape_whitespaces" in flags), name
        assert ours.no_bos_token == ("no_bos_token" in flags), name
        # llama.cpp adds BOS to Gemma 4 whatever the file says.
        assert ours.force_bos == (llama_type == "GEMMA4"), name


@pytest.mark.parametrize("split", sorted(SPLITS))
def test_split_cuts_text_where_llama_cpp_does(split):
    regexes, _ = SPLITS[split]
    cuts = reference()["cuts"][json.dumps(list(regexes))]
    splitter = Splitter(regexes)
    for text, lengths in zip(reference()["texts"], cuts, strict=True):
        pieces = splitter(text)
        assert "".join(pieces) == text
        assert [len(piece) for piece in pieces] == lengths, (split, text)


def test_special_scan_finds_what_each_token_in_turn_finds():
    """SpecialScan.found (one pass over the text) is llama.cpp's partition's filter, `token in text`
    for each matched-in-text token in its order: overlapping tokens, one-character ones, a text
    twice in the vocabulary, tokens at the text's ends, an empty one (never matched)."""
    import random

    from py_engine.tokenizer.llama.special_scan import SpecialScan

    tokens = ["<a>", "<a", "a>", "<ab>", "\n\n", "\n", "  ", " ", "[x]", "<a>", "", "b", "zz", "<i>", "<im>"]
    order = sorted(range(len(tokens)), key=lambda i: -len(tokens[i]))
    scan = SpecialScan(tokens, order)
    pieces = ["<", "a", ">", "b", "\n", " ", "[", "x", "]", "z", "i", "m", "q"]
    rng = random.Random(7)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
        assert scan.found(text) == [i for i in order if tokens[i] and tokens[i] in text], repr(text)
    assert SpecialScan(["a"], []).found("a") == []
