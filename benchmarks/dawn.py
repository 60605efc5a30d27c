"""The browser page's engine on a GPU with no browser: worker/worker.js + Pyodide + the engine wheel,
run by Node on Dawn (Chrome's WebGPU, npm `webgpu`) through benchmarks/dawn/run.mjs. Prints one JSON object.

    python benchmarks/dawn.py --model PATH|NAME [--prompt-tokens 128] [--new-tokens 128] [--compare]
                              [--node node] [--webgpu /tmp/webgpu] [--dawn-backend vulkan|opengles]
                              [--store-dir DIR] [--f32] [--dawn-toggle T ...] [--reload] [--load-only]
                              [--weights-only] [--inline-fetch] [--boot-first]

The prompt ids are benchmarks/decode.py's (random.Random(0) over the model's vocabulary), the warm-up
prompt the next ones of the same generator. Like decode.py, --new-tokens counts the decode steps after
the first answer token (so new tokens + 1 are generated and compared). The fields are
benchmarks/browser.py's: Pyodide boot, model load, prefill and decode tok/s and the worker's host
milliseconds per decode token. --compare also runs the desktop engine (wgpu-py) on the same ids with
the same clock as the worker's (py_engine/web/worker.py generate: prefill = time to the first token, decode = the
tokens after it), on the same precision (shader-f16 only where Dawn's engine used it), and reports
`tokens_identical` and both engines' speeds. Before running, the engine wheel in build/web/ is checked
against py_engine/ and shaders/ (and rebuilt with tools/build_web.py where it differs): the browser
engine measured is this tree's. --dawn-toggle passes a Dawn instance toggle, as Chrome's flags do, e.g.
`enable-dawn-features=vulkan_enable_f16_on_nvidia` (Dawn hides shader-f16 on NVIDIA's Vulkan driver
without it) or `enable-dawn-features=allow_unsafe_apis` (experimental features such as subgroup matrices).

`load` is the model load: `ms` the page's wall time (the first load's includes booting Pyodide, as the
page's does: `pyodide_boot_ms`; then the header, Python's planning, the shaders and the weights),
`worker_ms` the worker's from the load message on, `weights_ms` the weights' streaming (fetch or
read-back, verify, store, upload: one pipeline, started once the loader has placed them, so it runs
while the shaders compile), `mb_s` and `weights_mb_s` the weight bytes over each. `phases` are the
seconds the worker's thread spent per phase (worker/load_clock.js): working, or waiting on the thread
that does the work (fetch: the network; store: the store's writer, a worker that writes and hashes
each block while this thread takes the next; verify: digests; upload: the GPU's queue), so they
overlap and need not add up; `writer` says whether a download was stored on that worker's thread
("thread") or on the worker's ("here"). `threads_cpu_s` is the CPU each of the harness's threads spent
in the load (Linux): the worker's (with Dawn's calls and Pyodide), the network's (Node's fetch runs on a
thread of its own, as a browser's network stack is not the worker's; --inline-fetch puts it back on the
worker's thread, as session 37 measured it), the server's and the store writer's; on a machine with
cores to spare the busiest one bounds the load. --reload loads the model
again in the same worker, from the store the first load filled (`reload`); with --store-dir of an
earlier run, both loads read the kept store. --load-only stops there (no generation, no tokens).
--boot-first boots the worker before the first load, as the page does when it opens (it asks the
worker for the store's list): `ms` is then the load from the user's Load on, `pyodide_boot_ms` apart.
--weights-only measures the weights' streaming alone (worker/gpu.js's loadWeights through the store,
the GGUF's tensor ranges into two 64 MiB buffers, no Pyodide, no engine, no shaders): it fits Dawn's
null backend (512 MB of buffers), which cannot hold an 8B model, and gives the host's share.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from py_engine.catalog import MODELS  # noqa: E402
from py_engine.formats.model_files import read_model  # noqa: E402
from py_engine.formats.source import open_source  # noqa: E402


def ensure_current_wheel() -> None:
    """build/web must hold this tree's engine: `tools/build_web.py --check` says whether it does
    (naming what differs), and where it does not the build runs."""
    build_web = [sys.executable, str(ROOT / "tools" / "build_web.py")]
    if subprocess.run([*build_web, "--check"]).returncode == 0:
        return
    print("dawn.py: build/web is out of date: running tools/build_web.py", file=sys.stderr)
    subprocess.run(build_web, check=False)
    if subprocess.run([*build_web, "--check"]).returncode != 0:
        raise SystemExit(
            "error: build/web does not hold this tree's engine (see above); "
            "run `make web` on a machine with the build tools and bring build/web along"
        )


def model_path(name: str) -> Path:
    path = Path(name).expanduser()
    if not path.exists() and name in MODELS:
        from py_engine.model_cache import ensure_model

        return Path(ensure_model(name))
    if not path.exists():
        raise SystemExit(f"error: {name}: no such file (nor a catalog model: {', '.join(MODELS)})")
    return path.resolve()


def prompts(path: Path, prompt_tokens: int) -> tuple[list[int], list[int]]:
    """(ids, warm-up ids): decode.py's prompt, then the same generator's next draws."""
    cfg, _, _ = read_model(open_source(path))
    rng = random.Random(0)
    ids = [rng.randrange(cfg.vocab_size) for _ in range(prompt_tokens)]
    warm = [rng.randrange(cfg.vocab_size) for _ in range(prompt_tokens)]
    return ids, warm


def tensor_ranges(path: Path) -> list[list]:
    """[file name, start, length] of every tensor of a GGUF file: what a load streams into the GPU."""
    _, tensors, gguf = read_model(open_source(path))
    if gguf is None:
        return []
    return sorted([path.name, t.start, t.nbytes] for t in tensors.values() if hasattr(t, "start"))


def run_dawn(args, path: Path, ids: list[int], warm: list[int], steps: int, context: int) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"ids": ids, "warm_ids": warm}, f)
    pieces = None
    if args.weights_only and (ranges := tensor_ranges(path)):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as p:
            json.dump(ranges, p)
        pieces = p.name
    command = [
        args.node,
        str(ROOT / "benchmarks" / "dawn" / "run.mjs"),
        "--model",
        str(path),
        "--ids",
        f.name,
        "--new-tokens",
        str(steps),
        "--context",
        str(context),
        "--dawn-backend",
        args.dawn_backend,
        "--webgpu",
        args.webgpu,
        *(["--store-dir", args.store_dir] if args.store_dir else []),
        *(["--f32"] if args.f32 else []),
        *(["--reload"] if args.reload else []),
        *(["--load-only"] if args.load_only else []),
        *(["--weights-only", *(["--pieces", pieces] if pieces else [])] if args.weights_only else []),
        *(["--inline-fetch"] if args.inline_fetch else []),
        *(["--boot-first"] if args.boot_first else []),
        *(arg for toggle in args.dawn_toggle for arg in ("--dawn-toggle", toggle)),
    ]
    try:
        result = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    finally:
        Path(f.name).unlink(missing_ok=True)
        if pieces:
            Path(pieces).unlink(missing_ok=True)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise SystemExit(f"error: {' '.join(command[:2])} failed (exit code {result.returncode}); its log is above")
    return json.loads(lines[-1])


async def run_desktop(path: Path, ids: list[int], warm: list[int], steps: int, context: int, allow_f16: bool) -> dict:
    """The same two generations on the desktop engine, clocked as py_engine/web/worker.py's generate."""
    from py_engine.decode.prompt_cache import PromptCache
    from py_engine.decode.token_choice import SamplingParams
    from py_engine.engine import Engine
    from py_engine.gpu.wgpu_host import open_wgpu_device

    device = await open_wgpu_device(allow_f16=allow_f16)
    engine = await Engine.load(path, device, context=context)
    cache = PromptCache(engine)

    async def generate(prompt):
        tokens, times = [], []
        start = time.perf_counter()
        answer = cache.generate(prompt, steps, SamplingParams(temperature=0), ())
        try:
            async for token in answer:
                tokens.append(token)
                times.append(time.perf_counter())
        finally:
            await answer.aclose()
        ttft = times[0] - start
        decode = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        return {
            "prefill_tok_s": round(cache.prefilled / ttft, 1),
            "decode_tok_s": round(decode, 1),
            "host_ms_per_decode_token": round(1000 * engine.stats.host_seconds / max(engine.stats.tokens, 1), 3),
            "ttft_ms": round(1000 * ttft, 1),
            "tokens": tokens,
        }

    await generate(warm)
    out = await generate(ids)
    return {
        "engine": "desktop (wgpu-py)",
        "adapter": device.caps.adapter,
        "shader_f16": device.caps.shader_f16,
        "kv_cache": "/".join(engine.kv_formats),
        **out,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a .gguf file, an HF directory or a catalog name")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=128, help="decode steps after the first token (as decode.py)")
    parser.add_argument("--node", default="node")
    parser.add_argument("--webgpu", default="/tmp/webgpu", help="the npm `webgpu` package's directory")
    parser.add_argument("--dawn-backend", default="vulkan", help="vulkan, or opengles (compatibility mode, no GPU)")
    parser.add_argument("--store-dir", help="keep the worker's weight store (OPFS) here between runs")
    parser.add_argument("--f32", action="store_true", help="the f32 path on both engines")
    parser.add_argument(
        "--dawn-toggle", action="append", default=[], help="a Dawn toggle (repeatable), e.g. enable-dawn-features=X"
    )
    parser.add_argument("--compare", action="store_true", help="also run the desktop engine and compare tokens")
    parser.add_argument("--reload", action="store_true", help="load a second time, from the store (`reload`)")
    parser.add_argument("--load-only", action="store_true", help="measure the load(s) alone: no generation")
    parser.add_argument(
        "--weights-only",
        action="store_true",
        help="only the weights' streaming (no Pyodide, no engine): fits --dawn-backend null",
    )
    parser.add_argument(
        "--inline-fetch",
        action="store_true",
        help="Node's fetch on the worker's thread (as before the network thread): its HTTP work counted there",
    )
    parser.add_argument(
        "--boot-first", action="store_true", help="boot the worker before the load, as the page does when it opens"
    )
    args = parser.parse_args()
    if (args.load_only or args.weights_only) and args.compare:
        parser.error("--compare needs the generation that --load-only and --weights-only skip")
    args.load_only = args.load_only or args.weights_only
    if not args.weights_only:
        ensure_current_wheel()
    path = model_path(args.model)
    ids, warm = prompts(path, args.prompt_tokens) if not args.weights_only else ([], [])
    steps, context = args.new_tokens + 1, args.prompt_tokens + args.new_tokens + 8  # decode.py's context
    dawn = run_dawn(args, path, ids, warm, steps, context)
    if args.load_only:
        print(json.dumps({**dawn, "model": str(path)}))
        return
    tokens = dawn.pop("tokens")
    result = {**dawn, "model": str(path), "new_tokens": args.new_tokens, "generated_tokens": len(tokens)}
    if args.compare:
        f16 = "shader-f16" in dawn["features"] and not args.f32
        desktop = asyncio.run(run_desktop(path, ids, warm, steps, context, f16))
        theirs = desktop.pop("tokens")
        same = tokens == theirs
        result["tokens_identical"] = same
        if not same:
            result["first_difference"] = next(
                (i for i, (a, b) in enumerate(zip(tokens, theirs)) if a != b), min(len(tokens), len(theirs))
            )
            result["desktop_tokens"] = theirs
        result["desktop"] = desktop
        if desktop["decode_tok_s"]:
            result["decode_vs_desktop"] = round(dawn["decode_tok_s"] / desktop["decode_tok_s"], 3)
    result["tokens"] = tokens
    print(json.dumps(result))


if __name__ == "__main__":
    main()
