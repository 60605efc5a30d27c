"""Weights read as stored and dequantized inside the GEMV, matmul and embedding kernels
(shaders/weights/*.wgsl) against gguf-py's / numpy's float32 dequantization."""

import gguf
import gpu_harness
import numpy as np
import pytest
from gpu_harness import NORM_EPS, as_f32, quantized_rows, run_kernel
from quant_ref import QuantMatrix, int8_activations, repack_reference

from py_engine.runtime.linear_plan import (
    INT8_MATMUL_FORMATS,
    gemv_features,
    gemv_groups,
    linear_defines,
    linear_grid,
    linear_params,
    matmul_kernel,
    matmul_tile,
    q8_row_bytes,
    weight_defines,
)
from py_engine.runtime.quant import FORMATS, GGUF_TYPES, weight_format

# (format, K, MLX group). Each ggml K is an odd number of blocks whose byte size is 2 mod 4 where
# the format allows it (Q8_0, Q4_0, Q5_0, Q6_K), so every other row starts 2 bytes into a word;
# K = 352 / 768 give the one-row GEMV loop unrolled pairs and an odd last block.
CASES = [
    ("f32", 100, 64),
    ("f32", 70, 64),
    ("f16", 96, 64),
    ("f16", 70, 64),
    ("f16_packed", 96, 64),
    ("f16_packed", 70, 64),
    ("bf16", 96, 64),
    ("bf16", 69, 64),
    ("q8_0", 352, 64),
    ("q8_0", 32, 64),
    ("q4_0", 352, 64),
    ("q4_1", 352, 64),
    ("q5_0", 352, 64),
    ("q5_1", 352, 64),
    ("q4_k", 768, 64),
    ("q5_k", 768, 64),
    ("q6_k", 768, 64),
    ("q6_k", 256, 64),
    ("mlx4_f16", 352, 32),
    ("mlx4_f16", 384, 128),
    ("mlx4_bf16", 320, 64),
]
CASE_IDS = [f"{f}-K{k}" + (f"-G{g}" if f.startswith("mlx") else "") for f, k, g in CASES]
GEMV_N, MATMUL_N, VOCAB = 37, 75, 37  # odd (2-aligned MLX bias sections), not multiples of 8 / 64


def matrix(fmt, N, K, group):
    rng = np.random.default_rng(N * 100003 + K * 101 + group + sum(map(ord, fmt)))
    return QuantMatrix(fmt, N, K, rng, group)


def device_f16(fmt):
    """Only native f16 needs shader-f16; every other format runs on a device without it."""
    if fmt == "f16" and not gpu_harness.device(True)[0].caps.shader_f16:
        pytest.skip("device lacks shader-f16")
    return fmt == "f16"


