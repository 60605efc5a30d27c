"""Build build/notebook/: a JupyterLite site whose Python kernel runs Wisp, served by `python -m app
--notebook build/notebook` at /notebook/ (the page's origin, so the notebook and the page share one
weight store).

    python tools/build_notebook.py [--out build/notebook]

Everything comes from PyPI and npm, nothing from a CDN at build or at run time:
- the site: `jupyter lite build` of jupyterlite-core and jupyterlite-pyodide-kernel (pyproject's
  `notebook` extra; installed here when missing). The kernel extension ships its own wheels
  (piplite, pyodide-kernel, the ipykernel and widgetsnbextension stubs);
- Pyodide: the kernel (built for 314.0.6) runs on the page's own 314.0.7 core, /pyodide/ (tools/
  build_web.py, from npm), with a lock file of ours (wisp-kernel-lock.json: micropip, which the kernel
  loads first, and jinja2 + MarkupSafe for the engine wheel), never Pyodide's CDN lock;
- what the kernel then installs with piplite (comm, IPython, jedi and their dependencies): pinned pure
  wheels from PyPI in the site's pypi/ (indexed in pypi/all.json), with PyPI's fallback disabled;
- the engine: build/web/wheels' wisp wheel (the page's, served at /wheels/), which the example
  notebook (docs/wisp.ipynb, copied as files/wisp.ipynb) installs with micropip;
- PyScript: @pyscript/core's dist from npm (sha512 pinned) in pyscript/, and docs/pyscript.html as
  pyscript.html, its `<script type="py" worker>` on the same Pyodide (the server serves that page
  cross-origin isolated: app/server.py ISOLATED).

A rebuild is skipped when nothing it is built from changed (build/notebook/.stamp.json).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_web  # noqa: E402  (the page's build: Pyodide's core, the engine wheel, pinned PyPI downloads)

ROOT = build_web.ROOT
NOTEBOOK = ROOT / "docs" / "wisp.ipynb"
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
LOCK = "wisp-kernel-lock.json"
PYODIDE_PYTHON = "3.14"  # Pyodide 314's Python: what the wheels below must install on

# The kernel's start (micropip, loaded through our lock) and what it installs with piplite (pyodide_kernel
# asks for comm and IPython, the kernel for jedi), with their dependencies as micropip resolves them on
# emscripten (IPython's pexpect is not asked for there): pinned PyPI wheels, "<file> <sha256>" a line.
WHEELS = """
micropip-0.11.1-py3-none-any.whl 768de165adb8e66906039d8fec4127a57f522dfdf8e6fbff877a4616941ecfd3
comm-0.2.3-py3-none-any.whl c615d91d75f7f04f095b30d1c1711babd43bdc6419c1be9886a85f2f4e489417
ipython-9.12.0-py3-none-any.whl 0f2701e8ee86e117e37f50563205d36feaa259d2e08d4a6bc6b6d74b18ce128d
jedi-0.19.2-py2.py3-none-any.whl a8ef22bde8490f57fe5c7681a3c83cb58874daf72b4784de3cce5b6ef6edb5b9
parso-0.8.7-py2.py3-none-any.whl a8926eb2a1b915486941fdbd31e86a4baf88fe8c210f25f2f35ecec5b574ca1c
asttokens-3.0.2-py3-none-any.whl 9da13157f5b28becde0bd374fc677dcd3c290614264eff096f167c469cd9f933
decorator-5.3.1-py3-none-any.whl f47fe6fdbd2edd623ecfe36875d37aba411624e2670dd395dddae1358689bb3c
executing-2.3.0-py3-none-any.whl 736e859c9f8701f11fcf516856f26f562e04776387824b43a35a1dfe21c84122
ipython_pygments_lexers-1.1.1-py3-none-any.whl a9462224a505ade19a605f71f8fa63c2048833ce50abc86768a0d81d876dc81c
matplotlib_inline-0.2.2-py3-none-any.whl 3c821cf1c209f59fb2d2d64abbf5b23b67bcb2210d663f9918dd851c6da1fcf6
prompt_toolkit-3.0.53-py3-none-any.whl 01c0891d7f9237d5e339f7d3e42cdae80b7534abb1c7c0e3352efba6231492f2
pure_eval-0.2.4-py3-none-any.whl 96cae060a313cfaad51bb761278bfb0e62dc0248d9315a81173752dc546cd37a
pygments-2.21.0-py3-none-any.whl 2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
stack_data-0.6.3-py3-none-any.whl d5558e0c25a4cb0853cddad3d77da9891a08cb85dd9f9f91b9f8cd66e511e695
traitlets-5.16.1-py3-none-any.whl f775618166caa0396c8e337099240f2bd3e5e917d203b2e6fbe21a58d3cb1f6b
wcwidth-0.9.4-py3-none-any.whl 901eace6d2dd25ebb917d0ce5db18e5c537e1504c905cf32f0d006c12098b05d
"""


# Lock entries (loaded by Pyodide's loadPackage, so plain micropip.install finds them offline): name ->
# (import names, dependencies). The engine's own dependencies are the page's wheels (build/web/wheels).
LOCKED = {
    "micropip": (["micropip"], []),
    "jinja2": (["jinja2"], ["markupsafe"]),
    "markupsafe": (["markupsafe"], []),
    "wisp": (["py_engine"], ["jinja2"]),
}
PYSCRIPT = ROOT / "docs" / "pyscript.html"
PYSCRIPT_VERSION = "0.7.31"
# `npm view @pyscript/core@0.7.31 dist.integrity`
PYSCRIPT_INTEGRITY = "sha512-GqM1aonc1N4RTkNZ1zJ8jJk8+i2cqeztZslPsAiQtn+wHHkUX9Z1FgIg4HjCvhBylB68UKmbTVTzOobpgPIMVQ=="
ENGINE_WHEEL = re.compile(r"/wheels/wisp-[^\"'\s]*?\.whl")  # the wheel URL docs/wisp.ipynb installs


class BuildError(Exception):
    pass


def log(message: str) -> None:
    print(f"build_notebook: {message}", flush=True)


def ensure_jupyterlite() -> None:
    """pyproject's `notebook` extra, installed into this Python when jupyterlite is missing."""
    if all(importlib.util.find_spec(m) for m in ("jupyterlite_core", "jupyterlite_pyodide_kernel", "jupyter_server")):
        return
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    log(f"installing {', '.join(extras['notebook'])}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *extras["notebook"]], check=True
    )


