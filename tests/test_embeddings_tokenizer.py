"""all-MiniLM-L6-v2's WordPiece tokenizer (BertNormalizer, BertPreTokenizer, WordPiece, [CLS] … [SEP])
against HF `tokenizers` on tricky text, and the embedder's truncation against HF's and against
sentence-transformers' ids for the reference sentences (tests/fixtures/embed_minilm)."""

import json
from functools import cache
from pathlib import Path

import pytest
from tokenizer_vocab import fetch_vocab

from py_engine.embedding.embedder import special_affixes, text_tokens
from py_engine.tokenizer import Tokenizer

hf_tokenizers = pytest.importorskip("tokenizers")

REFERENCE = Path(__file__).parent / "fixtures" / "embed_minilm" / "embedding_reference.json"
TRICKY = [
    "Café déjà vu — naïve façade, Ångström, Øresund, Straße, İstanbul, ΣΊΣΥΦΟΣ",  # accents stripped, lowercased
    "東京は日本の首都です。北京欢迎你！서울 특별시",  # CJK ideographs split; Hangul kept whole
    'He said: "Don\'t!"... (really?) [yes] {no} <tag> a/b\\c #1 $2 %3 ^4 &5 *6 _7 +8 =9 ~0 `x` |y|',
    "tab\there\nnewline\r\nzero\u200bwidth\u00adsoft\x00nul\x07bell\ufffdreplacement\u2028sep",  # control chars
    "pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 99 + " " + "y" * 100 + " " + "z" * 101,
    "antidisestablishmentarianism unaffable tokenization re-evaluate e-mail U.S.A. 3.14159 1,000,000",
    "emoji 👍🏽 and 🇫🇷 flags, math ∑∫√∞≠ ≤ ≥, arrows → ⇒, fractions ½ ¾, superscripts x² y³",
    "ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ ① ℃ ﬁ ligature",
    "   leading and trailing spaces   ",
    "",
    "[CLS] [SEP] [MASK] [UNK] [PAD] special-looking [mask] text",
    "Mixed CASE with McDonald's and O'Neill's iPhone",
]


@cache
def ours() -> Tokenizer:
    return Tokenizer.from_model_dir(fetch_vocab("minilm"))


@cache
def reference():
    hf = hf_tokenizers.Tokenizer.from_file(str(fetch_vocab("minilm") / "tokenizer.json"))
    hf.no_padding()
    hf.no_truncation()
    return hf


@pytest.mark.parametrize("text", TRICKY)
def test_wordpiece_matches_hf(text):
    for special in (False, True):
        assert ours().encode(text, special) == reference().encode(text, add_special_tokens=special).ids


def test_truncation_matches_hf():
    hf = hf_tokenizers.Tokenizer.from_file(str(fetch_vocab("minilm") / "tokenizer.json"))
    hf.no_padding()
    long_text = " ".join(TRICKY) * 8
    for limit in (2, 3, 16, 256, 512):
        hf.enable_truncation(max_length=limit)
        assert text_tokens(ours(), long_text, limit) == hf.encode(long_text).ids, limit
    assert special_affixes(ours()) == ([101], [102])


def test_sentence_transformers_ids():
    ref = json.loads(REFERENCE.read_text())
    assert [text_tokens(ours(), s, 256) for s in ref["sentences"]] == ref["input_ids"]
