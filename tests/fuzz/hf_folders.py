"""Hugging Face model folders for the fuzzers (test_fuzz_hf_folder.py, test_fuzz_mlx.py), small
enough to mutate by the ten thousand: a folder is a dict of its small JSON files' bytes and, per
*.safetensors file, its header bytes and its size (the tensor data is never read before the GPU,
so it is left out: reads past the header come back empty). `load` reads one through everything loading
does without a device (session.read_model_files: config, tensor index, MLX, text tower, the
checks, the graph planned once, generation_config's stop ids)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path

from harness import json_bytes, mutate_bytes, mutate_json

from py_engine.errors import ModelFileError
from py_engine.formats.source import ModelSource

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMALL_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json")


# ---- a folder as data ----


def as_text(data: bytes) -> str:
    return data.decode("latin-1")  # any bytes, JSON-serialisable for the harness's saved findings


def safetensors_head(path: Path) -> bytes:
    """The 8-byte length and JSON header of a safetensors file."""
    with open(path, "rb") as file:
        head = file.read(8)
        return head + file.read(struct.unpack("<Q", head)[0])


def encode_header(header, rng=None) -> bytes:
    text = json_bytes(header, rng)
    return struct.pack("<Q", len(text)) + text


def read_folder(directory: Path) -> dict:
    """A fixture directory as a folder dict."""
    folder = {"files": {}, "shards": {}}
    for path in sorted(directory.iterdir()):
        if path.name in SMALL_FILES:
            folder["files"][path.name] = as_text(path.read_bytes())
        elif path.suffix == ".safetensors":
            folder["shards"][path.name] = [as_text(safetensors_head(path)), path.stat().st_size]
    return folder


def text_tower_folder(folder: dict, architecture: str) -> dict:
    """The same model as a multimodal checkpoint's text tower (config under text_config, tensors
    under model.language_model.)."""
    config = json.loads(folder["files"]["config.json"])
    wrapped = {"architectures": [architecture], "text_config": config, "dtype": config.get("dtype")}
    shards = {}
    for name, (head, size) in folder["shards"].items():
        header = json.loads(head.encode("latin-1")[8:])
        renamed = {
            (key.replace("model.", "model.language_model.", 1) if key.startswith("model.") else key): entry
            for key, entry in header.items()
        }
        shards[name] = [as_text(encode_header(renamed)), size + len(encode_header(renamed)) - len(head)]
    files = dict(folder["files"], **{"config.json": as_text(json.dumps(wrapped).encode())})
    return {"files": files, "shards": shards}


# ---- mutation ----


def mutate_folder(folder: dict, rng) -> dict:
    """One file of the folder mutated: a JSON file or a header as JSON (mostly) or as bytes, or a
    file's size."""
    folder = json.loads(json.dumps(folder))
    names = [("files", name) for name in folder["files"]] + [("shards", name) for name in folder["shards"]]
    weights = [4 if name == "config.json" else 1 if kind == "files" else 3 for kind, name in names]
    kind, name = rng.choices(names, weights)[0]
    if kind == "files":
        raw = folder["files"][name].encode("latin-1")
        try:
            mutated = json_bytes(mutate_json(json.loads(raw), rng), rng) if rng.random() < 0.9 else None
        except ValueError:  # not JSON: an earlier byte mutation (a replayed finding)
            mutated = None
        folder["files"][name] = as_text(mutated or mutate_bytes(raw, rng))
        return folder
    head, size = folder["shards"][name]
    raw = head.encode("latin-1")
    roll = rng.random()
    if roll < 0.7:
        try:
            header = json.loads(raw[8:])
        except ValueError:  # an earlier byte mutation (a replayed finding)
            header = {}
        new = encode_header(mutate_json(header, rng), rng)
        folder["shards"][name] = [as_text(new), size + len(new) - len(raw)]
    elif roll < 0.9:
        folder["shards"][name][0] = as_text(mutate_bytes(raw, rng))
    else:
        folder["shards"][name][1] = rng.choice((0, 7, len(raw), size - 1, size * 2, 2**64))
    return folder


# ---- reading ----


class FolderSource(ModelSource):
    """A folder dict as a model source: its small files written to `directory` (the path-based
    JSON readers read them there), its safetensors headers served from memory."""

    kind = "hf"

    def __init__(self, folder: dict, directory: Path, written: dict):
        """written: what the last source wrote to `directory` (rewriting only what differs keeps
        ten thousand folders fast)."""
        self.directory, self.label = directory, str(directory)
        self.shards = {name: (head.encode("latin-1"), size) for name, (head, size) in folder["shards"].items()}
        self.small = sorted(folder["files"])
        directory.mkdir(parents=True, exist_ok=True)
        for name in SMALL_FILES:
            text = folder["files"].get(name)
            if written.get(name) != text:
                if text is None:
                    (directory / name).unlink()
                else:
                    (directory / name).write_bytes(text.encode("latin-1"))
                written[name] = text

    def files(self):
        return sorted([*self.shards, *self.small])

    def size(self, rel):
        if rel not in self.shards:
            raise ModelFileError(self.directory / rel, "file not found")
        return self.shards[rel][1]

    def read(self, rel, start, length):
        return self.shards[rel][0][start : start + length]  # past the header: nothing (never read)

    def locate(self, rel):
        return str(self.directory / rel)

    def small_dir(self):
        return self.directory

    def exists(self, rel):
        return rel in self.shards or rel in self.small


@contextmanager
def scratch_dir(fallback: Path):
    """A directory for the small files: in memory (/dev/shm) where there is one, since rewriting
    a file costs milliseconds on some disks and the fuzzers rewrite one per input."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    directory = Path(tempfile.mkdtemp(prefix="wisp-fuzz-", dir=shm))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def loader(directory: Path):
    """The fuzz target: a folder (a dict, or a saved finding's JSON bytes) read as loading reads it."""

    from py_engine.session import read_model_files

    written = {}

    def load(data) -> None:
        folder = json.loads(data) if isinstance(data, bytes) else data
        read_model_files(FolderSource(folder, directory, written), with_tokenizer=False)

    return load
