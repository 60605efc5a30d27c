"""Mutation fuzzing of the readers of untrusted model files (issue 16).

Each reader's fuzzer (tests/fuzz/test_fuzz_*.py) hands `fuzz()` its seed inputs, a mutator and a
`target` that feeds one input to the reader. An input passes when the target returns or raises a
WispError (the typed errors the CLI prints as one line). Anything else is a finding:
- another exception (TypeError, RecursionError, struct.error, ...);
- an input running past HANG_SECONDS (a SIGALRM interrupts Python code and `re` matching);
- MemoryError under the address-space cap (the process's current size + MEMORY_HEADROOM).

Findings are written to tests/fuzz/crashers/found/<reader>-<hash> and the test fails naming them.
Once fixed, a finding moves to tests/fuzz/crashers/<reader>/, which every run replays first.

    FUZZ_COUNT   inputs per reader (default 10,000: what CI runs)
    FUZZ_SEED    the mutation seed (default 0, so CI is repeatable; `make fuzz` draws a new one)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import resource
import signal
import time
import traceback
from pathlib import Path

from py_engine.errors import WispError

HERE = Path(__file__).parent
CRASHERS = HERE / "crashers"
HANG_SECONDS = 5.0
MEMORY_HEADROOM = 2 << 30

# Values that break readers: wrong types, signs, sizes, non-finite floats, hostile names.
HOSTILE_VALUES = [
    None, True, False, 0, -1, 1, 2, 3, 7, 2**31 - 1, 2**31, 2**32, 2**63, 2**64 + 1, 10**30, -(10**30),
    0.0, -0.0, 0.5, 1e-300, 1e308, math.inf, -math.inf, math.nan, "", "x", "0", "-1", "1e999", "NaN",
    "../../../etc/passwd", "/etc/passwd", "a" * 4096, "\x00", "\ud800", [], [0], [None], ["x"], [-1, 2**40],
    {}, {"x": 1}, [[[[[[[[]]]]]]]],
]  # fmt: skip
INTERESTING_INTS = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1]


class Hang(Exception):
    pass


def fuzz_count() -> int:
    return int(os.environ.get("FUZZ_COUNT", "10000"))


def fuzz_seed() -> int:
    return int(os.environ.get("FUZZ_SEED", "0"))


# --- mutators -------------------------------------------------------------------------------


def mutate_bytes(data: bytes, rng: random.Random, others=()) -> bytes:
    """1-4 byte-level edits: bit flips, interesting integers (u8/u32/u64, little-endian, often
    aligned where headers keep counts and offsets), inserted/deleted/duplicated runs, a splice of
    another seed, truncation."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        pos = rng.randrange(len(buf) + 1)
        if kind == 0 and buf:
            buf[pos % len(buf)] ^= 1 << rng.randrange(8)
        elif kind == 1 and buf:
            buf[pos % len(buf)] = rng.randrange(256)
        elif kind in (2, 3):
            width = rng.choice((1, 4, 8)) if kind == 2 else 8
            pos = pos - pos % width if rng.random() < 0.7 else pos
            value = rng.choice(INTERESTING_INTS) if rng.random() < 0.8 else rng.getrandbits(width * 8)
            buf[pos : pos + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        elif kind == 4:
            del buf[pos : pos + rng.choice((1, 2, 4, 8, 64))]
        elif kind == 5:
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 8))))
        elif kind == 6 and buf:
            start = rng.randrange(len(buf))
            buf[pos:pos] = buf[start : start + rng.randint(1, 64)]
        elif kind == 7:
            if others and rng.random() < 0.5:
                other = rng.choice(others)
                cut = rng.randrange(len(other) + 1)
                buf = buf[:pos] + bytearray(other[cut:])
            else:
                del buf[pos:]
    return bytes(buf)


def mutate_json(value, rng: random.Random):
    """A deep copy of a JSON value with 1-3 structural edits: a node replaced by a hostile value
    (or a deeply nested one), a key deleted, a list emptied or grown, a number scaled."""
    value = json.loads(json.dumps(value))
    for _ in range(rng.randint(1, 3)):
        value = _edit(value, rng)
    return value


