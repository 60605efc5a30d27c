"""Whisper's generation as transformers does it greedily (WhisperGenerationMixin.generate), on the host:
the start-of-transcript tokens, the logits processors, the split of a window's tokens into timestamped
segments and how far the next window seeks.

- The prompt a window's decoder starts from: [<|startofprev|> + a prompt's tokens] + <|startoftranscript|>
  + the language (given, or detected from the first window on a multilingual model) + the task
  (transcribe by default where a language is known) + <|notimestamps|> unless timestamps are asked for.
- Each step's scores: SuppressTokensAtBeginLogitsProcessor (at the first generated token),
  SuppressTokensLogitsProcessor, then with timestamps WhisperTimeStampLogitsProcessor (timestamps in
  pairs, never decreasing, the first one at most max_initial_timestamp_index, and a timestamp forced
  where the timestamps' total probability beats every text token's: TimestampMask); the first of
  equal maxima wins, as torch's argmax. The token is chosen on the GPU (Seq2Seq.generate_greedy,
  generate_split): no step reads the whole row back.
- Every window is then split as _retrieve_segment does (whatever the mode: a model may emit timestamps
  without being asked), and the seek advances by the window, or to its last timestamp where its last
  segment is cut off; transformers loops so until the audio's frames are used up (3,000 for audio of at
  most 30 s, padded to it, so even a short clip may take several windows).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError
from ..formats.json_file import read_json
from ..models.config_values import ConfigKeys

TIME_PRECISION = 0.02  # seconds a timestamp token stands for
INPUT_STRIDE = 2  # log-mel frames an encoder frame covers (conv2's stride)
FEATURE_SECONDS = 0.01  # seconds a log-mel frame covers (hop 160 at 16 kHz)
WINDOW_FRAMES = 3000  # log-mel frames of a 30-s window

LANGUAGE_NAMES = {"english": "en", "german": "de", "french": "fr", "spanish": "es", "italian": "it"}


@dataclass
class WhisperSettings:
    """generation_config.json's ids and rules (and config.json's max_target_positions)."""

    start: int  # decoder_start_token_id: <|startoftranscript|>
    eos: int
    no_timestamps: int | None
    prev_sot: int | None  # <|startofprev|>: before a prompt's tokens
    lang_to_id: dict  # "<|en|>" -> id
    task_to_id: dict  # "transcribe" / "translate" -> id
    suppress: tuple
    begin_suppress: tuple
    max_initial_timestamp: int | None
    multilingual: bool
    max_target_positions: int
    # forced_decoder_ids (the hub's configs: [[1, None], [2, <|transcribe|>]]): the tokens after the
    # start where neither a language nor a task is given, None where the language is detected.
    forced: tuple = ()

    @property
    def timestamp_begin(self) -> int | None:
        return None if self.no_timestamps is None else self.no_timestamps + 1

    def language_id(self, language: str) -> int:
        """A language's token id: "en", "<|en|>" or "english" (ValueError where this model has none)."""
        name = language.lower()
        token = name if name in self.lang_to_id else f"<|{LANGUAGE_NAMES.get(name, name)}|>"
        if token not in self.lang_to_id:
            raise ValueError(f"language {language!r:.40} is not one this model knows ({len(self.lang_to_id)} known)")
        return self.lang_to_id[token]


