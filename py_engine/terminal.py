"""What the desktop CLI's commands share (cli.py, chat.py): the model argument resolved to a path
(catalog name, .gguf file or HF directory; default: the catalog's DEFAULT_MODEL) and the text
progress bar shown while fetching and loading."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .catalog import DEFAULT_MODEL, MODELS
from .errors import ModelFileError


class ProgressBar:
    """progress(stage, done, total) → one bar on `stream`: redrawn in place with \\r on a terminal,
    a line at 0/25/50/75/100% otherwise. total 0 = unknown (a single line)."""

    WIDTH = 30
    LABELS = {
        "download": "download",
        "extract": "unpack",
        "verify": "verify",
        "load": "load",
        "waiting": "waiting for another process to fetch this model",
    }

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.stage = None
        self.shown = -1  # last quarter printed (plain) / whether a bar is on screen (tty)
        self.last_draw = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.finish()
            self.stage, self.shown = stage, -1
        if self.tty:
            now = time.monotonic()
            if self.shown >= 0 and done < total and now - self.last_draw < 0.1:
                return
            self.last_draw, self.shown = now, 0
            self.stream.write("\r" + self.line(stage, done, total) + "\x1b[K")
            self.stream.flush()
        else:
            quarter = 4 * done // total if total > 0 else 0
            if quarter > self.shown:
                self.shown = quarter
                self.stream.write(self.line(stage, done, total) + "\n")
                self.stream.flush()

    def line(self, stage: str, done: int, total: int) -> str:
        label = self.LABELS.get(stage, stage)
        if total <= 0:
            return label if stage == "waiting" else f"{label:<8} {done / 1e6:7.1f} MB"
        filled = min(self.WIDTH, self.WIDTH * done // total)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        return f"{label:<8} [{bar}] {100 * done // total:3d}%  {done / 1e6:.1f}/{total / 1e6:.1f} MB"

    def finish(self) -> None:
        if self.tty and self.shown >= 0:
            self.stream.write("\n")
            self.stream.flush()
        self.stage, self.shown = None, -1


def resolve_model(model: str | None, progress=None) -> Path:
    """An existing path (a .gguf file or an HF directory) as is; a catalog name → its cached file,
    fetched on first use; None → the default catalog model."""
    from .model_cache import cached_path, default_cache_dir, ensure_model

    def fetched(name: str) -> Path:
        if progress is not None and cached_path(name) is None:
            print(f"fetching {name} ({MODELS[name].size / 1e6:.0f} MB) into {default_cache_dir()}", file=sys.stderr)
        return ensure_model(name, progress=progress)

    if model is None:
        return fetched(DEFAULT_MODEL)
    path = Path(model).expanduser()
    if path.exists():
        return path
    if model in MODELS:
        return fetched(model)
    raise ModelFileError(path, f"model path not found (nor a catalog model: {', '.join(sorted(MODELS))})")
