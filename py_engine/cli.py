"""Desktop CLI: `python -m py_engine chat|generate|fetch|tokenize|check|kernel|transcribe|speak …`. Bad input →
one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path

from .audio.commands import add_speech_commands
from .catalog import DEFAULT_MODEL
from .chat import CHAT_MAX_NEW_TOKENS, CHAT_REPETITION_PENALTY, CHAT_TEMPERATURE, CHAT_TOP_P, chat
from .errors import WispError
from .runtime.linear_plan import PRECISIONS
from .terminal import ProgressBar, resolve_model

MMPROJ_HELP = "llama.cpp's vision projector (mmproj-*.gguf) for a text GGUF: its picture side"


def build_parser(prog: str = "python -m py_engine") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Wisp: LLM inference on WebGPU")
    sub = parser.add_subparsers(dest="command", required=True)
    model_help = f"catalog name, .gguf file or HF model directory (default: {DEFAULT_MODEL}, fetched on first use)"
    talk = sub.add_parser("chat", help="chat interactively (lines on stdin; /reset, /exit)")
    talk.add_argument("--model", help=model_help)
    talk.add_argument("--system", help="system prompt")
    add_sampling_args(
        talk,
        max_new_tokens=CHAT_MAX_NEW_TOKENS,
        temperature=CHAT_TEMPERATURE,
        top_p=CHAT_TOP_P,
        repetition_penalty=CHAT_REPETITION_PENALTY,
    )
    talk.add_argument("--mmproj", help=MMPROJ_HELP)
    talk.add_argument("-v", "--verbose", action="store_true")
    gen = sub.add_parser("generate", help="generate text from a prompt")
    gen.add_argument("--model", help=model_help)
    source = gen.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="prompt text")
    source.add_argument("--ids", help="comma-separated prompt token ids")
    gen.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    gen.add_argument(
        "--image",
        action="append",
        default=[],
        help="a picture file for a vision model (repeatable): with --chat before the text, else at the prompt's <image>s",
    )
    gen.add_argument("--mmproj", help=MMPROJ_HELP)
    add_sampling_args(gen, max_new_tokens=128, temperature=0.0, top_p=1.0, repetition_penalty=1.0)
    gen.add_argument("--json", action="store_true", help='print {"tokens": [...], "text": "..."} as the last line')
    gen.add_argument("--logits-out", help="write the last prompt position's float32 logits to this .npy file")
    gen.add_argument("-v", "--verbose", action="store_true")
    get = sub.add_parser("fetch", help="download a catalog model into the cache; print its path")
    get.add_argument("name", nargs="?", default=DEFAULT_MODEL, help=f"catalog name (default: {DEFAULT_MODEL})")
    get.add_argument("--list", action="store_true", help="list the catalog and what is cached")
    check = sub.add_parser("check", help='run the GPU self-tests ("Check this device"); exit 1 if any fails')
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--f32", action="store_true", help="open the device without shader-f16")
    kernel = sub.add_parser("kernel", help="print a kernel's WGSL as it is compiled (snippets, defines)")
    kernel.add_argument("name", help="shaders/<name>.wgsl, e.g. gemv, attention, rmsnorm")
    kernel.add_argument(
        "--define",
        action="append",
        default=[],
        metavar="K=V",
        help="a define (true/false, an integer, or a name: WEIGHTS=q4_0, K_CACHE=f16, ...)",
    )
    kernel.add_argument("--subgroups", action="store_true", help="as on a device with subgroups")
    kernel.add_argument("--browser", action="store_true", help="as the browser's WGSL wants it (enable subgroups;)")
    tok = sub.add_parser("tokenize", help='read text on stdin, print {"ids": [...]}')
    tok.add_argument("--model", required=True, help="a GGUF file, a model directory or a tokenizer.json")
    tok.add_argument("--special", action="store_true", help="add the tokenizer's special tokens (e.g. BOS)")
    add_speech_commands(sub)
    return parser


def add_sampling_args(parser, max_new_tokens: int, temperature: float, top_p: float, repetition_penalty: float):
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help=f"default {max_new_tokens}")
    parser.add_argument("--temperature", type=float, default=temperature, help=f"0 = greedy (default {temperature})")
    parser.add_argument("--top-k", type=int, default=0, help="0 = off (default)")
    parser.add_argument("--top-p", type=float, default=top_p, help=f"default {top_p}")
    parser.add_argument(
        "--repetition-penalty", type=float, default=repetition_penalty, help=f"default {repetition_penalty}"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--lookup",
        action="store_true",
        help="prompt-lookup decoding: the same tokens, faster where the answer copies its prompt",
    )
    parser.add_argument("--context", type=int, default=2048, help="KV-cache length in tokens (default 2048)")
    parser.add_argument("--f32", action="store_true", help="force the f32 path even where shader-f16 exists")
    add_precision_arg(parser)


def add_precision_arg(parser) -> None:
    """--precision, as Engine.load's (also benchmarks/decode.py's and python -m app's)."""
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fast",
        help="fast (default): quantized weights' GEMV on int8 activations; exact: f32 arithmetic throughout",
    )


