"""Audio files on the desktop (py_engine/audio/files.py, FFmpeg through PyAV) and the pure-Python
pieces under them (wav.py, pcm.py): each container the API takes decoded to mono float32 at 16 kHz
(the files made here by FFmpeg's own encoders, a second of a 440 Hz tone), a 96 kHz 8-channel file
mixed down, silence and clipping passed through, every bad file one AudioFileError naming it, and a
long file streamed in chunks with bounded memory."""

import ast
import asyncio
import io
import math
import struct
import tracemalloc
from array import array
from pathlib import Path

import numpy as np
import pytest

from py_engine.audio.files import container_format, open_audio
from py_engine.audio.pcm import int16_bytes, rechunked
from py_engine.audio.wav import AudioFileError, read_wav, wav_bytes, wav_header

av = pytest.importorskip("av")
ROOT = Path(__file__).resolve().parent.parent
TONE_HZ = 440
# (name, container, codec, source rate): what OpenAI's endpoint takes, and webm (browsers' MediaRecorder)
FORMATS = [
    ("tone.wav", "wav", "pcm_s16le", 44100),
    ("tone.mp3", "mp3", "libmp3lame", 44100),
    ("tone.ogg", "ogg", "libopus", 48000),
    ("tone.flac", "flac", "flac", 44100),
    ("tone.m4a", "ipod", "aac", 44100),
    ("tone.webm", "webm", "libopus", 48000),
]


