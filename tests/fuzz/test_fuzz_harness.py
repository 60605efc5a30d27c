"""The fuzz harness itself: what it counts as a finding, and what it lets pass."""

import random
import time

import harness
import pytest
from harness import fuzz, json_bytes, mutate_bytes, mutate_json

from py_engine.errors import ModelFileError


@pytest.fixture(autouse=True)
def crashers(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "CRASHERS", tmp_path)
    return tmp_path


def test_typed_errors_and_accepted_inputs_pass():
    def target(data):
        if data[:1] and data[0] % 2:
            raise ModelFileError("x.bin", "odd")

    counts = fuzz("ok", [b"\x00\x01\x02"], mutate_bytes, target, count=500, seed=1)
    assert counts["inputs"] == 500 and counts["typed_errors"] > 0 and counts["accepted"] > 0


def test_an_untyped_exception_is_a_finding_saved_for_replay(crashers):
    def target(data):
        if len(data) > 4:
            raise TypeError("a list where a string was expected")

    with pytest.raises(AssertionError, match="TypeError"):
        fuzz("bad", [b"1234"], mutate_bytes, target, count=200, seed=1)
    found = list((crashers / "found").iterdir())
    assert found and all(len(path.read_bytes()) > 4 for path in found)
    # Moved into the reader's folder, a finding is replayed first on every run.
    (crashers / "bad").mkdir()
    found[0].rename(crashers / "bad" / found[0].name)
    with pytest.raises(AssertionError):
        fuzz("bad", [b""], lambda data, rng: data, target, count=1, seed=1)


def test_a_hang_is_a_finding(monkeypatch):
    monkeypatch.setattr(harness, "HANG_SECONDS", 0.2)

    def target(data):
        while True:
            time.sleep(0.01)

    start = time.perf_counter()
    with pytest.raises(AssertionError, match="ran past"):
        fuzz("hang", [b"x"], mutate_bytes, target, count=2, seed=1)
    assert time.perf_counter() - start < 5


def test_a_memory_blow_up_is_a_finding(monkeypatch):
    monkeypatch.setattr(harness, "MEMORY_HEADROOM", 256 << 20)

    def target(data):
        return bytearray(1 << 30)

    with pytest.raises(AssertionError, match="MemoryError"):
        fuzz("memory", [b"x"], mutate_bytes, target, count=1, seed=1)
    bytearray(512 << 20)  # and the cap is lifted afterwards


def test_json_mutations_reach_hostile_values():
    rng = random.Random(0)
    seed = {"num_attention_heads": 4, "layer_types": ["full_attention"] * 2, "rope_scaling": {"factor": 8.0}}
    texts = {json_bytes(mutate_json(seed, rng)) for _ in range(300)}
    assert any(b"NaN" in t or b"Infinity" in t for t in texts)
    assert any(b"[[[[" in t for t in texts) and len(texts) > 100