def pyodide_wheel(filename: str, sha256: str) -> Path:
    """A pinned pure wheel from PyPI for Pyodide's Python (pip is asked for that version, not this one's)."""
    name, version = filename.split("-")[:2]
    return build_web.pypi_file(name, version, filename, sha256, binary=True, python=PYODIDE_PYTHON)


def pyscript_tarball() -> Path:
    """@pyscript/core's npm tarball, fetched once and checked against its pinned sha512."""
    return build_web.npm_tarball("@pyscript/core", PYSCRIPT_VERSION, PYSCRIPT_INTEGRITY)


def add_pyscript(site: Path, tarball: Path) -> None:
    """PyScript's core (its dist: the module, its chunks and CSS; no source maps) and the example page."""
    target = site / "pyscript"
    target.mkdir()
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/dist/")
            if member.isfile() and name != member.name and "/" not in name and name.endswith((".js", ".css")):
                with tar.extractfile(member) as src:
                    (target / name).write_bytes(src.read())
    if not (target / "core.js").is_file():
        raise BuildError(f"{tarball.name} has no dist/core.js")
    shutil.copy2(PYSCRIPT, site / "pyscript.html")


def lite_version() -> str:
    from importlib.metadata import version

    return f"{version('jupyterlite-core')}+{version('jupyterlite-pyodide-kernel')}"


