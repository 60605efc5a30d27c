"""The dependent chain: `steps` dispatches, each reading what the previous one wrote.

Submitted as one batch it exercises whatever the host does with many dispatches at once (one
compute pass on Dawn, grouped command buffers on WebKit); submitted one dispatch per submit it is
the correctness floor. The submit probe promotes a group size only when both give the same bytes,
and those bytes equal the CPU reference below.
"""

from __future__ import annotations

from array import array

from ..gpu import Dispatch
from ..runtime.kernels import KernelCache

WORDS = 256
_MASK = 0xFFFFFFFF


def seed_words(n: int = WORDS) -> array:
    return array("I", ((i * 2654435761 + 12345) & _MASK for i in range(n)))


def reference(steps: int, n: int = WORDS) -> bytes:
    """What the chain leaves in its output buffer, computed on the CPU (pure Python)."""
    words = list(seed_words(n))
    for _ in range(steps):
        words = [((w * 1664525 + 1013904223) + (words[(i + 1) % n] ^ (w >> 7))) & _MASK for i, w in enumerate(words)]
    return array("I", words).tobytes()


class Chain:
    """Two ping-pong buffers and the bind groups of both directions, reused across runs."""

    def __init__(self, device, kernels: KernelCache | None = None, n: int = WORDS):
        self.device, self.n = device, n
        self.kernel = (kernels or KernelCache(device)).get("selftest/chain")
        nbytes = n * 4
        self.buffers = [device.create_buffer(nbytes, label=f"chain.{i}") for i in range(2)]
        a, b = ((buf, 0, nbytes) for buf in self.buffers)
        self.groups = [
            device.create_bind_group(self.kernel.handle, [a, b]),
            device.create_bind_group(self.kernel.handle, [b, a]),
        ]

    def dispatch(self, step: int) -> Dispatch:
        return Dispatch(self.kernel.handle, self.groups[step % 2], (self.n // 64, 1, 1))

    async def run(self, steps: int, one_by_one: bool = False) -> bytes:
        """The chain's output after `steps` dispatches: all in one submit, or one submit each."""
        self.device.write_buffer(self.buffers[0], 0, seed_words(self.n).tobytes())
        await self.device.prepare()
        commands = [self.dispatch(s) for s in range(steps)]
        if one_by_one:
            for command in commands:
                self.device.submit([command])
        else:
            self.device.submit(commands)
        return await self.device.read_buffer(self.buffers[steps % 2], 0, self.n * 4)

    def destroy(self) -> None:
        for buf in self.buffers:
            self.device.destroy_buffer(buf)
