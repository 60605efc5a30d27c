"""The package people install: `python -m build` makes the sdist and, from it, the wheel (engine, shaders,
server, py.typed, licence, the `wisp` command); a fresh venv installs the wheel and, without the desktop
extra, says which extra a command needs; with it, `wisp generate` gives transformers' greedy ids on this
machine's GPU (lavapipe here), run from outside the checkout so the installed copy is what runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert {"py_engine/py.typed", "py_engine/library/model.py", "app/command.py", f"{info}/licenses/LICENSE"} <= names
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
        [venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[desktop]"], capture_output=True, text=True
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
