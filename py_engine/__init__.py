"""Wisp: LLM inference on WebGPU, in Python — the same engine on the desktop (wgpu-py) and in the
browser (Pyodide).

    import py_engine as wisp

    model = await wisp.load("smollm2-135m-instruct")
    async for piece in model.chat("Why is the sky blue?"):
        print(piece, end="")

load() gives a Model: generate / chat stream text, complete / reply give the whole Answer, embed
gives vectors; Wisp() is an OpenAI-shaped client (await client.chat.completions.create(...)). Every
error about a model's files or a request is a WispError. docs/python.md has the whole API."""

from importlib.metadata import PackageNotFoundError, version

from .errors import WispError
from .library import Answer, Message, Messages, Model, Precision, Progress, Prompt, Wisp, load

try:
    __version__ = version("wisp")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Answer",
    "Message",
    "Messages",
    "Model",
    "Precision",
    "Progress",
    "Prompt",
    "Wisp",
    "WispError",
    "__version__",
    "load",
]
