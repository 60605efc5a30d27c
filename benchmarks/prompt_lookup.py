"""Prompt-lookup decoding (py_engine/decode/prompt_lookup.py) against the plain GPU-fed loop on a chat, a
code-editing and a summarising prompt. Prints one JSON object: per prompt and hand-over streak,
whether the tokens are identical, the drafted and accepted tokens, the verifying forwards and the
tokens they gave, and each way's tok/s (the best of --repeats runs).

    python benchmarks/prompt_lookup.py --model smollm2-135m-instruct|FILE.gguf [--new-tokens 256]
                                       [--temperature 0] [--streaks 0,2] [--repeats 2]

The acceptance rates are the model's and its prompts' (any device gives the same); the speed-up is
the device's: each verifying step waits for its tokens, the GPU-fed loop keeps forwards in flight.
Streak 0 verifies whenever there is a draft; the engine's default (prompt_lookup.STREAK) first waits
for that many predicted tokens in a row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.catalog import MODELS  # noqa: E402
from py_engine.decode import prompt_lookup  # noqa: E402
from py_engine.decode.token_choice import SamplingParams  # noqa: E402
from py_engine.gpu import open_device  # noqa: E402
from py_engine.model_cache import ensure_model  # noqa: E402
from py_engine.session import load  # noqa: E402
from py_engine.tokenizer.template.prompt import fit_to_context  # noqa: E402

CODE = """def total_price(items, tax, discount=None):
    total = 0
    for item in items:
        if item.quantity <= 0:
            continue
        total = total + item.price * item.quantity
    if discount is not None:
        total = total - total * discount
    total = total + total * tax
    return round(total, 2)


def cheapest(items):
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best


def describe(items, tax):
    lines = []
    for item in items:
        lines.append(f"{item.name}: {item.quantity} x {item.price:.2f}")
    lines.append(f"total: {total_price(items, tax):.2f}")
    return "\\n".join(lines)
"""
PROMPTS = {
    "chat": "Give me three tips for sleeping better.",
    "code_edit": "Rename the variable `total` to `amount` in this code and change nothing else. "
    "Answer with the whole code.\n\n```python\n" + CODE + "```",
    "summarise": "Summarise in two sentences: The Great Barrier Reef is the world's largest coral reef system. "
    "It is composed of over 2,900 individual reefs and 900 islands stretching for over 2,300 kilometres "
    "over an area of approximately 344,400 square kilometres. The reef is located in the Coral Sea, off "
    "the coast of Queensland, Australia. The Great Barrier Reef can be seen from outer space and is the "
    "world's biggest single structure made by living organisms.",
}


async def run(engine, prompt, new_tokens, lookup, sampling, stop_ids=(), repeats=1):
    best = None
    for _ in range(repeats):
        engine.reset()
        start, tokens = time.perf_counter(), []
        async for t in engine.generate(prompt, new_tokens, replace(sampling, lookup=lookup), stop_ids):
            tokens.append(t)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return tokens, best


async def measure(args) -> dict:
    path = ensure_model(str(args.model)) if str(args.model) in MODELS else Path(args.model)
    device = await open_device()
    loaded = await load(path, device, context=2048)
    engine, tok, stop_ids = loaded.engine, loaded.tok, loaded.stop_ids
    sampling = SamplingParams(temperature=args.temperature, seed=0)
    out = {
        "model": str(args.model),
        "adapter": device.caps.adapter,
        "new_tokens": args.new_tokens,
        "temperature": args.temperature,
        "default_streak": prompt_lookup.STREAK,
        "prompts": {},
    }
    streaks = [int(s) for s in args.streaks.split(",")]
    for name, text in PROMPTS.items():
        ids, _ = fit_to_context(tok, [{"role": "user", "content": text}], engine.context, args.new_tokens)
        await run(engine, ids, 4, False, sampling)  # warm-up
        await run(engine, ids, 4, True, sampling)
        plain, plain_s = await run(engine, ids, args.new_tokens, False, sampling, stop_ids, args.repeats)
        result = out["prompts"][name] = {"tokens": len(plain), "plain_tok_s": round(len(plain) / plain_s, 1)}
        for streak in streaks:
            prompt_lookup.STREAK = streak
            looked, lookup_s = await run(engine, ids, args.new_tokens, True, sampling, stop_ids, args.repeats)
            d = engine.drafter
            result[f"streak_{streak}"] = {
                "identical": plain == looked,
                "drafted": d.drafted,
                "accepted": d.accepted,
                "acceptance": round(d.accepted / max(1, d.drafted), 3),
                "verifying_forwards": d.forwards,
                "verified_tokens": d.verified,
                "lookup_tok_s": round(len(looked) / lookup_s, 1),
                "speed_up": round(plain_s / lookup_s, 2),
            }
        prompt_lookup.STREAK = out["default_streak"]
        print(name, json.dumps(result), file=sys.stderr)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0, help="sample (seed 0) instead of greedy")
    parser.add_argument("--streaks", default="0,2", help="hand-over streaks to measure (prompt_lookup.STREAK)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per way (the best is reported)")
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
