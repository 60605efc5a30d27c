"""The engine's speed in a browser: Chromium (Playwright) against our own server. Prints one JSON object.

    python benchmarks/browser.py [--model NAME|FILE.gguf|DIR] [--prompt-tokens 32] [--new-tokens 16] [--context N]
                                 [--chromium /usr/bin/chromium] [--headed] [--flags "..."] [--reload]

Measures what the page would: Pyodide boot (worker start → engine imported), model load (fetch +
upload + kernel compilation; the weights' seconds by phase: fetch, read, verify, store, upload), prefill and decode tok/s of a greedy generation from random prompt ids,
and the worker's host milliseconds per decode token (Python encoding + one FFI submit); with --reload,
also a second load of the model by a new worker, from the store the first filled (as a page reload). The fields
match benchmarks/decode.py's where they mean the same, so the two can be compared on one machine.
On a machine without a GPU Chromium runs WebGPU on SwiftShader (the default flags), which is slow.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWIFTSHADER = (
    "--enable-unsafe-webgpu --enable-features=Vulkan --use-angle=swiftshader "
    "--use-webgpu-adapter=swiftshader --no-sandbox --disable-background-networking "
    "--disable-component-update --disable-sync --no-first-run --disable-quic"
)

MEASURE = """async ({modelId, warmIds, ids, newTokens, context, reload}) => {
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === modelId);
  const client = new WispClient();
  let booted = null;
  client.addEventListener("booted", (e) => { booted = e.detail.pyodide_ms; });
  const start = performance.now();
  const loaded = await client.load(modelRef(model), context ? {context} : {});
  const loadMs = performance.now() - start;
  const run = async (prompt) => {
    const generation = client.generate({ids: prompt, ignoreEos: true,
                                        sampling: {temperature: 0, max_new_tokens: newTokens}});
    const times = [];  // each answer token's arrival: the decode's seconds to more digits than done's tok/s
    for await (const _ of generation) times.push(performance.now());
    const done = await generation.done;
    return {...done, page_ms_per_decode_token: times.length > 1 ? (times.at(-1) - times[0]) / (times.length - 1) : null};
  };
  await run(warmIds);  // warm-up: first use of every pipeline (another prompt: nothing is reused from the cache)
  const done = await run(ids);
  client.terminate();
  let reloaded = null;
  if (reload) {  // a new worker loads the same model again: from this profile's store, as a page reload would
    const again = new WispClient();
    const restart = performance.now();
    const info = await again.load(modelRef(model), context ? {context} : {});
    reloaded = {loadMs: performance.now() - restart, info};
    again.terminate();
  }
  return {booted, loadMs, loaded, done, reloaded};
}"""


def start_server(model: str) -> tuple[subprocess.Popen, str, str]:
    args = [sys.executable, "-m", "app", "--port", "0"]
    path = Path(model)
    if path.exists():
        args += ["--no-default", "--model", str(path)]
    else:
        from py_engine.model_cache import ensure_model

        ensure_model(model)
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    match = re.search(r"http://\S+", proc.stdout.readline())
    if not match:
        proc.kill()
        raise SystemExit(f"the server did not start: {proc.stderr.read()}")
    models = json.loads(
        subprocess.run(["curl", "-s", match.group(0) + "api/models"], capture_output=True, text=True).stdout
    )
    model_id = models[0]["id"] if path.exists() else model
    return proc, match.group(0).rstrip("/"), model_id


def measure(args) -> dict:
    from playwright.sync_api import sync_playwright

    proc, url, model_id = start_server(args.model)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                headless=not args.headed, executable_path=args.chromium, args=args.flags.split()
            )
            page = browser.new_page()
            page.goto(url + "/")
            vocab = 49152 if model_id.startswith("smollm2") else 256
            rng = random.Random(0)
            warm, ids = ([rng.randrange(vocab) for _ in range(args.prompt_tokens)] for _ in range(2))
            result = page.evaluate(
                MEASURE,
                {
                    "modelId": model_id,
                    "warmIds": warm,
                    "ids": ids,
                    "newTokens": args.new_tokens,
                    "context": args.prompt_tokens + args.new_tokens + 8 if args.context is None else args.context,
                    "reload": args.reload,
                },
            )
            browser.close()
    finally:
        proc.terminate()
    done, loaded, reloaded = result["done"], result["loaded"], result["reloaded"]
    again = {}
    if reloaded:  # the same three figures for the load from the store
        again = {
            "reload": {
                "model_load_ms": round(reloaded["loadMs"]),
                "worker_load_ms": round(reloaded["info"]["load_ms"]),
                "weights": reloaded["info"].get("weights"),
            }
        }
    return {
        "browser": "chromium",
        "adapter": loaded["adapter"]["name"],
        "model": model_id,
        "shader_f16": "shader-f16" in loaded["adapter"]["features"],
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "context": loaded["context"],
        "pyodide_boot_ms": result["booted"],
        "model_load_ms": round(result["loadMs"]),
        # the worker's own load time, and its weights' share split by phase (worker/load_clock.js):
        # the rest of it is building the graph and compiling the kernels
        "worker_load_ms": round(loaded["load_ms"]),
        "weights": loaded.get("weights"),
        "prefill_tok_s": done["prefill_tok_s"],
        "decode_tok_s": done["decode_tok_s"],
        "host_ms_per_decode_token": done["host_ms_per_token"],
        # the page's clock between the first and the last answer token, per token
        "page_ms_per_decode_token": done["page_ms_per_decode_token"] and round(done["page_ms_per_decode_token"]),
        "ttft_ms": done["ttft_ms"],
        "wasm_memory_mb": round(loaded["wasm_memory_bytes"] / 1e6, 1),
        **again,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument(
        "--context", type=int, default=None, help="the load's context (0: the page's default; default: just the run's)"
    )
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--headed", action="store_true")
    parser.add_argument(
        "--reload", action="store_true", help="then load the model again in a new worker, from the page's store"
    )
    parser.add_argument("--flags", default=SWIFTSHADER, help="Chromium flags (default: WebGPU on SwiftShader)")
    sys.path.insert(0, str(ROOT))
    print(json.dumps(measure(parser.parse_args())))


if __name__ == "__main__":
    main()
