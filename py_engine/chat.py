"""Interactive chat for the desktop CLI (`python -m py_engine chat`), the model resolution it shares
with `generate` (catalog name, .gguf file or HF directory; default: the catalog's DEFAULT_MODEL),
and the text progress bar shown while fetching and loading."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .catalog import DEFAULT_MODEL, MODELS
from .chat_prompt import fit_to_context
from .errors import ModelFileError, WispError
from .prompt_cache import PromptCache

# Sampling defaults for chat (generate stays greedy). SmolLM2's model card recommends temperature
# 0.2 / top-p 0.9; at 0.7 the 135M default model wanders off (seen: one answer in a handful to "the
# capital of France?" ran 500 tokens of French). The repetition penalty covers the tokens of the
# current turn (the new user message, the template around it and the answer so far), much like
# llama.cpp's window of recent tokens.
CHAT_TEMPERATURE = 0.2
CHAT_TOP_P = 0.9
CHAT_REPETITION_PENALTY = 1.1
CHAT_MAX_NEW_TOKENS = 512

HELP = "type a message; /reset starts a new conversation, /exit or Ctrl-D quits"


class ProgressBar:
    """progress(stage, done, total) → one bar on `stream`: redrawn in place with \\r on a terminal,
    a line at 0/25/50/75/100% otherwise. total 0 = unknown (a single line)."""

    WIDTH = 30
    LABELS = {"download": "download", "extract": "unpack", "verify": "verify", "load": "load",
              "waiting": "waiting for another process to fetch this model"}

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


async def load(path: Path, device, context: int, progress=None):
    """session.load_model, reporting the weight upload to `progress` as stage "load"."""
    from .session import load_model

    report = (lambda done, total: progress("load", done, total)) if progress else None
    return await load_model(path, device, context=context, with_tokenizer=True, progress=report)


class Conversation:
    """The messages so far, rendered with the model's chat template on every turn.

    The KV cache is reused across turns (prompt_cache.py): a turn prefills only what follows the
    common prefix of the new rendering with the tokens already in the cache. When the conversation
    no longer fits the context, the oldest exchanges are dropped (the system prompt stays)."""

    def __init__(self, engine, tok, stop_ids, sampling, max_new_tokens: int, system: str | None = None):
        self.engine, self.tok, self.stop_ids = engine, tok, set(stop_ids)
        self.sampling, self.max_new_tokens, self.system = sampling, max_new_tokens, system
        self.messages: list[dict] = []
        self.cache = PromptCache(engine)
        self.dropped = 0  # exchanges dropped to fit the context, last turn
        self.token_times: list[float] = []  # perf_counter() at each answer token, last turn

    @property
    def prefilled(self) -> int:
        return self.cache.prefilled

    @property
    def reused(self) -> int:
        return self.cache.reused

    def reset(self) -> None:
        self.messages = []
        self.cache.reset()

    async def reply(self, text: str, on_text):
        """Answer user message `text`, calling on_text(piece) as the answer streams; returns the
        answer's token ids (a final stop token included)."""
        context = self.engine.context
        system = [{"role": "system", "content": self.system}] if self.system else []
        self.messages.append({"role": "user", "content": text})
        ids, self.dropped = fit_to_context(self.tok, system + self.messages, context, self.max_new_tokens)
        del self.messages[:2 * self.dropped]
        if len(ids) >= context:
            self.messages.pop()
            raise WispError(f"the message is too long: {len(ids)} tokens with the template, context is {context} "
                            f"(--context)")
        stream = self.tok.stream_decoder(skip_special_tokens=True)
        answer: list[int] = []
        self.token_times = []
        try:
            async for token in self.cache.generate(ids, min(self.max_new_tokens, context - len(ids)),
                                                   self.sampling, self.stop_ids):
                answer.append(token)
                self.token_times.append(time.perf_counter())
                if token not in self.stop_ids:
                    on_text(stream.push(token))
        except BaseException:
            self.messages.pop()  # the turn did not happen
            raise
        on_text(stream.flush())
        content = [t for t in answer if t not in self.stop_ids]
        self.messages.append({"role": "assistant", "content": self.tok.decode(content, skip_special_tokens=True)})
        return answer


def speed_line(tokens: int, start: float, token_times: list[float], prefilled: int) -> str:
    """[N tokens, decode tok/s; prefill: prompt tokens computed this turn and the time to the first token]"""
    if not token_times:
        return "[0 tokens]"
    first, last = token_times[0], token_times[-1]
    rate = (tokens - 1) / (last - first) if tokens > 1 and last > first else tokens / max(last - start, 1e-9)
    return f"[{tokens} tokens, {rate:.1f} tok/s; prefill {prefilled} tokens, {first - start:.2f} s]"


def read_line(interactive: bool) -> str | None:
    if interactive:
        try:
            return input("> ")
        except EOFError:
            return None
    line = sys.stdin.readline()
    return line.rstrip("\n") if line else None


def dim(text: str) -> str:
    return f"\x1b[2m{text}\x1b[0m" if sys.stderr.isatty() else text


async def chat(args) -> int:
    from .gpu import open_device
    from .sampling import SamplingParams

    bar = ProgressBar()
    path = resolve_model(args.model, bar)
    bar.finish()
    device = await open_device(allow_f16=not args.f32)
    engine, tok, stop_ids = await load(path, device, args.context, bar)
    bar.finish()
    if tok is None or tok.chat_template is None:
        raise WispError(f"{path}: the model has no chat template; use `generate` instead")
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed,
                              args.lookup)
    conversation = Conversation(engine, tok, stop_ids, sampling, args.max_new_tokens, args.system)
    interactive = sys.stdin.isatty()
    if interactive:
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
    print(dim(f"[{path.name}: {HELP}]"), file=sys.stderr)

    def write(piece: str) -> None:
        print(piece, end="", flush=True)

    while (line := read_line(interactive)) is not None:
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            break
        if text == "/reset":
            conversation.reset()
            print(dim("[conversation cleared]"), file=sys.stderr)
            continue
        if text.startswith("/") and " " not in text:
            print(dim(f"[unknown command {text}: {HELP}]"), file=sys.stderr)
            continue
        start = time.perf_counter()
        try:
            answer = await conversation.reply(text, write)
        except WispError as exc:
            print(f"error: {exc}", file=sys.stderr)
            continue
        print(flush=True)
        if conversation.dropped:
            print(dim(f"[context full: dropped the oldest {conversation.dropped} exchange(s)]"), file=sys.stderr)
        print(dim(speed_line(len(answer), start, conversation.token_times, conversation.prefilled)), file=sys.stderr)
    return 0
