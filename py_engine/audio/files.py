"""Audio files decoded on the desktop by FFmpeg (PyAV, the `desktop` extra): wav, mp3, ogg (Opus,
Vorbis), flac, m4a/mp4 (AAC, ALAC), webm/mkv and ADTS AAC, mixed down to mono and resampled by
FFmpeg's resampler to the rate a model hears (16 kHz for Whisper and Moonshine), and streamed: the
file is read and decoded a chunk at a time, so a 2-hour recording is never whole in memory.

PyAV is imported when a file is opened, never with the engine (which runs in Pyodide, where the page
decodes with the browser's own decoder), as vision/files.py imports Pillow. A file is untrusted
input: its container is named from its first bytes and only that demuxer is used (FFmpeg never
probes it as a playlist or a reference to other files), it is read through a Python file object
(no FFmpeg protocols), and an empty, damaged or audio-less file is one AudioFileError naming it."""

from __future__ import annotations

import os
from array import array
from collections.abc import AsyncIterator
from pathlib import Path

from .pcm import rechunked
from .wav import AudioFileError

DEFAULT_RATE = 16000  # Whisper's and Moonshine's
CHUNK_SECONDS = 30  # Whisper's window: a chunk is ~1.9 MB of float32 at 16 kHz
KINDS = "wav, mp3, ogg/opus, flac, m4a, webm or aac"


