"""Reading a model's JSON files (config.json, generation_config.json, the safetensors index,
tokenizer.json, tokenizer_config.json): one reader, so every bad file gets the same typed error
naming the file and the problem."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import ModelFileError


def read_json(path) -> dict:
    """The JSON object in `path`; ModelFileError if it is missing, unreadable, not JSON or not an object."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except FileNotFoundError:
        raise ModelFileError(path, "file not found") from None
    except OSError as err:
        raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelFileError(path, f"malformed JSON: {err}") from None
    if not isinstance(data, dict):
        raise ModelFileError(path, "expected a JSON object at the top level")
    return data
