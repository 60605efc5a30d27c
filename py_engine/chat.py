"""Interactive chat for the desktop CLI (`python -m py_engine chat`): a conversation whose turns
reuse the KV cache, read from stdin and streamed to stdout (terminal.py resolves the model and draws
the progress bar)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .decode.answer_stream import AnswerStream
from .errors import WispError
from .terminal import ProgressBar
from .tokenizer.template.prompt import fit_to_context

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


async def load(model, device, context: int, progress=None, precision: str = "fast"):
    """session.load's LoadedModel (of a path, or the ModelFiles read from one), reporting the
    weight upload to `progress` as stage "load"."""
    from .session import load

    report = (lambda done, total: progress("load", done, total)) if progress else None
    return await load(model, device, context=context, with_tokenizer=True, progress=report, precision=precision)


class Conversation:
    """The messages so far, rendered with the model's chat template on every turn.

    The KV cache is reused across turns (prompt_cache.py): a turn prefills only what follows the
    common prefix of the new rendering with the tokens already in the cache. When the conversation
    no longer fits the context, the oldest exchanges are dropped (the system prompt stays)."""

    def __init__(self, model, sampling, max_new_tokens: int, system: str | None = None):
        """model: a session.LoadedModel with a tokenizer."""
        self.model, self.tok = model, model.tok
        self.sampling, self.max_new_tokens, self.system = sampling, max_new_tokens, system
        self.messages: list[dict] = []
        self.dropped = 0  # exchanges dropped to fit the context, last turn
        self.token_times: list[float] = []  # perf_counter() at each answer token, last turn

    @property
    def prefilled(self) -> int:
        return self.model.cache.prefilled

    @property
    def reused(self) -> int:
        return self.model.cache.reused

    def reset(self) -> None:
        self.messages = []
        self.model.cache.reset()

    async def reply(self, text: str, on_text):
        """Answer user message `text`, calling on_text(piece) as the answer streams; returns the
        answer's token ids (a final stop token included)."""
        context = self.model.engine.context
        system = [{"role": "system", "content": self.system}] if self.system else []
        self.messages.append({"role": "user", "content": text})
        ids, self.dropped = fit_to_context(self.tok, system + self.messages, context, self.max_new_tokens)
        del self.messages[: 2 * self.dropped]
        if len(ids) >= context:
            self.messages.pop()
            raise WispError(
                f"the message is too long: {len(ids)} tokens with the template, context is {context} (--context)"
            )
        answer = AnswerStream(self.model, ids, min(self.max_new_tokens, context - len(ids)), self.sampling)
        self.token_times = answer.token_times
        try:
            async for piece in answer:
                on_text(piece)
        except BaseException:
            self.messages.pop()  # the turn did not happen
            raise
        content = [t for t in answer.tokens if t not in self.model.stop_ids]
        self.messages.append({"role": "assistant", "content": self.tok.decode(content, skip_special_tokens=True)})
        return answer.tokens


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


async def chat(args, path: Path, files) -> int:
    """The conversation loop on the model at `path`, whose files (session.ModelFiles, with a
    tokenizer and chat template) the caller has read and checked before any device is opened."""
    from .decode.token_choice import SamplingParams
    from .gpu import open_device

    device = await open_device(allow_f16=not args.f32)
    bar = ProgressBar()
    model = await load(files, device, args.context, bar, args.precision)
    bar.finish()
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.repetition_penalty, args.seed, args.lookup)
    conversation = Conversation(model, sampling, args.max_new_tokens, args.system)
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
