"""Fuzzing the safetensors header reader (formats/safetensors.parse_header): the headers of the
tiny fixtures' files (every architecture and dtype, a sharded pair), mutated as JSON (shapes,
dtypes and data_offsets of every kind and size) or as bytes (the length prefix, truncation)."""

import json
import struct

import pytest
from harness import fuzz, mutate_bytes, mutate_json
from hf_folders import FIXTURES, encode_header, safetensors_head

from py_engine.formats.safetensors import parse_header

SLACK = 16 << 20  # the file's size past its header: more than any fixture's tensor data


def parse(data: bytes) -> None:
    """The reader as a model source calls it: a read function over the file's first bytes (here
    all there is of it) and the file's size."""
    parse_header(lambda start, length: data[start : start + length], len(data) + SLACK, "fuzz.safetensors")


def mutate(seed: bytes, rng) -> bytes:
    if rng.random() < 0.6:
        header = json.loads(seed[8:])
        return encode_header(mutate_json(header, rng), rng)
    return mutate_bytes(seed, rng)


@pytest.fixture(scope="module")
def seeds():
    return [safetensors_head(path) for path in sorted(FIXTURES.glob("*/*.safetensors"))]


def test_seeds_parse(seeds):
    assert len(seeds) >= 30
    for data in seeds:
        parse(data)
        assert struct.unpack("<Q", data[:8])[0] == len(data) - 8


def test_fuzz_safetensors(seeds):
    counts = fuzz("safetensors", seeds, mutate, parse)
    assert counts["accepted"] > 0 and counts["typed_errors"] > 0
