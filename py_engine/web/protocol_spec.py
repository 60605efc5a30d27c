"""The worker protocol's spec language (protocol.py's tables are written in it) and the check of a
value against a spec: what each form means is in protocol.py's docstring."""

from __future__ import annotations

from ..errors import WispError


class ProtocolError(WispError):
    """A worker message that does not fit the table: which message, which field, what is wrong."""


class Or:
    def __init__(self, *choices):
        self.choices = choices


class Enum:
    def __init__(self, *names: str):
        self.names = names


class Map:
    def __init__(self, value):
        self.value = value


def check(value, spec, where: str) -> None:
    """Raise ProtocolError naming `where` (e.g. "load.model.files") when value does not fit spec."""
    if not _fits(value, spec, where):
        raise ProtocolError(f"{where} must be {describe(spec)}, not {name_of(value)}")


def _fits(value, spec, where: str) -> bool:
    """False when value is not of spec's kind at all; raises for a problem inside an object."""
    if spec is None:
        return value is None
    if spec is object:
        return True
    if spec is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec in (str, int, bool, dict):
        return isinstance(value, spec) and (spec is bool or not isinstance(value, bool))
    if isinstance(spec, Enum):
        return value in spec.names
    if isinstance(spec, Or):  # the first choice that fits; a lone choice of the value's kind says why not
        candidates = [choice for choice in spec.choices if _json_kind(value) in _json_kinds(choice)]
        for choice in candidates:
            try:
                check(value, choice, where)
                return True
            except ProtocolError as exc:
                problem = exc
        if len(candidates) == 1:
            raise problem
        return False
    if isinstance(spec, list):
        if not isinstance(value, list):
            return False
        for i, item in enumerate(value):
            check(item, spec[0], f"{where}[{i}]")
        return True
    if isinstance(spec, Map):
        if not isinstance(value, dict):
            return False
        for key, item in value.items():
            check(item, spec.value, f"{where}[{key!r}]")
        return True
    if not isinstance(value, dict):  # a dict spec: exactly these fields
        return False
    fields = {name.rstrip("?"): (sub, not name.endswith("?")) for name, sub in spec.items()}
    for name, (sub, required) in fields.items():
        if name in value:
            check(value[name], sub, f"{where}.{name}")
        elif required:
            raise ProtocolError(f"{where}: the field {name!r} is missing")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ProtocolError(f"{where}: unknown field {unknown[0]!r}; known: {', '.join(fields)}")
    return True


def _json_kind(value) -> str:
    return {
        type(None): "null",
        bool: "bool",
        int: "number",
        float: "number",
        str: "string",
        list: "list",
        dict: "object",
    }.get(type(value), "other")


def _json_kinds(spec) -> set:
    if spec is object:
        return {"null", "bool", "number", "string", "list", "object"}
    if isinstance(spec, Or):
        return set().union(*(_json_kinds(choice) for choice in spec.choices))
    if spec is None:
        return {"null"}
    if spec is str or isinstance(spec, Enum):
        return {"string"}
    if spec in (int, float):
        return {"number"}
    return {"bool"} if spec is bool else {"list"} if isinstance(spec, list) else {"object"}


def describe(spec) -> str:
    if spec is None:
        return "null"
    if isinstance(spec, type):
        return {
            str: "a string",
            int: "a whole number",
            bool: "true or false",
            float: "a number",
            dict: "an object",
            object: "any value",
        }[spec]
    if isinstance(spec, Enum):
        return "one of " + ", ".join(repr(n) for n in spec.names)
    if isinstance(spec, Or):
        return " or ".join(describe(c) for c in spec.choices)
    if isinstance(spec, list):
        return f"a list of {describe(spec[0]).removeprefix('a ').removeprefix('an ')}s"
    if isinstance(spec, Map):
        return "an object of " + describe(spec.value).removeprefix("a ").removeprefix("an ") + "s"
    return "an object {" + ", ".join(spec) + "}"


def name_of(value) -> str:
    return {
        "null": "null",
        "bool": "true/false",
        "number": repr(value),
        "string": repr(value)[:40],
        "list": "a list",
        "object": "an object",
    }.get(_json_kind(value), type(value).__name__)