def main(argv=None, prog: str = "python -m py_engine") -> int:
    """prog: how the usage names the command (`wisp`, app/command.py)."""
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "tokenize":
            return tokenize(args)
        if args.command == "fetch":
            return fetch(args)
        if args.command == "check":
            return asyncio.run(check_device(args))
        if args.command == "kernel":
            return print_kernel(args)
        if args.command in ("transcribe", "speak"):
            from .audio import commands

            return asyncio.run(getattr(commands, args.command)(args))
        check_sampling_args(args)
        if args.command == "chat":
            return run_chat(args)
        return asyncio.run(generate(args))
    except WispError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def print_kernel(args) -> int:
    from .runtime.kernels import assemble

    defines = {}
    for item in args.define:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise WispError(f"--define {item!r}: expected K=V")
        defines[key] = {"true": True, "false": False}.get(value.lower(), int(value) if value.isdigit() else value)
    try:
        source, bindings, params = assemble(args.name, defines, args.subgroups, args.browser)
    except ValueError as exc:
        raise WispError(f"kernel {args.name}: {exc}") from None
    print(
        f"// {args.name}.wgsl as compiled; bindings: "
        + ", ".join(f"{b.index} {b.name} ({b.kind})" for b in bindings)
        + (f"; Params: {', '.join(n for n, _ in params)}" if params else "")
    )
    print(source)
    return 0


def fetch(args) -> int:
    from .catalog import EMBEDDING_MODELS, MODELS
    from .model_cache import cached_path, default_cache_dir, ensure_model

    if args.list:
        print(f"cache: {default_cache_dir()}")
        for name, model in {**MODELS, **EMBEDDING_MODELS}.items():
            state = "cached" if cached_path(name) else "not cached"
            default = ", default" if name == DEFAULT_MODEL else ""
            print(f"{name:<30} {model.size / 1e6:6.0f} MB  {state}{default}  {model.description}")
        return 0
    bar = ProgressBar()
    path = ensure_model(args.name, progress=bar)
    bar.finish()
    print(path)
    return 0


async def check_device(args) -> int:
    from .gpu import open_device
    from .gpu.submit_strategy import submit_strategy
    from .selftest.suite import device_report, format_report, run_suite

    device = await open_device(allow_f16=not args.f32)
    results = await run_suite(device)
    report = device_report(device, results, submit=submit_strategy())  # the desktop never groups submits
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    return 0 if report["failed"] == 0 else 1


def load_tokenizer(path: Path):
    """A GGUF file's tokenizer (its metadata), a tokenizer.json, or an HF directory's."""
    from .formats.gguf import read_gguf, starts_like_gguf
    from .tokenizer import Tokenizer

    if path.is_file() and (path.suffix == ".gguf" or starts_like_gguf(path)):
        from .formats.gguf_tokenizer import tokenizer_from_gguf

        return tokenizer_from_gguf(read_gguf(path))
    return Tokenizer.from_file(path) if path.is_file() else Tokenizer.from_model_dir(path)


