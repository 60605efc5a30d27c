"""The JSON grammar that schemas compile to (py_engine/constrain/schema.py and the json_* nodes), checked
byte by byte: what each supported keyword lets through and refuses, and the keywords refused by name
(with their path) at compile time, since the output could not be held to them."""

import pytest
from test_constrain import accepts, schema, viable

from py_engine.constrain import ConstraintError, compile_response_format


def test_json_object_grammar():
    grammar = compile_response_format({"type": "json_object"})
    for good in ["{}", '{"a": [1, -2.5e+3, true, false, null, {"b": "x\\u00e9\\n"}], "c": -0}', '{ "a" : "" }']:
        assert accepts(grammar, good), good
    for bad in [
        "[]",
        '"x"',
        '{"a":1,}',
        '{"a" 1}',
        "{a: 1}",
        "{'a': 1}",
        '{"a": 01}',
        '{"a": .5}',
        '{"a": 1.}',
        '{"a": +1}',
        '{"a": tru}',
        '{"a": NaN}',
        "  {}",
        "\n{}",
        "{} ",
        '{"a": [1,]}',
        "{,}",
        '{"a": "\x01"}',
    ]:
        assert not accepts(grammar, bad), bad
    assert accepts(grammar, " {}")  # one space first: SentencePiece vocabularies start with "▁{"
    assert accepts(schema({"type": "null"}), "null") and not accepts(schema({"type": "null"}), " null")
    deep = '{"a": ' + "[" * 15 + "]" * 15 + "}"
    assert accepts(grammar, deep) and not viable(grammar, '{"a": ' + "[" * 16)  # nesting at most 16 deep


def test_strings_escapes_and_utf8():
    grammar = schema({"type": "string"})
    for good in ['""', '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\u0041\\uFFFF"', '"é☃😀"', '"\x7f"']:
        assert accepts(grammar, good), good
    for bad in [
        b'"\\x"',
        b'"\\u00G0"',
        b'"\\ud800"',
        b'"\\uDC00"',
        b'"\n"',
        b'"\t"',
        b'"\xc3"',
        b'"\xc3a"',
        b'"\x80"',
        b'"\xc0\x80"',
        b'"\xed\xa0\x80"',
        b'"\xf4\x90\x80\x80"',
        b'"\xff"',
        b"'a'",
    ]:
        assert not accepts(grammar, bad), bad
    assert viable(grammar, b'"\xe2\x82') and accepts(grammar, b'"\xe2\x82\xac"')


def test_string_lengths_count_characters():
    grammar = schema({"type": "string", "minLength": 2, "maxLength": 3})
    assert [accepts(grammar, s) for s in ['"a"', '"ab"', '"abc"', '"abcd"']] == [False, True, True, False]
    assert accepts(grammar, '"éé☃"') and accepts(grammar, '"\\n\\u0041"') and not accepts(grammar, '"\\n\\u0041é😀"')
    assert not viable(grammar, '"abcd') and viable(grammar, '"abc')
    with pytest.raises(ConstraintError, match="admits no value"):
        schema({"type": "string", "minLength": 3, "maxLength": 2})


def test_numbers_are_bounded():
    grammar = schema({"type": "number"})
    assert accepts(grammar, "1" * 15) and not viable(grammar, "1" * 16) and accepts(grammar, "0." + "1" * 15)
    assert not viable(grammar, "0." + "1" * 16) and accepts(grammar, "1e-99") and not viable(grammar, "1e100")
    integer = schema({"type": "integer"})
    assert (
        accepts(integer, "-12")
        and not viable(integer, "1.")
        and not viable(integer, "1e")
        and not viable(integer, "00")
    )


@pytest.mark.parametrize(
    "bounds, good, bad, one",
    [
        ({"minimum": 10, "maximum": 20}, ["10", "15", "20"], ["9", "21", "100", "-10", "1"], True),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, ["0.5", "0.999"], ["0", "1", "1.0", "-0.5", "0.0"], False),
        ({"minimum": -2.5, "maximum": -1.25}, ["-2.5", "-1.25", "-2", "-1.3"], ["-1.2", "-2.51", "0", "-3"], False),
        ({"maximum": 1.5}, ["1.5", "1.50", "-1000", "1.49"], ["1.51", "1.6", "2"], True),
        ({"minimum": 5, "exclusiveMinimum": True}, ["5.01", "10"], ["5", "5.0", "4.99"], True),  # draft 4's flag
    ],
)
def test_number_bounds(bounds, good, bad, one):
    grammar = schema({"type": "number", **bounds})
    assert all(accepts(grammar, text) for text in good), good
    assert not any(accepts(grammar, text) for text in bad), bad
    assert viable(grammar, "1") == one  # only where some number starting with 1 is within the bounds


def test_integer_bounds_only_allow_viable_prefixes():
    grammar = schema({"type": "integer", "minimum": 100, "maximum": 250})
    assert viable(grammar, "1") and viable(grammar, "2") and not viable(grammar, "3") and not viable(grammar, "26")
    assert not accepts(grammar, "2") and accepts(grammar, "250") and not viable(grammar, "-")
    assert accepts(schema({"type": "integer", "minimum": -5, "maximum": -5}), "-5")
    with pytest.raises(ConstraintError, match="admits no value"):
        schema({"type": "integer", "minimum": 1.2, "maximum": 1.8})