def run_linear(
    kernel,
    x,
    m: QuantMatrix,
    layout: dict | None = None,
    subgroups: bool = True,
    norm: np.ndarray | None = None,
    norm_offset: float = 0.0,
    gated: bool = False,
    gelu: bool = False,
    precision: str = "exact",
    int8_matmul_tier: bool = False,
    x_levels: int = 2,
    q8_input: bool = False,
    q8_output: tuple | None = None,
):
    """y = x . m (x RMS-normalised by `norm` first; gated: m's rows are gate | up, y = act(gate) * up).
    int8_matmul_tier: the matmul is matmul_int8.wgsl (on quantize_rows' x in x_levels int8
    levels), whatever K. q8_input: the GEMV (precision "fast") reads quantize_rows' two levels.
    q8_output (next norm weight or None, its offset): the GEMV quantizes y too (Q8_OUTPUT);
    returned: (y, yq, ys)."""
    rows, K = x.shape
    outputs = m.N // 2 if gated else m.N
    params = linear_params(K, m.N, out_stride=outputs, rows=rows, norm_eps=NORM_EPS, norm_offset=norm_offset)
    buffers = {
        "x": x,
        "w": gpu_harness.repacked(m.raw(), m.fmt),
        "bias": 16,
        "residual": 16,
        "norm": 16 if norm is None else norm,
        "y": rows * outputs * 4,
    }
    defines = {
        **linear_defines(K, m.N, m.fmt, m.group, norm=norm is not None, gated=gated, gelu=gelu, precision=precision),
        **(layout or {}),
    }
    if int8_matmul_tier:
        defines["Q8_MATMUL"], defines["X_LEVELS"] = True, x_levels
        buffers["x"], buffers["norm"] = quantized_rows(x, norm, norm_offset, x_levels)
    if q8_input:
        defines["Q8_INPUT"] = True
        buffers["x"] = quantized_rows(x, norm, norm_offset, 2, spread=True)
    if q8_output:
        next_norm, next_offset = q8_output
        defines.update(Q8_OUTPUT=True, Q8_OUT_NORM=next_norm is not None)
        buffers["yq"] = rows * q8_row_bytes(outputs)
        if next_norm is not None:
            buffers["norm"], params["norm_offset"] = next_norm, next_offset
    grid = linear_grid(
        kernel, rows, m.N, gemv_per_group=gemv_features(defines), gated=gated, matmul_per_group=matmul_tile(defines)
    )
    out = run_kernel(
        matmul_kernel(defines) if kernel == "matmul" else kernel,
        buffers,
        params,
        grid=grid,
        step=(rows, 0, rows),
        defines=defines,
        f16=device_f16(m.fmt),
        subgroups=subgroups,
    )
    y = as_f32(out["y"], (rows, outputs))
    if q8_output:
        return y, np.frombuffer(out["yq"], np.uint32)
    return y


def fused_reference(x, m: QuantMatrix, norm, norm_offset: float, gated: bool, gelu: bool) -> np.ndarray:
    """float64: RMSNorm (when norm is given), the projection, the gated activation (when gated)."""
    h = x.astype(np.float64)
    if norm is not None:
        h = h / np.sqrt((h**2).mean(-1, keepdims=True) + NORM_EPS) * (norm.astype(np.float64) + norm_offset)
    y = h @ m.ref.astype(np.float64).T
    return gate_reference(y, m.N, gelu) if gated else y


def gate_reference(y: np.ndarray, N: int, gelu: bool) -> np.ndarray:
    gate, up = y[:, : N // 2], y[:, N // 2 :]
    act = (
        0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate**3)))
        if gelu
        else gate / (1 + np.exp(-np.maximum(gate, -80.0)))  # exp(80): no overflow, and gate / it is ~0 as SiLU's
    )
    return act * up


def int8_reference(x, m: QuantMatrix, norm=None, norm_offset: float = 0.0, gated=False, gelu=False, levels=2):
    """The GEMV's int8-activation arithmetic (gemv.wgsl Q8_ACT; the int8 matmul's with `levels`)
    in float64: x (times the norm weight, in float32 as the kernel stages it) quantized per 32
    (quant_ref.int8_activations) against the dequantized weights, then the RMS factor and the
    gated activation."""
    staged = x if norm is None else x * (norm + np.float32(norm_offset))
    scale = 1.0
    if norm is not None:
        h = x.astype(np.float64)
        scale = 1 / np.sqrt((h**2).mean(-1, keepdims=True) + NORM_EPS)
    y = scale * (int8_activations(staged, levels) @ m.ref.astype(np.float64).T)
    return gate_reference(y, m.N, gelu) if gated else y


def assert_int8_gemv(got, x, m: QuantMatrix, label: str, **fused):
    """got: the GEMV under precision "fast" — the int8 model's outputs within f32 rounding, and
    measurably not the exact ones."""
    ref = int8_reference(x, m, **fused)
    tol = 2e-6 * np.abs(ref).max()
    err = np.abs(got - ref).max()
    assert err < tol, f"{label}: off the int8 model by {err:.2e} (tolerance {tol:.2e})"
    exact = fused_reference(
        x, m, fused.get("norm"), fused.get("norm_offset", 0.0), fused.get("gated", False), fused.get("gelu", False)
    )
    assert np.abs(exact - ref).max() > 4 * tol, f"{label}: int8 and exact cannot be told apart"


INT8_CASES = [(f, k, g) for f, k, g in CASES if not FORMATS[f].is_float]


