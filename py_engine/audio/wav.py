"""WAV files (RIFF/WAVE) read and written in pure Python. A file is untrusted input: its chunks are
walked within its length, its format checked (PCM 8/16/24/32-bit or IEEE float 32/64, plain or
WAVE_FORMAT_EXTENSIBLE), and anything else is one AudioFileError naming the file and the problem.
A data chunk that claims more than the file holds (a recording cut short, or a stream's header
written before its length was known) is read as far as whole frames go."""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

from ..errors import WispError
from .pcm import float32_bytes, int16_bytes, little_endian

PCM, IEEE_FLOAT, EXTENSIBLE = 1, 3, 0xFFFE
UNKNOWN_SIZE = 0xFFFFFFFF  # a streamed file's RIFF and data sizes, before its length is known
MAX_CHANNELS = 64
SAMPLE_FORMATS = {"pcm16": (PCM, 16), "float32": (IEEE_FLOAT, 32)}


class AudioFileError(WispError):
    """An audio file that cannot be read: empty, damaged, not audio, or in a format not read here.
    Always names the file."""

    def __init__(self, name, problem: str):
        self.name = str(name)
        self.problem = problem
        super().__init__(f"{self.name}: {problem}")


@dataclass
class Wav:
    sample_rate: int
    channels: int
    samples: array  # array('f'), frames interleaved, in [-1, 1]

    @property
    def frames(self) -> int:
        return len(self.samples) // self.channels


def read_wav(data: bytes, name: str = "audio.wav") -> Wav:
    """The samples of the WAV file whose bytes are `data` (`name` labels its errors)."""
    if not data:
        raise AudioFileError(name, "the file is empty (0 bytes)")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        kind = "an RF64 file (not read here)" if data[:4] == b"RF64" else "not a WAV file (no RIFF/WAVE header)"
        raise AudioFileError(name, kind)
    fmt = None
    for chunk_id, start, size in _chunks(data, name):
        if chunk_id == b"fmt ":
            fmt = _format(data[start : start + size], name)
        elif chunk_id == b"data":
            if fmt is None:
                raise AudioFileError(name, "the data chunk comes before the fmt chunk")
            return _samples(data[start : start + size], fmt, name)
    raise AudioFileError(name, "no fmt chunk" if fmt is None else "no data chunk")


def _chunks(data: bytes, name: str):
    """(id, start, size) of each chunk after the WAVE tag; a size past the end is cut to the end
    for the data chunk (a truncated recording), an error for any other."""
    pos = 12
    while pos + 8 <= len(data):
        chunk_id, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        start = pos + 8
        if start + size > len(data):
            if chunk_id != b"data":
                raise AudioFileError(name, f"the {chunk_id!r} chunk at byte {pos} runs past the end of the file")
            size = len(data) - start
        yield chunk_id, start, size
        pos = start + size + (size & 1)  # chunks are padded to an even length


@dataclass
class _Format:
    tag: int
    channels: int
    sample_rate: int
    bits: int


def _format(fmt: bytes, name: str) -> _Format:
    if len(fmt) < 16:
        raise AudioFileError(name, f"the fmt chunk is {len(fmt)} bytes; expected at least 16")
    tag, channels, rate, _, block_align, bits = struct.unpack_from("<HHIIHH", fmt)
    if tag == EXTENSIBLE:
        if len(fmt) < 40:
            raise AudioFileError(name, "a WAVE_FORMAT_EXTENSIBLE fmt chunk shorter than 40 bytes")
        tag = struct.unpack_from("<H", fmt, 24)[0]  # the sub-format GUID's first two bytes
    if tag not in (PCM, IEEE_FLOAT):
        raise AudioFileError(name, f"sample format {tag:#06x} is not read here (PCM or IEEE float only)")
    allowed = (8, 16, 24, 32) if tag == PCM else (32, 64)
    if bits not in allowed:
        kind = "PCM" if tag == PCM else "float"
        raise AudioFileError(name, f"{bits}-bit {kind} samples are not read here ({', '.join(map(str, allowed))})")
    if not 1 <= channels <= MAX_CHANNELS:
        raise AudioFileError(name, f"{channels} channels (1-{MAX_CHANNELS} are read)")
    if not 1 <= rate <= 1_000_000:
        raise AudioFileError(name, f"a sample rate of {rate} Hz")
    if block_align != channels * bits // 8:
        raise AudioFileError(name, f"block align {block_align} is not {channels} channels x {bits // 8} bytes")
    return _Format(tag, channels, rate, bits)


def _samples(data: bytes, fmt: _Format, name: str) -> Wav:
    width = fmt.bits // 8
    data = data[: len(data) // (width * fmt.channels) * width * fmt.channels]  # whole frames
    if fmt.tag == IEEE_FLOAT:
        values = little_endian(_frombytes("f" if width == 4 else "d", data))
        samples = values if width == 4 else array("f", values)
    elif width == 1:
        samples = array("f", ((b - 128) / 128.0 for b in data))
    elif width == 2:
        samples = array("f", (v / 32768.0 for v in little_endian(_frombytes("h", data))))
    else:
        if width == 3:  # each sample placed in the top three bytes of an int32
            wide = bytearray(len(data) // 3 * 4)
            for byte in range(3):
                wide[byte + 1 :: 4] = data[byte::3]
            data = bytes(wide)
        samples = array("f", (v / 2147483648.0 for v in little_endian(_frombytes("i", data))))
    return Wav(fmt.sample_rate, fmt.channels, samples)


def _frombytes(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    return values


def wav_header(
    sample_rate: int, channels: int = 1, sample_format: str = "pcm16", data_bytes: int | None = None
) -> bytes:
    """A WAV file's header for `data_bytes` of samples; None: a stream's, whose length is not known
    yet (RIFF and data sizes 0xFFFFFFFF, as players and FFmpeg read a live stream)."""
    tag, bits = SAMPLE_FORMATS[sample_format]
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", tag, channels, sample_rate, sample_rate * block, block, bits)
    extra = b""
    if tag == IEEE_FLOAT:  # a non-PCM format's fmt carries cbSize, and a fact chunk its frame count
        fmt += struct.pack("<H", 0)
        frames = UNKNOWN_SIZE if data_bytes is None else data_bytes // block
        extra = b"fact" + struct.pack("<II", 4, frames)
    size = UNKNOWN_SIZE if data_bytes is None else data_bytes
    riff = UNKNOWN_SIZE if data_bytes is None else 4 + 8 + len(fmt) + len(extra) + 8 + data_bytes + (data_bytes & 1)
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + extra
        + b"data"
        + struct.pack("<I", size)
    )


def sample_bytes(samples, sample_format: str = "pcm16") -> bytes:
    """Float samples as a WAV file's data in `sample_format` (pcm16 or float32)."""
    return int16_bytes(samples) if sample_format == "pcm16" else float32_bytes(samples)


def wav_bytes(samples, sample_rate: int, channels: int = 1, sample_format: str = "pcm16") -> bytes:
    """A whole WAV file of `samples` (floats in [-1, 1], frames interleaved)."""
    data = sample_bytes(samples, sample_format)
    return wav_header(sample_rate, channels, sample_format, len(data)) + data + b"\0" * (len(data) & 1)
