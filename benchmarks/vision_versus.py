"""Wisp against llama.cpp's llama-mtmd-cli on pictures: the same text GGUF + mmproj GGUF pairs, the same picture
and prompt, on the same GPU, in one run. Prints one JSON object (also written to --out).

On the GPU machine, from the project root, with the ignored folder .gpu-bench/ sent along (see
benchmarks/README.md: it also needs layouts/gemma3-tokenizer.json.gz and the Pillow / Jinja2 wheels):

    . .gpu-bench/device_setup.sh && python3 benchmarks/vision_versus.py [--backends vulkan,cuda]
                                    [--models smolvlm,gemma3] [--scale full|tiny] [--runs 3]

Here, on a CPU (lavapipe for Wisp, llama.cpp's CPU backend): `--backends cpu --scale tiny`.

1. Builds llama-mtmd-cli for the first backend (benchmarks/vision_llamacpp.py; llamacpp.sh's flags and build
   directories) while it writes the random-weight pairs (tools/vision_layouts.py: SmolVLM-256M-Instruct's Q4_0
   text + f16 mmproj, Gemma-3-4B-it's Q4_K_M text + f16 mmproj) into --work (kept there: a later call on the
   same machine reuses them); the picture is llama.cpp's own tools/mtmd/test-1.jpeg (640 x 488) from the
   source archive.
2. Runs llama-mtmd-cli on each pair: one warm-up run, then --runs, each a process of its own (`-n 0`:
   image-to-first-token from its log's timestamps, vision_llamacpp.py's docstring says how).
3. Runs Wisp on each pair (benchmarks/vision_wisp.py: the CLI's generate --chat path from the picture file to
   the first token, one warm-up then --runs in one process, and the vision tower alone).
4. Then each further backend: its build, its runs. Nothing is measured while a compiler runs, and the first
   backend's comparison is complete (and in --out/vision_versus.json, rewritten after every stage) before the
   next build starts, should the machine's time limit end the call.

Reported per model: Wisp's and each backend's medians (ms) of image-to-first-token and of the image encode (Wisp:
the tower alone, patch rows in, embeddings back on the host, as llama.cpp's encode; also its in-path encode
from the picture's bytes, resizes included), patch rows per second through the tower, and the ratios: times
Wisp / llama.cpp (below 1: Wisp is faster), rates Wisp / llama.cpp (above 1: Wisp is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import vision_llamacpp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Describe this picture in one sentence."
PICTURE = "tools/mtmd/test-1.jpeg"


def picture(bench: Path, work: Path) -> Path:
    target = work / Path(PICTURE).name
    if not target.exists():
        with tarfile.open(bench / "src.tgz") as archive:
            target.write_bytes(archive.extractfile(PICTURE).read())
    return target


def write_pairs(bench: Path, work: Path, scale: str, models: list[str]) -> dict:
    cmd = [sys.executable, str(ROOT / "tools" / "vision_layouts.py"), "write", str(work), "--scale", scale]
    cmd += ["--models", ",".join(models), "--bench", str(bench)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"tools/vision_layouts.py write failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def timed_build(bench: Path, backend: str, built: dict) -> None:
    """built[backend]: the binary, or the exception; built["<backend> build_s"]: how long it took."""
    started = time.perf_counter()
    try:
        built[backend] = vision_llamacpp.build(bench, backend)
    except Exception as exc:  # reported in the JSON; the other backends still run
        built[backend] = exc
    built[f"{backend} build_s"] = round(time.perf_counter() - started, 1)


def llamacpp_rows(backend: str, built: dict, models: list[str], pairs: dict, args, pic: Path, theirs: dict) -> None:
    for model in models:
        binary = built[backend]
        try:
            if isinstance(binary, Exception):
                raise binary
            theirs[backend, model] = llamacpp_runs(binary, backend, model, pairs[model], args, pic)
        except Exception as exc:  # one backend's failure leaves the others' rows
            theirs[backend, model] = {"error": str(exc)[-3000:]}
        (args.out / f"llamacpp-{backend}-{model}.json").write_text(json.dumps(theirs[backend, model]))
        print(f"llama.cpp {backend} {model}: {theirs[backend, model]}", file=sys.stderr)


def llamacpp_runs(binary: Path, backend: str, model: str, pair: dict, args, pic: Path) -> dict:
    runs = []
    for i in range(1 + args.runs):  # the first warms the page cache and the driver's caches: not reported
        log = args.out / f"llamacpp-{backend}-{model}-{i}.log"
        runs.append(vision_llamacpp.run(binary, backend, pair, pic, args.prompt, args.context, log))
    timed = runs[1:]
    row = {k: round(statistics.median(r[k] for r in timed), 2) for k in ("image_to_first_token_ms", "encode_ms")}
    return {**row, **{k: runs[-1][k] for k in runs[-1] if k not in row}, "runs": timed, "warm_up": runs[0]}


def wisp_run(model: str, pair: dict, args, pic: Path) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "vision_wisp.py"), "--model", pair["text"]]
    cmd += ["--mmproj", pair["mmproj"], "--picture", str(pic), "--prompt", args.prompt, "--runs", str(args.runs)]
    cmd += ["--context", str(args.context), "--precision", args.precision]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return {"error": done.stderr[-3000:]}
    (args.out / f"wisp-{model}.json").write_text(done.stdout)
    return json.loads(done.stdout)


def compare(ours: dict, theirs: dict) -> dict:
    """llama.cpp's row with its patch rows / s, and Wisp's ratios to it."""
    if "error" in ours or "error" in theirs:
        return {}
    rows_per_token = ours["patch_rows"] / ours["picture_tokens"]  # the same tower geometry in both files
    rows = theirs["picture_tokens"] * rows_per_token
    theirs["tower_rows_per_s"] = round(rows / (theirs["encode_ms"] / 1e3))
    return {
        "image_to_first_token (time)": round(ours["image_to_first_token_ms"] / theirs["image_to_first_token_ms"], 3),
        "tower (time)": round(ours["tower_ms"] / theirs["encode_ms"], 3),
        "tower_rows_per_s (rate)": round(ours["tower_rows_per_s"] / theirs["tower_rows_per_s"], 3),
        "same picture tokens": ours["picture_tokens"] == theirs["picture_tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=ROOT / ".gpu-bench")
    parser.add_argument("--backends", default="vulkan,cuda", help="of cuda, vulkan, cpu")
    parser.add_argument("--models", default="smolvlm,gemma3")
    parser.add_argument("--scale", choices=["full", "tiny"], default="full")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--precision", choices=["fast", "exact"], default="fast")
    parser.add_argument("--work", type=Path, default=Path("/tmp/wisp-vision"), help="where the GGUFs go")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    backends, models = args.backends.split(","), args.models.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    clock, seconds, built, theirs, ours = time.perf_counter(), {}, {}, {}, {}

    def stage(name: str) -> None:
        """The stage's seconds, and the JSON so far (a run cut short by the machine's time limit keeps it)."""
        seconds[name] = round(time.perf_counter() - clock - sum(seconds.values()), 1)
        result = report(args, backends, models, built, theirs, ours, seconds)
        (args.out / "vision_versus.json").write_text(json.dumps(result, indent=1))

    # The first backend builds while the pairs are written; its runs, then Wisp's, come before the other
    # backends' builds, so that the first comparison is complete early and no compiler shares the CPU with
    # a measurement.
    builder = threading.Thread(target=timed_build, args=(args.bench, backends[0], built))
    builder.start()
    pic = picture(args.bench, args.work)
    pairs = write_pairs(args.bench, args.work, args.scale, models)
    builder.join()
    stage(f"pairs + build {backends[0]}")
    llamacpp_rows(backends[0], built, models, pairs, args, pic, theirs)
    stage(f"llama.cpp {backends[0]}")
    for model in models:
        ours[model] = wisp_run(model, pairs[model], args, pic)
    stage("wisp")
    for backend in backends[1:]:
        timed_build(args.bench, backend, built)
        stage(f"build {backend}")
        llamacpp_rows(backend, built, models, pairs, args, pic, theirs)
        stage(f"llama.cpp {backend}")
    print(json.dumps(report(args, backends, models, built, theirs, ours, seconds)))


def report(args, backends: list[str], models: list[str], built: dict, theirs: dict, ours: dict, seconds: dict) -> dict:
    table = {}
    for model in models:
        mine = ours.get(model, {"error": "not run yet"})
        row = {"wisp": {k: v for k, v in mine.items() if k not in ("runs", "warm_up", "tower_runs_ms")}}
        for backend in backends:
            them = theirs.get((backend, model))
            if them is None:
                continue
            row[f"llama.cpp {backend}"] = them
            ratios = compare(mine, them)
            if ratios:
                row[f"wisp / llama.cpp {backend}"] = ratios
        row["wisp runs"] = {k: mine.get(k) for k in ("runs", "warm_up", "tower_runs_ms")}
        table[model] = row
    return {
        "gpu": next((m["adapter"] for m in ours.values() if "adapter" in m), None),
        "scale": args.scale,
        "prompt": args.prompt,
        "picture": PICTURE,
        "runs": args.runs,
        "precision": args.precision,
        "build_s": {b: built.get(f"{b} build_s") for b in backends},
        "stage_s": {**seconds, "total": round(sum(seconds.values()), 1)},
        "models": table,
    }


if __name__ == "__main__":
    main()