@pytest.mark.parametrize("fmt,K,group", INT8_CASES, ids=[i for i, c in zip(CASE_IDS, CASES) if c in INT8_CASES])
def test_gemv_int8(fmt, K, group):
    """precision "fast": every block format's int8 units against the int8 model."""
    m = matrix(fmt, GEMV_N, K, group)
    rng = np.random.default_rng(K)
    for rows in (1, 13):
        x = rng.standard_normal((rows, K), dtype=np.float32)
        got = run_linear("gemv", x, m, precision="fast")
        assert_int8_gemv(got, x, m, f"{fmt} rows={rows} K={K}")
        if not FORMATS[fmt].is_mlx:  # x quantized once by quantize_rows (MLX's nibble order is its own)
            assert np.array_equal(run_linear("gemv", x, m, precision="fast", q8_input=True), got), fmt


# GEMV thread layouts (LANES, SLOTS, RPT, STEP): slots wider and narrower than a subgroup, rows
# per thread that do not divide N, one lane group per workgroup.
LAYOUTS = [(64, 4, 4, 1), (16, 16, 2, 2), (256, 1, 3, 1), (8, 32, 1, 4)]


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
@pytest.mark.parametrize(
    "fmt,K,group",
    [
        ("f32", 70, 64),
        ("f16_packed", 96, 64),
        ("q4_0", 352, 64),
        ("q6_k", 768, 64),
        ("q4_k", 768, 64),
        ("mlx4_bf16", 320, 64),
        # K past gemv.wgsl's X_CHUNK of 2048: several staged chunks
        # (with their x sums: Q4_K, MLX)
        ("f32", 2054, 64),
        ("q4_0", 4160, 64),
        ("q6_k", 4352, 64),
        ("q4_k", 4352, 64),
        ("mlx4_f16", 4160, 64),
    ],
)
def test_gemv_layouts(fmt, K, group, subgroups):
    m = matrix(fmt, GEMV_N, K, group)
    rng = np.random.default_rng(K + 1)
    for (lanes, slots, rpt, step), rows in zip(LAYOUTS, (1, 3, 2, 1)):
        x = rng.standard_normal((rows, K), dtype=np.float32)
        ref = x.astype(np.float64) @ m.ref.astype(np.float64).T
        layout = {"LANES": lanes, "SLOTS": slots, "RPT": rpt, "STEP": step}
        got = run_linear("gemv", x, m, layout, subgroups)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < 1e-4, f"{fmt} {layout} rows={rows}: relative error {err:.2e}"
        if not FORMATS[fmt].is_float and K > 2048:  # int8 staging of several chunks, same layout
            got = run_linear("gemv", x, m, layout, subgroups, precision="fast")
            assert_int8_gemv(got, x, m, f"{fmt} {layout} rows={rows} fast")
            if not FORMATS[fmt].is_mlx:  # quantize_rows' x: chunks of 4096 (the sums' order differs)
                got = run_linear("gemv", x, m, layout, subgroups, precision="fast", q8_input=True)
                assert_int8_gemv(got, x, m, f"{fmt} {layout} rows={rows} Q8_INPUT")


# (kernel, subgroups, format, K, rows, norm, gated): the scalar-x path (K = 70), an x-sum format
# (Q4_1), K-quants, K past one staged chunk; 37 outputs end mid-workgroup and mid-tile.
FUSED = [
    ("gemv", True, "f32", 70, 3, True, True),
    ("gemv", False, "q4_1", 352, 2, True, True),
    ("gemv", True, "q6_k", 768, 1, True, False),
    ("gemv", True, "q4_0", 2304, 2, True, True),
    ("gemv", True, "f16_packed", 96, 1, False, True),
    ("gemv", False, "q4_k", 2304, 1, True, False),
    ("matmul", True, "f32", 70, 70, True, True),
    ("matmul", True, "q4_1", 352, 17, True, False),
    ("matmul", True, "q8_0", 2304, 33, False, True),
    ("matmul", True, "q4_0", 96, 130, True, True),  # int8: two row tiles, the second of 2 rows
    ("matmul", False, "q4_k", 768, 70, True, False),  # int8: a sub-block's scale and min a 32
    ("matmul", True, "q6_k", 512, 70, False, True),  # int8: a scale per 16, each half weighed apart
]


