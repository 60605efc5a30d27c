"""Constrained decoding (py_engine/constrain) on a tiny handmade vocabulary: the API and the mask's
format, stop ids, termination, tool-call sequences, and random walks whose outputs validate and whose
every mask is checked against a brute-force mask (the shortcuts of masks.py against the definition).
The schema features are in test_constrain_schema.py, real vocabularies in test_constrain_vocab.py."""

import json
import random

import pytest

from py_engine.constrain import (
    Constraint,
    ConstraintError,
    Literal,
    Sequence,
    TokenTable,
    compile_response_format,
    json_schema_grammar,
)
from py_engine.constrain.nodes import accepting, advance_bytes, start
from py_engine.errors import WispError

MULTI = [
    *b'{"|":|": |", "|",|"}|"]|true|false|null|  |    |\n|\n  |\n    |ab|abc|name|age|"name|", "age": |}}|]}|[]|{}|'
    b' "|  "|12|345|0.5|e-|-0|\\n|\\"|\\u00|\\ud8|\\u2603|\xc3\xa9|\xe2\x82|\xac"|\xac|\xff|,\n  "|": "|"\n}'.split(
        b"|"
    ),
]
PIECES = [bytes((value,)) for value in range(256)] + MULTI
EOS, SPECIAL = len(PIECES), len(PIECES) + 1
VOCAB = len(PIECES) + 7  # embedding rows past the tokenizer: never allowed
TABLE = TokenTable(PIECES + [None, None], VOCAB)


def allowed_ids(mask: bytes) -> list[int]:
    bits = int.from_bytes(mask, "little")
    return [i for i, bit in enumerate(reversed(bin(bits)[2:])) if bit == "1"]


def brute_force(table: TokenTable, constraint: Constraint) -> set[int]:
    """The mask by definition: every token whose bytes the grammar accepts from here."""
    allowed = {i for i in constraint.eos_ids if constraint.complete}
    if constraint.finished:
        return allowed
    state = constraint._state
    return allowed | {i for i, piece in enumerate(table.pieces) if piece and advance_bytes(state, piece)}


def accepts(grammar, text: str | bytes) -> bool:
    """Whether `text` is a whole output of `grammar`."""
    data = text.encode() if isinstance(text, str) else text
    state = advance_bytes(start(grammar), data)
    return bool(state) and accepting(state)


def viable(grammar, text: str | bytes) -> bool:
    """Whether `text` may start an output of `grammar`."""
    return bool(advance_bytes(start(grammar), text.encode() if isinstance(text, str) else text))


def schema(s: dict):
    return json_schema_grammar(s)