def tokenize(args) -> int:
    tok = load_tokenizer(Path(args.model))
    print(json.dumps({"ids": tok.encode(sys.stdin.read(), add_special_tokens=args.special)}))
    return 0


def parse_ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise WispError(f"--ids: expected comma-separated integers, got {text!r}") from None


def check_sampling_args(args) -> None:
    problems = [
        (args.temperature < 0, "--temperature must be >= 0"),
        (args.top_k < 0, "--top-k must be >= 0"),
        (not 0 < args.top_p <= 1, "--top-p must be in (0, 1]"),
        (args.repetition_penalty <= 0, "--repetition-penalty must be > 0"),
        (args.max_new_tokens < 1, "--max-new-tokens must be >= 1"),
    ]
    for bad, message in problems:
        if bad:
            raise WispError(message)


def read_model_arg(args, with_tokenizer: bool):
    """(path, ModelFiles) of --model: resolved (a catalog model fetched on first use), then read
    and checked before any device is opened, so a malformed model's error is the only line on
    stderr (a GPU driver opened first may print its own)."""
    from .session import read_model_files

    bar = ProgressBar()
    path = resolve_model(args.model, bar)
    bar.finish()
    return path, read_model_files(path, with_tokenizer=with_tokenizer, mmproj=getattr(args, "mmproj", None))


def run_chat(args) -> int:
    path, files = read_model_arg(args, with_tokenizer=True)
    if files.tokenizer is None or files.tokenizer.chat_template is None:
        raise WispError(f"{path}: the model has no chat template; use `generate` instead")
    return asyncio.run(chat(args, path, files))


async def generate(args) -> int:
    from .decode.answer_stream import AnswerStream, place_pictures
    from .decode.token_choice import SamplingParams
    from .gpu import open_device
    from .session import load
    from .vision.files import read_picture

    need_tokenizer = args.prompt is not None or not args.json
    _, files = read_model_arg(args, with_tokenizer=need_tokenizer)
    tok, vocab_size = files.tokenizer, files.cfg.vocab_size
    pictures = [read_picture(path) for path in args.image]
    if pictures and args.prompt is None:
        raise WispError("--image needs --prompt")
    if pictures and files.vision is None:
        raise WispError(f"{args.model}: a text-only model; --image needs a vision model (or its --mmproj)")
    if args.prompt is not None:
        content = [{"type": "image"} for _ in pictures] + [{"type": "text", "text": args.prompt}]
        message = {"role": "user", "content": content if pictures else args.prompt}
        text = tok.apply_chat_template([message]) if args.chat else args.prompt
    else:
        prompt = parse_ids(args.ids)
        bad = [i for i in prompt if not 0 <= i < vocab_size]
        if bad or not prompt:
            raise WispError(f"--ids: token ids must be in 0..{vocab_size - 1}, got {bad or 'nothing'}")
    device = await open_device(allow_f16=not args.f32)
    model = await load(files, device, context=args.context, precision=args.precision)
    if args.prompt is not None:
        if pictures:
            text, _ = model.vision.expand(text, pictures)
        prompt = tok.encode(text, add_special_tokens=not args.chat)
    if args.logits_out:
        from .formats.npy import write_npy_f32

        if pictures:
            await place_pictures(model, prompt, pictures)
        write_npy_f32(args.logits_out, await model.engine.prompt_logits(prompt))  # the answer goes on from 0
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed, args.lookup)
    answer = AnswerStream(model, prompt, args.max_new_tokens, sampling, pictures=pictures)
    pieces = []
    start = time.perf_counter()
    async for piece in answer:
        pieces.append(piece)
        if not args.json:
            print(piece, end="", flush=True)
    elapsed = time.perf_counter() - start
    tokens = answer.tokens
    if args.json:
        print(json.dumps({"tokens": tokens, "text": "".join(pieces)}, ensure_ascii=False))
    else:
        if model.tok is not None:
            print()
        print(f"[{len(tokens)} tokens, {len(tokens) / max(elapsed, 1e-9):.1f} tok/s]", file=sys.stderr)
    return 0
