"""The `wisp` command (pyproject's console script): `wisp serve` is `python -m app`, every other
subcommand is `python -m py_engine`'s (chat, generate, fetch, tokenize, check, kernel, transcribe,
speak), with the same options. A wheel installed without its extras says which one a command needs."""

from __future__ import annotations

import sys

USAGE = """usage: wisp {serve,chat,generate,fetch,tokenize,check,kernel,transcribe,speak} ...

  serve       the chat page and OpenAI's API (/v1) on this machine (python -m app)
  chat        chat in the terminal
  generate    generate text from a prompt
  fetch       download a catalog model into the cache
  tokenize    text on stdin to token ids
  check       run the GPU self-tests
  kernel      print a kernel's WGSL as compiled
  transcribe  speech to text (Whisper, Moonshine)
  speak       text to speech (Kani-TTS-2)

`wisp COMMAND --help` describes each; `wisp --version` prints the version."""

EXTRAS = {"starlette": "server", "uvicorn": "server", "multipart": "server", "wgpu": "desktop"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "--version":
        from py_engine import __version__

        print(f"wisp {__version__}")
        return 0
    try:
        if args[0] == "serve":
            from .__main__ import main as serve

            return serve(args[1:], prog="wisp serve")
        from py_engine.cli import main as engine

        return engine(args, prog="wisp")
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        print(f"error: `wisp {args[0]}` needs {exc.name}: pip install 'wisp[{extra}]'", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
