"""Real-time factors of the page's speech on Dawn: worker/worker.js + Pyodide + the engine wheel
(build/web) in Node (benchmarks/dawn/speech.mjs), a clip sent through the worker's `transcribe` message
and a text through its `speak` message as the page sends them (static/speech_client.js), the model's
files through the weight store. Prints one JSON object; the desktop's numbers for the same work are
versus_whispercpp.py's and speech_rtf.py's.

Here, just before the GPU call (packs what the GPU machine needs into the ignored .dawn-speech/,
~34 MB, compressed so that it travels with the tree: build/web (this tree's engine, built first where
it differs), Node from .gpu-bench/ stripped, Dawn, Whisper base's configs and tokenizer from
.whisper-bench/ (versus_whispercpp.py --prepare), Moonshine base's tokenizer from .speech-bench/
(speech_rtf.py --prepare), the loader debs):

    .venv/bin/python benchmarks/dawn_speech.py --prepare

On the GPU machine, from the project root, with .dawn-speech carried (--setup unpacks it):

    python3 benchmarks/dawn_speech.py --setup [--models whisper,moonshine,kani] [--runs 5]

and here on the CPU (Dawn's GLES backend on llvmpipe) with the tiny fixtures, to check the script:

    .venv/bin/python benchmarks/dawn_speech.py --tiny --dawn-backend opengles --node node --webgpu DIR

(DIR: the npm `webgpu` package, its dist/linux-x64/dawn.node.xz decompressed).

The weights are random in the real layouts, written on the GPU machine exactly as the desktop's
benchmarks write them (the real ones cannot travel): Whisper base in float16 by
versus_whispercpp.random_model (the special and timestamp rows zero), Moonshine base in f32 by
speech_rtf.moonshine_folder (the end-of-text row zero). So no model ends early, and each decodes the
token count of transformers' transcript of the real model on the clip (Whisper: 21 + <|endoftext|>;
Moonshine: its reference's). The clip is tests/fixtures/speech/two_cities_other_way.wav (6.2 s).
Whisper is told language en (the desktop's versus_whispercpp.py does so too).

Kani-TTS-2 + NanoCodec (kani): speech_rtf.kani_folder's real layout, random (bf16 backbone, f32
codec; END_OF_SPEECH's row zero, so speech is bounded by max_frames: --seconds x 12.5 frames), its
text speech_rtf.TEXT, the body's seed fixed; --tiny: the tiny LFM2 over the codec fixture's config.
Its runs are --speak-runs (warm, after the one that loads), as speech_rtf.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import wave
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dawn import ensure_current_wheel  # noqa: E402

PACK = ROOT / ".dawn-speech"
CLIP = ROOT / "tests" / "fixtures" / "speech" / "two_cities_other_way.wav"
FIXTURES = ROOT / "tests" / "fixtures"
WHISPER_BENCH, SPEECH_BENCH = ROOT / ".whisper-bench", ROOT / ".speech-bench"
TOKENIZERS = {"whisper": WHISPER_BENCH / "whisper-base", "moonshine": SPEECH_BENCH}


def prepare(node: Path) -> None:
    """.dawn-speech/ here: node (stripped, xz), build/web (this tree's engine, tar.xz: Pyodide's wasm
    compresses 3x), Dawn (npm `webgpu`, its dawn.node already xz), the model folders' small files
    (tar.xz) and the loader debs (.gpu-bench/gl: Vulkan's, glvnd's). About 34 MB: with the tracked
    tree (25 MB), under a call's 64 MiB."""
    exclude = ROOT / ".git" / "info" / "exclude"
    if "/.dawn-speech/" not in exclude.read_text():
        exclude.write_text(exclude.read_text() + "/.dawn-speech/\n")
    ensure_current_wheel()
    PACK.mkdir(exist_ok=True)
    if not (PACK / "node.xz").exists():  # two minutes: kept for the next --prepare
        with tempfile.TemporaryDirectory() as work:
            binary = Path(work) / "node"
            with open(binary, "wb") as out:
                subprocess.run(["xz", "-dc", str(node)], stdout=out, check=True)
            subprocess.run(["strip", "--strip-unneeded", str(binary)], check=True)
            with open(PACK / "node.xz.part", "wb") as out:
                subprocess.run(["xz", "-9e", "-T2", "-c", str(binary)], stdout=out, check=True)
            (PACK / "node.xz.part").rename(PACK / "node.xz")
    with tarfile.open(PACK / "small.tar.xz", "w:xz", preset=9) as tar:
        tar.add(ROOT / "build" / "web", "build/web")
        for folder in TOKENIZERS.values():
            tar.add(folder, folder.relative_to(ROOT))
    shutil.copytree(ROOT / ".gpu-bench" / "webgpu", PACK / "webgpu", dirs_exist_ok=True)
    shutil.copytree(ROOT / ".gpu-bench" / "gl", PACK / "gl", dirs_exist_ok=True)
    print(subprocess.run(["du", "-sh", str(PACK)], capture_output=True, text=True).stdout.strip())