def container_format(head: bytes) -> str | None:
    """FFmpeg's demuxer for a file starting with `head` (its first 12 bytes or more), or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:4] == b"fLaC":
        return "flac"
    if head[4:8] == b"ftyp":
        return "mov"  # FFmpeg's mov,mp4,m4a demuxer (its references to other files stay off by default)
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "matroska"  # webm too
    if head[:3] == b"ID3":
        return "mp3"
    if len(head) >= 2 and head[0] == 0xFF:
        if head[1] & 0xF6 == 0xF0:  # ADTS: the sync word and layer 0
            return "aac"
        if head[1] & 0xE0 == 0xE0 and head[1] & 0x06:  # an MPEG audio frame of layer I-III
            return "mp3"
    return None


class AudioFile:
    """An audio file opened for decoding: open_audio(...). `chunks()` streams its samples once."""

    def __init__(self, name: str, file, container, stream):
        self.name, self._file, self._container, self._stream = name, file, container, stream
        self.sample_rate = DEFAULT_RATE  # of the samples chunks() yields
        self.source_rate = stream.codec_context.sample_rate
        self.source_channels = stream.codec_context.channels
        self.samples = 0  # yielded so far
        self.closed = False

    @property
    def seconds(self) -> float:
        """The duration of what chunks() has yielded so far (all of it once it has ended)."""
        return self.samples / self.sample_rate

    async def chunks(self, sample_rate: int = DEFAULT_RATE, chunk_samples: int | None = None) -> AsyncIterator[array]:
        """Mono float32 samples at `sample_rate` (the model's), array('f') of chunk_samples each
        (default 30 s), the last one shorter; the file is closed at the end."""
        self.sample_rate = sample_rate
        size = chunk_samples or CHUNK_SECONDS * sample_rate
        try:
            async for chunk in rechunked(self._decoded(), size):
                self.samples += len(chunk)
                yield chunk
        finally:
            self.close()

    async def _decoded(self) -> AsyncIterator[array]:
        import av

        graph = self._mixdown()
        try:
            for frame in self._container.decode(self._stream):
                graph.push(frame)
                for out in _pulled(graph):
                    yield out
                    if self.closed:  # closed while this waited: FFmpeg's demuxer is freed (reading on would crash)
                        return
            graph.push(None)  # what the resampler's filter still holds
            for out in _pulled(graph):
                yield out
        except (av.error.FFmpegError, ValueError) as exc:  # ValueError: a stream whose format changes midway
            at = f" after {self.seconds:.1f} s" if self.samples else ""
            raise AudioFileError(self.name, f"damaged audio data{at} ({_reason(exc)})") from None

    def _mixdown(self):
        """FFmpeg's filters from the stream's frames to mono float32 at sample_rate: the channels'
        plain average (pan: every channel 1/n, so the mix stays within [-1, 1] as a model expects,
        where the resampler's own surround downmix can pass 2), then aresample."""
        import av.filter

        n = self.source_channels
        gains = "+".join(f"{1 / n:.9g}*c{c}" for c in range(n))
        graph = av.filter.Graph()
        graph.link_nodes(
            graph.add_abuffer(template=self._stream),
            graph.add("pan", f"mono|c0={gains}"),
            graph.add("aresample", str(self.sample_rate)),
            graph.add("aformat", f"sample_fmts=flt:channel_layouts=mono:sample_rates={self.sample_rate}"),
            graph.add("abuffersink"),
        ).configure()
        return graph

    def close(self) -> None:
        """Free FFmpeg's demuxer and close the file (again: nothing); chunks() then ends."""
        if not self.closed:
            self.closed = True
            self._container.close()
            self._file.close()


def _pulled(graph):
    """The frames the filter graph has ready, as float arrays."""
    import av

    while True:
        try:
            frame = graph.pull()
        except (av.error.BlockingIOError, av.error.EOFError):
            return
        yield _floats(frame)


def _floats(frame) -> array:
    samples = array("f")
    samples.frombytes(memoryview(frame.planes[0])[: frame.samples * 4])  # packed mono float32, native order
    return samples


def _reason(exc) -> str:
    return getattr(exc, "strerror", None) or str(exc)


class _Reader:
    """What FFmpeg is given of a file object: read, seek and tell, and no write. An upload's
    SpooledTemporaryFile handed to PyAV 18 as it is shows FFmpeg no stream at all (the same bytes
    in any other file object, or these methods of it, read well)."""

    def __init__(self, file):
        self.read, self.tell, self._file = file.read, file.tell, file

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._file.seek(offset, whence)
        return self._file.tell()

    def seekable(self) -> bool:
        return self._file.seekable()


def open_audio(source, name: str | None = None) -> AudioFile:
    """Open an audio file for decoding (AudioFile.chunks): `source` is a path or a binary file
    object (an upload), `name` labels errors (default the path). Checks what can be checked before
    a model is loaded: the file is not empty, its container is one read here, FFmpeg reads its
    header, and it has an audio stream."""
    if isinstance(source, str | os.PathLike):
        name = name or str(source)
        try:
            file = open(Path(source), "rb")  # AudioFile closes it
        except OSError as exc:
            raise AudioFileError(name, exc.strerror or "cannot be opened") from None
    else:
        name, file = name or "audio", source
    try:
        return _open(file, name)
    except BaseException:
        file.close()
        raise


def _open(file, name: str) -> AudioFile:
    head = file.read(16)
    if not head:
        raise AudioFileError(name, "the file is empty (0 bytes)")
    file.seek(0)
    kind = container_format(head)
    if kind is None:
        raise AudioFileError(name, f"not an audio file read here ({KINDS})")
    try:
        import av
    except ImportError:
        raise AudioFileError(name, "decoding audio files needs PyAV (pip install av)") from None
    try:
        container = av.open(_Reader(file), format=kind, metadata_errors="ignore")
    except av.error.FFmpegError as exc:
        raise AudioFileError(name, f"a damaged or unreadable {kind} file ({_reason(exc)})") from None
    try:
        stream = next((s for s in container.streams.audio if s.codec_context is not None), None)
        if stream is None:
            raise AudioFileError(name, "the file has no audio stream")
        if not stream.codec_context.sample_rate or not stream.codec_context.channels:
            raise AudioFileError(name, "the audio stream has no sample rate or channel count")
    except BaseException:
        container.close()
        raise
    return AudioFile(name, file, container, stream)
