"""The wisp wheel the page loads: in a checkout, built from the sources (pip wheel of a clean copy: the
same wheel `python -m build` makes); in an installed wheel, the installed distribution packed again.
Also the zip writing every wheel of the page's build shares (app/web_build.py makes the rest)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # a checkout's root, or site-packages in an installed wheel
IN_CHECKOUT = (ROOT / "pyproject.toml").is_file() and (ROOT / "static").is_dir()
# Part of the wheel's key: a change to how it is built rebuilds it.
TOOL_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed member dates: the same inputs give the same wheel bytes


class BuildError(Exception):
    pass


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def log(message: str) -> None:
    print(f"build_web: {message}", flush=True)


METADATA_FILES = ("pyproject.toml", "README.md", "LICENSE")  # read by the build, not members of the wheel
# What the wheel carries, as pyproject's packages and package-data say: (top folder, pattern).
PACKAGED = (
    ("py_engine", "*.py"),
    ("py_engine", "py.typed"),
    ("app", "*.py"),
    ("shaders", "*.wgsl"),
    ("static", "*"),
    ("worker", "*.js"),
)
# Folders the wheel holds under another name (pyproject's package-dir): repository folder -> wheel folder.
RENAMED = {"shaders/": "py_engine/shaders/", "static/": "app/static/", "worker/": "app/worker/"}


def engine_inputs() -> dict[str, Path]:
    """The files the wisp wheel is built from (all engine and server sources, shaders, the type marker, and
    the metadata's README and licence): the same wheel the page loads and `pip install` takes."""
    files = {name: ROOT / name for name in METADATA_FILES}
    for top, pattern in PACKAGED:
        for path in sorted((ROOT / top).rglob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(ROOT).as_posix()] = path
    return files


def build_engine_wheel(wheels: Path, stamp: dict) -> Path:
    if not IN_CHECKOUT:
        return installed_wheel(wheels, stamp)
    inputs = engine_inputs()
    digest = hashlib.sha256()
    for rel, path in inputs.items():
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    key = f"{TOOL_HASH}:{digest.hexdigest()}"
    existing = sorted(wheels.glob("wisp-*.whl"))
    if stamp.get("wisp") == key and len(existing) == 1:
        return existing[0]
    # Build from a copy of just the sources: setuptools' in-tree build/lib would keep files that
    # were deleted since the last build, and they would end up in the wheel.
    with tempfile.TemporaryDirectory() as tmp:
        src, dist = Path(tmp) / "src", Path(tmp) / "dist"
        for rel, path in inputs.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / rel)
        env = {**os.environ, "SOURCE_DATE_EPOCH": "315532800"}  # stable zip timestamps: same sources, same bytes
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--disable-pip-version-check",
                "-w",
                str(dist),
                str(src),
            ],
            check=True,
            env=env,
        )
        (built,) = dist.glob("wisp-*.whl")
        missing = sorted(set(inputs) - set(METADATA_FILES) - engine_members(built))
        if missing:
            raise BuildError(f"the wisp wheel lacks {missing[:5]}: add their packages to pyproject.toml")
        for old in existing:
            old.unlink()
        target = wheels / built.name
        shutil.move(built, target)
    stamp["wisp"] = key
    log(f"engine wheel -> {target.name}")
    return target


def installed_wheel(wheels: Path, stamp: dict) -> Path:
    """The installed wisp distribution packed again as its wheel (its files as RECORD lists them, but the
    installer's own and bytecode): what an installed `wisp serve` hands the page."""
    from importlib.metadata import distribution

    dist = distribution("wisp")
    info = f"wisp-{dist.version}.dist-info"
    installer_files = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    files = sorted(
        f
        for f in dist.files or ()
        if f.parts[0] in ("py_engine", "app", info)
        and "__pycache__" not in f.parts
        and not (f.parts[0] == info and f.name in installer_files)
    )
    if not any(f.parts[0] == "py_engine" for f in files):
        raise BuildError("the installed wisp has no py_engine files in its RECORD (an editable install?)")
    key = f"{TOOL_HASH}:{dist.version}:{hashlib.sha256((dist.read_text('RECORD') or '').encode()).hexdigest()}"
    target = wheels / f"wisp-{dist.version}-py3-none-any.whl"
    if stamp.get("wisp") == key and target.exists():
        return target
    members = {f.as_posix(): Path(f.locate()).read_bytes() for f in files}
    record = [f"{name},sha256={record_hash(data)},{len(data)}" for name, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    for old in wheels.glob("wisp-*.whl"):
        old.unlink()
    write_wheel(members, info, target)
    stamp["wisp"] = key
    log(f"engine wheel (the installed one) -> {target.name}")
    return target


def engine_members(wheel: Path) -> set[str]:
    """Wheel members named like the repository's files (py_engine/shaders/x.wgsl -> shaders/x.wgsl)."""
    return {repository_name(name) for name in wheel_names(wheel)}


def repository_name(member: str) -> str:
    for folder, packaged in RENAMED.items():
        if member.startswith(packaged):
            return folder + member[len(packaged) :]
    return member


def stale_engine_files(out: Path) -> list[str]:
    """Why `out` does not hold this tree's engine (none: it does): engine sources whose bytes differ
    from the wisp wheel's copy, or are missing from it, or are only in it. --check prints them:
    benchmarks/dawn.py may run on a build brought from a machine with the build tools."""
    if not (out / "pyodide" / "pyodide.mjs").is_file() or not (out / "wisp-lock.json").is_file():
        return [f"{out} (not built)"]
    wheels = sorted((out / "wheels").glob("wisp-*.whl"))
    if len(wheels) != 1:
        return [f"{out / 'wheels'}/wisp-*.whl (not one wheel)"]
    inputs = {rel: path for rel, path in engine_inputs().items() if rel not in METADATA_FILES}
    with zipfile.ZipFile(wheels[0]) as whl:
        members = {repository_name(n): n for n in whl.namelist() if not n.endswith("/") and ".dist-info/" not in n}
        stale = [
            rel for rel, path in inputs.items() if rel not in members or whl.read(members[rel]) != path.read_bytes()
        ]
    return stale + sorted(rel for rel in members if rel not in inputs)


def write_wheel(members: dict[str, bytes], info: str, target: Path) -> None:
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as whl:
        for name in sorted(members, key=lambda n: (n.startswith(info), n)):  # dist-info last, as pip writes it
            whl.writestr(zipfile.ZipInfo(name, ZIP_DATE), members[name], zipfile.ZIP_DEFLATED)
    os.replace(tmp, target)


def record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as whl:
        return whl.namelist()
