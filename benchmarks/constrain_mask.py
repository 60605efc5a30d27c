"""The cost of constrained decoding's token masks (py_engine/constrain) on real vocabularies, in CPython.
Prints one JSON object: per vocabulary the token table's build seconds, and per schema the cold first
mask (empty mask cache), then per-token mask milliseconds (median / p90 / max) over random generations:
each token drawn at random from the allowed ones, more and more often one that closes a string or a
container (a model's output repeats states more, so this is the harder case). "first" is the first
generation of a schema on a fresh table (every state new), "warm" the generations after it (the cache
as a server would have it); advance_ms is the parser's cost per token. "answer_first" / "answer_warm":
the same along a plausible answer (pretty-printed JSON in the model's own tokenization), on a fresh
mask cache and again.

    python benchmarks/constrain_mask.py [--models qwen2.5-coder-0.5b-instruct smollm2-135m-instruct]
                                        [--generations 6] [--max-tokens 200]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.constrain import Constraint, TokenTable, compile_response_format  # noqa: E402
from py_engine.formats.gguf import read_gguf  # noqa: E402
from py_engine.formats.gguf_tokenizer import tokenizer_from_gguf  # noqa: E402
from py_engine.model_cache import ensure_model  # noqa: E402

NAME = {"type": "string", "minLength": 1, "maxLength": 40}
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": NAME,
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "bio": {"type": "string"},
        },
        "required": ["name", "age", "bio"],
        "additionalProperties": False,
    },
    "review": {
        "type": "object",
        "properties": {
            "product": {"type": "string"},
            "rating": {"enum": [1, 2, 3, 4, 5]},
            "pros": {"type": "array", "items": NAME, "maxItems": 3},
            "verdict": {"enum": ["buy", "skip"]},
            "price": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
        },
        "required": ["product", "rating", "pros", "verdict", "price"],
        "additionalProperties": False,
    },
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["label", "children"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    },
    "json_object": None,
}


# An answer per schema, as a model might write it: its own tokenization is walked token by token.
ANSWERS = {
    "person": {
        "name": "Ada Lovelace",
        "age": 36,
        "bio": "Mathematician; wrote the first program for Babbage's "
        "Analytical Engine, and saw that it could compose music — «a new, a vast, and a powerful language».",
    },
    "review": {
        "product": "Acme Kettle 2000",
        "rating": 4,
        "pros": ["boils fast", "quiet"],
        "verdict": "buy",
        "price": 39.99,
    },
    "tree": {
        "label": "root",
        "children": [{"label": "a", "children": []}, {"label": "b", "children": [{"label": "b.1", "children": []}]}],
    },
    "json_object": {
        "city": "Paris",
        "population": 2102650,
        "landmarks": ["Eiffel Tower", "Louvre"],
        "mayor": {"name": "Anne Hidalgo", "since": 2014},
        "capital": True,
        "note": None,
    },
}


def response_format(schema) -> dict:
    if schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "bench", "schema": schema, "strict": True}}


def allowed(mask: bytes) -> list[int]:
    bits = bin(int.from_bytes(mask, "little"))[:1:-1]
    return [i for i, bit in enumerate(bits) if bit == "1"]


def generate(grammar, table, eos: int, rng: random.Random, max_tokens: int):
    """One random generation: (mask seconds per token, advance seconds per token, finished)."""
    constraint = Constraint(grammar, table, [eos])
    masks, advances = [], []
    for step in range(max_tokens):
        start = time.perf_counter()
        mask = constraint.mask()
        masks.append(time.perf_counter() - start)
        ids = allowed(mask)
        if eos in ids:
            return masks, advances, True
        closers = [i for i in ids if any(b in table.pieces[i] for b in b'"]}')]
        pick = rng.choice(closers if closers and rng.random() < min(0.9, step / 30) else ids)
        start = time.perf_counter()
        constraint.advance(pick)
        advances.append(time.perf_counter() - start)
    return masks, advances, False


def replay(grammar, table, eos: int, ids: list[int]) -> list[float]:
    """Mask seconds per token along a given answer (every token must be allowed)."""
    constraint = Constraint(grammar, table, [eos])
    seconds = []
    for token_id in [*ids, eos]:
        start = time.perf_counter()
        mask = constraint.mask()
        seconds.append(time.perf_counter() - start)
        assert mask[token_id >> 3] >> (token_id & 7) & 1, f"{token_id} refused after {constraint.text!r}"
        if token_id != eos:
            constraint.advance(token_id)
    return seconds


def stats(seconds: list[float]) -> dict:
    ms = sorted(s * 1e3 for s in seconds)
    return {
        "tokens": len(ms),
        "median_ms": round(statistics.median(ms), 3),
        "p90_ms": round(ms[math.ceil(0.9 * len(ms)) - 1], 3),
        "max_ms": round(ms[-1], 3),
    }


def bench_model(name: str, generations: int, max_tokens: int) -> dict:
    tokenizer = tokenizer_from_gguf(read_gguf(ensure_model(name)))
    start = time.perf_counter()
    table = TokenTable.from_tokenizer(tokenizer)  # a fresh tokenizer: built here, every token's bytes included
    out = {"vocab_size": table.vocab_size, "table_build_s": round(time.perf_counter() - start, 3), "schemas": {}}
    eos = min(tokenizer.eos_ids)
    for label, schema in SCHEMAS.items():
        table.masks.clear()
        start = time.perf_counter()
        grammar = compile_response_format(response_format(schema))
        compile_ms = (time.perf_counter() - start) * 1e3
        start = time.perf_counter()
        Constraint(grammar, table, [eos]).mask()
        cold_ms = (time.perf_counter() - start) * 1e3
        table.masks.clear()
        answer = tokenizer.encode(json.dumps(ANSWERS[label], indent=2, ensure_ascii=False))
        answer_first = replay(grammar, table, eos, answer)
        answer_warm = replay(grammar, table, eos, answer)
        table.masks.clear()
        rng = random.Random(label)
        runs = [generate(grammar, table, eos, rng, max_tokens) for _ in range(generations)]
        out["schemas"][label] = {
            "compile_ms": round(compile_ms, 3),
            "cold_first_mask_ms": round(cold_ms, 3),
            "answer_first": stats(answer_first),
            "answer_warm": stats(answer_warm),
            "first": stats(runs[0][0]),
            "warm": stats([s for masks, _, _ in runs[1:] for s in masks]),
            "advance_ms": stats([s for _, advances, _ in runs for s in advances])["median_ms"],
            "finished": sum(done for _, _, done in runs),
            "generations": generations,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"])
    parser.add_argument("--generations", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=200)
    args = parser.parse_args()
    result = {
        "python": sys.version.split()[0],
        "models": {name: bench_model(name, args.generations, args.max_tokens) for name in args.models},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