def json_bytes(value, rng: random.Random | None = None) -> bytes:
    """Serialised (NaN and Infinity allowed, as Python's json reads them; DEEP markers expanded to
    nested lists); with `rng`, sometimes byte-mutated as text too."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    text = _DEEP_MARK.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    data = text.encode("utf-8", "surrogatepass")
    if rng is not None and rng.random() < 0.15:
        data = mutate_bytes(data, rng)
    return data


# A JSON nesting deeper than Python's recursion limit can't be built as a value to dump: a node
# stands in for it as a marker string that json_bytes expands in the text.
_DEEP_MARK = re.compile(r'"\\u0000deep:(\d+)"')


def _edit(node, rng):
    containers = []
    _collect(node, containers, 0)
    if not containers or rng.random() < 0.02:
        return _hostile(rng)
    parent, key = rng.choice(containers)
    kind = rng.randrange(10)
    if kind <= 5:
        parent[key] = _hostile(rng)
    elif kind == 6 and isinstance(parent, dict):
        del parent[key]
    elif kind == 7 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool):
        parent[key] = parent[key] * rng.choice((-1, 0, 2, 1000, 2**32, 0.5))
    elif kind == 8 and isinstance(parent[key], list):
        parent[key] = parent[key][: rng.randrange(len(parent[key]) + 1)] * rng.choice((0, 1, 2, 100))
    elif kind == 9 and isinstance(parent[key], str):
        parent[key] = parent[key] * rng.choice((0, 2, 1000))
    else:
        parent[key] = _hostile(rng)
    return node


def _collect(node, out, depth):
    if depth > 64:
        return
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        out.append((node, key))
        _collect(child, out, depth + 1)


def _hostile(rng):
    if rng.random() < 0.03:
        return f"\x00deep:{rng.choice((100, 5000, 100_000))}"
    return json.loads(json.dumps(rng.choice(HOSTILE_VALUES), allow_nan=True))


# --- the runner -----------------------------------------------------------------------------


def fuzz(reader: str, seeds: list, mutate, target, count: int | None = None, seed: int | None = None) -> dict:
    """Feed `count` mutated inputs (bytes, or anything `target` takes that `save` can write) to
    `target`; fail with the findings. Returns the counts, printed as JSON for the log."""
    count = fuzz_count() if count is None else count
    seed = fuzz_seed() if seed is None else seed
    rng = random.Random(f"{reader}:{seed}")
    counts = {"reader": reader, "seed": seed, "inputs": 0, "accepted": 0, "typed_errors": 0, "findings": 0}
    findings = []
    start = time.perf_counter()
    with _memory_cap(), _alarm():
        for data in _replay(reader):
            _one(reader, target, data, counts, findings)
        for _ in range(count):
            _one(reader, target, mutate(rng.choice(seeds), rng), counts, findings)
    counts["seconds"] = round(time.perf_counter() - start, 2)
    print(json.dumps(counts))
    if findings:
        first = {}  # one line per kind of finding: its first input
        for path, problem in findings:
            first.setdefault(problem.split(": ")[0] + problem.rsplit("(at", 1)[-1], (path, problem))
        lines = "\n".join(f"  {path}: {problem}" for path, problem in list(first.values())[:20])
        raise AssertionError(f"{reader}: {len(findings)} findings of {len(first)} kinds (FUZZ_SEED={seed}):\n{lines}")
    return counts


def _one(reader, target, data, counts, findings):
    counts["inputs"] += 1
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        target(data)
        counts["accepted"] += 1
    except WispError:
        counts["typed_errors"] += 1
    except Hang:
        findings.append((_save(reader, data), f"ran past {HANG_SECONDS} s"))
    except Exception as exc:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        where = traceback.extract_tb(exc.__traceback__)[-1]
        problem = f"{type(exc).__name__}: {str(exc)[:200]} (at {Path(where.filename).name}:{where.lineno})"
        findings.append((_save(reader, data), problem))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    counts["findings"] = len(findings)


def _save(reader, data) -> Path:
    raw = data if isinstance(data, bytes) else json.dumps(data, allow_nan=True).encode("utf-8", "surrogatepass")
    path = CRASHERS / "found" / f"{reader}-{hashlib.sha256(raw).hexdigest()[:16]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return path


def _replay(reader):
    folder = CRASHERS / reader
    return [path.read_bytes() for path in sorted(folder.iterdir())] if folder.is_dir() else []


class _alarm:
    def __enter__(self):
        def ring(signum, frame):
            raise Hang()

        self.previous = signal.signal(signal.SIGALRM, ring)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)


class _memory_cap:
    """RLIMIT_AS at the process's present size + MEMORY_HEADROOM while fuzzing, restored after
    (Chromium and the GPU drivers started later must not inherit it)."""

    def __enter__(self):
        self.previous = resource.getrlimit(resource.RLIMIT_AS)
        size = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
        hard = self.previous[1]
        cap = size + MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))

    def __exit__(self, *exc):
        resource.setrlimit(resource.RLIMIT_AS, self.previous)
