"""One JSON Schema with a `type` (or none: then the types its keywords speak of, or any value) ->
its grammar. Each type checks the keywords that apply to it; one it cannot enforce raises."""

from .json_containers import Array, FreeObject, Object
from .json_numbers import Number
from .json_strings import String
from .nodes import LiteralSet, Node, Union

_KEYWORDS = {
    "object": {
        "properties",
        "required",
        "additionalProperties",
        "unevaluatedProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
    },
    "array": {
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "prefixItems",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
    },
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
}
_KEYWORDS["integer"] = _KEYWORDS["number"]
_KEYWORDS["boolean"] = _KEYWORDS["null"] = set()
_SUPPORTED = {
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
}
_TYPE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")


def build_type(compiler, schema: dict, path: str) -> Node:
    types = schema.get("type")
    if types is None:
        types = [t for t in _TYPE_ORDER if t != "integer" and _KEYWORDS[t] & schema.keys()]
        if not types:
            return compiler.node(True, path)
    elif isinstance(types, str):
        types = [types]
    if not isinstance(types, list) or not types or any(t not in _KEYWORDS for t in types):
        compiler.fail(path, f'"type" {schema.get("type")!r:.60} is not a JSON Schema type or list of types')
    return Union([_build_one(compiler, schema, path, kind) for kind in dict.fromkeys(types)])


def _build_one(compiler, schema: dict, path: str, kind: str) -> Node:
    for key in _KEYWORDS[kind] & schema.keys():
        if key not in _SUPPORTED and not _harmless(key, schema[key], schema):
            compiler.fail(path, f'"{key}" is not supported for type {kind}')
    if kind == "object":
        return _object(compiler, schema, path)
    if kind == "array":
        items = schema.get("items", True)
        if not isinstance(items, dict | bool):
            compiler.fail(path, '"items" as a list (tuple form) is not supported')
        low, high = _count(compiler, schema, path, "minItems"), _count(compiler, schema, path, "maxItems", None)
        return Array(compiler.node(items, f"{path}/items"), low, high)
    if kind == "string":
        low, high = _count(compiler, schema, path, "minLength"), _count(compiler, schema, path, "maxLength", None)
        return String(low, high)
    if kind in ("number", "integer"):
        return _number(compiler, schema, path, kind == "integer")
    return LiteralSet([b"true", b"false"] if kind == "boolean" else [b"null"])


def _harmless(key, value, schema) -> bool:
    """Keywords that forbid nothing our grammar could produce."""
    if key in ("unevaluatedProperties", "unevaluatedItems", "additionalItems"):
        return True  # we emit declared properties only; `items` covers every item
    if key == "uniqueItems":
        return value is False or schema.get("maxItems") in (0, 1)
    if key == "minProperties":
        return value == 0
    return False


def _count(compiler, schema, path, key, default=0):
    value = schema.get(key, default)
    if value is not default and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        compiler.fail(path, f'"{key}" must be a non-negative integer')
    return value


def _object(compiler, schema: dict, path: str) -> Node:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict):
        compiler.fail(path, '"properties" must be an object')
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        compiler.fail(path, '"required" must be a list of strings')
    if not isinstance(extra, dict | bool):
        compiler.fail(path, '"additionalProperties" must be a schema')
    if not properties and not required:
        return FreeObject(compiler.node(extra, f"{path}/additionalProperties"))
    fields = [
        (name, compiler.node(sub, f"{path}/properties/{name}"), name in required) for name, sub in properties.items()
    ]
    for name in dict.fromkeys(required):
        if name not in properties:
            if extra is False:
                compiler.fail(path, f"required property {name!r:.60} is not allowed by additionalProperties: false")
            fields.append((name, compiler.node(extra, f"{path}/additionalProperties"), True))
    return Object(fields)


def _number(compiler, schema: dict, path: str, integer: bool) -> Node:
    bounds = {}
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        value = schema.get(key)
        if value is None:
            continue
        if key.startswith("exclusive") and isinstance(value, bool):  # draft 4: a flag on minimum / maximum
            continue
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or value != value
            or abs(value) == float("inf")
        ):
            compiler.fail(path, f'"{key}" must be a finite number')
        bounds[key] = value
    low, low_excl = _tighter(bounds, "minimum", "exclusiveMinimum", schema, max)
    high, high_excl = _tighter(bounds, "maximum", "exclusiveMaximum", schema, min)
    return Number(integer, low, low_excl, high, high_excl)


def _tighter(bounds: dict, inclusive: str, exclusive: str, schema: dict, pick):
    """The binding bound of a side: (value, exclusive?), or (None, False)."""
    options = []
    if inclusive in bounds:
        options.append((bounds[inclusive], schema.get(exclusive) is True))
    if exclusive in bounds:
        options.append((bounds[exclusive], True))
    if not options:
        return None, False
    value = pick(value for value, _ in options)
    return value, any(excl for v, excl in options if v == value)
