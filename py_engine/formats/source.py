"""Where a model's bytes come from: a local file or directory here, a web origin in the browser.

Loading reads only small things through a source: JSON and tokenizer files (as files in
`small_dir`, so the path-based readers work unchanged) and header prefixes (`read`). Weight bytes
move only as *placements*: (GPU buffer, offset) ← (file, byte range). The local source writes them
straight from a memory map; the browser's (py_engine/web/files.py) hands the whole plan to
JavaScript, which streams it from fetch into GPU buffers, never through the Python heap.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from ..errors import ModelFileError
from .gguf import starts_like_gguf


class ModelSource:
    kind: str  # "gguf" (one file) or "hf" (a directory of files)
    label: str  # for messages

    def size(self, rel: str) -> int:
        raise NotImplementedError

    def read(self, rel: str, start: int, length: int) -> bytes:
        """Bytes of a header region (at most `length`; fewer only at the end of the file)."""
        raise NotImplementedError

    def locate(self, rel: str) -> str:
        """The name that TensorInfo.path and error messages use for this file."""
        raise NotImplementedError

    def small_dir(self) -> Path:
        """A directory holding the model's small files (config.json, tokenizer.json, …)."""
        raise NotImplementedError

    def exists(self, rel: str) -> bool:
        raise NotImplementedError

    def files(self) -> list[str]:
        """The model's files (a GGUF source: its one file, first)."""
        raise NotImplementedError

    def place(self, device, buffer, pieces) -> int:
        """Schedule pieces (dst offset, file location, file start, length) into `buffer`; return
        how many bytes were written already (the rest land in `flush`)."""
        raise NotImplementedError

    async def flush(self, device, progress=None) -> None:
        """Complete every placement; progress(bytes) as deferred bytes land."""
        raise NotImplementedError


def confinement(model_dir: Path) -> Path:
    """The folder a model directory's files must resolve into: the directory itself, or for a
    Hugging Face hub cache snapshot (models--org--name/snapshots/<revision>/, whose files are
    symlinks into ../../blobs/) the repository's folder."""
    resolved = model_dir.resolve()
    if resolved.parent.name == "snapshots" and resolved.parent.parent.name.startswith("models--"):
        return resolved.parent.parent
    return resolved


class LocalModel(ModelSource):
    """A .gguf file or an HF directory on this machine's file system."""

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            raise ModelFileError(self.path, "model path not found")
        is_gguf = self.path.suffix == ".gguf" or starts_like_gguf(self.path)  # a bad .gguf: the reader says why
        self.kind = "gguf" if self.path.is_file() and is_gguf else "hf"
        self.label = str(self.path)
        self._maps = {}

    def file(self, rel: str) -> Path:
        """The model's file `rel` (a GGUF: the file itself). An HF directory's names come from its
        own files (model.safetensors.index.json's weight_map): one that is absolute, climbs out
        with "..", or resolves (symlinks followed) outside the directory is refused."""
        if self.kind == "gguf":
            return self.path
        path = self.path / rel
        inside = confinement(self.path)
        if not rel or Path(rel).is_absolute() or ".." in Path(rel).parts or "\0" in rel:
            raise ModelFileError(path, "names a file outside the model folder")
        try:
            resolved = path.resolve() if path.exists() else None
        except (OSError, RuntimeError) as err:  # 3.11 reports a symlink loop as RuntimeError
            raise ModelFileError(path, f"cannot resolve the path: {err}") from None
        if resolved is not None and not resolved.is_relative_to(inside):
            raise ModelFileError(path, f"resolves to {resolved}, outside the model folder")
        return path

    def size(self, rel: str) -> int:
        path = self.file(rel)
        try:
            if not path.is_file():  # a directory, a socket, a dangling or looping symlink
                raise ModelFileError(path, "file not found" if not path.exists() else "not a regular file")
            return os.path.getsize(path)
        except OSError as err:
            raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None

    def read(self, rel: str, start: int, length: int) -> bytes:
        path = self.file(rel)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                return f.read(length)
        except OSError as err:
            raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None

    def locate(self, rel: str) -> str:
        return str(self.file(rel))

    def small_dir(self) -> Path:
        """The directory, once no entry of it is a symlink leading out (its small files are read
        from here by name)."""
        if self.kind == "hf":
            for entry in self._entries():
                if entry.is_symlink():
                    self.file(entry.name)
        return self.path

    def _entries(self) -> list[Path]:
        if not self.path.is_dir():
            raise ModelFileError(self.path, "neither a GGUF file nor a model directory")
        try:
            return list(self.path.iterdir())
        except OSError as err:
            raise ModelFileError(self.path, f"cannot list the model directory: {err.strerror or err}") from None

    def exists(self, rel: str) -> bool:
        return self.file(rel).is_file()

    def files(self) -> list[str]:
        if self.kind == "gguf":
            return [self.path.name]
        return sorted(p.name for p in self._entries() if p.is_file())

    def _view(self, location: str) -> memoryview:
        if location not in self._maps:
            with open(location, "rb") as f:
                self._maps[location] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(self._maps[location])

    def place(self, device, buffer, pieces) -> int:
        """Written at once, zero-copy from the map. GPU writes need 4-byte offsets and sizes:
        rows of some block formats (34-byte Q8_0, 210-byte Q6_K blocks) start at 2-byte offsets,
        so such a buffer is assembled on the host and written whole."""
        views = [(dst, self._view(loc)[start : start + length]) for dst, loc, start, length in pieces]
        if all(dst % 4 == 0 and len(data) % 4 == 0 for dst, data in views):
            for dst, data in views:
                device.write_buffer(buffer, dst, data)
        else:
            whole = bytearray(buffer.size)
            for dst, data in views:
                whole[dst : dst + len(data)] = data
            device.write_buffer(buffer, 0, whole)
        return sum(len(data) for _, data in views)

    async def flush(self, device, progress=None) -> None:
        self._maps.clear()  # nothing deferred; the maps close when their last view is released


def open_source(model) -> ModelSource:
    return model if isinstance(model, ModelSource) else LocalModel(model)
