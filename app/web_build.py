"""Build build/web/: what the browser needs besides the page — Pyodide, our wheels and a lock file.

    python tools/build_web.py [--out build/web] [--check]

In a checkout the engine wheel is built from the sources (the same wheel `python -m build` makes); in an
installed wheel (`wisp serve`) it is the installed distribution packed again, the page's files are the
wheel's own (app/static, app/worker), and the build goes to ~/.cache/wisp/web.

build/web/pyodide/       Pyodide's core files, from `npm pack pyodide@PYODIDE_VERSION` (sha512 pinned)
build/web/vendor/        hash-wasm's SHA-256 (WASM) for the weight store, from `npm pack hash-wasm@HASH_WASM_VERSION`
                         (sha512 pinned); worker/sha256.js falls back to its own hasher without it
build/web/wheels/        wisp (the engine, shaders inside), jinja2 (PyPI's wheel, sha256 pinned) and
                         markupsafe (a pure py3-none-any wheel we build from its pinned sdist)
build/web/wisp-lock.json the stock lock's "info" plus entries for those three wheels, so
                         `loadPyodide({lockFileURL: "/wisp-lock.json"})` then `loadPackage(["wisp"])`
                         installs the engine offline, from our own origin (no CDN: these machines reach none).
build/web/version.json   {"version", "files": [urls]}: the app shell the service worker (static/sw.js)
                         precaches — /, /manifest.webmanifest, static/*, worker/*, pyodide/*, wheels/*,
                         /wisp-lock.json — and a hash of all of it (and of sw.js), which names its cache.

Downloads are cached in .cache/ and checked against pinned hashes. Every step is skipped when its
output is already there and its inputs (pins, engine sources) did not change, so a rerun takes
well under a second.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from .engine_wheel import (
    IN_CHECKOUT,
    ROOT,
    BuildError,
    build_engine_wheel,
    log,
    record_hash,
    sha256_of,
    stale_engine_files,
    write_wheel,
)
from .shell import PYODIDE_FILES, shell_manifest  # the server computes the same live

USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wisp"
CACHE = ROOT / ".cache" if IN_CHECKOUT else USER_CACHE / "downloads"  # npm/ and pypi/ downloads
DEFAULT_OUT = ROOT / "build" / "web" if IN_CHECKOUT else USER_CACHE / "web"
# The page's own files: the checkout's static/ and worker/, which the wheel carries as app/static, app/worker.
PAGE_ROOT = ROOT if IN_CHECKOUT else Path(__file__).resolve().parent

PYODIDE_VERSION = "314.0.7"
# `npm view pyodide@314.0.7 dist.integrity`
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="

HASH_WASM_VERSION = "4.13.0"
# `npm view hash-wasm@4.13.0 dist.integrity`
HASH_WASM_INTEGRITY = "sha512-GrWl7wsV46fKIXQZB5ebskLZLAmKL6d9RS0fspCxDeQyjoNu1AfTJTMLPOJyfzaQm0ldFiwFN21/w+sE/kgEFQ=="
# Only its SHA-256 build (a UMD script, the WASM inlined; importing it sets globalThis.hashwasm) and
# the license: the store needs nothing else of it.
HASH_WASM_FILES = {"dist/sha256.umd.min.js": "sha256.umd.min.js", "LICENSE": "LICENSE"}

JINJA2 = (
    "jinja2",
    "3.1.6",
    "jinja2-3.1.6-py3-none-any.whl",
    "85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67",
)
MARKUPSAFE = (
    "markupsafe",
    "3.0.4",
    "markupsafe-3.0.4.tar.gz",
    "2e9ad7dd851bf45fab9f75cbff4cb493fee9979e8d8c7c9c3ee119022518edd6",
)

# Lock entries: import names and dependencies (normalised names) of each wheel.
IMPORTS = {"wisp": ["py_engine"], "jinja2": ["jinja2"], "markupsafe": ["markupsafe"]}
DEPENDS = {"wisp": ["jinja2"], "jinja2": ["markupsafe"], "markupsafe": []}


# Part of every step's key: a change to how things are built rebuilds them.
TOOL_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


# ---- Pyodide ----


def npm_tarball(name: str, version: str, integrity: str) -> Path:
    """An npm tarball (`@scope/name` too), fetched once into .cache/npm and checked against its pinned
    sha512 (npm's client names a scoped package's tarball <scope>-<name>-<version>.tgz)."""
    tarball = CACHE / "npm" / f"{name.removeprefix('@').replace('/', '-')}-{version}.tgz"
    if not tarball.exists():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        log(f"fetching {name}@{version} from npm")
        with tempfile.TemporaryDirectory(dir=tarball.parent) as tmp:
            if shutil.which("npm"):
                subprocess.run(
                    ["npm", "pack", f"{name}@{version}", "--pack-destination", tmp, "--silent"],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                got = Path(tmp) / tarball.name
            else:  # no npm client here: the registry's own tarball URL, same bytes, same pinned hash
                registry = os.environ.get("npm_config_registry", "https://registry.npmjs.org").rstrip("/")
                got = Path(tmp) / tarball.name
                urllib.request.urlretrieve(f"{registry}/{name}/-/{name.rpartition('/')[2]}-{version}.tgz", got)
            check_integrity(got, integrity)
            os.replace(got, tarball)
    else:
        check_integrity(tarball, integrity)
    return tarball


def check_integrity(path: Path, integrity: str) -> None:
    actual = "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()
    if actual != integrity:
        path.unlink(missing_ok=True)
        raise BuildError(f"{path.name}: integrity {actual} != pinned {integrity}; deleted it")


def unpack(tarball: Path, members: dict[str, str], target: Path) -> None:
    """`members` (package/<key>, npm's layout) of `tarball` into `target` as <value>, all or nothing."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        for src_name, dst_name in members.items():
            with tar.extractfile(tar.getmember(f"package/{src_name}")) as src, open(tmp / dst_name, "wb") as dst:
                shutil.copyfileobj(src, dst)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def build_pyodide(out: Path, stamp: dict) -> None:
    target = out / "pyodide"
    key = PYODIDE_INTEGRITY
    if stamp.get("pyodide") == key and all((target / name).is_file() for name in PYODIDE_FILES):
        return
    # Only the core: no console pages, typings or source maps.
    unpack(npm_tarball("pyodide", PYODIDE_VERSION, PYODIDE_INTEGRITY), {n: n for n in PYODIDE_FILES}, target)
    stamp["pyodide"] = key
    log(f"pyodide {PYODIDE_VERSION} core -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


def build_hash_wasm(out: Path, stamp: dict) -> None:
    target = out / "vendor" / "hash-wasm"
    key = HASH_WASM_INTEGRITY
    if stamp.get("hash-wasm") == key and all((target / name).is_file() for name in HASH_WASM_FILES.values()):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    unpack(npm_tarball("hash-wasm", HASH_WASM_VERSION, HASH_WASM_INTEGRITY), HASH_WASM_FILES, target)
    stamp["hash-wasm"] = key
    log(f"hash-wasm {HASH_WASM_VERSION} (sha256) -> {target.relative_to(out)}")


# ---- wheels ----


def pypi_file(name: str, version: str, filename: str, sha256: str, binary: bool, python: str | None = None) -> Path:
    """A pinned file from PyPI through pip (so pip's index/proxy settings apply), cached in .cache/pypi.
    python: a pure wheel for that Python version (Pyodide's), not this one's."""
    path = CACHE / "pypi" / filename
    if path.exists() and sha256_of(path) == sha256:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"downloading {filename}")
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        kind = "--only-binary=:all:" if binary else "--no-binary=:all:"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                kind,
                *(["--platform", "any", "--python-version", python] if python else []),
                "--disable-pip-version-check",
                "-d",
                tmp,
                f"{name}=={version}",
            ],
            check=True,
        )
        got = Path(tmp) / filename
        if not got.exists():
            raise BuildError(f"pip download {name}=={version} gave {os.listdir(tmp)}, not {filename}")
        if sha256_of(got) != sha256:
            raise BuildError(f"{filename}: sha256 {sha256_of(got)} != pinned {sha256}")
        os.replace(got, path)
    return path


