"""The package people install: `python -m build` makes the sdist and, from it, the wheel (engine, shaders,
server, py.typed, licence, the `wisp` command); a fresh venv installs the wheel and, without the desktop
extra, says which extra a command needs; with it, `wisp generate` gives transformers' greedy ids on this
machine's GPU (lavapipe here), run from outside the checkout so the installed copy is what runs."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
LLAMA = ROOT / "tests" / "fixtures" / "llama-f32"

pytestmark = pytest.mark.slow  # a build and a venv with wgpu: ~1 min on 2 cores


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("wisp-*-py3-none-any.whl")
    assert len(list(out.glob("wisp-*.tar.gz"))) == 1
    return found


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh venv holding the wheel alone (and jinja2, its one requirement)."""
    where = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    pip = subprocess.run(
        [where / "bin" / "python", "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return where


def wisp(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([venv / "bin" / "wisp", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_the_wheel_holds_the_engine_and_says_what_it_is(wheel):
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        info = f"wisp-{version}.dist-info"
        metadata = whl.read(f"{info}/METADATA").decode()
        scripts = whl.read(f"{info}/entry_points.txt").decode()
    shaders = {p.relative_to(ROOT / "shaders").as_posix() for p in (ROOT / "shaders").rglob("*.wgsl")}
    assert {n.removeprefix("py_engine/shaders/") for n in names if n.endswith(".wgsl")} == shaders
    page = {"app/static/index.html", "app/static/sw.js", "app/worker/worker.js", "app/worker/gpu.js"}
    assert {"py_engine/py.typed", "py_engine/library/model.py", "app/command.py", f"{info}/licenses/LICENSE"} <= names
    assert page <= names  # an installed `wisp serve` serves the page from the wheel
    assert "wisp = app.command:main" in scripts
    assert "License-Expression: Apache-2.0" in metadata
    required = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert required == ["Requires-Dist: jinja2>=3.1"]  # the rest are extras: micropip leaves them out
    assert 'Requires-Dist: wgpu==0.32.0; extra == "desktop"' in metadata


def test_a_fresh_venv_says_which_extra_a_command_needs(venv, tmp_path):
    version = wisp(venv, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("wisp 0.")
    serve = wisp(venv, "serve", "--port", "0", cwd=tmp_path)
    assert serve.returncode == 2 and "pip install 'wisp[server]'" in serve.stderr, serve.stderr
    generate = wisp(venv, "generate", "--model", str(LLAMA), "--ids", "1,2", "--json", cwd=tmp_path)
    assert generate.returncode == 2 and "pip install 'wisp[desktop]'" in generate.stderr, generate.stderr
    usage = wisp(venv, "generate", "--help", cwd=tmp_path)
    assert usage.stdout.startswith("usage: wisp generate")


def test_with_the_desktop_extra_wisp_generate_gives_transformers_ids(venv, wheel, tmp_path):
    pip = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[desktop,server]"],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    reference = json.loads((LLAMA / "reference.json").read_text())
    ids = ",".join(map(str, reference["prompt_ids"]))
    out = wisp(venv, "generate", "--model", str(LLAMA), "--ids", ids, "--max-new-tokens", "16", "--json",
               "--precision", "exact", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1])["tokens"] == reference["greedy"]
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import py_engine; print(py_engine.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert str(venv) in where.stdout  # the installed copy ran, not the checkout


MICROPIP = ("micropip==0.11.1", "768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3")  # Pyodide 314's
WEB = ROOT / "build" / "web"

MICROPIP_INSTALL = """
import { readFileSync } from "node:fs";
const [web, micropip, wheel] = process.argv.slice(2);
const { loadPyodide } = await import(`${web}/pyodide/pyodide.mjs`);
const lock = JSON.parse(readFileSync(`${web}/wisp-lock.json`, "utf8"));
for (const p of Object.values(lock.packages)) p.file_name = web + p.file_name;  // Node reads files, not URLs
const py = await loadPyodide({ indexURL: `${web}/pyodide/`, lockFileContents: lock });
await py.loadPackage([micropip], { messageCallback: () => {} });
const name = wheel.split("/").pop();
py.FS.writeFile(`/tmp/${name}`, readFileSync(wheel));
console.log(await py.runPythonAsync(`
import micropip
await micropip.install("emfs:/tmp/${name}")
import py_engine, jinja2
from py_engine.runtime.kernels import SHADER_DIR
" ".join([py_engine.__version__, str(len(list(SHADER_DIR.glob("*.wgsl"))) > 50), py_engine.load.__module__])
`));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_micropip_installs_the_same_wheel_in_pyodide(wheel, tmp_path):
    """The wheel pip installed, installed by micropip in Pyodide 314 (Node): its one requirement, jinja2,
    from the page's lock; the desktop extras left out."""
    if not (WEB / "wisp-lock.json").is_file():
        pytest.skip("needs `make web` (Pyodide's core)")
    requirement, sha256 = MICROPIP
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--platform", "any",
         "--python-version", "3.14", "-d", str(tmp_path), requirement],
        capture_output=True, text=True,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    (micropip,) = tmp_path.glob("micropip-*.whl")
    assert hashlib.sha256(micropip.read_bytes()).hexdigest() == sha256
    script = tmp_path / "install.mjs"
    script.write_text(MICROPIP_INSTALL)
    out = subprocess.run(
        ["node", str(script), str(WEB), str(micropip), str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-3:] == [wheel.name.split("-")[1], "True", "py_engine.library.hosts"]


NODE_BOOT = """
import { readFileSync } from "node:fs";
const web = process.argv[2];
const { loadPyodide } = await import(`${web}/pyodide/pyodide.mjs`);
const lock = JSON.parse(readFileSync(`${web}/wisp-lock.json`, "utf8"));
for (const p of Object.values(lock.packages)) p.file_name = web + p.file_name;
const py = await loadPyodide({ indexURL: `${web}/pyodide/`, lockFileContents: lock });
await py.loadPackage(["wisp"], { messageCallback: () => {} });
console.log(py.runPython("import py_engine.web.worker, py_engine; py_engine.__version__"));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_an_installed_wisp_serve_builds_and_serves_the_page(venv, wheel, tmp_path):
    """`wisp serve` from the wheel (after the test above added [desktop,server]): the page's build in the
    user's cache (Pyodide and PyPI downloads seeded from the checkout's .cache, as a second run finds
    them), the installed engine packed as the page's wheel; the page, its worker and that wheel served,
    and Pyodide boots the engine from it."""
    downloads = tmp_path / "cache" / "wisp" / "downloads"
    for kind in ("npm", "pypi"):
        if (ROOT / ".cache" / kind).is_dir():
            shutil.copytree(ROOT / ".cache" / kind, downloads / kind)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [venv / "bin" / "wisp", "serve", "--port", "0", "--no-default", "--model", str(LLAMA)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        lines = iter(server.stdout.readline, "")
        url = next(line.split()[1] for line in lines if line.startswith("Wisp: http"))
        page = urllib.request.urlopen(url).read().decode()
        lock = json.loads(urllib.request.urlopen(url + "wisp-lock.json").read())
        served = urllib.request.urlopen(url + lock["packages"]["wisp"]["file_name"].lstrip("/")).read()
        worker = urllib.request.urlopen(url + "worker/worker.js").read().decode()
    finally:
        server.terminate()
        server.wait(timeout=30)
    web = tmp_path / "cache" / "wisp" / "web"
    assert "<html" in page.lower() and "loadPyodide" in worker
    with zipfile.ZipFile(io.BytesIO(served)) as whl:
        assert "py_engine/library/hosts.py" in whl.namelist() and "app/static/index.html" in whl.namelist()
    script = tmp_path / "boot.mjs"
    script.write_text(NODE_BOOT)
    out = subprocess.run(["node", str(script), str(web)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == wheel.name.split("-")[1]