@pytest.mark.parametrize("kernel,subgroups,fmt,K,rows,with_norm,gated", FUSED)
def test_fused_norm_and_gate(kernel, subgroups, fmt, K, rows, with_norm, gated):
    """RMSNorm inside the projection (NORM) and the gated activation after it (GATED); the GEMV
    of a block format under precision "fast" too (its int8 x quantized after the norm weight), and
    the int8 matmul where the format has one."""
    m = matrix(fmt, 2 * 37 if gated else 37, K, 64)
    rng = np.random.default_rng(K + rows)
    x = rng.standard_normal((rows, K), dtype=np.float32) * 3
    norm = rng.standard_normal(K, dtype=np.float32) if with_norm else None
    gelu = fmt == "q8_0"  # Gemma's activation once
    offset = 1.0 if fmt == "q4_1" else 0.0  # Gemma's (1 + w) once
    got = run_linear(kernel, x, m, subgroups=subgroups, norm=norm, norm_offset=offset, gated=gated, gelu=gelu)
    ref = fused_reference(x, m, norm, offset, gated, gelu)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-4, f"{kernel} {fmt} K={K} rows={rows}: relative error {err:.2e}"
    int8_tier = kernel == "matmul" and fmt in INT8_MATMUL_FORMATS
    if (kernel == "gemv" and not FORMATS[fmt].is_float) or int8_tier:
        fused = {"norm": norm, "norm_offset": offset, "gated": gated, "gelu": gelu}
        for levels in (1, 2) if int8_tier else (2,):  # the int8 matmul's activations in one int8 level or two
            got = run_linear(
                kernel,
                x,
                m,
                subgroups=subgroups,
                precision="fast",
                int8_matmul_tier=int8_tier,
                x_levels=levels,
                **fused,
            )
            assert_int8_gemv(got, x, m, f"{kernel} {fmt} K={K} rows={rows} fast {levels}", levels=levels, **fused)
        if kernel == "gemv" and not FORMATS[fmt].is_float:  # quantize_rows' x and RMS factor
            got = run_linear(kernel, x, m, subgroups=subgroups, precision="fast", q8_input=True, **fused)
            assert_int8_gemv(got, x, m, f"gemv {fmt} K={K} rows={rows} Q8_INPUT", **fused)


# (format, K, outputs, gated, on quantized x, next norm, layout LANES, SLOTS, RPT, STEP, rows): a
# GEMV that quantizes its outputs for the GEMV after it, in the layouts q8_output_layout gives
# (plain rows two a thread, gated 32 slots, the CPU's 128 rows) and a short-row one; on
# quantize_rows' x, RMS-normalised when gated (the 8B's gate | up), and not (a down projection
# quantizing for the next q|k|v: its norm binding holds the next norm); f32 K = 70 reads the next
# norm one float at a time; 160 outputs leave the CPU layout's second workgroup one 32 live.
Q8_OUTPUTS = [
    ("q4_0", 2304, 96, False, False, True, (16, 16, 2, 4), 2),
    ("q4_0", 2304, 96, True, True, False, (8, 32, 2, 2), 2),
    ("q4_0", 2304, 64, False, True, True, (16, 16, 2, 4), 1),
    ("q6_k", 768, 64, False, False, False, (32, 8, 4, 1), 1),
    ("f32", 70, 160, False, False, True, (1, 128, 1, 1), 3),
]


