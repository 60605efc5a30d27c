"""A transcript's segments (anything with start and end in seconds and text: speech.Segment) as
OpenAI's response formats write them: text, SRT and WebVTT subtitles, json and verbose_json."""

from __future__ import annotations

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")


def plain_text(segments) -> str:
    """The segments' text joined as Whisper's tokens decode (each segment's text keeps its own
    leading space), without the space at the very start."""
    return "".join(s.text for s in segments).strip()


def clock(seconds: float, decimal: str = ",", hours: bool = True) -> str:
    """HH:MM:SS,mmm (SRT), HH:MM:SS.mmm (WebVTT); without hours: MM:SS.mmm (the CLI's timestamps)."""
    millis = max(0, round(seconds * 1000))
    h, rest = divmod(millis, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    head = f"{h:02d}:{m:02d}" if hours else f"{h * 60 + m:02d}"
    return f"{head}:{s:02d}{decimal}{ms:03d}"


def srt_cue(n: int, segment) -> str:
    """One SRT cue (numbered from 1), ending in a blank line."""
    return f"{n}\n{clock(segment.start)} --> {clock(segment.end)}\n{segment.text.strip()}\n\n"


def vtt_cue(segment) -> str:
    return f"{clock(segment.start, '.')} --> {clock(segment.end, '.')}\n{segment.text.strip()}\n\n"


VTT_HEADER = "WEBVTT\n\n"


def subtitles(segments, kind: str) -> str:
    if kind == "srt":
        return "".join(srt_cue(n, s) for n, s in enumerate(segments, 1))
    return VTT_HEADER + "".join(vtt_cue(s) for s in segments)


def verbose_json(segments, language: str | None, duration: float, task: str = "transcribe") -> dict:
    """OpenAI's verbose_json: the text, the language, the audio's duration and each segment with its
    times and token ids. Only what the engine knows is there (no log-probabilities or no-speech estimates)."""
    return {
        "task": task,
        "language": language or "",
        "duration": round(duration, 3),
        "text": plain_text(segments),
        "segments": [segment_json(n, s) for n, s in enumerate(segments)],
    }


def segment_json(n: int, segment) -> dict:
    """verbose_json's n-th segment (from 0); its token ids where the model gave them."""
    out = {"id": n, "start": round(segment.start, 3), "end": round(segment.end, 3), "text": segment.text}
    if getattr(segment, "tokens", None):
        out["tokens"] = list(segment.tokens)
    return out | {"temperature": 0.0}  # greedy: the only decoding served


def render(segments, response_format: str, language: str | None = None, duration: float = 0.0, task="transcribe"):
    """The transcript in `response_format` (FORMATS): a dict for the JSON ones, else a str."""
    if response_format == "json":
        return {"text": plain_text(segments)}
    if response_format == "verbose_json":
        return verbose_json(segments, language, duration, task)
    if response_format in ("srt", "vtt"):
        return subtitles(segments, response_format)
    if response_format == "text":
        return plain_text(segments) + "\n"
    raise ValueError(f"response_format {response_format!r}: one of {', '.join(FORMATS)}")