def test_objects_follow_schema_order_required_and_optional():
    grammar = schema(
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
            "required": ["b"],
            "additionalProperties": False,
        }
    )
    for good in ['{"b": ""}', '{"a": 1, "b": "x"}', '{"b": "x", "c": true}', '{"a":1,"b":"","c":false}']:
        assert accepts(grammar, good), good
    for bad in ["{}", '{"a": 1}', '{"b": "x", "a": 1}', '{"b": "x", "d": 1}', '{"b": "x", "b": "y"}', '{"c": true}']:
        assert not accepts(grammar, bad), bad
    everything_optional = schema({"properties": {"x": {"type": "null"}}})
    assert accepts(everything_optional, "{}") and accepts(everything_optional, '{"x": null}')
    odd_keys = schema({"type": "object", "properties": {'q"u\\o/té': {"const": 1}}, "required": ['q"u\\o/té']})
    assert accepts(odd_keys, '{"q\\"u\\\\o/té": 1}')


def test_free_objects_and_required_names_without_properties():
    ints = schema({"type": "object", "additionalProperties": {"type": "integer"}})
    assert accepts(ints, '{"x": 1, "y": -2}') and not accepts(ints, '{"x": "1"}')
    named = schema({"type": "object", "required": ["id"]})
    assert accepts(named, '{"id": [1, {"k": null}]}') and not accepts(named, "{}")
    with pytest.raises(ConstraintError, match="additionalProperties"):
        schema({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": False})


def test_arrays():
    grammar = schema({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})
    assert [accepts(grammar, t) for t in ["[]", "[1]", "[1, 2, 3]", "[1,2,3,4]"]] == [False, True, True, False]
    assert accepts(schema({"type": "array"}), '[1, "a", [], {}]') and not viable(grammar, "[1, 2, 3,")
    assert accepts(schema({"type": "array", "items": False}), "[]")
    with pytest.raises(ConstraintError, match="admits no value"):
        schema({"type": "array", "items": False, "minItems": 1})


def test_enum_const_anyof_and_type_lists():
    grammar = schema({"enum": ["a", "ab", 1, 12, None, {"k": [1]}, 'q"'], "description": "ignored"})
    for good in ['"a"', '"ab"', "1", "12", "null", '{"k": [1]}', '"q\\""']:
        assert accepts(grammar, good), good
    assert not accepts(grammar, '"b"') and not accepts(grammar, "2")
    assert accepts(schema({"const": "x"}), '"x"') and not accepts(schema({"const": "x"}), '"y"')
    assert accepts(schema({"type": "string", "enum": ["a", 1]}), '"a"') and not accepts(
        schema({"type": "string", "enum": ["a", 1]}), "1"
    )
    either = schema({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "null"}, {"type": "integer"}]})
    assert all(accepts(either, t) for t in ['"x"', "null", "-3"]) and not accepts(either, '"xy"')
    listed = schema({"type": ["boolean", "array"], "items": {"type": "null"}})
    assert accepts(listed, "true") and accepts(listed, "[null]") and not accepts(listed, "[1]")
    assert accepts(schema({"oneOf": [{"type": "integer"}, {"type": "string"}]}), '"s"')


def test_recursive_refs_are_bounded():
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["v", "kids"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    grammar = schema(tree)
    nested = lambda depth: '{"v":1,"kids":[' + (nested(depth - 1) if depth else "") + "]}"  # noqa: E731
    assert accepts(grammar, nested(5)) and not viable(grammar, nested(7)[:-10])
    with pytest.raises(ConstraintError, match="admits no value"):
        schema({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"})


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"type": "string", "pattern": "^a$"}, '"pattern"'),
        ({"type": "string", "format": "email"}, '"format"'),
        ({"type": "integer", "multipleOf": 2}, '"multipleOf"'),
        ({"not": {"type": "null"}}, '"not"'),
        ({"if": {}, "then": {}}, '"if"'),
        ({"allOf": [{"type": "string"}, {"maxLength": 2}]}, '"allOf"'),
        ({"type": "array", "items": [{}, {}]}, "tuple"),
        ({"type": "array", "uniqueItems": True}, '"uniqueItems"'),
        ({"type": "array", "prefixItems": [{}]}, '"prefixItems"'),
        ({"type": "object", "patternProperties": {"x": {}}}, '"patternProperties"'),
        ({"type": "object", "maxProperties": 2}, '"maxProperties"'),
        ({"type": "date"}, '"type"'),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        ({"$ref": "https://example.com/s.json"}, "local"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "uuid"}}}, "#/properties/a"),
        ({"anyOf": [{"type": "string"}], "minLength": 2}, '"minLength" beside "anyOf"'),
        ({"enum": ["a", "bb"], "maxLength": 1}, '"maxLength" beside "enum"'),
        ({"type": "integer", "minimum": "3"}, "finite number"),
        ({"type": "string", "maxLength": -1}, "non-negative"),
        (3, "must be an object"),
    ],
)
def test_unsupported_keywords_are_refused_by_name(bad, words):
    with pytest.raises(ConstraintError) as caught:
        schema(bad)
    assert words in str(caught.value)


def test_annotations_and_unknown_keywords_are_ignored():
    grammar = schema({"type": "integer", "title": "t", "examples": [1], "default": 2, "x-vendor": 1, "$comment": "c"})
    assert accepts(grammar, "7")
    assert accepts(schema({"type": "string", "minimum": 3}), '"a"')  # minimum says nothing about strings
