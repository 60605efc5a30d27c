"""A model's files are untrusted: the engine opens nothing outside a model's folder (weight_map
names that climb out or are absolute, symlinks leading out), and the server serves a model's
listed files only while they resolve inside its folder — checked at each request, so a symlink
made after start-up leads nowhere either."""

import json
import shutil
from pathlib import Path

import pytest

from py_engine.errors import ModelFileError
from py_engine.formats.model_files import read_model
from py_engine.formats.source import open_source

FIXTURE = Path(__file__).parent / "fixtures" / "qwen2-bf16"  # sharded: has a weight_map


def copy_fixture(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    (tmp_path / "secret.safetensors").write_bytes((model / "model-00001-of-00002.safetensors").read_bytes())
    return model


def rewrite_weight_map(model: Path, shard: str) -> None:
    index = model / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    first = next(iter(data["weight_map"]))
    data["weight_map"][first] = shard
    index.write_text(json.dumps(data))


@pytest.mark.parametrize("shard", ["../secret.safetensors", "ABSOLUTE", "sub/../../secret.safetensors", "config.json"])
def test_weight_map_names_outside_the_folder_are_refused(tmp_path, shard):
    model = copy_fixture(tmp_path)
    rewrite_weight_map(model, str(tmp_path / "secret.safetensors") if shard == "ABSOLUTE" else shard)
    with pytest.raises(ModelFileError) as err:
        read_model(open_source(model))
    assert "model.safetensors.index.json" in str(err.value) or "outside the model folder" in str(err.value)


@pytest.mark.parametrize("name", ["model-00001-of-00002.safetensors", "config.json"])
def test_symlinks_leading_out_are_refused(tmp_path, name):
    model = copy_fixture(tmp_path)
    outside = tmp_path / f"outside-{name}"
    shutil.move(model / name, outside)
    (model / name).symlink_to(outside)
    with pytest.raises(ModelFileError, match="outside the model folder"):
        read_model(open_source(model))


def test_a_symlink_inside_the_folder_is_followed(tmp_path):
    model = copy_fixture(tmp_path)
    (model / "blobs").mkdir()
    shutil.move(model / "config.json", model / "blobs" / "config.json")
    (model / "config.json").symlink_to(model / "blobs" / "config.json")  # as hub caches lay files out
    assert read_model(open_source(model))[0].architecture == "Qwen2ForCausalLM"


def test_a_hub_cache_snapshot_reads_its_blobs(tmp_path):
    """huggingface_hub's layout: snapshots/<rev>/ holds symlinks into the repository's blobs/."""
    repo = tmp_path / "models--org--name"
    snapshot, blobs = repo / "snapshots" / "0123abc", repo / "blobs"
    shutil.copytree(FIXTURE, blobs)
    snapshot.mkdir(parents=True)
    for f in blobs.iterdir():
        (snapshot / f.name).symlink_to(Path("../..") / "blobs" / f.name)
    assert read_model(open_source(snapshot))[0].architecture == "Qwen2ForCausalLM"
    (tmp_path / "outside.json").write_text("{}")
    (snapshot / "config.json").unlink()
    (snapshot / "config.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ModelFileError, match="outside the model folder"):
        read_model(open_source(snapshot))


@pytest.mark.parametrize(
    "model_id, name",
    [
        ("../up", "model.gguf"),
        (".", "model.gguf"),
        ("a/b", "model.gguf"),
        ("ok", "../model.gguf"),
        ("ok", "/etc/passwd"),
        ("ok", "sub/./model.gguf"),
        ("ok", "a//b.safetensors"),
        ("ok", "a\\b.gguf"),
        ("ok", "model.gguf?x=1"),
        ("ok", "x" * 200 + ".gguf"),
    ],
)
def test_the_browser_source_takes_plain_names_only(model_id, name):
    """The page names a model's id and files (a brought model's come from a URL, an index.json or a
    folder): the worker's source refuses any that is not plain relative segments before a fetch."""
    from py_engine.errors import WispError
    from py_engine.web.files import confine

    confine("byo-org-qwen-0a1b2c3d", {"config.json": 2, "model-00001-of-00002.safetensors": 1})
    with pytest.raises(WispError, match="not a plain"):
        confine(model_id, {name: 1})