def encoded(container: str, codec: str, rate: int, layout: str = "stereo", seconds: float = 1.0, wave=None) -> bytes:
    """`seconds` of `wave(t)` (default a 0.5 tone) in every channel, encoded by FFmpeg."""
    wave = wave or (lambda t: 0.5 * np.sin(2 * math.pi * TONE_HZ * t))
    channels = av.AudioLayout(layout).nb_channels
    samples = wave(np.arange(int(rate * seconds)) / rate).astype(np.float32)
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        for start in range(0, len(samples), 1024):
            piece = np.repeat(samples[start : start + 1024], channels)
            frame = av.AudioFrame(format="flt", layout=layout, samples=len(piece) // channels)
            frame.planes[0].update(piece.tobytes())
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def decode(source, name=None, chunk_samples=None) -> np.ndarray:
    async def run():
        audio = open_audio(source, name)
        return [np.asarray(c) for c in [chunk async for chunk in audio.chunks(chunk_samples=chunk_samples)]]

    chunks = asyncio.run(run())
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def tone_cycles(samples: np.ndarray, rate: int = 16000) -> float:
    """The dominant frequency in Hz (an FFT's peak)."""
    spectrum = np.abs(np.fft.rfft(samples))
    return np.argmax(spectrum) * rate / len(samples)


@pytest.mark.parametrize(("name", "container", "codec", "rate"), FORMATS, ids=[f[0] for f in FORMATS])
def test_each_format_decodes_to_16khz_mono(name, container, codec, rate):
    data = encoded(container, codec, rate)
    assert container_format(data[:16]) is not None
    samples = decode(io.BytesIO(data), name)
    assert samples.dtype == np.float32
    assert abs(len(samples) - 16000) <= 1024  # codecs' priming and padding (AAC: 1024 samples at 44.1 kHz)
    assert abs(tone_cycles(samples) - TONE_HZ) <= 2
    assert 0.45 < np.abs(samples).max() < 0.55  # the channels averaged, not summed


def test_a_path_and_the_8_channel_96khz_file(tmp_path):
    path = tmp_path / "surround.wav"
    path.write_bytes(encoded("wav", "pcm_f32le", 96000, layout="7.1"))
    samples = decode(str(path))
    assert len(samples) == 16000 and abs(tone_cycles(samples) - TONE_HZ) <= 1
    assert 0.49 < np.abs(samples).max() < 0.501  # the resampler's own 7.1 downmix would pass 2
    plain = wav_bytes(array("f", [0.25, -0.25] * 4 * 9600), 96000, channels=8)  # no channel mask
    assert np.abs(decode(io.BytesIO(plain))).max() < 1e-6  # +x and -x average to silence


def test_silence_and_clipping_are_audio():
    silence = decode(io.BytesIO(encoded("flac", "flac", 16000, layout="mono", wave=lambda t: 0 * t)))
    assert len(silence) == 16000 and not silence.any()
    square = decode(
        io.BytesIO(encoded("wav", "pcm_s16le", 16000, layout="mono", wave=lambda t: np.sign(np.sin(t * 900))))
    )
    assert len(square) == 16000 and np.abs(square).max() <= 1.0


def test_bad_files_name_themselves(tmp_path):
    good = encoded("wav", "pcm_s16le", 16000, layout="mono", seconds=0.1)
    video = io.BytesIO()
    with av.open(video, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=1)
        stream.width = stream.height = 16
        for packet in [*stream.encode(av.VideoFrame(16, 16, "yuv420p")), *stream.encode(None)]:
            out.mux(packet)
    cases = {
        "empty.wav": (b"", "the file is empty"),
        "header.wav": (good[:30], "a damaged or unreadable wav file"),
        "riff.wav": (b"RIFF\0\0\0\0WAVEjunkjunkjunk", "a damaged or unreadable wav file"),
        "noise.mp3": (b"ID3" + bytes(range(256)) * 40, "a damaged or unreadable mp3 file"),
        "notes.txt": (b"hello, this is text", "not an audio file read here"),
        "video.mp4": (video.getvalue(), "the file has no audio stream"),
    }
    for name, (data, problem) in cases.items():
        with pytest.raises(AudioFileError, match=f"^{name}: {problem}"):
            decode(io.BytesIO(data), name)
    with pytest.raises(AudioFileError, match="missing.wav: No such file"):
        decode(str(tmp_path / "missing.wav"))
    assert len(decode(io.BytesIO(wav_bytes([], 16000)))) == 0  # a header and no samples: no audio, not an error


class LongWav(io.RawIOBase):
    """A WAV file of `seconds` of an 8 kHz 8-bit ramp, made as it is read (never whole in
    memory, here or in the decoder); counts how far it was read."""

    RATE = 8000
    RAMP = bytes(range(28, 228)) * 400  # a read of up to 79,800 bytes from any phase; a longer one comes back short

    def __init__(self, seconds: int):
        self.size = self.RATE * seconds
        self.header = b"RIFF" + struct.pack("<I", 36 + self.size) + b"WAVEfmt "
        self.header += struct.pack("<IHHIIHH", 16, 1, 1, self.RATE, self.RATE, 1, 8) + b"data"
        self.header += struct.pack("<I", self.size)
        self.pos = self.furthest = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: len(self.header) + self.size}[whence] + offset
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, buffer):
        end = min(self.pos + len(buffer), len(self.header) + self.size)
        data = bytes(self.header[self.pos : end]) if self.pos < len(self.header) else b""
        start = self.pos + len(data) - len(self.header)
        data += self.RAMP[start % 200 : start % 200 + end - len(self.header) - start]
        buffer[: len(data)] = data
        self.pos += len(data)
        self.furthest = max(self.furthest, self.pos)
        return len(data)


def test_a_2_hour_file_is_read_a_chunk_at_a_time():
    source = LongWav(2 * 3600)
    chunk = 16000 * 30

    async def first_chunks():
        audio = open_audio(source, "long.wav")
        got = []
        async for samples in audio.chunks(chunk_samples=chunk):
            got.append(len(samples))
            if len(got) == 3:
                break
        return got

    assert asyncio.run(first_chunks()) == [chunk] * 3
    assert source.furthest < 8000 * 100  # 90 s decoded: about 90 s of the file read, of 7,200
    assert source.closed


def test_closed_while_streaming():
    """A model that stops listening early (its token budget spent) closes the file; the stream then ends
    (FFmpeg's demuxer is freed: reading it on crashed the process) and closing again is nothing."""

    async def run():
        audio = open_audio(LongWav(60), "minute.wav")
        chunks = audio.chunks(chunk_samples=16000)
        first = await anext(chunks)
        audio.close()
        audio.close()
        rest = [len(c) async for c in chunks]
        return len(first), rest

    first, rest = asyncio.run(run())
    assert first == 16000 and sum(rest) < 16000