def read_settings(source, max_target_positions: int, vocab: int) -> WhisperSettings:
    """The model folder's generation_config.json (a ModelFileError for a malformed one)."""
    path = source.small_dir() / "generation_config.json"
    if not source.exists("generation_config.json"):
        raise ModelFileError(path, "missing: Whisper's token ids (start, languages, timestamps) are read there")
    keys = ConfigKeys(read_json(path), path)

    def token(key, default=None):
        value = keys.int(key, default)
        if value is not None and not 0 <= value < vocab:
            keys.fail(key, f"a token id below the vocabulary's {vocab}", value)
        return value

    def id_map(key) -> dict:
        raw = keys.get(key, {})
        if not isinstance(raw, dict) or not all(isinstance(v, int) and 0 <= v < vocab for v in raw.values()):
            keys.fail(key, "an object of token ids", raw)
        return dict(raw)

    def id_list(key) -> tuple:
        raw = keys.get(key, [])
        if not isinstance(raw, list) or not all(isinstance(v, int) and 0 <= v < vocab for v in raw):
            keys.fail(key, "a list of token ids", raw)
        return tuple(raw)

    forced = keys.get("forced_decoder_ids", None)
    if forced is None and source.exists("config.json"):  # transformers falls back on the model's config
        forced = read_json(source.small_dir() / "config.json").get("forced_decoder_ids")
    forced = forced or []
    if not isinstance(forced, list) or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and (p[1] is None or 0 <= p[1] < vocab)
        for p in forced
    ):
        keys.fail("forced_decoder_ids", "a list of [index, token id or null]", forced)
    eos = keys.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos
    if not isinstance(eos, int) or not 0 <= eos < vocab:
        keys.fail("eos_token_id", "a token id", eos)
    return WhisperSettings(
        start=token("decoder_start_token_id"),
        eos=eos,
        no_timestamps=token("no_timestamps_token_id", None),
        prev_sot=token("prev_sot_token_id", None),
        lang_to_id=id_map("lang_to_id"),
        task_to_id=id_map("task_to_id"),
        suppress=id_list("suppress_tokens"),
        begin_suppress=id_list("begin_suppress_tokens"),
        max_initial_timestamp=keys.int("max_initial_timestamp_index", None),
        multilingual=keys.bool("is_multilingual", False),
        max_target_positions=max_target_positions,
        forced=tuple((p[0], p[1]) for p in forced),
    )


def _forced(settings: WhisperSettings, language: int | None, task: str | None) -> list:
    """forced_decoder_ids' tokens after the start (None: the language, to detect), taken only where
    neither a language nor a task is given, and while their indexes follow on from 1."""
    tokens = []
    if task is None and language is None:
        for index, token in settings.forced:
            if index != len(tokens) + 1:
                break
            tokens.append(token)
    return tokens


def needs_language(settings: WhisperSettings, language: int | None, task: str | None) -> bool:
    """Whether the language is detected (transformers' detect_language, from the first window): none
    given, the model has languages, and forced_decoder_ids names none."""
    forced = _forced(settings, language, task)
    return language is None and bool(settings.lang_to_id) and (not forced or forced[0] is None)


def init_tokens(
    settings: WhisperSettings, language: int | None, task: str | None, timestamps: bool, detected: int | None = None
) -> list[int]:
    """The start-of-transcript tokens (transformers' _retrieve_init_tokens): the start, forced_decoder_ids'
    where neither a language nor a task is given, the language (given, or `detected`) in second place,
    the task (transcribe by default for a given language), <|notimestamps|> without timestamps (and
    none with them)."""
    tokens = [settings.start] + _forced(settings, language, task)
    spoken = language if language is not None else detected
    if spoken is not None:
        tokens[1:2] = [spoken]
    if task is not None:
        if task not in settings.task_to_id:
            raise ValueError(f"task {task!r:.20} is not one of {sorted(settings.task_to_id)}")
        tokens.append(settings.task_to_id[task])
    elif language is not None and settings.task_to_id and not set(tokens) & set(settings.task_to_id.values()):
        tokens.append(settings.task_to_id["transcribe"])
    if not timestamps and settings.no_timestamps is not None and tokens[-1] != settings.no_timestamps:
        tokens.append(settings.no_timestamps)
    elif timestamps and tokens[-1] == settings.no_timestamps:
        tokens.pop()
    return [t for t in tokens if t is not None]


