"""Prompt-lookup decoding (py_engine/prompt_lookup.py) against the plain GPU-fed loop, greedy, on a
chat, a code-editing and a summarising prompt. Prints one JSON object: per prompt, whether the
tokens are identical, the drafted and accepted tokens, forwards per token and each way's tok/s.

    python benchmarks/prompt_lookup.py --model smollm2-135m-instruct [--new-tokens 96]

The acceptance rates are the model's and its prompts' (any device gives the same); the speed-up is
the device's: each lookup step waits for its tokens, the plain loop keeps forwards in flight.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.chat_prompt import fit_to_context  # noqa: E402
from py_engine.gpu import open_device  # noqa: E402
from py_engine.model_cache import MODELS, ensure_model  # noqa: E402
from py_engine.sampling import SamplingParams  # noqa: E402
from py_engine.session import load_model  # noqa: E402

CODE = '''def total_price(items, tax):
    total = 0
    for item in items:
        total = total + item.price * item.quantity
    total = total + total * tax
    return round(total, 2)
'''
PROMPTS = {
    "chat": "Give me three tips for sleeping better.",
    "code_edit": "Rename the variable `total` to `amount` in this function and change nothing else. "
                 "Answer with the whole function.\n\n```python\n" + CODE + "```",
    "summarise": "Summarise in two sentences: The Great Barrier Reef is the world's largest coral reef system. "
                 "It is composed of over 2,900 individual reefs and 900 islands stretching for over 2,300 kilometres "
                 "over an area of approximately 344,400 square kilometres. The reef is located in the Coral Sea, off "
                 "the coast of Queensland, Australia. The Great Barrier Reef can be seen from outer space and is the "
                 "world's biggest single structure made by living organisms.",
}


async def run(engine, prompt, new_tokens, lookup, stop_ids=()):
    engine.reset()
    start, tokens = time.perf_counter(), []
    async for t in engine.generate(prompt, new_tokens, SamplingParams(), stop_ids, lookup=lookup):
        tokens.append(t)
    return tokens, time.perf_counter() - start


async def measure(args) -> dict:
    path = ensure_model(str(args.model)) if str(args.model) in MODELS else Path(args.model)
    device = await open_device()
    engine, tok, stop_ids = await load_model(path, device, context=2048)
    out = {"model": str(args.model), "adapter": device.caps.adapter, "new_tokens": args.new_tokens, "prompts": {}}
    for name, text in PROMPTS.items():
        ids, _ = fit_to_context(tok, [{"role": "user", "content": text}], engine.context, args.new_tokens)
        await run(engine, ids, 4, False)  # warm-up
        plain, plain_s = await run(engine, ids, args.new_tokens, False, stop_ids)
        looked, lookup_s = await run(engine, ids, args.new_tokens, True, stop_ids)
        d = engine.drafter
        out["prompts"][name] = {
            "identical": plain == looked, "tokens": len(looked), "drafted": d.drafted, "accepted": d.accepted,
            "acceptance": round(d.accepted / max(1, d.drafted), 3), "forwards_per_token": round(d.forwards / len(looked), 3),
            "plain_tok_s": round(len(plain) / plain_s, 1), "lookup_tok_s": round(len(looked) / lookup_s, 1),
            "speed_up": round(plain_s / lookup_s, 2)}
        print(name, json.dumps(out["prompts"][name]), file=sys.stderr)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--new-tokens", type=int, default=96)
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
