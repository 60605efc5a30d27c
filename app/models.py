"""Which models the web app offers, and exactly which files of each it serves.

Two sources: catalog models already in the model cache (looked up on every request, so a model
fetched while the server runs shows up), and the models named on the command line (a .gguf file,
an HF directory, whisper.cpp's model file, or a cached catalog name; checked once at start). A .gguf may come with llama.cpp's
vision projector (`--mmproj`): one model of two files, the projector's named by `mmproj`. The file
lists here are the only things /models/<id>/... serves: a request is matched against them by exact
name, so no URL can reach any other file.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from app.files import safe_path
from py_engine.catalog import DEFAULT_MODEL, EMBEDDING_MODELS, MODELS, SPEECH_MODELS
from py_engine.embedding.settings import dense_module_files
from py_engine.formats.hf_dir import SMALL_FILES
from py_engine.formats.source import confinement
from py_engine.model_cache import cached_path
from py_engine.models.config import ENCODER_ARCHITECTURES
from py_engine.speech.transcriber import is_ggml_whisper

# Speech models' folders (py_engine.speech's loaders), by their config's architecture.
SPEECH_ARCHITECTURES = {
    "WhisperForConditionalGeneration": "transcription",
    "MoonshineForConditionalGeneration": "transcription",
    "KaniTTS2ForCausalLM": "speech",
}


class ModelPathError(Exception):
    pass


@dataclass
class ServedModel:
    id: str
    name: str
    kind: str  # "gguf" | "hf" | "ggml" (whisper.cpp's model file: py_engine/speech/whisper_ggml.py)
    path: Path  # the .gguf file, the HF directory or the ggml file
    description: str = ""
    default: bool = False
    files: dict[str, Path] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)  # file -> the catalog's hash
    task: str = "chat"  # or "embedding" (the page's chat picker leaves those out), "transcription", "speech"
    mmproj: str | None = None  # a GGUF model's vision projector: which of `files` it is

    def file(self, rel: str) -> Path | None:
        """The listed file `rel` as it is now, or None: an HF model's files are resolved at each
        request (a symlink made after start-up included) and must be regular files inside its
        folder (formats/source.confinement: a hub cache snapshot's repository); a GGUF model is its file (and
        its mmproj's), resolved when it was named."""
        if rel not in self.files:
            return None
        if self.kind == "hf":
            return safe_path(self.path, rel, within=confinement(self.path))
        return self.files[rel] if self.files[rel].is_file() else None

    def to_json(self) -> dict:
        sizes, hashes = {}, {}
        for rel in self.files:
            path = self.file(rel)
            try:
                stat = path.stat()
            except (OSError, AttributeError):  # deleted or turned into a way out since the start: not offered
                continue
            sizes[rel] = stat.st_size
            hashes[rel] = file_hash(path, stat, self.sha256.get(rel))
        out = {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "files": sizes,
            "hashes": hashes,
            "default": self.default,
        }
        if self.description:
            out["description"] = self.description
        if self.task != "chat":
            out["task"] = self.task
        if self.mmproj is not None:  # the worker reads it beside the text GGUF (py_engine/web/worker.py)
            out["mmproj"] = self.mmproj
        return out

    def mmproj_path(self) -> Path | None:
        """The vision projector's file, for /v1's loads (session.load's mmproj)."""
        return self.files[self.mmproj] if self.mmproj is not None else None


def file_hash(path: Path, stat, catalog_sha256: str | None = None) -> dict:
    """What the browser's weight store checks a downloaded file against: {"sha256": hex} when it is
    known without reading the file (the catalog, or the model cache's .sha256 sidecar while it still
    matches the file's size and mtime), else {"etag": ...}, the very ETag the file server sends
    (Starlette's FileResponse: md5 of "<mtime>-<size>"), so a changed file is noticed."""
    if catalog_sha256:
        return {"sha256": catalog_sha256}
    try:
        record = json.loads(path.with_name(path.name + ".sha256").read_text())
        if (
            isinstance(record, dict)
            and record.get("size") == stat.st_size
            and record.get("mtime_ns") == stat.st_mtime_ns
            and re.fullmatch(r"[0-9a-f]{64}", record.get("sha256", ""))
        ):
            return {"sha256": record["sha256"]}
    except (OSError, ValueError):
        pass
    base = f"{stat.st_mtime}-{stat.st_size}"
    return {"etag": f'"{hashlib.md5(base.encode(), usedforsecurity=False).hexdigest()}"'}


def gguf_model(model_id: str, path: Path, description: str = "", sha256: str | None = None) -> ServedModel:
    return ServedModel(
        model_id,
        path.name.removesuffix(".gguf"),
        "gguf",
        path,
        description,
        files={path.name: path.resolve()},
        sha256={path.name: sha256} if sha256 else {},
    )


def paired(model: ServedModel, mmproj: Path) -> ServedModel:
    """A GGUF model with llama.cpp's vision projector beside it (`--model X.gguf --mmproj Y.gguf`),
    served from the same /models/<id>/ under the projector's own file name."""
    if model.kind != "gguf":
        raise ModelPathError(f"{model.path}: --mmproj goes with a .gguf text model, not a folder")
    if not mmproj.is_file() or mmproj.suffix.lower() != ".gguf":
        raise ModelPathError(f"{mmproj}: --mmproj expects llama.cpp's vision projector .gguf file")
    if mmproj.name in model.files:
        raise ModelPathError(f"{mmproj}: the projector's file name is the text model's; rename one")
    model.files[mmproj.name] = mmproj.resolve()
    model.mmproj = mmproj.name
    return model


def hf_model(model_id: str, path: Path) -> ServedModel:
    files = {name: path / name for name in SMALL_FILES if (path / name).is_file()}
    if "modules.json" in files:  # a sentence-transformers model's Dense projections (EmbeddingGemma's two)
        files |= {rel: path / rel for rel in dense_module_files(path / "modules.json") if (path / rel).is_file()}
    for weights in sorted(path.glob("*.safetensors")):
        if weights.is_file():
            files[weights.name] = weights
    codec = path / "nanocodec"  # a Kani-TTS-2 folder's NanoCodec decoder (speech/kani_files.py's CODEC_DIR)
    for part in [codec / "config.json", *sorted(codec.glob("*.safetensors"))]:
        if part.is_file():
            files[f"nanocodec/{part.name}"] = part
    if "config.json" not in files or not any(name.endswith(".safetensors") for name in files):
        raise ModelPathError(f"{path}: not a model directory (needs config.json and *.safetensors)")
    return ServedModel(model_id, path.name, "hf", path, files=files, task=folder_task(path))


def folder_task(path: Path) -> str:
    """An encoder's folder (all-MiniLM-L6-v2, EmbeddingGemma: session.is_embedding_model's test) is an
    "embedding" model, so one named on the command line is offered as the catalog's embedders are: to
    memory (the page's, and --memory-model's default), not to the chat picker; a speech model's is
    "transcription" or "speech" (/v1/audio)."""
    try:
        architectures = json.loads((path / "config.json").read_text()).get("architectures") or [None]
    except (OSError, ValueError, AttributeError):
        return "chat"  # the load says what is wrong with it
    if architectures[0] in SPEECH_ARCHITECTURES:
        return SPEECH_ARCHITECTURES[architectures[0]]
    return "embedding" if architectures[0] in ENCODER_ARCHITECTURES else "chat"


def slug(text: str) -> str:
    """A URL-safe id: /models/<id>/ needs no escaping."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.").lower() or "model"


class ModelRegistry:
    def __init__(self, paths=(), include_cache: bool = True, cache_dir: Path | None = None):
        self.include_cache = include_cache
        self.cache_dir = cache_dir
        self.explicit: list[ServedModel] = []
        taken = {*MODELS, *SPEECH_MODELS}  # catalog names stay reserved: a model fetched later keeps its id
        for arg in paths:  # a path, or (a .gguf path, its mmproj's path)
            arg, mmproj = arg if isinstance(arg, tuple) else (arg, None)
            model = self._resolve(str(arg), taken)
            if mmproj is not None:
                model = paired(model, Path(mmproj).expanduser())
            taken.add(model.id)
            self.explicit.append(model)

    def _resolve(self, arg: str, taken: set[str]) -> ServedModel:
        path = Path(arg).expanduser()
        if not path.exists() and (arg in MODELS or arg in SPEECH_MODELS):
            model = self._catalog(arg)
            if model is None:
                raise ModelPathError(f"{arg} is not in the model cache; run: python -m py_engine fetch {arg}")
            return model
        if not path.exists():
            raise ModelPathError(f"{arg}: no such file or directory (nor a catalog model: {', '.join(MODELS)})")
        path = path.resolve()
        base = slug(path.name.removesuffix(".gguf"))
        model_id, n = base, 2
        while model_id in taken or any(m.id == model_id for m in self.explicit):
            model_id, n = f"{base}-{n}", n + 1
        if path.is_file() and path.suffix.lower() == ".gguf":
            return gguf_model(model_id, path)
        if path.is_dir():
            return hf_model(model_id, path)
        if is_ggml_whisper(path):  # /v1/audio's transcriber loads it (load_transcriber)
            return ServedModel(model_id, path.name, "ggml", path, files={path.name: path}, task="transcription")
        raise ModelPathError(f"{path}: expected a .gguf file, whisper.cpp's model file or an HF model directory")

    def _catalog(self, name: str) -> ServedModel | None:
        if name in EMBEDDING_MODELS or name in SPEECH_MODELS:  # a folder: each file with the catalog's hash
            entry = EMBEDDING_MODELS.get(name) or SPEECH_MODELS[name]
            path = cached_path(name, self.cache_dir)
            if path is None:
                return None
            served = hf_model(name, path)
            served.description = entry.description
            served.task = "embedding" if name in EMBEDDING_MODELS else served.task  # speech: its folder's
            served.sha256 = {f.name: f.sha256 for f in entry.files}
            return served
        path = cached_path(name, self.cache_dir)
        return None if path is None else gguf_model(name, path, MODELS[name].description, MODELS[name].sha256)

    def models(self) -> list[ServedModel]:
        """Exactly one default when anything is listed: the first model named on the command
        line, else the catalog's default model, else the first one."""
        out = list(self.explicit)
        if self.include_cache:
            listed = {m.id for m in out}
            names = [*MODELS, *EMBEDDING_MODELS, *SPEECH_MODELS]
            out += [m for name in names if name not in listed and (m := self._catalog(name)) is not None]
        if out:
            chosen = out[0] if self.explicit else next((m for m in out if m.id == DEFAULT_MODEL), out[0])
            for m in out:
                m.default = m is chosen
        return out

    def find(self, model_id: str) -> ServedModel | None:
        return next((m for m in self.models() if m.id == model_id), None)
