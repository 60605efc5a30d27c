"""Structured output with real models: N prompts x 5 JSON schemas through the OpenAI layer
(py_engine/api, the code both transports run), every answer parsed and validated with the
`jsonschema` package; prints JSON: per model and schema the share that validates, tokens, decode
ms per token and the constraint's host ms per token (its share of a decode token).

    python benchmarks/structured_output.py [--models smollm2-135m-instruct qwen2.5-coder-0.5b-instruct]
                                           [--prompts 50] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.api.completions import chat_chunks, collect  # noqa: E402
from py_engine.api.request import parse_chat  # noqa: E402

NAME = {"type": "string", "minLength": 1, "maxLength": 40}
SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {"name": NAME, "age": {"type": "integer"}, "occupation": NAME},
        "required": ["name", "age", "occupation"],
        "additionalProperties": False,
    },
    "review": {
        "type": "object",
        "properties": {
            "product": NAME,
            "rating": {"enum": [1, 2, 3, 4, 5]},
            "pros": {"type": "array", "items": NAME, "maxItems": 3},
            "verdict": {"enum": ["buy", "skip"]},
        },
        "required": ["product", "rating", "pros", "verdict"],
        "additionalProperties": False,
    },
    "city": {
        "type": "object",
        "properties": {
            "city": NAME,
            "country": NAME,
            "population": {"type": "integer"},
            "landmarks": {"type": "array", "items": NAME, "minItems": 1, "maxItems": 3},
            "is_capital": {"type": "boolean"},
        },
        "required": ["city", "country", "population", "landmarks", "is_capital"],
        "additionalProperties": False,
    },
    "recipe": {
        "type": "object",
        "properties": {
            "name": NAME,
            "servings": {"type": "integer"},
            "ingredients": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"item": NAME, "grams": {"type": "number"}},
                    "required": ["item", "grams"],
                    "additionalProperties": False,
                },
                "minItems": 1,
                "maxItems": 4,
            },
            "vegetarian": {"type": "boolean"},
        },
        "required": ["name", "servings", "ingredients", "vegetarian"],
        "additionalProperties": False,
    },
    "event": {
        "type": "object",
        "properties": {
            "title": NAME,
            "day": {"enum": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]},
            "attendees": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": NAME, "role": {"enum": ["host", "guest", "speaker"]}},
                    "required": ["name", "role"],
                    "additionalProperties": False,
                },
                "maxItems": 3,
            },
            "online": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        },
        "required": ["title", "day", "attendees", "online"],
        "additionalProperties": False,
    },
}
SUBJECTS = {
    "person": "a {} who lives in {}",
    "review": "a review of a {} bought in {}",
    "city": "the city closest to the word '{}' in {}",
    "recipe": "a {} dish from {}",
    "event": "a {} meetup held in {}",
}
WORDS = "baker pilot teacher nurse farmer chef painter coder singer dancer".split()
PLACES = "Paris Tokyo Lima Cairo Oslo".split()


def prompts(schema: str, count: int) -> list[str]:
    pairs = [(w, p) for p in PLACES for w in WORDS][:count]
    return [f"Describe {SUBJECTS[schema].format(w, p)} as JSON." for w, p in pairs]


async def run_model(name: str, count: int, max_tokens: int, device) -> dict:
    import jsonschema

    from py_engine.model_cache import ensure_model
    from py_engine.session import load

    model = await load(ensure_model(name), device, model_id=name, context=1024)
    engine, tok = model.engine, model.tok
    out = {"free_decode_ms_per_token": await free_decode_ms(engine, tok)}
    for schema_name, schema in SCHEMAS.items():
        valid, tokens, decode_s, mask_s, failures, finishes = 0, [], 0.0, 0.0, [], {}
        fmt = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": True}}
        for prompt in prompts(schema_name, count):
            body = {
                "model": name,
                "messages": [{"role": "user", "content": prompt}],
                "response_format": fmt,
                "temperature": 0.7,
                "seed": len(tokens),
                "max_tokens": max_tokens,
            }
            start = time.perf_counter()
            response = await collect(chat_chunks(model, parse_chat(body)))
            decode_s += time.perf_counter() - start
            mask_s += engine.stats.constraint_seconds
            used = response["usage"]["completion_tokens"]
            tokens.append(used)
            finish = response["choices"][0]["finish_reason"]
            finishes[finish] = finishes.get(finish, 0) + 1
            text = response["choices"][0]["message"]["content"]
            try:
                jsonschema.validate(json.loads(text), schema)
                valid += 1
            except (ValueError, jsonschema.ValidationError) as exc:
                failures.append({"prompt": prompt, "text": text[:300], "error": str(exc)[:200]})
        total = sum(tokens)
        out[schema_name] = {
            "prompts": count,
            "valid": valid,
            "valid_share": round(valid / count, 4),
            "finish_reasons": finishes,
            "tokens_mean": round(statistics.mean(tokens), 1),
            "ms_per_token": round(1000 * decode_s / total, 3),
            "constraint_ms_per_token": round(1000 * mask_s / total, 3),
            "constraint_share": round(mask_s / decode_s, 4),
            "failures": failures[:3],
        }
        print(json.dumps({name: {schema_name: out[schema_name]}}), file=sys.stderr, flush=True)
    out["vocab"] = engine.cfg.vocab_size
    return out


async def free_decode_ms(engine, tok, count: int = 128) -> float:
    """A decode token without a constraint (the GPU-fed loop), for scale: ms per token."""
    from py_engine.decode.token_choice import SamplingParams

    ids = tok.encode("Once upon a time", add_special_tokens=True)
    for _ in range(2):  # the first run compiles
        engine.reset()
        tokens = engine.generate(ids, count, SamplingParams(), ())
        first = await anext(tokens)
        start = time.perf_counter()
        rest = [t async for t in tokens]
        elapsed = time.perf_counter() - start
    del first
    return round(1000 * elapsed / len(rest), 3)


async def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct"])
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    from py_engine.gpu import open_device

    device = await open_device()
    results = {"device": str(getattr(device, "adapter_info", "")) or type(device).__name__}
    for name in args.models:
        results[name] = await run_model(name, args.prompts, args.max_tokens, device)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