def test_a_long_file_streams_in_bounded_memory():
    seconds, chunk = 600, 16000 * 30

    async def count():
        total = 0
        async for samples in open_audio(LongWav(seconds), "ten-minutes.wav").chunks(chunk_samples=chunk):
            assert len(samples) <= chunk
            total += len(samples)
        return total

    tracemalloc.start()
    try:
        total = asyncio.run(count())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert abs(total - seconds * 16000) <= 64
    assert peak < 4 * chunk * 4  # a few chunks' floats, not the 38 MB of the whole


def test_wav_read_and_written():
    ramp = array("f", [i / 50 - 1 for i in range(100)])
    for sample_format, tolerance in [("pcm16", 1 / 32768), ("float32", 0)]:
        wav = read_wav(wav_bytes(ramp, 22050, sample_format=sample_format))
        assert (wav.sample_rate, wav.channels, wav.frames) == (22050, 1, 100)
        assert max(abs(a - b) for a, b in zip(wav.samples, ramp)) <= tolerance
    stereo = read_wav(wav_bytes(array("f", [0.5, -0.5] * 10), 8000, channels=2))
    assert stereo.frames == 10 and list(stereo.samples) == [0.5, -0.5] * 10
    for bits, pack, scale in [(8, "B", 128), (24, None, 2**23), (32, "i", 2**31)]:
        values = [0, scale // 2, -(scale // 2)]
        if bits == 8:
            data = bytes(v + 128 for v in values)
        elif bits == 24:
            data = b"".join(v.to_bytes(3, "little", signed=True) for v in values)
        else:
            data = struct.pack(f"<{len(values)}{pack}", *values)
        fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000 * bits // 8, bits // 8, bits)
        wav = read_wav(
            b"RIFF\0\0\0\0WAVEfmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
        )
        assert list(wav.samples) == [0.0, 0.5, -0.5], bits
    streamed = wav_header(16000) + int16_bytes([0.25] * 7) + b"\x01"  # sizes unknown, a half frame at the end
    assert list(read_wav(streamed).samples) == [0.25] * 7
    assert list(read_wav(wav_bytes([2.0, -2.0, 0.5], 8000)).samples) == [32767 / 32768, -1.0, 0.5]  # clipped


def test_bad_wav_files():
    good = wav_bytes([0.0] * 4, 16000)
    fmt_at = good.index(b"fmt ")

    def patched(offset, fmt, value):
        data = bytearray(good)
        struct.pack_into(fmt, data, fmt_at + 8 + offset, value)
        return bytes(data)

    cases = [
        (b"", "the file is empty"),
        (b"OggS" + bytes(40), "not a WAV file"),
        (good[:12] + good[good.index(b"data") :], "the data chunk comes before the fmt chunk"),
        (good[:36], "no data chunk"),
        (good[:12] + b"LIST" + struct.pack("<I", 99) + b"x", "runs past the end"),
        (patched(0, "<H", 2), "sample format 0x0002 is not read here"),
        (patched(14, "<H", 12), "12-bit PCM samples"),
        (patched(2, "<H", 0), "0 channels"),
        (patched(12, "<H", 3), "block align 3"),
    ]
    for data, problem in cases:
        with pytest.raises(AudioFileError, match=f"^clip.wav: .*{problem}"):
            read_wav(data, "clip.wav")


def test_rechunked():
    async def run(sizes, size):
        async def source():
            for n in sizes:
                yield array("f", [1.0] * n)

        return [len(c) async for c in rechunked(source(), size)]

    assert asyncio.run(run([3, 10, 0, 4], 5)) == [5, 5, 5, 2]
    assert asyncio.run(run([], 5)) == []


def test_the_engine_imports_pyav_only_when_a_file_is_opened():
    """PyAV is the desktop's (the engine runs in Pyodide too): only audio/files.py names it, inside functions."""
    for path in (ROOT / "py_engine").rglob("*.py"):
        tree = ast.parse(path.read_text())
        top = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        top |= {(n.module or "").split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and not n.level}
        assert "av" not in top, path
        lazy = [
            n for n in ast.walk(tree) if isinstance(n, ast.Import) and any(a.name.startswith("av") for a in n.names)
        ]
        assert not lazy or path.name == "files.py" and path.parent.name == "audio", path