def site_config() -> dict:
    """jupyter-lite.json: the kernel on the page's Pyodide (/pyodide/) with our lock, PyPI never asked."""
    kernel = {
        "pyodideUrl": "/pyodide/pyodide.mjs",
        "disablePyPIFallback": True,
        "loadPyodideOptions": {"lockFileURL": f"./{LOCK}"},  # resolved against the site (/notebook/)
    }
    return {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {"appName": "Wisp notebooks", "litePluginSettings": {KERNEL_PLUGIN: kernel}},
    }


def example_notebook(engine_wheel: Path) -> str:
    """docs/wisp.ipynb, installing the wheel this build serves (its version is pyproject's)."""
    text = NOTEBOOK.read_text()
    if not ENGINE_WHEEL.search(text):
        raise BuildError(f"{NOTEBOOK} installs no /wheels/wisp-*.whl")
    return ENGINE_WHEEL.sub(f"/wheels/{engine_wheel.name}", text)


def write_lock(out: Path, wheels: dict[str, Path]) -> None:
    stock = json.loads((ROOT / "build" / "web" / "pyodide" / "pyodide-lock.json").read_text())
    packages = {}
    for name, (imports, depends) in LOCKED.items():
        wheel = wheels[name]
        packages[name] = {
            "name": name,
            "version": wheel.name.split("-")[1],
            "file_name": f"pypi/{wheel.name}",  # relative to the lock file: the site's own copy
            "install_dir": "site",
            "sha256": build_web.sha256_of(wheel),
            "package_type": "package",
            "imports": imports,
            "depends": depends,
            "unvendored_tests": False,
        }
    (out / LOCK).write_text(json.dumps({"info": stock["info"], "packages": packages}, indent=1, sort_keys=True) + "\n")


def build(out: Path) -> None:
    ensure_jupyterlite()
    build_web.build(ROOT / "build" / "web")  # the page's Pyodide core and the engine wheel
    page_wheels = {p.name.split("-")[0].lower(): p for p in (ROOT / "build" / "web" / "wheels").glob("*.whl")}
    pinned = [pyodide_wheel(*line.split()) for line in WHEELS.split("\n") if line]
    wheels = sorted([*pinned, *page_wheels.values()], key=lambda p: p.name)
    notebook = example_notebook(page_wheels["wisp"])
    pyscript = pyscript_tarball()
    config = json.dumps(site_config(), indent=1)

    key = hashlib.sha256()
    for part in (build_web.sha256_of(Path(__file__)), lite_version(), notebook, config, PYSCRIPT.read_text()):
        key.update(part.encode() + b"\0")
    for wheel in wheels:
        key.update(wheel.name.encode() + build_web.sha256_of(wheel).encode())
    stamp = out / ".stamp.json"
    if stamp.is_file() and json.loads(stamp.read_text()).get("key") == key.hexdigest() and (out / LOCK).is_file():
        return

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:  # beside `out`: the finished site is moved there
        lite, built = Path(tmp) / "lite", Path(tmp) / "site"
        (lite / "files").mkdir(parents=True)
        (lite / "pypi").mkdir()
        (lite / "jupyter-lite.json").write_text(config)
        (lite / "files" / NOTEBOOK.name).write_text(notebook)
        for wheel in wheels:
            shutil.copy2(wheel, lite / "pypi" / wheel.name)
        log(f"jupyter lite build ({lite_version()}) -> {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
        run = subprocess.run(
            [sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", str(lite), "--output-dir", str(built)],
            cwd=lite,
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise BuildError(f"jupyter lite build failed:\n{(run.stdout + run.stderr)[-3000:]}")
        write_lock(built, {name: built / "pypi" / wheels_by_name(wheels)[name].name for name in LOCKED})
        add_pyscript(built, pyscript)
        (built / ".stamp.json").write_text(json.dumps({"key": key.hexdigest()}) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(built, out)


def wheels_by_name(wheels: list[Path]) -> dict[str, Path]:
    return {p.name.split("-")[0].lower(): p for p in wheels}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "notebook")
    args = parser.parse_args(argv)
    try:
        build(args.out.resolve())
    except (BuildError, build_web.BuildError, subprocess.CalledProcessError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
