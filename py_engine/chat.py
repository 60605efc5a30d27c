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
PICTURE_HELP = "/image PATH attaches a picture to your next message"


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
    no longer fits the context, the oldest exchanges are dropped (the system prompt stays), with
    their pictures. A vision model's pictures (attach) go with the next user message, before its
    text as `generate --chat --image` puts them; each turn's prompt holds every kept message's
    pictures, and the prompt cache reuses those already encoded (Picture.key)."""

    def __init__(self, model, sampling, max_new_tokens: int, system: str | None = None):
        """model: a session.LoadedModel with a tokenizer."""
        self.model, self.tok = model, model.tok
        self.sampling, self.max_new_tokens, self.system = sampling, max_new_tokens, system
        self.messages: list[dict] = []
        self.pending: list = []  # pictures (vision/input.py Picture) for the next user message
        self._pictures: dict[int, list] = {}  # id() of a kept user message -> its pictures
        self.turn_pictures: list = []  # the last turn's prompt's pictures, in order
        self.dropped = 0  # exchanges dropped to fit the context, last turn
        self.token_times: list[float] = []  # perf_counter() at each answer token, last turn

    @property
    def prefilled(self) -> int:
        return self.model.cache.prefilled

    @property
    def reused(self) -> int:
        return self.model.cache.reused

    def reset(self) -> None:
        self.messages, self.pending, self._pictures = [], [], {}
        self.model.cache.reset()

    def attach(self, picture) -> None:
        """A picture for the next user message (a vision model's only)."""
        if self.model.vision is None:
            raise WispError("a text-only model: /image needs a vision model (or its --mmproj)")
        self.pending.append(picture)

    def _encode(self, text: str, kept: list[dict]) -> list[int]:
        """The rendering's ids, its pictures' placeholders expanded (fit_to_context's encode)."""
        pictures = [p for m in kept for p in self._pictures.get(id(m), ())]
        if pictures:
            text, _ = self.model.vision.expand(text, pictures)
        self.turn_pictures = pictures
        return self.tok.encode(text, add_special_tokens=False)

    def _forget(self, messages: list[dict]) -> None:
        for m in messages:
            self._pictures.pop(id(m), None)

    async def reply(self, text: str, on_text):
        """Answer user message `text` (with the pictures attached since the last turn), calling
        on_text(piece) as the answer streams; returns the answer's token ids (a final stop token
        included)."""
        context = self.model.engine.context
        system = [{"role": "system", "content": self.system}] if self.system else []
        pictures, self.pending = self.pending, []
        parts = [{"type": "image"} for _ in pictures] + [{"type": "text", "text": text}]
        message = {"role": "user", "content": parts if pictures else text}
        self.messages.append(message)
        if pictures:
            self._pictures[id(message)] = pictures

        def undo() -> None:  # the turn did not happen: its pictures wait for the next message
            self.messages.pop()
            self._forget([message])
            self.pending = pictures

        try:
            ids, self.dropped = fit_to_context(
                self.tok, system + self.messages, context, self.max_new_tokens, encode=self._encode
            )
        except BaseException:
            undo()
            raise
        self._forget(self.messages[: 2 * self.dropped])
        del self.messages[: 2 * self.dropped]
        if len(ids) >= context:
            undo()
            raise WispError(
                f"the message is too long: {len(ids)} tokens with the template, context is {context} (--context)"
            )
        answer = AnswerStream(
            self.model, ids, min(self.max_new_tokens, context - len(ids)), self.sampling, pictures=self.turn_pictures
        )
        self.token_times = answer.token_times
        try:
            async for piece in answer:
                on_text(piece)
        except BaseException:
            undo()
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


def attach(conversation: Conversation, path: str) -> None:
    """/image PATH: the picture in that file for the next message, or one line saying why not."""
    from .vision.files import read_picture

    try:
        if not path:
            raise WispError(f"/image needs a file: {PICTURE_HELP}")
        conversation.attach(read_picture(Path(path).expanduser()))
    except WispError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return
    picture = conversation.pending[-1]
    print(
        dim(f"[picture {len(conversation.pending)}: {picture.width} x {picture.height}, with your next message]"),
        file=sys.stderr,
    )


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
    print(dim(f"[{path.name}: {HELP}" + (f"; {PICTURE_HELP}]" if model.vision else "]")), file=sys.stderr)

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
        if text.startswith("/image ") or text == "/image":
            attach(conversation, text[len("/image") :].strip())
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
