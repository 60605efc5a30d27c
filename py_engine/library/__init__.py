"""The public Python API (re-exported by py_engine itself): load a model, then generate, chat, embed,
or speak OpenAI's objects to it — the same calls on the desktop (wgpu-py) and in Pyodide (a notebook,
a worker of your own)."""

from .client import Wisp
from .hosts import Precision, Progress, load
from .model import Answer, Message, Messages, Model, Prompt

__all__ = ["Answer", "Message", "Messages", "Model", "Precision", "Progress", "Prompt", "Wisp", "load"]
