"""PCM helpers: float samples in [-1, 1] (array('f')) as little-endian int16 or float32 bytes, and a
stream cut into chunks of a fixed length. Pure Python: the page's worker uses them too."""

from __future__ import annotations

import sys
from array import array
from collections.abc import AsyncIterable, AsyncIterator, Iterable

INT16_SCALE = 32768.0


def little_endian(samples: array) -> array:
    """`samples` in little-endian byte order (a copy on a big-endian host, else the same array)."""
    if sys.byteorder == "big":
        samples = array(samples.typecode, samples)
        samples.byteswap()
    return samples


def int16_bytes(samples: Iterable[float]) -> bytes:
    """Float samples as PCM16 little-endian, rounded and clipped to [-32768, 32767]."""
    return little_endian(array("h", (max(-32768, min(32767, round(v * INT16_SCALE))) for v in samples))).tobytes()


def float32_bytes(samples: Iterable[float]) -> bytes:
    """Float samples as IEEE float32 little-endian."""
    return little_endian(
        samples if isinstance(samples, array) and samples.typecode == "f" else array("f", samples)
    ).tobytes()


async def rechunked(chunks: AsyncIterable[array], size: int) -> AsyncIterator[array]:
    """The samples of `chunks` (array('f') of any lengths) again as arrays of exactly `size`
    samples, the last one shorter; at most one chunk's worth is held back."""
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    pending = array("f")
    async for chunk in chunks:
        pending.extend(chunk)
        if len(pending) >= size:
            cut = len(pending) // size * size
            for start in range(0, cut, size):
                yield pending[start : start + size]
            del pending[:cut]
    if pending:
        yield pending
