"""Header parsers of binary model files that hold no table of contents (CTranslate2's model.bin,
whisper.cpp's ggml files): each field is read in turn from an open file, and every length the file
claims is checked against the bytes it has left before anything is read or allocated, so a damaged or
hostile file fails with one `ModelFileError` naming the file and the byte, never a huge read."""

from __future__ import annotations

import os
from typing import NoReturn

from ..errors import ModelFileError


class BoundedReader:
    """Subclasses say what they read (KIND, for the messages) and define `model()`."""

    KIND = "model file"

    def __init__(self, file, size: int, path: str):
        self.file, self.size, self.path = file, size, path

    def fail(self, problem: str) -> NoReturn:
        raise ModelFileError(self.path, f"{problem} (at byte {self.file.tell()} of {self.size})")

    def take(self, length: int) -> bytes:
        if length > self.size - self.file.tell():
            self.fail(f"file ends inside a field of {length} bytes: truncated or not a {self.KIND}")
        return self.file.read(length)

    def skip(self, nbytes: int, what: str) -> int:
        """Pass over `what`'s nbytes of data (kept in the file, not read); where they start."""
        start = self.file.tell()
        if nbytes > self.size - start:
            self.fail(f"{what}: its {nbytes} bytes run past the end of the file")
        self.file.seek(start + nbytes)
        return start

    @classmethod
    def parse(cls, path):
        """`cls(...).model()` over the file at `path`; the OS's errors as ModelFileErrors naming it."""
        path = str(path)
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as file:
                return cls(file, size, path).model()
        except FileNotFoundError:
            raise ModelFileError(path, "file not found") from None
        except IsADirectoryError:
            raise ModelFileError(path, f"is a directory, not a {cls.KIND}") from None
        except OSError as err:
            raise ModelFileError(path, f"cannot read file: {err.strerror or err}") from None
