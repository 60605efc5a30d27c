"""JSON Schema (OpenAI strict mode's subset, and a bit more) and response_format -> a grammar.

The grammar's outputs are always a subset of the schema's instances: where we choose (property order,
skipping optional properties, one spelling of each enum value, depth limits on recursion and on "any
value") we only ever leave outputs out. A keyword that would forbid something we cannot enforce
(pattern, format, multipleOf, not, if/then/else, ...) raises ConstraintError naming it and its path;
annotations and keywords JSON Schema does not define are ignored, as validators ignore them.
A response_format's answer may start with one space, nothing else around the value.
oneOf is compiled as anyOf: its branches are not checked for overlap (an output matching two
branches would fail oneOf; distinct types or discriminator values, the usual case, cannot overlap).
"""

import json
from functools import lru_cache

from .errors import ConstraintError
from .json_containers import FreeObject, any_value
from .nodes import NEVER, Literal, LiteralSet, Node, Sequence, Union
from .schema_types import build_type

MAX_DEPTH = 16  # json_object's nesting; "any value" in a schema nests as deep
MAX_REF_DEPTH = 6  # how often one $ref may expand inside itself (recursive schemas)

_UNSUPPORTED = {
    "not": "not",
    "if": "if/then/else",
    "then": "if/then/else",
    "else": "if/then/else",
    "$dynamicRef": "$dynamicRef",
    "$recursiveRef": "$recursiveRef",
}
_COMBINATORS = ("anyOf", "oneOf", "allOf", "$ref", "enum", "const")
_CONTAINERS = ("$defs", "definitions")
_ANNOTATIONS = frozenset(
    "title description examples default $comment deprecated readOnly writeOnly $schema $id $anchor "
    "contentEncoding contentMediaType contentSchema strict name".split()
)


@lru_cache(maxsize=64)
def _cached_schema(text: str) -> Node:
    return SchemaCompiler(json.loads(text)).compile()


def json_schema_grammar(schema) -> Node:
    """The grammar of a JSON Schema's instances (compiled grammars are cached by the schema's text)."""
    try:
        text = json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ConstraintError(f"the schema is not JSON: {err}") from None
    return _cached_schema(text)


def json_object_grammar() -> Node:
    """Any JSON object, containers nested at most MAX_DEPTH deep."""
    return FreeObject(any_value(MAX_DEPTH - 2))


def _answer(value: Node) -> Node:
    """A whole answer: the value, or one space and the value (SentencePiece vocabularies begin a
    reply with "▁{", and forcing another spelling of the first token would only hurt the model)."""
    return Union([value, Sequence([Literal(" "), value])])


@lru_cache(maxsize=64)
def _cached_answer(text: str) -> Node:
    return _answer(_cached_schema(text))


_JSON_OBJECT = _answer(json_object_grammar())


def compile_response_format(fmt) -> Node | None:
    """OpenAI's response_format -> the grammar its output must follow; None for {"type": "text"}."""
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise ConstraintError('response_format must be an object with a "type"')
    kind = fmt["type"]
    if kind == "text":
        return None
    if kind == "json_object":
        return _JSON_OBJECT
    if kind != "json_schema":
        raise ConstraintError(f'response_format type {kind!r:.40} (expected "text", "json_object" or "json_schema")')
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict | bool):
        raise ConstraintError('response_format json_schema needs a "schema" object')
    json_schema_grammar(spec["schema"])  # raises for a schema that is not JSON
    return _cached_answer(json.dumps(spec["schema"], allow_nan=False))


class SchemaCompiler:
    def __init__(self, root):
        self.root = root
        self._refs: dict[tuple[str, int], Node] = {}
        self._expanding: dict[str, int] = {}

    def compile(self) -> Node:
        node = self.node(self.root, "#")
        if node.empty:
            raise ConstraintError("the schema admits no value (within the depth limits)")
        return node

    def fail(self, path: str, problem: str):
        raise ConstraintError(f"schema at {path}: {problem}")

    def node(self, schema, path: str) -> Node:
        if schema is True or schema == {}:
            return any_value(MAX_DEPTH - 1)
        if schema is False:
            return NEVER
        if not isinstance(schema, dict):
            self.fail(path, f"a schema must be an object or a boolean, not {type(schema).__name__}")
        for key, name in _UNSUPPORTED.items():
            if key in schema:
                self.fail(path, f'"{key}" is not supported ({name} cannot be enforced)')
        combinators = [key for key in _COMBINATORS if key in schema]
        if combinators:
            return self._combinator(schema, path, combinators)
        return build_type(self, schema, path)

    def constraints(self, schema, allowed=()) -> list[str]:
        """The keywords of `schema` that constrain, besides `allowed`."""
        skip = _ANNOTATIONS.union(_CONTAINERS, allowed)
        return [key for key in schema if key not in skip]

    def _combinator(self, schema, path, combinators) -> Node:
        if combinators in (["enum"], ["const"], ["enum", "const"]):
            return self._enum(schema, path)
        first = combinators[0]
        others = self.constraints(schema, (first,))
        if others:
            self.fail(path, f'"{others[0]}" beside "{first}" is not supported (move it into the branches)')
        value = schema[first]
        if first == "$ref":
            return self._ref(value, path)
        if not isinstance(value, list) or not value:
            self.fail(path, f'"{first}" must be a non-empty list')
        if first == "allOf" and len(value) > 1:
            self.fail(path, '"allOf" with several schemas is not supported')
        return Union([self.node(branch, f"{path}/{first}/{i}") for i, branch in enumerate(value)])

    def _enum(self, schema, path) -> Node:
        others = self.constraints(schema, ("enum", "const", "type"))
        if others:
            self.fail(path, f'"{others[0]}" beside "enum"/"const" is not supported')
        if "const" in schema:
            values = [schema["const"]]
        elif isinstance(schema["enum"], list):
            values = schema["enum"]
        else:
            self.fail(path, '"enum" must be a list')
        if "enum" in schema and "const" in schema:
            values = [v for v in values if _same(v, schema["const"])]
        types = schema.get("type")
        if types is not None:
            types = [types] if isinstance(types, str) else types
            values = [v for v in values if any(_is_type(v, t) for t in types)]
        return LiteralSet(json.dumps(v, ensure_ascii=False, allow_nan=False) for v in values)

    def _ref(self, ref, path) -> Node:
        if not isinstance(ref, str) or not ref.startswith("#"):
            self.fail(path, f"$ref {ref!r:.60}: only local references (#/$defs/...) are supported")
        depth = self._expanding.get(ref, 0)
        if depth >= MAX_REF_DEPTH:
            return NEVER
        node = self._refs.get((ref, depth))
        if node is None:
            self._expanding[ref] = depth + 1
            try:
                node = self.node(self._resolve(ref, path), ref)
            finally:
                self._expanding[ref] = depth
            self._refs[(ref, depth)] = node
        return node

    def _resolve(self, ref: str, path: str):
        target = self.root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                self.fail(path, f"$ref {ref!r:.60} does not resolve")
        return target


def _is_type(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()
    checks = {
        "string": str,
        "number": int | float,
        "boolean": bool,
        "null": type(None),
        "object": dict,
        "array": list,
    }
    expected = checks.get(kind)
    return expected is not None and isinstance(value, expected) and (kind == "boolean" or not isinstance(value, bool))


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