def setup_device() -> tuple[str, str]:
    """On the GPU machine: the loaders into /, node and Dawn into /tmp, build/web and the benches'
    small files back in place. (node, webgpu dir)."""
    for deb in sorted((PACK / "gl").glob("*.deb")):  # as .gpu-bench/device_setup.sh: NVIDIA's ICD uses glvnd's
        subprocess.run(["dpkg", "-x", str(deb), "/"], check=True)
    subprocess.run(["ldconfig"], check=True)
    os.environ.update(XDG_RUNTIME_DIR="/tmp", VK_DRIVER_FILES="/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json")
    with open("/tmp/node", "wb") as out:
        subprocess.run(["xz", "-dc", str(PACK / "node.xz")], stdout=out, check=True)
    os.chmod("/tmp/node", 0o755)
    if not Path("/tmp/webgpu/dist/linux-x64/dawn.node").exists():
        shutil.copytree(PACK / "webgpu", "/tmp/webgpu", dirs_exist_ok=True)
        subprocess.run(["xz", "-d", "/tmp/webgpu/dist/linux-x64/dawn.node.xz"], check=True)
    shutil.rmtree(ROOT / "build" / "web", ignore_errors=True)
    with tarfile.open(PACK / "small.tar.xz") as tar:
        tar.extractall(ROOT, filter="data")
    return "/tmp/node", "/tmp/webgpu"


