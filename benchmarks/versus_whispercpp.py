"""Wisp against whisper.cpp (its CUDA and Vulkan backends, built from source) on the same GPU, the same
Whisper size and the same clip. Prints one JSON object with real-time factors.

Here, once (fills the ignored folder .whisper-bench/, ~20 MB, for the GPU machine, which reaches no
registry): whisper.cpp's source from the npm package nodejs-whisper 0.3.1 (whisper.cpp 1.9.1 with
ggml's CUDA and Vulkan backends; the other backends, the bindings and the mobile examples left
out), the Vulkan/GL loader and glslc debs and the wgpu-py wheels (copied from .gpu-bench/ when
../shared/gpu-bench/prepare.sh made it, else downloaded), and the catalog's whisper-base files but
the weights (its configs and tokenizer.json):

    .venv/bin/python benchmarks/versus_whispercpp.py --prepare

On the GPU machine, from the project root, with .whisper-bench carried:

    python3 benchmarks/versus_whispercpp.py [--backends vulkan,cuda] [--clip tests/fixtures/speech/X.wav]

The weights are random, in Whisper base's real layout and float16 (the real 145 MB cannot travel;
speed does not depend on the values), written once as an HF folder for Wisp and as whisper.cpp's
ggml file (tools/make_ggml_whisper.py). The rows of the special and timestamp tokens in the (tied)
embedding are zero, so their logits are 0 while the best text token's is positive: no engine ends
early, and each decodes as many tokens as it is told. The clip's work is one 30-second window
(log-mel, encoder) and the token count of transformers' transcript of the real model on it
(tests/fixtures/speech/whisper_base.json). whisper.cpp runs its own whisper-bench (encoder, then
single-token decode steps) and whisper-cli on the clip (no timestamps, no temperature fallback,
language en, greedy; it decodes until its own limit, ~220 tokens). whisper.cpp's time for the clip
(warm, as Wisp's) is whisper-cli's mel + whisper-bench's encoder, one 5-token batch (the prompt)
and that many single-token decode steps + whisper-cli's sampling per token; whisper-cli's own run,
its first use of the GPU (Vulkan's pipelines compiled then), is reported apart as "cold". Wisp runs py_engine.speech.load_transcriber's
transcribe(clip, language="en", max_tokens=that count), timed on the second of two runs.
Real-time factor = time / clip seconds (lower is faster).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import wave
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH = ROOT / ".whisper-bench"
NPM_PACKAGE, WHISPER_CPP = "nodejs-whisper@0.3.1", "1.9.1"
CLIP = ROOT / "tests" / "fixtures" / "speech" / "two_cities_other_way.wav"
MODEL_FILES = ("config.json", "generation_config.json", "preprocessor_config.json", "tokenizer.json")
MODEL_FILES += ("tokenizer_config.json",)
KEEP_BACKENDS = ("ggml-cpu", "ggml-cuda", "ggml-vulkan", "ggml-blas")
DROP_EXAMPLES = ("whisper.android", "whisper.android.java", "whisper.objc", "whisper.swiftui", "talk-llama", "wchess")
DROP_EXAMPLES += ("whisper.wasm", "stream.wasm", "command.wasm", "bench.wasm", "addon.node", "whisper.nvim", "python")
SPECIAL_FROM = 50257  # <|endoftext|> and every id after it: specials, languages, timestamps


def prepare() -> None:
    """Fill .whisper-bench/ here (see the docstring)."""
    (BENCH / "work").mkdir(parents=True, exist_ok=True)
    exclude = ROOT / ".git" / "info" / "exclude"
    if "/.whisper-bench/" not in exclude.read_text():
        exclude.write_text(exclude.read_text() + "/.whisper-bench/\n")
    work = BENCH / "work"
    if not (BENCH / "whispercpp.tgz").exists():
        subprocess.run(["npm", "pack", "-q", NPM_PACKAGE], cwd=work, check=True, stdout=subprocess.DEVNULL)
        (archive,) = work.glob("nodejs-whisper-*.tgz")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        src = work / "package" / "cpp" / "whisper.cpp"

        def keep(info: tarfile.TarInfo):
            parts = Path(info.name).parts
            if len(parts) > 3 and parts[1:3] == ("ggml", "src") and parts[3].startswith("ggml-"):
                if (src / "ggml" / "src" / parts[3]).is_dir() and parts[3] not in KEEP_BACKENDS:
                    return None
            if len(parts) > 2 and parts[1] == "examples" and parts[2] in DROP_EXAMPLES:
                return None
            if len(parts) > 1 and parts[1] == "bindings":  # CMakeLists.txt reads the JavaScript package template
                return info if parts[2:] in ((), ("javascript",), ("javascript", "package-tmpl.json")) else None
            return None if len(parts) > 1 and parts[1] in ("models", "samples", "tests", "media") else info

        with tarfile.open(BENCH / "whispercpp.tgz", "w:gz") as tar:
            tar.add(src, "whisper.cpp", filter=keep)
        shutil.rmtree(work)
    shared = ROOT / ".gpu-bench"
    for folder, names in (("gl", "*.deb"), ("vk", "*.deb"), ("whl", "*.whl")):
        (BENCH / folder).mkdir(exist_ok=True)
        for path in (shared / folder).glob(names):
            if folder != "whl" or path.name.split("-")[0] in ("wgpu", "cffi", "pycparser", "rendercanvas", "sniffio"):
                shutil.copy(path, BENCH / folder)
    if not list((BENCH / "gl").glob("*.deb")):
        raise SystemExit("no loader debs: run bash ../shared/gpu-bench/prepare.sh first (it makes .gpu-bench/)")
    from py_engine.model_cache import ensure_model

    model = ensure_model("whisper-base")
    (BENCH / "whisper-base").mkdir(exist_ok=True)
    for name in MODEL_FILES:
        shutil.copy(model / name, BENCH / "whisper-base" / name)
    print(subprocess.run(["du", "-sh", str(BENCH)], capture_output=True, text=True).stdout.strip())


def setup_device() -> None:
    """The loaders into /, glslc and the Vulkan headers into /opt/vk, wgpu-py into /tmp/site."""
    for deb in sorted((BENCH / "gl").glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), "/"], check=True)
    subprocess.run(["ldconfig"], check=True)
    for deb in sorted((BENCH / "vk").glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), "/opt/vk"], check=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", "/tmp/site"]
    subprocess.run([*pip, *map(str, (BENCH / "whl").glob("*.whl"))], check=True)
    sys.path.insert(0, "/tmp/site")
    os.environ.update(XDG_RUNTIME_DIR="/tmp", VK_DRIVER_FILES="/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json")


def build(backend: str) -> Path:
    """whisper-bench and whisper-cli of whisper.cpp for one backend, in /tmp/wcpp-<backend>."""
    src = Path(f"/tmp/wcpp-{backend}")
    binary = src / "whisper.cpp" / "build" / "bin"
    if (binary / "whisper-cli").exists():
        return binary
    src.mkdir(exist_ok=True)
    with tarfile.open(BENCH / "whispercpp.tgz") as tar:
        tar.extractall(src, filter="data")
    root = src / "whisper.cpp"
    if backend == "vulkan":
        # Debian 12's Vulkan headers predate VK_EXT_layer_settings: drop the validation-layer settings (debug only).
        path = root / "ggml" / "src" / "ggml-vulkan" / "ggml-vulkan.cpp"
        text = re.sub(
            r"VkBool32 enable_best_practice = layer_settings;.*?&layer_setting_info\);",
            "vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);",
            path.read_text(),
            flags=re.S,
        )
        path.write_text(text)
        vk = "/opt/vk/usr"
        flags = ["-DGGML_VULKAN=ON", f"-DVulkan_INCLUDE_DIR={vk}/include", f"-DVulkan_GLSLC_EXECUTABLE={vk}/bin/glslc"]
        flags += [
            "-DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1",
            f"-DSPIRV-Headers_DIR={vk}/share/cmake/SPIRV-Headers",
        ]
        os.environ["LD_LIBRARY_PATH"] = f"{vk}/lib/x86_64-linux-gnu"
    else:
        flags = ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]
    flags += [
        "-DGGML_NATIVE=OFF",
        "-DWHISPER_BUILD_TESTS=OFF",
        "-DWHISPER_BUILD_SERVER=OFF",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    log = open(f"/tmp/build-{backend}.log", "w")
    subprocess.run(["cmake", "-S", str(root), "-B", str(root / "build"), *flags], check=True, stdout=log, stderr=log)
    jobs = str(os.cpu_count() or 8)
    targets = ["--target", "whisper-bench", "whisper-cli"]
    subprocess.run(["cmake", "--build", str(root / "build"), *targets, "-j", jobs], check=True, stdout=log, stderr=log)
    return binary


def random_model(folder: Path) -> Path:
    """Whisper base's layout with random float16 weights (HF folder) and its whisper.cpp ggml file."""
    from py_engine.formats.safetensors import read_header
    from py_engine.models.whisper import whisper_configs, whisper_shapes

    sys.path.insert(0, str(ROOT / "tools"))
    from make_ggml_whisper import write_ggml
    from random_model import write_safetensors

    folder.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copy(BENCH / "whisper-base" / name, folder / name)
    config = json.loads((folder / "config.json").read_text())
    shapes = whisper_shapes(*whisper_configs(config, folder / "config.json"))
    write_safetensors(folder / "model.safetensors", shapes, "f16")
    embed = read_header(folder / "model.safetensors")["model.decoder.embed_tokens.weight"]
    with open(folder / "model.safetensors", "r+b") as file:  # the special and timestamp rows: zero
        row = embed.nbytes // embed.shape[0]
        file.seek(embed.start + SPECIAL_FROM * row)
        file.write(bytes(row * (embed.shape[0] - SPECIAL_FROM)))
    write_ggml(folder, folder / "ggml-base.bin")
    return folder / "ggml-base.bin"


