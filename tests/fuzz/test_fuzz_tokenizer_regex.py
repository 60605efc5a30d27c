"""Fuzz the tokenizer regexes of tokenizer.json (issue 16): mutated Split patterns, compiled through
tokenizer/regex/compat.py and its backtracking guard (regex/guard.py), then run over text built to make a
backtracking engine work hard. A pattern may be refused, with the ModelFileError the tokenizer
loader turns a SpecError into; one that is accepted must split every text in under SLOW_SECONDS.

Seeds: the pre-tokenizer patterns of real models (GPT-2, Llama 3, Qwen2, GPT-4o, DeepSeek,
BLOOM, Chameleon...) with their big Unicode classes mostly swapped for small ones (a pattern with
\\p{L} takes some 20 ms to compile, and the guard reasons about overlaps, not sizes), and
patterns that backtrack catastrophically.
"""

import random
import time

from harness import fuzz

from py_engine.errors import ModelFileError
from py_engine.tokenizer.hf.pretokenize import GPT2_PATTERN, split_on_pattern
from py_engine.tokenizer.llama.pre import AFMOE_DIGITS, KIMI_K2, SPLITS
from py_engine.tokenizer.regex.compat import compile_pattern
from py_engine.tokenizer.spec_error import SpecError

SLOW_SECONDS = 2.0

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
O200K = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
R50K = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"
REAL = [GPT2_PATTERN, LLAMA3, O200K, R50K] + sorted(
    {regex for regexes, _ in SPLITS.values() for regex in regexes} - {KIMI_K2, AFMOE_DIGITS}
)
CATASTROPHIC = [
    r"(a+)+!", r"(a|a)*b", r"(a|aa)+b", r"(\w+\s?)*$", r"a*a*a*b", r"\s*\s*x", r"(?:|)" * 12 + "x",
    r"(.*a){20}", r"(\d+)+$", r"(x+x+)+y", r"(?=(a+)+b)", r"\s+(?=\s*$)x", r"(?:a?){30}a{30}", r"(a+)\1",
]  # fmt: skip
# Small stand-ins for the big classes: the same overlaps between letters, digits, marks and spaces.
SMALL_CLASSES = [
    ("\\p{L}", "[a-zA-Zé]"), ("\\p{N}", "[0-9²]"), ("\\p{Lu}", "[A-Z]"), ("\\p{Ll}", "[a-z]"), ("\\p{Lt}", "ǅ"),
    ("\\p{Lm}", "ʰ"), ("\\p{Lo}", "[ªº]"), ("\\p{M}", "[\\u0300-\\u0302]"), ("\\p{P}", "[!-/:-@]"),
    ("\\p{S}", "[$+<=>^`|~]"), ("\\w", "[a-zA-Z0-9_]"), ("\\W", "[^a-zA-Z0-9_]"),
]  # fmt: skip
FRAGMENTS = [
    "+", "*", "?", "+?", "*+", "{2,5}", "{3}", "{0,40}", "{1,}", "(", ")", "(?:", "(?=", "(?!", "(?<=a)", "(?<!\\s)", "|",
    "\\s", "\\S", "\\d", "\\D", "\\p{Nd}", "\\p{Zs}", "\\P{Nd}", "[^", "]", "[a-c]", "[\\s0-9]", ".", "^", "$", "\\b",
    "\\z", "\\1", "(?i:", "(?>", "a", "aa", " ", "\\r\\n", "\\x{41}", "\\x{zz}", "\\p{Greek}", "\\", "[]", "(?P<n>",
    "(?(1)a|b)", "\\p{", "{99999}", "(a|a)", "(a+)+", "(?:|)",
]  # fmt: skip
TEXTS = [
    "a" * 60 + "!",
    " " * 150 + "x",
    "0" * 80 + "!",
    "\r\n" * 40 + "x",
    "ab" * 40 + "\x00",
    "aaa " * 30 + "!",
    "Hello world! It's 2024; naïve café ǅ ʰ 12345 \t\n  end",
]


def _shrink(pattern: str, rng: random.Random) -> str:
    if rng.random() < 0.01:
        return pattern  # now and then the real thing, big classes and all
    for big, small in SMALL_CLASSES:
        pattern = pattern.replace(big, small)
    return pattern


def mutate(seed: bytes, rng: random.Random) -> bytes:
    pattern = _shrink(seed.decode("utf-8", "surrogatepass"), rng)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(len(pattern) + 1)
        kind = rng.randrange(6)
        if kind <= 1:
            pattern = pattern[:pos] + rng.choice(FRAGMENTS) + pattern[pos:]
        elif kind == 2:
            pattern = pattern[:pos] + pattern[pos + rng.randint(1, 6) :]
        elif kind == 3:  # repeat a stretch: nested quantifiers come from here
            end = min(len(pattern), pos + rng.randint(1, 12))
            pattern = pattern[:pos] + "(?:" + pattern[pos:end] + ")" + rng.choice("+*?") + pattern[end:]
        elif kind == 4:
            start = rng.randrange(len(pattern) + 1)
            pattern = pattern[:pos] + pattern[start : start + rng.randint(1, 20)] + pattern[pos:]
        else:
            other = _shrink(rng.choice(SEEDS).decode("utf-8", "surrogatepass"), rng)
            cut = rng.randrange(len(other) + 1)
            pattern = pattern[:pos] + other[cut:]
    return pattern.encode("utf-8", "surrogatepass")


def target(data: bytes) -> None:
    pattern = data.decode("utf-8", "surrogatepass")
    try:
        regex = compile_pattern(pattern)
    except SpecError as err:
        raise ModelFileError("tokenizer.json", str(err)) from None  # as Tokenizer.from_spec does
    start = time.perf_counter()
    for text in TEXTS:
        split_on_pattern(text, regex, "Isolated")
    elapsed = time.perf_counter() - start
    if elapsed > SLOW_SECONDS:
        raise AssertionError(f"an accepted pattern took {elapsed:.1f} s to split the test texts")


SEEDS = [pattern.encode("utf-8", "surrogatepass") for pattern in REAL + CATASTROPHIC]


def test_fuzz_tokenizer_regex():
    fuzz("tokenizer_regex", SEEDS, mutate, target)