@pytest.mark.parametrize("fmt,K,outputs,gated,on_quantized,with_norm,layout,rows", Q8_OUTPUTS)
def test_gemv_quantizes_its_outputs(fmt, K, outputs, gated, on_quantized, with_norm, layout, rows):
    """gemv.wgsl Q8_OUTPUT: y unchanged, and yq the bits quantize_rows SPREAD makes of y (times
    the next RMSNorm's weight + offset) for the GEMV after it."""
    m = matrix(fmt, 2 * outputs if gated else outputs, K, 64)
    rng = np.random.default_rng(K + outputs)
    x = rng.standard_normal((rows, K), dtype=np.float32) * 3
    next_norm = rng.standard_normal(outputs, dtype=np.float32) if with_norm else None
    lanes, slots, rpt, step = layout
    fused = {"gated": gated, "precision": "exact" if FORMATS[fmt].is_float else "fast", "q8_input": on_quantized}
    if gated:
        fused["norm"] = rng.standard_normal(K, dtype=np.float32)
    layout = {"LANES": lanes, "SLOTS": slots, "RPT": rpt, "STEP": step}
    y, yq = run_linear("gemv", x, m, layout, q8_output=(next_norm, 0.5), **fused)
    assert np.array_equal(y, run_linear("gemv", x, m, layout, **fused)), "Q8_OUTPUT changed y"
    want = quantized_rows(y, next_norm, 0.5, 2, spread=True)
    words = outputs // 4  # a row's q1 and q2 words; then its scales, e * sums and squares
    row = q8_row_bytes(outputs) // 4
    for r in range(rows):
        got_r, want_r = yq[r * row : (r + 1) * row], want[r * row : (r + 1) * row]
        assert np.array_equal(got_r[:words], want_r[:words]), f"row {r}: the int8 levels differ from quantize_rows'"
        assert np.array_equal(got_r[words:], want_r[words:]), f"row {r}: the scales differ from quantize_rows'"


# (format, K, outputs, gated, on quantized x, norm, layout, rows): GROUPS groups a workgroup: the
# 8B's gate | up (on quantize_rows' x, quantizing its outputs), x staged and normalised in the
# GEMV (one chunk: staged once for every group), K past one chunk (restaged each group).
GROUPED = [
    ("q4_0", 2304, 160, True, True, True, (8, 32, 2, 2), 2),
    ("q4_1", 352, 37, False, False, True, (16, 16, 1, 2), 3),
    ("q4_k", 4352, 40, False, False, False, (16, 8, 1, 1), 1),
]


@pytest.mark.parametrize("fmt,K,outputs,gated,on_quantized,with_norm,layout,rows", GROUPED)
def test_gemv_groups(fmt, K, outputs, gated, on_quantized, with_norm, layout, rows):
    """gemv.wgsl GROUPS 2 and 3 (workgroups that compute several groups of outputs, the last
    ones fewer) leave y (and yq) the same bits as one group a workgroup."""
    m = matrix(fmt, 2 * outputs if gated else outputs, K, 64)
    rng = np.random.default_rng(K + outputs)
    x = rng.standard_normal((rows, K), dtype=np.float32) * 3
    fused = {"gated": gated, "precision": "fast", "q8_input": on_quantized}
    if with_norm:
        fused["norm"] = rng.standard_normal(K, dtype=np.float32)
    q8_output = (None, 0.0) if gated else None
    results = []
    for groups in (1, 2, 3):
        defines = dict(zip(("LANES", "SLOTS", "RPT", "STEP"), layout), GROUPS=groups)
        got = run_linear("gemv", x, m, defines, q8_output=q8_output, **fused)
        results.append(got if q8_output else (got,))
    for groups, got in zip((2, 3), results[1:]):
        for a, b in zip(got, results[0]):
            assert np.array_equal(a, b), f"GROUPS {groups} changed the outputs"


def test_gemv_groups_rule():
    """linear_plan.gemv_groups: two groups a workgroup only where twice GEMV_GROUPED_WORKGROUPS
    workgroups would run (the 8B's gate | up on int8 x), one for its down projection and q | k | v."""
    gate_up = {**linear_defines(4096, 28672, "q4_0", gated=True, precision="fast"), "LANES": 8, "SLOTS": 32}
    assert gemv_groups(gate_up, 28672) == 2
    assert gemv_groups(linear_defines(14336, 4096, "q4_0", precision="fast"), 4096) == 1
    assert gemv_groups(linear_defines(4096, 6144, "q4_0", precision="fast"), 6144) == 1


