"""Prefill and decode speed of one model on this machine's GPU. Prints one JSON object.

    python benchmarks/decode.py --model PATH [--prompt-tokens 128] [--new-tokens 128] [--depth 0] [--context N] [--limits adapter]
                                [--f32] [--precision fast|exact] [--packed-kv] [--breakdown] [--round-trip] [--tokens-per-submit N]
                                [--temperature T] [--top-p P] [--tg-at-depth]

PATH: an HF model directory, a .gguf file or a catalog name (py_engine/catalog.py). For quantized models the weight bytes read per
decode token and the effective bandwidth they imply are part of the JSON. --depth D puts D tokens in the
KV cache first (prefilled, untimed): the prompt's prefill and the decode after it are then timed at that
depth; with --tg-at-depth the decode starts at the depth itself (a one-token prompt), as llama-bench's
tg at `-d D` does. The prefill's tok/s is the median of three timed runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemv_bandwidth import Timer  # noqa: E402

from py_engine.catalog import MODELS  # noqa: E402
from py_engine.cli import add_precision_arg  # noqa: E402
from py_engine.decode.on_host import decode_on_host  # noqa: E402
from py_engine.decode.token_choice import SamplingParams  # noqa: E402
from py_engine.engine import PREFILL_ROWS, Engine  # noqa: E402
from py_engine.gpu.wgpu_host import open_wgpu_device  # noqa: E402
from py_engine.model_cache import ensure_model  # noqa: E402


async def measure(args) -> dict:
    device = await open_wgpu_device(
        allow_f16=not args.f32, limits=args.limits, extra_features=("timestamp-query",) if args.breakdown else ()
    )
    if not args.model.exists() and str(args.model) in MODELS:
        args.model = ensure_model(str(args.model))
    engine = await Engine.load(
        args.model,
        device,
        max_rows=args.max_rows,
        context=args.context or args.depth + args.prompt_tokens + args.new_tokens + 8,
        packed_kv=args.packed_kv,
        precision=args.precision,
    )
    engine.tokens_per_submit = args.tokens_per_submit
    rng = random.Random(0)
    earlier = [rng.randrange(engine.cfg.vocab_size) for _ in range(args.depth)]
    prompt = [rng.randrange(engine.cfg.vocab_size) for _ in range(args.prompt_tokens)]
    greedy = SamplingParams()

    async def at_depth():
        """The engine reset, then --depth tokens in its KV cache (waited for)."""
        engine.reset()
        if earlier:
            device.submit(engine.prefill_commands(earlier))
            await device.read_buffer(engine.logits_buffer, 0, 4)

    async def prefill():
        await at_depth()
        start = time.perf_counter()
        device.submit(engine.prefill_commands(prompt) + engine.sampler.commands(greedy, prompt))
        token = await engine.sampler.pick(greedy)
        return time.perf_counter() - start, token

    await prefill()  # warm-up: first use of every pipeline
    # The median of 3 timed prefills (llama-bench's pp is the mean of its repetitions): one 512-token
    # prefill of SmolLM2 read 12,604 to 13,765 tok/s in three runs on the H200.
    timed = sorted([await prefill() for _ in range(3)], key=lambda run: run[0])
    prefill_s, token = timed[1]
    # Decode as generate() runs it (the token stays on the GPU; the host encodes ahead where it can):
    # the clock starts at the first answer token, which needs the prefill.
    decode = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=0)
    # --tg-at-depth: from the depth itself (a one-token prompt), where llama-bench's tg starts.
    lead = prompt[:1] if args.tg_at_depth else prompt
    await at_depth()
    async for _ in engine.generate(lead, 9, decode):  # warm-up: the decode loop's first submits
        pass
    await at_depth()
    start = None
    tokens = (
        decode_on_host(engine, lead, args.new_tokens + 1, decode, (), list(lead), engine.stats)
        if args.round_trip
        else engine.generate(lead, args.new_tokens + 1, decode)
    )
    async for _ in tokens:
        start = start or time.perf_counter()
    decode_s = time.perf_counter() - start
    host_s, wait_s = engine.stats.host_seconds, engine.stats.wait_seconds
    engine.reset()
    engine.pos = args.depth + len(lead)
    fold = engine.executor.graph.folds(
        1, engine.pos + 1
    )  # a decode token's plan: the attention's merge in the O projection
    commands = engine.forward_commands([token]) + engine.sampler.commands(greedy, [])  # one decode token's
    read_per_token = weight_bytes_per_token(engine.executor.graph)
    breakdown = await kernel_breakdown(engine, device, commands, 1, fold, args.repeats) if args.breakdown else None
    prefill_breakdown = None
    if args.breakdown:  # one prefill forward of the prompt's first max_rows tokens, at the depth
        engine.reset()
        engine.pos = args.depth
        rows = min(args.max_rows, len(prompt))
        forward = engine.forward_commands(prompt[:rows])
        prefill_breakdown = await kernel_breakdown(engine, device, forward, rows, 0, args.repeats)
    return {
        "adapter": device.caps.adapter,
        "model": str(args.model),
        "precision": args.precision,
        "shader_f16": device.caps.shader_f16,
        "kv_cache": "/".join(engine.kv_formats),
        "decode_loop": "host round trip per token" if args.round_trip else "on the GPU",
        "tokens_per_submit": args.tokens_per_submit or "sized",
        "temperature": args.temperature,
        "depth": args.depth,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "decode_starts_at": args.depth + len(lead),
        "prefill_tok_s": round(args.prompt_tokens / prefill_s, 1),
        "decode_tok_s": round(args.new_tokens / decode_s, 1),
        "dispatches_per_decode_token": len(commands),
        "dispatches_per_layer": round(engine.executor.graph.ops_per_layer(engine.cfg.num_layers, fold=fold), 2),
        "merge_in_o_projection_until_kv": engine.executor.graph.fold_until,
        "ms_per_decode_token": round(1000 * decode_s / args.new_tokens, 3),
        # Host time encoding + submitting a token, and time it waited for the GPU: their sum is the
        # token's time when nothing overlaps; with the GPU fed ahead, the wait shrinks by the host time.
        "host_ms_per_decode_token": round(1000 * host_s / args.new_tokens, 3),
        "host_wait_ms_per_decode_token": round(1000 * wait_s / args.new_tokens, 3),
        "activation_mb": round(engine.executor.activation_bytes / 1e6, 2),
        "kv_cache_mb": round(engine.executor.kv_bytes / 1e6, 2),
        "weight_mb": round(engine.weight_bytes / 1e6, 2),
        "weight_formats": weight_formats(engine.executor.graph),
        "weight_mb_per_decode_token": round(read_per_token / 1e6, 2),
        "effective_weight_gb_s": round(read_per_token * args.new_tokens / decode_s / 1e9, 1),
        **({"decode_ms_by_kernel": breakdown, "prefill_forward_ms_by_kernel": prefill_breakdown} if breakdown else {}),
    }


def weight_bytes_per_token(graph) -> int:
    """Weight bytes one decode token reads: every matrix and vector once, but of an embedding
    table only the token's row (its shard's bytes / rows)."""
    total = 0
    for op in graph.ops:
        for t in op.bind.values():
            if t.kind == "weight":
                total += t.nbytes // t.rows[1] if op.kernel == "embedding" else t.nbytes
    return total


def weight_formats(graph) -> dict:
    """MB of weights stored in each format (f32, q4_1, ...): tied tables counted once."""
    seen, out = set(), {}
    for t in graph.tensors:
        if t.kind == "weight" and (t.weight, t.rows, t.dtype) not in seen:
            seen.add((t.weight, t.rows, t.dtype))
            out[t.dtype] = round(out.get(t.dtype, 0) + t.nbytes / 1e6, 2)
    return out


async def kernel_breakdown(engine, device, commands, rows: int, fold: int, repeats: int) -> dict:
    """GPU milliseconds of one forward of `rows` tokens (1: a decode token) in each kernel: every
    dispatch in a compute pass of its own between timestamp queries (the median of `repeats` runs,
    after a warm-up), summed by kernel; "all" is their sum (dispatches run back to back in the
    engine's one pass overlap a little, so the forward's own time is a bit lower)."""
    names = engine.executor.kernel_names(rows, fold)
    names += ["sampler"] * (len(commands) - len(names))
    passes = [[(c.kernel.pipeline, c.bind_group, c.grid)] for c in commands]
    timer = Timer(device, len(passes))
    timer.warm_up(passes)
    runs = [timer.run(passes) for _ in range(repeats)]
    seconds = [statistics.median(run[i] for run in runs) for i in range(len(passes))]
    out = {}
    for name, t in zip(names, seconds):
        out[name] = out.get(name, 0.0) + t
    return {**{name: round(1000 * t, 3) for name, t in out.items()}, "all": round(1000 * sum(seconds), 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--depth", type=int, default=0, help="tokens in the KV cache before the timed prompt")
    parser.add_argument(
        "--context", type=int, default=0, help="the engine's context (default: the run's tokens; the page's is 2,048)"
    )
    parser.add_argument(
        "--tg-at-depth",
        action="store_true",
        help="time the decode from --depth (after a one-token prompt), as llama-bench's tg, not after the prompt",
    )
    parser.add_argument("--max-rows", type=int, default=PREFILL_ROWS, help="rows per prefill forward")
    parser.add_argument("--limits", choices=["default", "adapter"], default="default")
    parser.add_argument("--f32", action="store_true")
    add_precision_arg(parser)
    parser.add_argument("--packed-kv", action="store_true", help="K and V cached as packed f16 (WebKit's layout)")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time each kernel's share of a decode token and of a prefill forward",
    )
    parser.add_argument("--repeats", type=int, default=20, help="--breakdown's timed runs")
    parser.add_argument("--temperature", type=float, default=0.0, help="sample (seed 0) instead of greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument(
        "--tokens-per-submit",
        type=int,
        default=None,
        help="decode forwards per submit (default: the engine sizes each group)",
    )
    parser.add_argument(
        "--round-trip",
        action="store_true",
        help="decode the old way: the host reads each token back and feeds it to the next forward",
    )
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
