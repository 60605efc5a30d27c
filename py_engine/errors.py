"""Typed errors for bad input. The CLI prints one line per error and exits with code 2."""


class WispError(Exception):
    """Base class of every error the user can cause with bad input."""


class ModelFileError(WispError):
    """A model file is missing, malformed or truncated. Always names the file."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnsupportedArchitectureError(WispError):
    pass


class StorageQuotaError(WispError):
    """The browser's weight store (worker/store.js) has no room for a model's files."""


class DocumentError(WispError):
    """A document handed to on-device memory cannot be read: empty, binary, too large, damaged, a
    compression bomb, encrypted, or a PDF with no text to extract. Always names the document."""

    def __init__(self, name: str, problem: str):
        self.name = name
        self.problem = problem
        super().__init__(f"{name}: {problem}")