def clip_samples(clip: Path, out: Path) -> float:
    """The clip's 16 kHz mono PCM16 as float32 little-endian in `out` (what the page's decoder gives); its seconds."""
    with wave.open(str(clip)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2, clip
        count = w.getnframes()
        values = struct.unpack(f"<{count}h", w.readframes(count))
    out.write_bytes(struct.pack(f"<{count}f", *(v / 32768 for v in values)))
    return count / 16000


def models(names: list[str], work: Path, tiny: bool, clip: Path, seconds: float, seed: int) -> dict:
    """name -> (HF folder, speech.mjs's arguments for its run)."""
    out = {}
    if "whisper" in names:
        if tiny:
            out["whisper (tests/fixtures/whisper-f16)"] = (FIXTURES / "whisper-f16", heard(clip, 6, "en"))
        else:
            from versus_whispercpp import random_model

            reference = json.loads((FIXTURES / "speech" / "whisper_base.json").read_text())
            tokens = len(reference["clips"][CLIP.name]["ids"]) + 1  # and <|endoftext|>
            random_model(work / "whisper-base")
            out["whisper base (random f16)"] = (work / "whisper-base", heard(clip, tokens, "en"))
    if "moonshine" in names:
        from speech_rtf import moonshine_folder

        reference = json.loads((FIXTURES / "moonshine-base" / "reference.json").read_text())["clips"]
        tokens = 6 if tiny else len(reference[CLIP.name]["ids"]) - 1  # after the start id, the end id included
        name = "moonshine (tests/fixtures/moonshine-f32)" if tiny else "moonshine base (random f32)"
        out[name] = (moonshine_folder(work / "moonshine-base", tiny), heard(clip, tokens, None))
    if "kani" in names:
        from speech_rtf import TEXT, kani_folder

        name = "kani-tts-2 (tiny LFM2 + nanocodec-f32's config)" if tiny else "kani-tts-2 + nanocodec (random)"
        frames = round(seconds * 12.5)  # NanoCodec's 12.5 frames a second
        spoken = ["--text", TEXT, "--frames", str(frames), "--seed", str(seed)]
        out[name] = (kani_folder(work / "kani", tiny), spoken)
    return out


def heard(clip: Path, tokens: int, language: str | None) -> list[str]:
    """speech.mjs's arguments of a transcription of the clip's samples (clip_samples' file)."""
    return ["--pcm", str(clip), "--tokens", str(tokens)] + (["--language", language] if language else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", action="store_true", help="fill .dawn-speech/ here (CPU machine)")
    parser.add_argument("--setup", action="store_true", help="on the GPU machine: unpack .dawn-speech/ first")
    parser.add_argument("--tiny", action="store_true", help="the tiny fixtures (a check of the script)")
    parser.add_argument("--models", default="whisper,moonshine,kani")
    parser.add_argument("--runs", type=int, default=5, help="warm transcribes (after the first, which loads)")
    parser.add_argument("--speak-runs", type=int, default=3, help="warm speaks (after the first, which loads)")
    parser.add_argument("--seconds", type=float, default=10.0, help="speech to make: max_frames / 12.5")
    parser.add_argument("--seed", type=int, default=0, help="the speak body's seed")
    parser.add_argument("--node", default="node")
    parser.add_argument("--webgpu", default="/tmp/webgpu", help="the npm `webgpu` package's directory")
    parser.add_argument("--dawn-backend", default="vulkan", help="vulkan, or opengles (compatibility mode, no GPU)")
    parser.add_argument(
        "--dawn-toggle",
        action="append",
        default=None,
        help="a Dawn toggle (repeatable); on vulkan by default enable-dawn-features=vulkan_enable_f16_on_nvidia",
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    if args.prepare:
        return prepare(ROOT / ".gpu-bench" / "node.xz")
    if args.setup:
        args.node, args.webgpu = setup_device()
    toggles = args.dawn_toggle
    if toggles is None:  # Dawn hides shader-f16 on NVIDIA's Vulkan driver without it
        toggles = ["enable-dawn-features=vulkan_enable_f16_on_nvidia"] if args.dawn_backend == "vulkan" else []
    result = {"clip": CLIP.name}
    if args.setup:  # no rebuild there (no registry): say whether the carried wheel is this tree's engine
        check = subprocess.run(
            [sys.executable, "tools/build_web.py", "--check"], cwd=ROOT, capture_output=True, text=True
        )
        result["build_web"] = "this tree's engine" if check.returncode == 0 else (check.stdout + check.stderr)[-400:]
    else:
        ensure_current_wheel()
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        result["clip_seconds"] = round(clip_samples(CLIP, work / "clip.f32"), 3)
        names, clip = args.models.split(","), work / "clip.f32"
        for name, (folder, task) in models(names, work, args.tiny, clip, args.seconds, args.seed).items():
            runs = args.speak_runs if "--frames" in task else args.runs
            command = [args.node, str(ROOT / "benchmarks" / "dawn" / "speech.mjs"), "--model", str(folder)]
            command += [*task, "--runs", str(runs)]
            command += ["--dawn-backend", args.dawn_backend, "--webgpu", args.webgpu]
            command += [arg for toggle in toggles for arg in ("--dawn-toggle", toggle)]
            run = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
            lines = run.stdout.strip().splitlines()
            ok = run.returncode == 0 and lines
            result[name] = json.loads(lines[-1]) if ok else {"error": f"exit code {run.returncode}; its log is above"}
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "dawn_speech.json").write_text(json.dumps(result, indent=1))  # a run cut short keeps it
    print(json.dumps(result))


if __name__ == "__main__":
    main()
