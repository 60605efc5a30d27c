"""config.json's values read with their types checked (models/config.py; their ranges:
config_check.py)."""

from __future__ import annotations

import math

from ..errors import ModelFileError
from ..formats.json_file import describe


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_REQUIRED = object()


class ConfigKeys:
    """A config.json object whose values are read with their types checked: a required key that
    is missing (or null) or a value of the wrong type is a ModelFileError naming the file and the
    key. Null counts as absent, as transformers writes unset keys. (Ranges: config_check.py.)"""

    def __init__(self, raw: dict, path, where: str = ""):
        self.raw, self.path, self.where = raw, path, where

    def fail(self, key: str, expected: str, value):
        raise ModelFileError(self.path, f"{self.where}{key} should be {expected}, got {describe(value)}")

    def get(self, key: str, default=_REQUIRED):
        value = self.raw.get(key)
        if value is None:
            if default is _REQUIRED:
                raise ModelFileError(self.path, f"missing key {self.where + key!r}")
            return default
        return value

    def int(self, key: str, default=_REQUIRED):
        value = self.get(key, default)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)  # 4096.0 says 4096
        if value is not default and not is_int(value):
            self.fail(key, "an integer", value)
        return value

    def number(self, key: str, default=_REQUIRED):
        value = self.get(key, default)
        if value is default:
            return value
        if not is_number(value):
            self.fail(key, "a number", value)
        try:
            return float(value)
        except OverflowError:  # an integer past 1e308: config_check refuses the infinity
            return math.inf

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def str(self, key: str, default=_REQUIRED):
        value = self.get(key, default)
        if value is not default and not isinstance(value, str):
            self.fail(key, "a string", value)
        return value

    def section(self, key: str) -> ConfigKeys:
        """The object under `key` ({} when absent)."""
        value = self.get(key, {})
        if not isinstance(value, dict):
            self.fail(key, "an object", value)
        return ConfigKeys(value, self.path, f"{self.where}{key}.")