def build_dependency_wheels(wheels: Path, stamp: dict) -> list[Path]:
    name, version, filename, sha = JINJA2
    jinja2 = wheels / filename
    if not (jinja2.exists() and sha256_of(jinja2) == sha):
        shutil.copy2(pypi_file(name, version, filename, sha, binary=True), jinja2)
    name, version, filename, sha = MARKUPSAFE
    markupsafe = wheels / f"markupsafe-{version}-py3-none-any.whl"
    if not (markupsafe.exists() and stamp.get("markupsafe") == f"{TOOL_HASH}:{sha}"):
        build_pure_wheel(pypi_file(name, version, filename, sha, binary=False), markupsafe)
        stamp["markupsafe"] = f"{TOOL_HASH}:{sha}"
        log(f"pure wheel -> {markupsafe.name}")
    return [jinja2, markupsafe]


def build_pure_wheel(sdist: Path, target: Path) -> None:
    """A py3-none-any wheel from a setuptools sdist whose C extension is optional (MarkupSafe):
    the package's Python files, PKG-INFO as METADATA, WHEEL, the license and RECORD."""
    dist, version = sdist.name.removesuffix(".tar.gz").rsplit("-", 1)
    info = f"{dist}-{version}.dist-info"
    members: dict[str, bytes] = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if not member.isfile() or len(parts) < 2:
                continue
            rel = "/".join(parts[1:])
            if rel.startswith(f"src/{dist}/") and not rel.endswith((".c", ".h")):
                members[rel[len("src/") :]] = tar.extractfile(member).read()
            elif rel == "PKG-INFO":
                members[f"{info}/METADATA"] = tar.extractfile(member).read()
            elif rel.startswith("LICENSE"):
                members[f"{info}/licenses/{rel}"] = tar.extractfile(member).read()
    if f"{dist}/__init__.py" not in members or f"{info}/METADATA" not in members:
        raise BuildError(f"{sdist.name}: no src/{dist}/__init__.py or PKG-INFO")
    members[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: wisp build_web\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},sha256={record_hash(data)},{len(data)}" for name, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    write_wheel(members, info, target)