@pytest.mark.parametrize("fmt,K,group", CASES, ids=CASE_IDS)
def test_embedding(fmt, K, group):
    """Two shards of the table; a shard's dispatch leaves rows whose id lies elsewhere untouched."""
    m = matrix(fmt, VOCAB, K, group)
    ids = np.array([0, 17, 18, 36, 5, 18, 30], np.uint32)
    split = 18
    sentinel = np.float32(-7.5)
    out = np.full((ids.size, K), sentinel, np.float32)
    for start, stop in [(split, VOCAB), (0, split)]:
        res = run_kernel(
            "embedding",
            {"ids": ids, "w": gpu_harness.repacked(m.raw(start, stop), fmt), "y": out},
            {"dim": K, "row_start": start, "row_count": stop - start, "scale": 2.0},
            grid=(-(-K // 256), ids.size, 1),
            step=(ids.size, 0, ids.size),
            defines=weight_defines(K, fmt, group),
            f16=device_f16(fmt),
        )
        out = as_f32(res["y"], (ids.size, K)).copy()
        if start == split:
            assert (out[ids < split] == sentinel).all(), "a shard wrote rows of ids outside it"
    ref = m.ref[ids] * np.float32(2.0)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("fmt", [f for f in FORMATS if FORMATS[f].repack])
def test_repack(fmt):
    """The GPU repack (in place, chunk by chunk) against numpy's, with a partial last chunk
    spanning several workgroups' worth of chunks."""
    info = FORMATS[fmt]
    blocks = 8 * 61 + 5 if info.block_bytes < 100 else 8 * 5 + 3
    rng = np.random.default_rng(blocks)
    raw = rng.integers(0, 256, blocks * info.block_bytes, dtype=np.uint8)
    np.testing.assert_array_equal(gpu_harness.repacked(raw, fmt), repack_reference(raw, fmt))


def test_formats_match_gguf():
    for name, fmt in GGUF_TYPES.items():
        elems, nbytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]
        info = FORMATS[fmt]
        assert info.row_bytes(elems * 3) == nbytes * 3, name
        assert info.is_float == (name in ("F32", "F16", "BF16"))


def test_quant_table():
    assert FORMATS["q6_k"].matrix_bytes(3, 512) == 3 * 2 * 210
    assert FORMATS["q8_0"].row_bytes(96) == 3 * 34
    assert FORMATS["f16_packed"].row_bytes(70) == 140
    # MLX: N x K/8 words, then N x K/G scales and as many biases, 2 bytes each.
    assert FORMATS["mlx4_bf16"].matrix_bytes(3, 256, 64) == 3 * 128 + 2 * 3 * 4 * 2
    assert FORMATS["mlx4_f16"].row_bytes(256, 128) == 128
    for fmt, K, group in [
        ("q4_k", 128, 64),
        ("q8_0", 48, 64),
        ("f16_packed", 7, 64),
        ("mlx4_f16", 96, 64),
        ("mlx4_f16", 256, 16),
        ("q4_0", 0, 64),
    ]:
        with pytest.raises(ValueError, match=fmt):
            weight_format(fmt).check_k(K, group)
    with pytest.raises(ValueError, match="unknown weight format"):
        weight_format("q3_k")


def test_weight_defines():
    assert weight_defines(896, "f16") == {
        "WEIGHTS": "f16",
        "W": "f16",
        "VEC4": True,
        "WBlock": "vec4<W>",
        "XBlock": "vec4<f32>",
    }
    assert weight_defines(70, "f32") == {"WEIGHTS": "f32", "W": "f32", "VEC4": False, "WBlock": "W", "XBlock": "f32"}
    assert weight_defines(69, "bf16") == {"WEIGHTS": "bf16", "VEC4": False, "WBlock": "u32", "XBlock": "f32"}
    assert weight_defines(1024, "q4_k") == {
        "WEIGHTS": "q4_k",
        "VEC4": True,
        "WBlock": "vec4<u32>",
        "XBlock": "vec4<f32>",
    }
    assert weight_defines(1024, "mlx4_bf16", 32) == {
        "WEIGHTS": "mlx4_bf16",
        "VEC4": True,
        "WBlock": "vec4<u32>",
        "XBlock": "vec4<f32>",
        "MLX_GROUP": 32,
    }
    with pytest.raises(ValueError):
        weight_defines(100, "q4_0")
