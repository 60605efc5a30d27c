"""Wisp against llama.cpp on the same GPU and the same files, in one run. Prints one JSON table.

On the GPU machine, from the project root, with the ignored folder .gpu-bench/ sent along (fill it here
with `bash ../shared/gpu-bench/prepare.sh`; it holds llama.cpp's source from the llama-cpp-python sdist,
the layouts of SmolLM2-135M and of a Llama-3-8B-shaped Q4_0 model, and the loaders):

    . .gpu-bench/device_setup.sh && python3 benchmarks/versus_llamacpp.py [--backends cuda,vulkan]
                                                                          [--models smollm2,llama8b]

It builds the random-weight GGUFs from the layouts (real tensor shapes and types; speed does not depend
on the values), builds llama-bench for each backend and runs it (`.gpu-bench/llamacpp.sh`: pp128 and
tg256 / tg128 for the 8B, flash attention on, 3 repetitions), runs benchmarks/decode.py on the same files
(128-token prompt, as many new tokens), and reports tok/s side by side with Wisp's ratio to each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEW_TOKENS = {"smollm2": 256, "llama8b": 128}


def gguf_py(bench: Path) -> Path:
    """llama.cpp's gguf-py, unpacked from the source archive once (gguf_shape.py needs it)."""
    target = Path("/tmp/wisp-gguf-py")
    if not (target / "gguf-py").is_dir():
        with tarfile.open(bench / "src.tgz") as archive:
            archive.extractall(target, members=[m for m in archive.getmembers() if m.name.startswith("gguf-py")])
    return target / "gguf-py"


def build_gguf(bench: Path, model: str) -> Path:
    path = Path(f"/tmp/{model}.gguf")
    if not path.exists():
        env = dict(os.environ, PYTHONPATH=f"{gguf_py(bench)}:{os.environ.get('PYTHONPATH', '')}")
        subprocess.run(
            [
                sys.executable,
                str(bench / "gguf_shape.py"),
                "build",
                str(bench / "layouts" / f"{model}.json"),
                str(path),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    return path


def llamacpp(bench: Path, backends: list[str], models: list[str], out: Path) -> dict:
    """{(backend, model): {"pp": tok/s, "tg": tok/s}} from llama-bench's JSON."""
    subprocess.run(
        ["bash", str(bench / "llamacpp.sh"), " ".join(backends), " ".join(models)],
        check=True,
        env=dict(os.environ, OUT=str(out), B=str(bench)),
    )
    results = {}
    for backend in backends:
        for model in models:
            path = out / f"llamacpp-{backend}-{model}.json"
            if not path.exists() or not path.read_text().strip():
                continue
            rows = json.loads(path.read_text())
            results[backend, model] = {("pp" if r["n_prompt"] else "tg"): round(r["avg_ts"], 1) for r in rows}
    return results


def wisp(model: str, path: Path) -> dict:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "decode.py"),
        "--model",
        str(path),
        "--prompt-tokens",
        "128",
        "--new-tokens",
        str(NEW_TOKENS[model]),
    ]
    report = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {"pp": report["prefill_tok_s"], "tg": report["decode_tok_s"], "decode.py": report}


def table(models: list[str], backends: list[str], ours: dict, theirs: dict) -> dict:
    out = {}
    for model in models:
        row = {"wisp": {k: ours[model][k] for k in ("pp", "tg")}}
        for backend in backends:
            if (backend, model) in theirs:
                them = theirs[backend, model]
                row[f"llama.cpp {backend}"] = them
                row[f"wisp / llama.cpp {backend}"] = {k: round(row["wisp"][k] / them[k], 3) for k in them if them[k]}
        row["wisp decode.py"] = ours[model]["decode.py"]
        out[model] = row
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=ROOT / ".gpu-bench")
    parser.add_argument("--backends", default="cuda,vulkan")
    parser.add_argument("--models", default="smollm2,llama8b")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    backends, models = args.backends.split(","), args.models.split(",")
    args.out.mkdir(parents=True, exist_ok=True)
    paths = {m: build_gguf(args.bench, m) for m in models}
    ours = {m: wisp(m, paths[m]) for m in models}  # first: llama.cpp's builds leave the GPU alone meanwhile
    theirs = llamacpp(args.bench, backends, models, args.out)
    result = {
        "gpu": ours[models[0]]["decode.py"]["adapter"],
        "prompt_tokens": 128,
        "new_tokens": {m: NEW_TOKENS[m] for m in models},
        "models": table(models, backends, ours, theirs),
    }
    (args.out / "versus_llamacpp.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
