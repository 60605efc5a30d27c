"""llama.cpp's side of benchmarks/vision_versus.py: llama-mtmd-cli built from the source archive in .gpu-bench/
(llama-cpp-python's vendored llama.cpp) and timed on a text GGUF + mmproj GGUF pair and a picture.

Builds use .gpu-bench/llamacpp.sh's cmake flags, in its build directories (/tmp/lcpp-<backend>/build): where the
text benchmark configured one, llama-mtmd-cli is one more target of it; "cpu" is the same flags without a GPU
backend (for checking the whole path on a machine without a GPU).

llama-mtmd-cli prints no time for the first token, so a run is `-n 0` with `--log-prefix --log-timestamps -lv 4`:
every log line carries the microseconds since the program started. Image-to-first-token is from the line it logs
just before it loads the picture file ("This is an experimental CLI", after the model, the mmproj and both
warm-ups) to its first perf report line, which comes straight after the prompt's last batch: the picture's
decode (stb_image), its preprocessing (resizes and slices, on the CPU), the image encodes, the prompt's decode
with the picture's embeddings, and the last position's logits. The first token's greedy pick from those logits
(an argmax) is not in it. The image encode ("encode_ms") is the sum, over its "encoding mtmd batch" lines, of the
time to its "mtmd batch encoding done" line: the tower and projector over the slices' patches, their embeddings
read back to the host; its picture tokens are the "decoding image batch" lines' n_tokens_batch.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

VK = Path("/opt/vk")
# llamacpp.sh's flags, shared by every backend.
COMMON = [
    "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
]
# llamacpp.sh's patch: Debian 12's Vulkan headers predate VK_EXT_layer_settings, so the validation-layer
# settings (debug only) go.
LAYER_SETTINGS = re.compile(r"VkBool32 enable_best_practice = layer_settings;.*?&layer_setting_info\);", re.S)
PLAIN_INSTANCE = (
    "vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);"
)


def backend_env(backend: str) -> dict:
    env = dict(os.environ)
    if backend == "vulkan":  # as llamacpp.sh exports it for its build and its runs (glslc's libshaderc)
        env["LD_LIBRARY_PATH"] = str(VK / "usr/lib/x86_64-linux-gnu")
    return env


def flags(bench: Path, backend: str, src: Path) -> list[str]:
    if backend == "cuda":
        return ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]
    if backend == "cpu":
        return []
    VK.mkdir(parents=True, exist_ok=True)
    for deb in sorted((bench / "vk").glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(VK)], check=True)
    source = src / "ggml/src/ggml-vulkan/ggml-vulkan.cpp"
    source.write_text(LAYER_SETTINGS.sub(PLAIN_INSTANCE, source.read_text()))
    v = VK / "usr"
    return [
        "-DGGML_VULKAN=ON",
        f"-DVulkan_INCLUDE_DIR={v}/include",
        "-DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1",
        f"-DVulkan_GLSLC_EXECUTABLE={v}/bin/glslc",
        f"-DSPIRV-Headers_DIR={v}/share/cmake/SPIRV-Headers",
    ]


def build(bench: Path, backend: str) -> Path:
    """llama-mtmd-cli for one backend (configured once; later calls only bring the target up to date)."""
    src = Path(f"/tmp/lcpp-{backend}")
    log = Path(f"/tmp/build-mtmd-{backend}.log")
    env = backend_env(backend)
    with log.open("w") as out:
        if not (src / "build" / "CMakeCache.txt").exists():
            src.mkdir(parents=True, exist_ok=True)
            with tarfile.open(bench / "src.tgz") as archive:
                archive.extractall(src)
            configure = ["cmake", "-S", ".", "-B", "build", *flags(bench, backend, src), *COMMON]
            _run(configure, src, env, out, log)
        jobs = str(os.cpu_count() or 4)
        _run(["cmake", "--build", "build", "--target", "llama-mtmd-cli", "-j", jobs], src, env, out, log)
    return src / "build" / "bin" / "llama-mtmd-cli"


def _run(cmd: list[str], cwd: Path, env: dict, out, log: Path) -> None:
    if subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT).returncode:
        tail = log.read_text(errors="replace").splitlines()[-30:]
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({log}):\n" + "\n".join(tail))


STAMP = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+) [IWED] (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse(log: str) -> dict:
    """Times (ms) from a `-n 0 --log-prefix --log-timestamps` run's log (module docstring)."""
    start = end = batch = None
    encode, batches, image_tokens = 0.0, 0, 0
    for raw in log.splitlines():
        match = STAMP.match(ANSI.sub("", raw))
        if not match:
            continue
        minutes, seconds, ms, us, text = match.groups()
        t = 60e3 * int(minutes) + 1e3 * int(seconds) + int(ms) + int(us) / 1e3
        if start is None and "This is an experimental CLI" in text:
            start = t
        elif text.startswith("encoding mtmd batch"):
            batch = t
        elif text.startswith("mtmd batch encoding done") and batch is not None:
            encode, batches, batch = encode + t - batch, batches + 1, None
        elif found := re.search(r"decoding image batch \d+/\d+, n_tokens_batch = (\d+)", text):
            image_tokens += int(found.group(1))
        elif end is None and "llama_perf_context_print:" in text:
            end = t
    if start is None or end is None or not batches:
        raise RuntimeError("llama-mtmd-cli's log lacks the lines timed (see its log in the output folder)")
    return {
        "image_to_first_token_ms": round(end - start, 2),
        "encode_ms": round(encode, 2),
        "encode_batches": batches,
        "picture_tokens": image_tokens,
    }


def run(binary: Path, backend: str, pair: dict, picture: Path, prompt: str, context: int, log: Path) -> dict:
    """One llama-mtmd-cli run on the pair (its log kept at `log`)."""
    cmd = [str(binary), "-m", pair["text"], "--mmproj", pair["mmproj"], "--image", str(picture), "-p", prompt]
    cmd += ["-n", "0", "-c", str(context), "--temp", "0", "--seed", "0"]
    # Timestamps on every line; verbosity 4 lets through the libraries' info lines (the image decodes, the
    # perf report), which the default 3 drops.
    cmd += ["--log-prefix", "--log-timestamps", "-lv", "4"]
    if backend != "cpu":
        cmd += ["-ngl", "99"]
    done = subprocess.run(cmd, env=backend_env(backend), capture_output=True, text=True, errors="replace")
    log.write_text(done.stdout + done.stderr)
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise RuntimeError(f"llama-mtmd-cli exited {done.returncode} ({log}):\n{tail}")
    return parse(done.stderr)  # the leveled log lines; stdout has the answer's text (none at -n 0)
