"""The desktop CLI's speech commands (py_engine/cli.py parses them):

    python -m py_engine transcribe FILE [--model M] [--language L] [--prompt P] [--timestamps]
                                        [--format text|srt|vtt|json] [--translate] [--max-tokens N]
    python -m py_engine speak TEXT -o out.wav [--model M] [--voice V]

The file is opened and checked (audio/files.py) and the model found before a GPU device is opened,
so a bad input's error is the only line on stderr. A transcript is printed segment by segment as
the model finishes them; speech is written to the WAV file chunk by chunk as it is made."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..errors import WispError
from .files import open_audio
from .requests import SAMPLING_LIMITS, TranscriptionRequest, sampling_params, speech_sampling, transcribed
from .transcript import VTT_HEADER, clock, srt_cue, verbose_json, vtt_cue
from .wav import sample_bytes, wav_header

DEFAULT_TRANSCRIBER = "whisper-base"
TRANSCRIPT_FORMATS = ("text", "srt", "vtt", "json")


def add_speech_commands(sub) -> None:
    """The transcribe and speak subcommands, on cli.build_parser's subparsers."""
    model_help = "a catalog name or an HF model folder"
    hear = sub.add_parser("transcribe", help="print an audio file's transcript (wav, mp3, ogg, flac, m4a, webm)")
    hear.add_argument("file", help="the audio file")
    hear.add_argument(
        "--model",
        default=DEFAULT_TRANSCRIBER,
        help=f"{model_help}, or whisper.cpp's ggml-*.bin (default {DEFAULT_TRANSCRIBER})",
    )
    hear.add_argument("--language", help="the speech's language, e.g. en (default: the model detects it)")
    hear.add_argument("--prompt", help="text the speech follows on from (names, spellings)")
    hear.add_argument("--timestamps", action="store_true", help="each segment's start and end")
    hear.add_argument("--format", choices=TRANSCRIPT_FORMATS, default="text", help="default text")
    hear.add_argument("--translate", action="store_true", help="the speech in English (Whisper's translate task)")
    hear.add_argument("--max-tokens", type=int, help="stop after this many tokens of transcript")
    say = sub.add_parser("speak", help="say TEXT into a WAV file (16-bit, the model's sample rate)")
    say.add_argument("text", help="what to say")
    say.add_argument("-o", "--output", required=True, help="the WAV file to write")
    say.add_argument("--model", required=True, help=model_help)
    say.add_argument("--voice", help="one of the model's voices (default its own)")
    say.add_argument("--max-frames", type=int, default=None, help="stop after this many codec frames")
    say.add_argument("--temperature", type=float, help="the codec tokens' sampling (default the model's: 1)")
    say.add_argument("--top-p", type=float, help="default the model's (0.95)")
    say.add_argument("--repetition-penalty", type=float, help="default the model's (1.1)")
    say.add_argument("--seed", type=int, help="the same seed, text and voice: the same speech")


def model_path(model: str) -> Path:
    """An existing folder (or whisper.cpp's model file) as it is; a catalog speech model's name: its cached folder, fetched on first use."""
    path = Path(model).expanduser()
    if path.exists():
        return path
    from ..catalog import SPEECH_MODELS
    from ..model_cache import ensure_model
    from ..terminal import ProgressBar

    if model not in SPEECH_MODELS:
        raise WispError(f"{model}: no such folder, nor a catalog speech model ({', '.join(sorted(SPEECH_MODELS))})")
    bar = ProgressBar()
    path = ensure_model(model, progress=bar)
    bar.finish()
    return path


async def transcribe(args) -> int:
    if args.max_tokens is not None and args.max_tokens < 1:
        raise WispError("--max-tokens must be >= 1")
    audio = open_audio(args.file)
    try:
        path = model_path(args.model)
        from ..gpu import open_device
        from ..speech import load_transcriber

        transcriber = await load_transcriber(path, await open_device())
        asked = TranscriptionRequest(
            args.model,
            args.language.lower() if args.language else None,
            args.prompt,
            timestamps=args.timestamps or args.format in ("srt", "vtt"),
            max_tokens=args.max_tokens,
            task="translate" if args.translate else "transcribe",
        )
        if args.format == "vtt":
            print(VTT_HEADER, end="")
        shown, start = [], time.perf_counter()

        def show(segment):
            shown.append(segment)
            print(_shown(segment, len(shown), args.format, asked.timestamps), end="", flush=True)

        segments = await transcribed(transcriber, audio.chunks(transcriber.sample_rate), asked, show)
    finally:
        audio.close()
    if args.format == "json":
        print(json.dumps(verbose_json(segments, asked.language, audio.seconds, asked.task), ensure_ascii=False))
    elif args.format == "text" and segments and not asked.timestamps:
        print()
    elapsed = time.perf_counter() - start
    print(f"[{audio.seconds:.1f} s of audio in {elapsed:.1f} s]", file=sys.stderr)
    return 0


def _shown(segment, n: int, kind: str, timestamps: bool) -> str:
    """What is printed of the n-th segment (from 1) as it comes."""
    if kind == "srt":
        return srt_cue(n, segment)
    if kind == "vtt":
        return vtt_cue(segment)
    if kind == "json":
        return ""  # one object at the end
    if timestamps:  # as whisper.cpp prints them
        return f"[{clock(segment.start, '.', False)} --> {clock(segment.end, '.', False)}] {segment.text.strip()}\n"
    return segment.text.lstrip() if n == 1 else segment.text


async def speak(args) -> int:
    asked = {name: getattr(args, name) for name in SAMPLING_LIMITS if getattr(args, name) is not None}
    sampling = sampling_params(speech_sampling(asked))
    path = model_path(args.model)
    from ..gpu import open_device
    from ..speech import load_speaker

    speaker = await load_speaker(path, await open_device())
    if args.voice is not None and args.voice not in speaker.voices:
        named = ", ".join(speaker.voices) or "none besides its default"
        raise WispError(f"--voice {args.voice}: {speaker.model_id} has no such voice (its voices: {named})")
    written, start = 0, time.perf_counter()
    with open(args.output, "wb") as out:
        out.write(wav_header(speaker.sample_rate, data_bytes=0))  # its sizes written when the speech ends
        async for chunk in speaker.speak(args.text, voice=args.voice, max_frames=args.max_frames, sampling=sampling):
            data = sample_bytes(chunk)
            out.write(data)
            written += len(data)
        out.seek(0)
        out.write(wav_header(speaker.sample_rate, data_bytes=written))
    seconds = written / 2 / speaker.sample_rate
    print(f"[{seconds:.1f} s of speech in {time.perf_counter() - start:.1f} s: {args.output}]", file=sys.stderr)
    return 0