# ---- lock file ----


def write_lock(out: Path, wheels: list[Path]) -> None:
    stock = json.loads((out / "pyodide" / "pyodide-lock.json").read_text())
    packages = {}
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        name = name.lower().replace("_", "-")
        packages[name] = {
            "name": name,
            "version": version,
            # Absolute path on our origin: the browser resolves it against the page, never a CDN.
            "file_name": f"/wheels/{wheel.name}",
            "install_dir": "site",
            "sha256": sha256_of(wheel),
            "package_type": "package",
            "imports": IMPORTS[name],
            "depends": DEPENDS[name],
            "unvendored_tests": False,
        }
    text = json.dumps({"info": stock["info"], "packages": packages}, indent=1, sort_keys=True) + "\n"
    lock = out / "wisp-lock.json"
    if not lock.exists() or lock.read_text() != text:  # unchanged bytes keep mtime and ETag
        lock.write_text(text)
        log(f"lock file -> {lock.name}")


def write_version(out: Path) -> None:
    text = json.dumps(shell_manifest(PAGE_ROOT / "static", PAGE_ROOT / "worker", out), indent=1) + "\n"
    path = out / "version.json"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
        log(f"app shell version {json.loads(text)['version']} -> {path.name}")


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stamp_path = out / ".stamp.json"
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        stamp = {}
    wheels = out / "wheels"
    wheels.mkdir(exist_ok=True)
    try:
        build_pyodide(out, stamp)
        build_hash_wasm(out, stamp)
        built = [build_engine_wheel(wheels, stamp), *build_dependency_wheels(wheels, stamp)]
    finally:
        stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    for stale in set(wheels.iterdir()) - set(built):
        stale.unlink()
    write_lock(out, built)
    write_version(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--check",
        action="store_true",
        help="build nothing; exit 1, naming the files, unless --out holds this tree's engine",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_engine_files(args.out.resolve())
        if stale:
            print(
                f"build_web: not this tree's engine: {', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''}",
                file=sys.stderr,
            )
        return 1 if stale else 0
    try:
        build(args.out.resolve())
    except (BuildError, subprocess.CalledProcessError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
