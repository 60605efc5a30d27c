"""One logits row's draw on the GPU, start to finish, with no host in between.

topk_chunks + topk_merge leave the row's first CANDIDATES tokens (logits / temperature order) and
the log-sum-exp of the whole row in `result`; sample_pick draws at u from them (token_choice.choose
in f32) or, when they cannot decide, writes sample_full's Params after the id it leaves in
`picked[0]`; sample_full is dispatched every time on a copy of those Params and returns at once when
sample_pick decided. So `picked[0]` holds the drawn id when the dispatches have run.

The Sampler keeps one RowDraw for logits row 0 (the decode loop's draws, and the candidates the
host's pick() reads) and one more per row that verification scores (prompt lookup while sampling:
each drafted row drawn at the u its token would have had).

The numbers both sides need are defined here and given to the kernels as defines (kernels.py):
CANDIDATES, TOPK_TILE = TILE, SAMPLING_THREADS = THREADS (also argmax's and repetition_penalty's,
sampling.py) and FULL_PARAMS_AT; the Params sizes come from the kernels' parsed Params.
"""

from __future__ import annotations

from ..gpu import Copy, Dispatch

CANDIDATES = 64  # tokens the top-k passes hand on
TILE = 1024  # logits per workgroup in topk_chunks.wgsl
THREADS = 256  # threads per workgroup: argmax, repetition_penalty, topk_*, sample_full (a power of two)
FULL_PARAMS_AT = 4  # the u32 of sample_pick's out where it writes sample_full's Params (copied from there)


def sampling_kernel(kernels, name: str, **defines):
    """A sampling kernel with SAMPLING_THREADS, the one workgroup size they share."""
    return kernels.get(name, SAMPLING_THREADS=THREADS, **defines)


def params_bytes(kernel) -> int:
    """The size of a kernel's Params in a uniform buffer (pack_params pads to 16 bytes)."""
    return -(-4 * len(kernel.params) // 16) * 16


class RowDraw:
    """The buffers and dispatches of one row's draw. logits: the binding (buffer, offset, size)
    that holds the row at element `logits_base`; scratch: the top-k passes' lists and stats
    bindings, shared by every row (a row's passes finish before the next row's start)."""

    def __init__(self, device, kernels, vocab: int, logits, logits_base: int, scratch):
        self.device, self.vocab, self.logits_base = device, vocab, logits_base
        tiles = -(-vocab // TILE)
        lists, stats = scratch
        self.chunks_kernel = sampling_kernel(kernels, "topk_chunks", CANDIDATES=CANDIDATES, TOPK_TILE=TILE)
        merge = sampling_kernel(kernels, "topk_merge", CANDIDATES=CANDIDATES, LISTS=tiles)
        self.pick_kernel = kernels.get("sample_pick", CANDIDATES=CANDIDATES, FULL_PARAMS_AT=FULL_PARAMS_AT)
        full = sampling_kernel(kernels, "sample_full")
        full_bytes = params_bytes(full)

        def buffer(size, kind="storage", label=""):
            buf = device.create_buffer(size, kind, label)
            return buf, (buf, 0, size)

        self.topk_params, p = buffer(16, "uniform")
        self.result, result = buffer(8 * CANDIDATES + 4, label="topk result")
        self.topk = [
            Dispatch(
                self.chunks_kernel.handle,
                device.create_bind_group(self.chunks_kernel.handle, [p, logits, lists, stats]),
                (tiles, 1, 1),
            ),
            Dispatch(merge.handle, device.create_bind_group(merge.handle, [lists, stats, result]), (1, 1, 1)),
        ]
        self.pick_params, pick_p = buffer(params_bytes(self.pick_kernel), "uniform")
        self.picked, picked = buffer(4 * FULL_PARAMS_AT + full_bytes, label="sample_pick")
        full_params, full_p = buffer(full_bytes, "uniform")
        self.draw = self.topk + [
            Dispatch(
                self.pick_kernel.handle,
                device.create_bind_group(self.pick_kernel.handle, [pick_p, result, picked]),
                (1, 1, 1),
            ),
            Copy(self.picked, 4 * FULL_PARAMS_AT, full_params, 0, full_bytes),
            Dispatch(full.handle, device.create_bind_group(full.handle, [full_p, logits, picked]), (1, 1, 1)),
        ]

    def topk_bytes(self, temperature: float) -> bytes:
        return self.chunks_kernel.pack_params(
            {"vocab": self.vocab, "logits_base": self.logits_base, "inv_temperature": 1 / temperature}
        )

    def pick_bytes(self, params, u: float) -> bytes:
        """sample_pick's Params for a draw at u (what the decode loop stages per forward)."""
        return self.pick_kernel.pack_params(
            {
                "vocab": self.vocab,
                "logits_base": self.logits_base,
                "inv_temperature": 1 / params.temperature,
                "top_k": params.top_k,
                "top_p": params.top_p,
                "u": u,
            }
        )
