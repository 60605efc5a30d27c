"""Grids and scratch of the chunked Gated DeltaNet forward (Qwen3.5's linear attention, many rows).

Three kernels run in this order on the same buffers, with one Params dict (`params`):
shaders/delta_chunk_prep.wgsl (per chunk and value head: everything that does not depend on the
state, into the scratch `chunks`), shaders/delta_chunk_scan.wgsl (per value head and column tile:
the chunks in order through the state; raw outputs into y) and shaders/delta_norm.wgsl (the
gated RMSNorm of y in place). Pure Python: it runs in Pyodide too.
"""

from __future__ import annotations

CHUNK = 32  # tokens per chunk: the kernels' C
SCAN_COLUMNS = 16  # state columns per scan workgroup: delta_chunk_scan.wgsl's TJ
DK_MAX = 128  # the scan keeps a [dk, SCAN_COLUMNS] tile of the state in workgroup memory


def chunk_count(rows: int) -> int:
    return -(-rows // CHUNK)


def block_floats(dk: int, dv: int) -> int:
    """Floats of one (value head, chunk) block of the scratch: W [C, dk], U [C, dv], A [C, C],
    qf [C], kf [C], decay, 3 unused."""
    return CHUNK * (dk + dv + CHUNK + 2) + 4


def scratch_bytes(rows: int, nv: int, dk: int, dv: int) -> int:
    """Bytes of the `chunks` scratch binding: f32 [nv, ceil(rows / C), block_floats(dk, dv)]."""
    return 4 * nv * chunk_count(rows) * block_floats(dk, dv)


def prep_grid(rows: int, nv: int) -> tuple[int, int, int]:
    return (chunk_count(rows), nv, 1)


def scan_grid(nv: int, dv: int) -> tuple[int, int, int]:
    return (nv, -(-dv // SCAN_COLUMNS), 1)


def norm_grid(rows: int, nv: int) -> tuple[int, int, int]:
    return (nv, rows, 1)


def params(
    *,
    nk: int,
    nv: int,
    dk: int,
    dv: int,
    proj_stride: int,
    z_at: int,
    b_at: int,
    a_at: int,
    a_is_log: bool,
    eps: float,
    heads_tiled: bool = False,
) -> dict:
    """The Params of all three kernels (the same struct as shaders/delta_rule.wgsl's, the one-token
    form). conv_dim = 2 nk dk + nv dv (mixed's row: q, k, v heads). heads_tiled: the value heads
    are stored in llama.cpp's tiled order (value head h reads key head h % nk)."""
    if nv % nk:
        raise ValueError(f"value heads ({nv}) must be a multiple of key heads ({nk})")
    if dk > DK_MAX:
        raise ValueError(f"key head dim {dk} > {DK_MAX} (the scan's state tile)")
    return {
        "nk": nk,
        "nv": nv,
        "dk": dk,
        "dv": dv,
        "conv_dim": 2 * nk * dk + nv * dv,
        "proj_stride": proj_stride,
        "z_at": z_at,
        "b_at": b_at,
        "a_at": a_at,
        "a_is_log": int(a_is_log),
        "eps": eps,
        "heads_tiled": int(heads_tiled),
    }
