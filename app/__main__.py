"""python -m app [--host 127.0.0.1] [--port 8000] [--model PATH ... [--mmproj PATH]] [--no-default]: the page, and
/v1 (app/openai_api.py)"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
from pathlib import Path

from py_engine.cli import add_precision_arg

from .memory_api import Memories
from .models import ModelPathError, ModelRegistry
from .openai_api import Models
from .server import create_app
from .web_build import DEFAULT_OUT, IN_CHECKOUT


class PairMmproj(argparse.Action):
    """--mmproj goes with the --model named last before it, as llama.cpp's `-m X.gguf --mmproj Y.gguf`:
    that entry of args.model becomes the pair (model, mmproj), which ModelRegistry serves as one model."""

    def __call__(self, parser, namespace, value, option_string=None):
        models = namespace.model
        if not models:
            parser.error("--mmproj goes after the --model it belongs to")
        if isinstance(models[-1], tuple):
            parser.error(f"{models[-1][0]} already has an --mmproj ({models[-1][1]})")
        models[-1] = (models[-1], value)


def parse_args(argv=None, prog: str = "python -m app") -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve Wisp's web app (the model runs in the browser) and OpenAI's API on this machine's GPU (/v1).",
    )
    # Loopback by default: the server hands out local model files; exposing it is an explicit choice.
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    parser.add_argument(
        "--model",
        action="extend",
        nargs="+",
        default=[],
        metavar="PATH",
        help="also offer this .gguf file, HF model directory or cached catalog model (repeatable); "
        "the first one is the page's default",
    )
    parser.add_argument(
        "--mmproj",
        action=PairMmproj,
        metavar="PATH",
        help="llama.cpp's vision projector (mmproj-*.gguf) for the .gguf --model named just before it: "
        "the pair is one model that reads pictures, on the page and on /v1",
    )
    parser.add_argument(
        "--no-default",
        action="store_true",
        help="offer only the --model models, not the catalog models in the model cache",
    )
    parser.add_argument(
        "--model-cache",
        type=Path,
        default=None,
        help="model cache directory (default $WISP_MODEL_CACHE or ~/.cache/wisp/models)",
    )
    add_precision_arg(parser)  # /v1's chat models (the page's engine takes its own load option)
    parser.add_argument(
        "--memory-dir",
        type=Path,
        default=None,
        help="where /v1/memory keeps its collections, a SQLite file each (default ~/.cache/wisp/memory)",
    )
    parser.add_argument(
        "--memory-model",
        default=None,
        metavar="ID",
        help="the served embedding model that embeds /v1/memory's documents (default: the first one listed)",
    )
    parser.add_argument(
        "--notebook",
        type=Path,
        default=None,
        metavar="DIR",
        help="also serve this JupyterLite site (make notebook builds build/notebook) at /notebook/, on the "
        "page's origin so the notebook's kernel shares the page's weight store",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (info shows every request)",
    )
    return parser.parse_args(argv)


def build_page() -> Path:
    """An installed wheel's page build (~/.cache/wisp/web: Pyodide's core from npm and jinja2 and
    markupsafe from PyPI the first time, the installed engine packed as the page's wheel); a checkout's
    is `make web`'s. Offline without it, the server still answers /v1."""
    from . import web_build

    if not (DEFAULT_OUT / "wisp-lock.json").is_file():
        print(f"building the page's files into {DEFAULT_OUT} (once: Pyodide from npm, jinja2 from PyPI)", flush=True)
    try:
        web_build.build(DEFAULT_OUT)
    except (web_build.BuildError, OSError, subprocess.CalledProcessError) as exc:
        print(f"warning: the page's files could not be built ({exc}); /v1 still answers", file=sys.stderr)
    return DEFAULT_OUT


def bind(host: str, port: int) -> socket.socket:
    """Bind ourselves (IPv4 or IPv6) so --port 0 works and the printed URL has the real port."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address)
    sock.listen(128)
    return sock


def main(argv=None, prog: str = "python -m app") -> int:
    """prog: how the usage names the command (`wisp serve`, app/command.py)."""
    args = parse_args(argv, prog)
    try:
        registry = ModelRegistry(args.model, include_cache=not args.no_default, cache_dir=args.model_cache)
    except ModelPathError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.notebook is not None and not (args.notebook / "jupyter-lite.json").is_file():
        print(f"error: {args.notebook} is not a JupyterLite site: run `make notebook`", file=sys.stderr)
        return 2
    import uvicorn  # after the argument checks: `--help` and bad paths need no server packages

    web_dir = build_page() if not IN_CHECKOUT else DEFAULT_OUT
    if not (web_dir / "wisp-lock.json").is_file():
        print(
            f"warning: {web_dir} is not built; run `make web` (the page cannot start Python without it)",
            file=sys.stderr,
        )
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    models = registry.models()
    print(f"Wisp: http://{shown}:{port}/", flush=True)
    if args.notebook is not None:
        print(f"  notebook: http://{shown}:{port}/notebook/lab/index.html?path=wisp.ipynb", flush=True)
    for m in models:
        paired = f" + {m.mmproj_path()}" if m.mmproj else ""
        print(f"  model {m.id}{' (default)' if m.default else ''}: {m.path}{paired}", flush=True)
    if not models:
        print("  no models: run `python -m py_engine fetch` or pass --model PATH", flush=True)
    openai = Models(registry, precision=args.precision)
    memories = Memories(openai, args.memory_dir, args.memory_model)
    app = create_app(registry, web_dir=web_dir, openai=openai, memories=memories, notebook=args.notebook)
    config = uvicorn.Config(app, log_level=args.log_level)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