class TimestampMask:
    """Each step's allowed tokens with timestamps (Seq2Seq.generate_split's mask, Sampler.mask's
    bits): SuppressTokensAtBeginLogitsProcessor (the first generated token), SuppressTokensLogitsProcessor
    and WhisperTimeStampLogitsProcessor's masks; `pick` then applies its probability rule."""

    def __init__(self, settings: WhisperSettings, vocab: int, begin: int):
        """begin: the first generated token's index (the decoder input's length)."""
        self.settings, self.vocab, self.begin = settings, vocab, begin
        every = (1 << vocab) - 1
        self._base = every & ~_bits(settings.suppress)
        self._first = self._base & ~_bits(settings.begin_suppress)

    def __call__(self, tokens: list[int]) -> bytes:
        allowed = self._first if len(tokens) == self.begin else self._base
        for lo, hi in _timestamp_bans(self.settings, self.vocab, tokens, self.begin):
            if hi > lo:
                allowed &= ~(((1 << (hi - lo)) - 1) << lo)
        return allowed.to_bytes(4 * -(-self.vocab // 32), "little")

    @staticmethod
    def pick(tokens: list[int], text, stamps) -> int:
        """The greedy token from the masked row's text range's best and the timestamp range's best
        and log-sum-exp (Seq2Seq.RangeBest's): a timestamp where the timestamps' total probability
        beats the likeliest text token's, else the row's argmax (the first of equal maxima)."""
        if stamps.value <= IMPOSSIBLE:  # every timestamp masked
            return text.id
        return stamps.id if stamps.lse > text.value else text.id  # lse >= the best: the argmax too


IMPOSSIBLE = -1.0e30  # shaders/logit_mask.wgsl's masked logit


def _bits(ids) -> int:
    return sum(1 << t for t in set(ids))


def _timestamp_bans(settings: WhisperSettings, vocab: int, tokens: list[int], begin: int) -> list[tuple]:
    """The id ranges [lo, hi) WhisperTimeStampLogitsProcessor makes impossible after `tokens`
    (before its probability rule): <|notimestamps|>; timestamps in pairs, never decreasing, the first
    one at most max_initial_timestamp_index."""
    first_ts = settings.timestamp_begin
    bans = [(settings.no_timestamps, settings.no_timestamps + 1)]
    seq = tokens[begin:]
    last_was_ts = len(seq) >= 1 and seq[-1] >= first_ts
    penultimate_was_ts = len(seq) < 2 or seq[-2] >= first_ts
    if last_was_ts:
        if penultimate_was_ts:  # a pair closed: text (or the end) next
            bans.append((first_ts, vocab))
        else:  # a pair's first: its second next, or the end
            bans.append((0, settings.eos))
    stamps = [t for t in seq if t >= first_ts]
    lowest = first_ts  # timestamps never go back
    if stamps:
        lowest = stamps[-1] if last_was_ts and not penultimate_was_ts else stamps[-1] + 1
    bans.append((first_ts, lowest))
    if len(tokens) == begin:
        bans.append((0, first_ts))
        if settings.max_initial_timestamp is not None:
            bans.append((first_ts + settings.max_initial_timestamp + 1, vocab))
    return bans


@dataclass
class WindowSegment:
    start: float
    end: float
    tokens: list[int]


def split_window(
    settings: WhisperSettings, sequence: list[int], seek: int, window_frames: int
) -> tuple[list[WindowSegment], int]:
    """A window's generated tokens (its end token left out) as segments, and the log-mel frames the
    next window starts after (transformers' _retrieve_segment). seek: the window's first frame;
    window_frames: the frames it held of the audio (at most WINDOW_FRAMES)."""
    first_ts = settings.timestamp_begin if settings.timestamp_begin is not None else 1 << 62
    offset = seek * TIME_PRECISION / INPUT_STRIDE
    is_ts = [t >= first_ts for t in sequence]
    single_ending = is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(is_ts) - 1) if is_ts[i] and is_ts[i + 1]]
    if cuts:
        if single_ending:
            cuts.append(len(sequence))
        else:
            cuts[-1] += 1  # the last pair's second timestamp stays in the last segment
        segments, last = [], 0
        for i, cut in enumerate(cuts):
            piece = sequence[last:cut]
            end_at = -1 if i < len(cuts) - 1 or single_ending else -2
            segments.append(
                WindowSegment(
                    offset + (piece[0] - first_ts) * TIME_PRECISION,
                    offset + (piece[end_at] - first_ts) * TIME_PRECISION,
                    piece,
                )
            )
            last = cut
        if single_ending:
            return segments, window_frames
        return segments, (sequence[last - 2] - first_ts) * INPUT_STRIDE
    stamps = [t for t in sequence if t >= first_ts]
    last_position = int(window_frames * FEATURE_SECONDS / TIME_PRECISION)
    if stamps and stamps[-1] != first_ts:
        last_position = stamps[-1] - first_ts
    return [WindowSegment(offset, offset + last_position * TIME_PRECISION, sequence)], window_frames
