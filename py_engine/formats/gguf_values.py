"""Typed reads of a GGUF file's metadata values: the one place where the raw values `parse_gguf`
returns (int, float, bool, str or a list of them, whatever the file says) become the numbers,
strings and lists the config and the tokenizer are built from.

A value of the wrong kind (an array where one number belongs, a string where a count belongs, a
float where an integer belongs), out of its range, not finite, or a per-layer array of the wrong
length is a ModelFileError naming the file and the key. Counts are read as llama.cpp reads them,
as uint32; anything that sizes a per-layer list is bounded by llama.cpp's LLAMA_MAX_LAYERS.
"""

from __future__ import annotations

import math

from ..errors import ModelFileError

REQUIRED = object()
UINT32_MAX = 2**32 - 1
MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS


def describe(value) -> str:
    """A value as an error message names it: its kind, and the value when short."""
    if isinstance(value, list):
        return f"an array of {len(value)} values"
    if isinstance(value, bool):
        return f"a bool ({value})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})" if len(value) <= 40 else f"a string of {len(value)} characters"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value!r})"
    return f"{type(value).__name__}"


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_flag(value) -> bool:
    """A per-layer flag: a bool, or the 0 / 1 some converters write."""
    return isinstance(value, bool) or (is_int(value) and value in (0, 1))


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Metadata:
    """A GGUF file's metadata, read key by key with the kind and range each key must have."""

    def __init__(self, metadata: dict, path):
        self.meta, self.path = metadata, str(path)

    def fail(self, key: str, problem: str):
        raise ModelFileError(self.path, f"metadata key {key!r} {problem}")

    def has(self, key: str) -> bool:
        return key in self.meta

    def absent(self, key: str, default) -> bool:
        """Whether `key` is missing (then `default` stands in for it); a required key must be there."""
        if key in self.meta:
            return False
        if default is REQUIRED:
            raise ModelFileError(self.path, f"missing metadata key {key!r}")
        return True

    # ---- scalars ----

    def integer(self, key: str, default=REQUIRED, *, minimum: int = 0, maximum: int = UINT32_MAX):
        if self.absent(key, default):
            return default
        value = self.meta[key]
        return self.check_integer(key, value, minimum, maximum)

    def check_integer(self, key: str, value, minimum: int = 0, maximum: int = UINT32_MAX) -> int:
        if not is_int(value):
            self.fail(key, f"should be an integer, got {describe(value)}")
        if not minimum <= value <= maximum:
            self.fail(key, f"is {value}, outside {minimum}..{maximum}")
        return value

    def number(self, key: str, default=REQUIRED, *, positive: bool = False):
        """A finite float (an integer is taken as one); positive: > 0."""
        if self.absent(key, default):
            return default
        value = self.meta[key]
        return self.check_number(key, value, positive)

    def check_number(self, key: str, value, positive: bool = False) -> float:
        if not is_number(value):
            self.fail(key, f"should be a number, got {describe(value)}")
        value = float(value)
        if not math.isfinite(value):
            self.fail(key, f"is {value}: it should be a finite number")
        if positive and value <= 0:
            self.fail(key, f"is {value}: it should be positive")
        return value

    def string(self, key: str, default=REQUIRED):
        if self.absent(key, default):
            return default
        value = self.meta[key]
        if not isinstance(value, str):
            self.fail(key, f"should be a string, got {describe(value)}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        if self.absent(key, default):
            return default
        value = self.meta[key]
        if not isinstance(value, bool):
            self.fail(key, f"should be a bool, got {describe(value)}")
        return value

    # ---- arrays ----

    def array(self, key: str, check_item=None, default=REQUIRED, *, types=None, length=None, what: str = "values"):
        """A list whose items are all of `types` (exactly: the parser gives int, float, bool,
        str or list) and pass check_item(item); `length`: exactly that many. Vocabularies hold
        hundreds of thousands of items: the checks run as map() over C functions where they can."""
        if self.absent(key, default):
            return default
        value = self.meta[key]
        if not isinstance(value, list):
            self.fail(key, f"should be an array of {what}, got {describe(value)}")
        kinds_ok = types is None or set(map(type, value)) <= set(types)
        if not kinds_ok or (check_item is not None and not all(map(check_item, value))):
            index = next(
                i
                for i, item in enumerate(value)
                if (types is not None and type(item) not in types) or (check_item is not None and not check_item(item))
            )
            self.fail(key, f"should be an array of {what}, but item {index} is {describe(value[index])}")
        if length is not None and len(value) != length:
            raise ModelFileError(self.path, f"{key} has {len(value)} entries, expected {length}")
        return value

    def per_layer(self, key: str, layers: int, default=REQUIRED, *, minimum: int = 0, maximum: int = UINT32_MAX):
        """An integer for every layer: one written as a number, or an array of `layers` numbers
        (`default` for every layer where the key is missing)."""
        if self.absent(key, default):
            return [default] * layers
        value = self.meta[key]
        if not isinstance(value, list):
            return [self.check_integer(key, value, minimum, maximum)] * layers
        if len(value) != layers:
            self.fail(key, f"has {len(value)} per-layer values for {layers} layers ({value[:8]})")
        return [self.check_integer(key, item, minimum, maximum) for item in value]

    def shared(self, key: str, layers: int, default=REQUIRED, *, minimum: int = 0, maximum: int = UINT32_MAX):
        """One integer for all layers: a number, or a per-layer array whose values are all equal
        (some converters write one per layer; a ModelConfig holds one)."""
        if self.absent(key, default):
            return default
        values = self.per_layer(key, layers, minimum=minimum, maximum=maximum)
        if len(set(values)) > 1:
            self.fail(key, f"per-layer values {values[:8]} differ: that is not supported")
        if not values:
            self.fail(key, "is an empty array")
        return values[0]
