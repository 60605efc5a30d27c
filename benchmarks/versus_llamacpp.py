"""Wisp against llama.cpp on the same GPU and the same files, in one run. Prints one JSON table.

On the GPU machine, from the project root, with the ignored folder .gpu-bench/ sent along (fill it here
with `bash ../shared/gpu-bench/prepare.sh`; it holds llama.cpp's source from the llama-cpp-python sdist,
the layouts of SmolLM2-135M and of a Llama-3-8B-shaped Q4_0 model, and the loaders):

    . .gpu-bench/device_setup.sh && python3 benchmarks/versus_llamacpp.py [--backends cuda,vulkan]
                                   [--models smollm2,llama8b] [--depths 0,4000] [--precision fast|exact]

It builds the random-weight GGUFs from the layouts (real tensor shapes and types; speed does not depend
on the values; a tensor whose layout row lists its "values" gets them: Gemma 4's RoPE divisors, which
Wisp checks). The layouts are .gpu-bench/layouts/<model>.json; those of GENERATED are written there
when missing (gemma4_e2b: Gemma-4-E2B's text model, Q4_K_M, by tools/make_gemma4_layout.py). It builds llama-bench for each backend (`.gpu-bench/llamacpp.sh`, which also benches pp128
and tg256 / tg128 for the 8B: reported as "short"), then runs llama-bench's pp512 and tg128 at each
depth (`-d`: tokens already in the KV cache; flash attention on, 3 repetitions) and
benchmarks/decode.py on the same files at the same depths (`--depth D --prompt-tokens 512
--new-tokens 128 --tg-at-depth`: the 512-token prefill after D tokens, then 128 tokens decoded from
depth D, where llama-bench's tg starts; until session 45 they started at D + 512), and reports tok/s
side by side with Wisp's ratio to each.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT, NEW = 512, 128  # pp512 and tg128 at each depth
# Models whose layout a tool of ours writes (no such model is reachable from the GPU machine).
GENERATED = {"gemma4_e2b": ROOT / "tools" / "make_gemma4_layout.py"}


def gguf_py(bench: Path) -> Path:
    """llama.cpp's gguf-py, unpacked from the source archive once (gguf_shape.py needs it)."""
    target = Path("/tmp/wisp-gguf-py")
    if not (target / "gguf-py").is_dir():
        with tarfile.open(bench / "src.tgz") as archive:
            archive.extractall(target, members=[m for m in archive.getmembers() if m.name.startswith("gguf-py")])
    return target / "gguf-py"


def layout(bench: Path, model: str) -> Path:
    path = bench / "layouts" / f"{model}.json"
    if not path.exists() and model in GENERATED:
        subprocess.run([sys.executable, str(GENERATED[model]), str(path.parent), "--name", model], check=True)
    return path


def set_values(path: Path, layout_path: Path) -> None:
    """Write the f32 values a layout row lists over the random ones gguf_shape.py gave that tensor."""
    sys.path.insert(0, str(ROOT))
    from py_engine.formats.gguf import read_gguf

    rows = [row for row in json.loads(layout_path.read_text())["tensors"] if "values" in row]
    if not rows:
        return
    tensors = read_gguf(path).tensors
    with path.open("r+b") as file:
        for row in rows:
            info = tensors[row["name"]]
            assert info.dtype == "F32" and info.nbytes == 4 * len(row["values"]), row["name"]
            file.seek(info.start)
            file.write(struct.pack(f"<{len(row['values'])}f", *row["values"]))


