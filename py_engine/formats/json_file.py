"""Reading a model's JSON files (config.json, generation_config.json, the safetensors index,
tokenizer.json, tokenizer_config.json) and the JSON header of a safetensors file: one parser, so
every bad file gets the same typed error naming the file and the problem."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ModelFileError


def read_json(path) -> dict:
    """The JSON object in `path`; ModelFileError if it is missing, unreadable, not JSON or not an object."""
    path = Path(path)
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except FileNotFoundError:
        raise ModelFileError(path, "file not found") from None
    except OSError as err:  # a directory, a symlink loop, no permission, ...
        raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None
    data = parse_json(raw, path)
    if not isinstance(data, dict):
        raise ModelFileError(path, "expected a JSON object at the top level")
    return data


def parse_json(raw: bytes, path, what: str = "JSON"):
    """The JSON value of `raw` (UTF-8). Python's json module raises more than JSONDecodeError on
    hostile input: ValueError for an integer of more than 4300 digits, UnicodeDecodeError, and
    RecursionError for arrays nested some thousand deep. Each becomes a ModelFileError. (NaN,
    Infinity and huge numbers parse: the readers of each value refuse them where they matter.)"""
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ModelFileError(path, f"malformed {what}: nested too deeply") from None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
        raise ModelFileError(path, f"malformed {what}: {err}") from None


def describe(value) -> str:
    """A JSON value, short, for a message (never the whole of a huge list or a 5,000-digit int)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value) if abs(value) < 10**30 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    if isinstance(value, (list, tuple)):
        short = len(value) <= 8 and all(v is None or isinstance(v, (bool, int, float, str)) for v in value)
        return "[" + ", ".join(map(describe, value)) + "]" if short else f"a list of length {len(value)}"
    return "an object" if isinstance(value, dict) else type(value).__name__