TIMING = re.compile(r"whisper_print_timings:\s+(\w+) time =\s+([\d.]+) ms(?: /\s+(\d+) runs)?")


def timings(text: str) -> dict:
    """{stage: {"ms": total, "runs": n}} from whisper_print_timings' lines."""
    return {m[1]: {"ms": float(m[2]), "runs": int(m[3] or 1)} for m in TIMING.finditer(text)}


def whispercpp(binary: Path, model: Path, clip: Path, tokens: int, seconds: float) -> dict:
    env = dict(os.environ)
    bench = subprocess.run(
        [str(binary / "whisper-bench"), "-m", str(model), "-t", "8"], capture_output=True, text=True, env=env
    )
    start = time.perf_counter()
    cli = [str(binary / "whisper-cli"), "-m", str(model), "-f", str(clip), "-t", "8", "-l", "en", "-nt", "-nf"]
    run = subprocess.run([*cli, "-bo", "1", "-bs", "1"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    used = [line for line in (bench.stderr + run.stderr).splitlines() if "ggml_" in line and "found" in line.lower()]
    cli_times, bench_times = timings(run.stderr), timings(bench.stderr)
    if run.returncode or bench.returncode or "encode" not in cli_times or "encode" not in bench_times:
        return {"error": (run.stderr + bench.stderr)[-2000:]}
    # Warm: whisper-bench's stages (after its two warm-up passes: the Vulkan pipelines compiled, CUDA
    # initialised) for the encoder, a 5-token batch (the prompt) and single-token decode steps, with
    # whisper-cli's mel and its sampling per decoded token (both on the CPU). whisper-cli's own run is
    # its first use of the GPU: the "cold" time a one-shot command sees.
    per = {k: v["ms"] / v["runs"] for k, v in bench_times.items()}
    sample = cli_times["sample"]["ms"] / cli_times["decode"]["runs"]
    warm = cli_times["mel"]["ms"] + per["encode"] + per["batchd"] + tokens * (per["decode"] + sample)
    return {
        "clip_ms": round(warm, 2),
        "rtf": round(warm / 1000 / seconds, 4),
        "encode_ms": round(per["encode"], 3),
        "decode_ms_per_token": round(per["decode"] + sample, 3),
        "whisper-cli cold": {
            "decoded": cli_times["decode"]["runs"],
            "total_ms (load included)": cli_times["total"]["ms"],
            "wall_s": round(wall, 3),
        },
        "whisper-cli": cli_times,
        "whisper-bench": bench_times,
        "devices": sorted(set(used)),
    }


def wisp(folder: Path, clip: Path, tokens: int, seconds: float, runs: int = 5) -> dict:
    from py_engine.speech.transcriber import TRANSCRIBERS

    if "WhisperForConditionalGeneration" not in TRANSCRIBERS:
        return {"not run": "py_engine.speech has no Whisper transcriber yet (TRANSCRIBERS)"}
    from array import array
    from statistics import median

    from py_engine.gpu import open_device
    from py_engine.speech import load_transcriber
    from py_engine.speech.log_mel import window_bytes

    with wave.open(str(clip)) as w:
        pcm = array("f", (s / 32768 for s in struct.unpack(f"<{w.getnframes()}h", w.readframes(w.getnframes()))))

    async def timed(work) -> float:
        start = time.perf_counter()
        await work()
        return time.perf_counter() - start

    async def run() -> dict:
        device = await open_device()
        transcriber = await load_transcriber(str(folder), device)
        model = transcriber.model
        times, decoded, first, per_token = [], [], [], []
        for _ in range(1 + runs):  # the first run compiles the pipelines
            start = time.perf_counter()
            segments = [s async for s in transcriber.transcribe(pcm, language="en", max_tokens=tokens)]
            times.append(time.perf_counter() - start)
            decoded.append(sum(len(s.tokens) for s in segments))
            first.append(model.stats.first_token_seconds)
            per_token.append(model.stats.seconds_per_token or 0.0)
        stamped = []
        for _ in range(3):  # with timestamps (the host picks from each range's best: a readback a token)
            [s async for s in transcriber.transcribe(pcm, language="en", timestamps=True, max_tokens=tokens)]
            stamped.append((model.stats.seconds_per_token, model.stats.tokens))
        # The stages alone (each waited for): the log-mel front-end, the encoder, both (a window's encode).
        window = {"pcm": window_bytes(pcm)}

        async def front():
            device.write_buffer(model.front.buffer("pcm"), 0, window["pcm"])
            device.submit(model.front.commands(transcriber.rows, 0))
            await model.sync()

        async def encoder():
            device.submit(model.encoder.commands(transcriber.rows, 0))
            await model.sync()

        async def encode():
            model.encode(window, transcriber.rows)
            await model.sync()

        stages = {}
        for name, work in (("front_end", front), ("encoder", encoder), ("encode", encode)):
            stages[name] = median([await timed(work) for _ in range(runs)])
        profile = {
            "encoder (1,500 rows)": await kernel_ms(model, model.encoder, transcriber.rows, 0),
            "decoder (1 row at 10)": await kernel_ms(model, model.decoder, 1, 10),
        }
        ms = lambda t: round(1000 * t, 2)  # noqa: E731
        warm = times[1:]
        return {
            "seconds": [round(t, 4) for t in times],
            "clip_ms": ms(median(warm)),
            "rtf": round(median(warm) / seconds, 4),
            "log_mel_ms": ms(stages["front_end"]),
            "encoder_ms": ms(stages["encoder"]),
            "encode_ms": ms(stages["encode"]),
            "first_token_ms (encode queued before it, included)": ms(median(first[1:])),
            "decode_ms_per_token (after the first)": round(1000 * median(per_token[1:]), 3),
            "timestamps: decode_ms_per_token, tokens": [
                None if t is None else round(1000 * t, 3) for t, _ in stamped[1:]
            ]
            + [stamped[-1][1]],
            "decoded_tokens": decoded,
            "adapter": device.caps.adapter,
            "kernels (ms a forward: each kernel's dispatches alone, 20 times a submit)": profile,
        }

    return asyncio.run(run())


async def kernel_ms(model, executor, rows: int, pos: int, repeats: int = 20) -> dict:
    """A forward's time by kernel: each kernel's dispatches of the forward (the values they read do
    not matter for time) submitted `repeats` times in one submit and waited for, per forward; the
    whole forward's the same way ("forward")."""
    dispatches = executor.commands(rows, pos)
    names = executor.kernel_names(rows, executor.graph.folds(rows, pos + rows))
    if len(names) != len(dispatches):
        return {"error": f"{len(names)} kernel names for {len(dispatches)} dispatches"}
    groups = {"forward": dispatches}
    for name, dispatch in zip(names, dispatches):
        groups.setdefault(name, []).append(dispatch)
    times = {}
    for name, group in groups.items():
        model.device.submit(group)  # once first: its pipelines ready
        await model.sync()
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            model.device.submit(group * repeats)
            await model.sync()
            best = min(best, time.perf_counter() - start)
        times[f"{name} x{len(group)}" if name != "forward" else name] = round(1000 * best / repeats, 3)
    return dict(sorted(times.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", action="store_true", help="fill .whisper-bench/ here (CPU machine)")
    parser.add_argument("--backends", default="vulkan,cuda")
    parser.add_argument("--clip", type=Path, default=CLIP)
    parser.add_argument("--wisp-only", action="store_true", help="Wisp's half alone (no whisper.cpp build)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    if args.prepare:
        return prepare()
    reference = json.loads((ROOT / "tests" / "fixtures" / "speech" / "whisper_base.json").read_text())
    tokens = len(reference["clips"][args.clip.name]["ids"]) + 1  # and <|endoftext|>
    with wave.open(str(args.clip)) as w:
        seconds = w.getnframes() / w.getframerate()
    setup_device()
    folder = Path("/tmp/whisper-base-random")
    model = random_model(folder) if not (folder / "ggml-base.bin").exists() else folder / "ggml-base.bin"
    result = {"clip": {"file": args.clip.name, "seconds": round(seconds, 3), "decoded_tokens": tokens}}
    result["whisper.cpp"] = f"{WHISPER_CPP} (npm {NPM_PACKAGE}), float16 ggml, flash attention on (its default)"
    args.out.mkdir(parents=True, exist_ok=True)
    try:  # first: the builds leave the GPU alone after
        result["wisp"] = wisp(folder, args.clip, tokens, seconds)
    except Exception as exc:  # the comparison still runs whisper.cpp's half
        result["wisp"] = {"error": f"{type(exc).__name__}: {exc}"}
    for backend in [] if args.wisp_only else args.backends.split(","):
        try:
            binary = build(backend)
        except subprocess.CalledProcessError:
            result[f"whisper.cpp {backend}"] = {"error": Path(f"/tmp/build-{backend}.log").read_text()[-3000:]}
            continue
        result[f"whisper.cpp {backend}"] = whispercpp(binary, model, args.clip, tokens, seconds)
        mine, theirs = result["wisp"].get("rtf"), result[f"whisper.cpp {backend}"].get("rtf")
        if mine and theirs:
            result[f"wisp / whisper.cpp {backend}"] = round(mine / theirs, 3)
        (args.out / "versus_whispercpp.json").write_text(json.dumps(result, indent=1))  # a run cut short keeps it
    (args.out / "versus_whispercpp.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