def random_walk(grammar, table, rng, eos=EOS, steps=300, check=False) -> str | None:
    """Random allowed tokens, more and more often ones that close something, until finished; the
    text, or None where the walk ran out of steps. check: compare every mask with brute force."""
    constraint = Constraint(grammar, table, [eos])
    for step in range(steps):
        mask = constraint.mask()
        assert len(mask) == 4 * ((table.vocab_size + 31) // 32)
        ids = allowed_ids(mask)
        if check:
            assert set(ids) == brute_force(table, constraint), constraint.text
        assert ids, f"no token allowed after {constraint.text!r}"
        if eos in ids and rng.random() < 0.7:
            constraint.advance(eos)
            return constraint.text
        closers = [i for i in ids if i != eos and any(b in table.pieces[i] for b in b'"]}')]
        pick = rng.choice(closers if closers and rng.random() < min(0.9, step / 30) else ids)
        constraint.advance(pick)
        if constraint.finished:
            assert allowed_ids(constraint.mask()) == [eos]
            return constraint.text
    return None


def test_mask_format_and_api():
    constraint = Constraint(compile_response_format({"type": "json_object"}), TABLE, [EOS, 10**6])
    mask = constraint.mask()
    assert len(mask) == 4 * ((VOCAB + 31) // 32) and isinstance(mask, bytes)
    assert allowed_ids(mask) == sorted(i for i, p in enumerate(PIECES) if p in (b" ", b"{", b'{"', b"{}"))
    assert constraint.allows(PIECES.index(b"{")) and not constraint.allows(EOS) and not constraint.allows(SPECIAL)
    assert not constraint.allows(VOCAB - 1) and not constraint.allows(-1) and not constraint.allows(VOCAB)
    with pytest.raises(ConstraintError, match="not allowed") as caught:
        constraint.advance(PIECES.index(b"["))
    assert isinstance(caught.value, WispError)
    for piece in (b'{"', b"ab", b'": ', b"12", b"}"):
        constraint.advance(PIECES.index(piece))
    assert constraint.text == '{"ab": 12}' and constraint.complete and constraint.finished
    assert allowed_ids(constraint.mask()) == [EOS]  # ids outside the vocabulary are dropped from eos_ids
    with pytest.raises(ConstraintError):
        constraint.advance(PIECES.index(b" "))  # no whitespace after the value
    constraint.advance(EOS)
    assert constraint.finished and not constraint.allows(PIECES.index(b"1"))


def test_text_is_none_and_bad_response_formats():
    assert compile_response_format({"type": "text"}) is None and compile_response_format(None) is None
    for bad in (
        {},
        {"type": "xml"},
        {"type": "json_schema"},
        {"type": "json_schema", "json_schema": {"name": "x"}},
        [],
    ):
        with pytest.raises(ConstraintError):
            compile_response_format(bad)
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": {"type": "integer"}}}
    assert compile_response_format(fmt) is compile_response_format(json.loads(json.dumps(fmt)))  # cached


def test_whitespace_is_bounded_and_nothing_follows_the_value():
    grammar = compile_response_format({"type": "json_object"})
    # one space, or a newline and an indent of at most 16 spaces or tabs
    assert viable(grammar, "{ ") and not viable(grammar, "{  ") and not viable(grammar, "{ \n")
    assert viable(grammar, "{\n" + " " * 16) and not viable(grammar, "{\n" + " " * 17)
    assert not viable(grammar, "{\n\n") and not viable(grammar, "{\r\n") and viable(grammar, '{\n\t\t"a": 1 ,\n')
    assert accepts(grammar, '{\n  "a": [\n    1\n  ]\n}') and not viable(grammar, "{}\n")
    constraint = Constraint(grammar, TABLE, [EOS])
    for piece in (b"{", b"\n", b"    ", b"    ", b"    ", b"    "):
        constraint.advance(PIECES.index(piece))
    assert not constraint.allows(PIECES.index(b" ")) and constraint.allows(PIECES.index(b"}"))


def test_a_top_level_number_may_stop_or_go_on():
    constraint = Constraint(schema({"type": "integer"}), TABLE, [EOS])
    constraint.advance(PIECES.index(b"12"))
    assert (
        constraint.complete
        and not constraint.finished
        and {EOS, PIECES.index(b"3")} <= set(allowed_ids(constraint.mask()))
    )
    for _ in range(13):
        constraint.advance(PIECES.index(b"3"))
    assert constraint.finished and allowed_ids(constraint.mask()) == [EOS]


def test_tool_call_sequence():
    body = json_schema_grammar({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
    grammar = Sequence([Literal("<tool_call>\n"), body, Literal("\n</tool_call>")])
    assert accepts(grammar, '<tool_call>\n{"x": 5}\n</tool_call>') and not accepts(grammar, '<tool_call>\n{"x": 5}')
    assert not viable(grammar, "{") and not viable(grammar, '<tool_call>\n{"x": 5} ')
    with pytest.raises(ConstraintError):
        Literal("")


WALK_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "n": {"type": "integer", "minimum": -3, "maximum": 400},
            "tags": {"type": "array", "items": {"enum": ["ab", "abc", "é"]}, "maxItems": 3},
        },
        "required": ["name", "n"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 1, "maxLength": 4},
            "x": {"anyOf": [{"type": "number", "exclusiveMaximum": 0.5}, {"type": "null"}]},
        },
        "required": ["s", "x"],
    },
    {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "boolean"}}, "maxItems": 3},
    {"type": "object", "properties": {"a b": {"type": "integer"}, "a\tc ": {"type": "null"}}},  # spaces in keys
    {
        "anyOf": [
            {
                "type": "object",
                "properties": {"ab": {"type": "string"}, "n": {"type": "null"}},
                "required": ["ab", "n"],
            },
            {"type": "object", "properties": {"ab": {"type": "string", "maxLength": 3}}, "required": ["ab"]},
        ]
    },
    True,
]


@pytest.mark.parametrize("index", range(len(WALK_SCHEMAS) + 1))
def test_random_walks_validate_and_masks_match_brute_force(index):
    jsonschema = pytest.importorskip("jsonschema")
    if index == len(WALK_SCHEMAS):
        grammar, check = compile_response_format({"type": "json_object"}), None
    else:
        grammar, check = json_schema_grammar(WALK_SCHEMAS[index]), jsonschema.Draft202012Validator(WALK_SCHEMAS[index])
    rng, done = random.Random(index), 0
    for _ in range(12):
        text = random_walk(grammar, TABLE, rng, check=True)
        if text is not None:
            value = json.loads(text)
            assert isinstance(value, dict) if check is None else check.is_valid(value), text
            done += 1
    assert done >= 8
