"""Parity of every fixture on this machine's GPU, without pytest (e.g. on a lent GPU box).
Prints one JSON line per fixture and path: max|Δlogit|/max|ref| and whether 16 greedy tokens match."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from py_engine.decode.token_choice import SamplingParams  # noqa: E402
from py_engine.engine import Engine  # noqa: E402
from py_engine.gpu import open_device  # noqa: E402


async def check(model_dir: Path, device) -> dict:
    ref = json.loads((model_dir / "reference.json").read_text())
    engine = await Engine.load(model_dir, device, max_rows=64, context=64, precision="exact")
    logits = await engine.prompt_logits(ref["prompt_ids"])
    engine.reset()
    tokens = [t async for t in engine.generate(ref["prompt_ids"], 16, SamplingParams())]
    peak = max(abs(x) for x in ref["logits"])
    rel = max(abs(a - b) for a, b in zip(logits, ref["logits"])) / peak
    return {
        "fixture": model_dir.name,
        "f16": device.caps.shader_f16,
        "rel_err": rel,
        "greedy_match": tokens == ref["greedy"],
    }


async def main():
    for allow_f16 in (True, False):
        device = await open_device(allow_f16=allow_f16)
        for ref in sorted((ROOT / "tests" / "fixtures").glob("*/reference.json")):
            print(json.dumps(await check(ref.parent, device)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