def build_gguf(bench: Path, model: str) -> Path:
    path = Path(f"/tmp/{model}.gguf")
    if not path.exists():
        layout_path = layout(bench, model)
        env = dict(os.environ, PYTHONPATH=f"{gguf_py(bench)}:{os.environ.get('PYTHONPATH', '')}")
        subprocess.run(
            [
                sys.executable,
                str(bench / "gguf_shape.py"),
                "build",
                str(layout_path),
                str(path),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        set_values(path, layout_path)
    return path


def llamacpp(bench: Path, backends: list[str], models: list[str], depths: list[int], out: Path) -> dict:
    """{(backend, model): {"short": {"pp128", "tg"}, depth: {"pp", "tg"}}} from llama-bench's JSON."""
    subprocess.run(
        ["bash", str(bench / "llamacpp.sh"), " ".join(backends), " ".join(models)],
        check=True,
        env=dict(os.environ, OUT=str(out), B=str(bench)),
        stdout=sys.stderr,  # its progress lines: stdout is this script's one JSON object
    )
    results = {}
    for backend in backends:
        binary = Path(f"/tmp/lcpp-{backend}/build/bin/llama-bench")
        for model in models:
            path = out / f"llamacpp-{backend}-{model}.json"
            if not binary.exists() or not path.exists() or not path.read_text().strip():
                continue
            short = {("pp128" if r["n_prompt"] else "tg"): round(r["avg_ts"], 1) for r in json.loads(path.read_text())}
            deep = out / f"llamacpp-{backend}-{model}-depths.json"
            cmd = [str(binary), "-m", f"/tmp/{model}.gguf", "-ngl", "99", "-p", str(PROMPT), "-n", str(NEW)]
            cmd += ["-d", ",".join(map(str, depths)), "-fa", "1", "-r", "3", "-o", "json"]
            with deep.open("w") as f:
                subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.DEVNULL)
            row = {"short": short}
            for r in json.loads(deep.read_text()):
                row.setdefault(r["n_depth"], {})["pp" if r["n_prompt"] else "tg"] = round(r["avg_ts"], 1)
            results[backend, model] = row
    return results


def wisp(path: Path, depth: int, precision: str, out: Path) -> dict:
    """decode.py's report at this depth, also written to out/ as it comes (a run cut short keeps it)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "decode.py"), "--model", str(path), "--depth", str(depth)]
    cmd += ["--prompt-tokens", str(PROMPT), "--new-tokens", str(NEW), "--precision", precision, "--tg-at-depth"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    (out / f"wisp-{path.stem}-depth{depth}.json").write_text(text)
    report = json.loads(text)
    return {"pp": report["prefill_tok_s"], "tg": report["decode_tok_s"], "decode.py": report}


def table(models: list[str], backends: list[str], depths: list[int], ours: dict, theirs: dict) -> dict:
    out = {}
    for model in models:
        for depth in depths:
            mine = ours[model, depth]
            row = {"wisp": {k: mine[k] for k in ("pp", "tg")}}
            for backend in backends:
                them = theirs.get((backend, model), {}).get(depth)
                if them:
                    row[f"llama.cpp {backend}"] = them
                    row[f"wisp / llama.cpp {backend}"] = {k: round(mine[k] / them[k], 3) for k in them if them[k]}
            row["wisp decode.py"] = mine["decode.py"]
            out[f"{model} depth {depth}"] = row
        for backend in backends:
            if (backend, model) in theirs:
                out.setdefault(f"{model} llama.cpp short (pp128, tg of llamacpp.sh)", {})[backend] = theirs[
                    backend, model
                ]["short"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", type=Path, default=ROOT / ".gpu-bench")
    parser.add_argument("--backends", default="cuda,vulkan")
    parser.add_argument("--models", default="smollm2,llama8b")
    parser.add_argument("--depths", default="0,4000")
    parser.add_argument("--precision", choices=["fast", "exact"], default="fast")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    backends, models = args.backends.split(","), args.models.split(",")
    depths = [int(d) for d in args.depths.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    paths = {m: build_gguf(args.bench, m) for m in models}
    # Wisp first: llama.cpp's builds leave the GPU alone meanwhile.
    ours = {(m, d): wisp(paths[m], d, args.precision, args.out) for m in models for d in depths}
    theirs = llamacpp(args.bench, backends, models, depths, args.out)
    result = {
        "gpu": ours[models[0], depths[0]]["decode.py"]["adapter"],
        "prompt_tokens": PROMPT,
        "new_tokens": NEW,
        "precision": args.precision,
        "models": table(models, backends, depths, ours, theirs),
    }
    (args.out / "versus_llamacpp.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
