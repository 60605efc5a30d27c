"""Which linear-layer kernel to run, how to specialise it and how large a grid to dispatch.

Pure Python (it runs in Pyodide too). The kernels are `shaders/gemv.wgsl` (few rows: memory-bound,
each weight load shared by up to GEMV_ROWS rows) and `shaders/matmul.wgsl` (many rows: TILE x TILE
output tiles through shared memory). Both take one bind group; see their header comments.
"""

from __future__ import annotations

from . import quant

# shaders/matmul.wgsl's TILE (rows and features of a workgroup's outputs); shaders/matmul_int8.wgsl's
# rows and features.
MATMUL_TILE = 64
MATMUL_INT8_ROWS = 64
MATMUL_INT8_FEATURES = 128

# The GEMV reads the weights once and then re-reads them from cache for every further row; the
# matmul costs a full 64-row tile of arithmetic however few rows it has.
GEMV_MAX_ROWS = 16


def choose_linear(rows: int) -> str:
    """The kernel for a linear layer over `rows` activation rows: "gemv" or "matmul"."""
    return "gemv" if rows <= GEMV_MAX_ROWS else "matmul"


def weight_defines(K: int, weight_format: str, mlx_group: int = 64) -> dict:
    """Defines for every kernel that reads a weight matrix (KernelCache.get("gemv" | "matmul" |
    "embedding", **defines)); formats as in quant.py.

    WEIGHTS picks the dequantizing snippet (shaders/weights/<format>.wgsl). A block of a row is 4
    consecutive k when VEC4 (coalesced 16-byte loads of f32 rows), else one k: only float formats
    take one-k blocks, for K % 4 != 0. W is the element type of the native float formats; the
    others are read as u32 words (bf16 / f16_packed: a vec4 block's 4 halves as one vec2<u32>).
    """
    fmt = quant.weight_format(weight_format)
    fmt.check_k(K, mlx_group)
    vec4 = K % 4 == 0
    defines = {"WEIGHTS": weight_format, "VEC4": vec4, "XBlock": "vec4<f32>" if vec4 else "f32"}
    if weight_format in ("f32", "f16"):
        defines.update(W=weight_format, WBlock="vec4<W>" if vec4 else "W")
    elif fmt.is_float:
        defines["WBlock"] = "vec2<u32>" if vec4 else "u32"
    else:
        defines["WBlock"] = "vec4<u32>"  # 16-byte words (shaders/weights/bytes.wgsl)
    if fmt.is_mlx:
        defines["MLX_GROUP"] = mlx_group
    return defines


# gemv_layout on a CPU adapter: a matrix of this many rows or more takes four a thread.
CPU_WIDE_ROWS = 32768


def gemv_layout(K: int, N: int, weight_format: str, gated: bool = False, cpu: bool = False, int8: bool = False) -> dict:
    """shaders/gemv.wgsl's thread layout for a K x N matrix: LANES threads split a row's units,
    SLOTS groups of them per workgroup, RPT rows per thread, STEP units per lane in flight;
    X_SUMS: the format's units weigh an offset by x sums (quant.WeightFormat.has_offset).
    Measured on an H100 (benchmarks/gemv_bandwidth.py, 4096 x 14336 and 14336 x 4096, 8 layouts,
    every format in one run): on long rows 16 lanes x 16 rows per workgroup, one row per thread,
    beat the warp-wide 32 x 8 by 2-17 % for every block format (a lane walks twice as many units
    between the x chunk's barriers); K-quants best with one unit in flight (64 weights each, with
    scale decoding), Q4_0 with four, the other 32-weight blocks with two. 16-bit float rows need
    K ~ 8192 for it (at 4096, 32 x 8 led by 4 %); f32 keeps 32 x 8 (14 % ahead at 14336). Short
    rows keep 32 x 8: SmolLM2's (K <= 1536) decoded 8 % slower with half as many workgroups, each
    lane holding one or two units of a row.
    GATED (gate | up with the activation) gives a thread its gate row and its up row (RPT 2); block
    formats then take one unit per row in flight: H100, 4096 x 28672 with the norm, 16 x 16, Q4_0
    STEP 1/2/4 49.9/55.8/58.2 us (49.6 for the plain GEMV, no norm), Q4_K 57.3/73.3, Q6_K 77.2/81.4; F16
    keeps STEP 4 (97.9 us; plain 102.1). On int8 activations (int8: precision "fast", Q8_ACT) Q4_0
    takes two: H200, 4096 x 28672 with the norm, STEP 1 / 2: 41.5 / 38.8 us, on quantize_rows' x
    (Q8_INPUT) 34.0 / 31.4; Q4_K 42.3 / 43.9 and 33.0 / 35.7, Q6_K 52.7 / 60.2 and 43.2 / 47.4, exact
    Q4_0 48.8 / 54.0.
    cpu (an adapter on the CPU: SwiftShader, lavapipe) takes a thread per row, 128 rows a workgroup,
    one unit in flight: no cross-lane sums, and each thread walks its row alone, which a CPU's
    SIMD runs as plain loops. 2026-11-30, GPU time of one GEMV (32.8.1.2 -> 1.128.1.1 or the best
    single-lane layout): SwiftShader Q4_1 576 x 1536 103.7 -> 8.7 ms (fast 172.9 -> 11.4), 1536 x
    576 41.3 -> 6.8 (4.3 with 64 rows a workgroup, which int8 activations' x staging cannot take),
    the Q8_0 head 576 x 49152 3,007 -> 267; lavapipe Q4_1 576 x 1536 8.0 -> 1.7, the head 206 -> 52
    (fast 410 -> 54); more lanes were slower at every step (32 > 16 > 8 > 4 > 2 > 1). A matrix of
    at least CPU_WIDE_ROWS rows gives a thread four (SwiftShader, the head: 362 -> 258 ms, fast
    482 -> 332; fewer, wider workgroups of shorter matrices were no faster: 576 x 960 9.1 -> 8.6,
    1536 x 576 8.8 -> 10.1)."""
    fmt = quant.weight_format(weight_format)
    sums = {"X_SUMS": fmt.has_offset}
    if cpu:
        rpt = 2 if gated else (4 if N >= CPU_WIDE_ROWS else 1)
        return {"LANES": 1, "SLOTS": 128, "RPT": rpt, "STEP": 1, "GROUPS": 1, **sums}
    if K < (8192 if fmt.is_float else 2048) or weight_format == "f32":
        lanes, slots, step = 32, 8, 4 if fmt.is_float else 2
    else:
        lanes, slots = 16, 16
        if fmt.is_float or weight_format == "q4_0":
            step = 4
        else:
            step = 1 if fmt.block_elems == 256 else 2
    if gated and not fmt.is_float:
        step = 2 if int8 and weight_format == "q4_0" and lanes == 16 else 1  # (long rows: where measured)
    return {"LANES": lanes, "SLOTS": slots, "RPT": 2 if gated else 1, "STEP": step, "GROUPS": 1, **sums}


# precision "exact": today's f32 arithmetic everywhere; "fast" (the default): the GEMV multiplies
# int8-quantized activations (gemv.wgsl Q8_ACT) for the formats in INT8_FORMATS.
PRECISIONS = ("fast", "exact")

# The block formats whose GEMV runs on int8 activations under "fast": each has int8 units
# (shaders/weights/<format>.wgsl), and stays here only while it measures faster that way
# (benchmarks/gemv_bandwidth.py --precision fast); a format taken off runs exact under both.
INT8_FORMATS = frozenset({"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k", "mlx4_f16", "mlx4_bf16"})


# The block formats with an int8 prefill matmul (quantize_rows.wgsl once per input, then
# matmul_int8.wgsl: int8_half in their snippet), on activations in INT8_MATMUL_LEVELS int8
# levels (X_LEVELS): one, as llama.cpp's q8_1 (round(x * 127 / max) per 32), so one dot product
# per 4 weights; the GEMV keeps two (gemv.wgsl Q8_ACT says why). H200, an 8B layer's Q4_0
# matmuls at 512 rows (benchmarks/matmul_rate.py): 4.5 ms with one level, 8.8 with two, 10.3 in
# f32 (decode.py pp512: 2,765, 1,612 and 1,413 tok/s). It runs under "fast" on rows of at least
# INT8_MATMUL_MIN_K, where one level measured close to exact: Qwen2.5-Coder-0.5B requantized to
# Q4_0 (tools/requantize_gguf.py; its down projection, K 4864, on one level), a 1,536-token prompt
# then 513 positions scored (benchmarks/fidelity.py --prompt 1536, H200): mean KL divergence
# 3.8e-5, p99 3.3e-4, top-1 99.8 % (two levels: 1.2e-7, 100 %). Below it the f32 matmul runs:
# SmolLM2-135M with every matmul on one level (K 576 and 1536, outliers that leave a 32's other x
# a few steps of 127; lavapipe, 89 positions after a 512-token prompt) read 7.0e-4 and 97.8 %,
# past issue 28's top-1 bound (two levels: 6.9e-7, 100 %), and two levels were slower than f32
# there (16,520 tok/s against 17,349: few 128-feature tiles).
# Q4_K (a sub-block's scale and min a 32) and Q6_K (a scale per 16: each half weighed apart,
# matmul_int8.wgsl INT8_HALF_SCALES), session 47: the 8B's layer at 512 rows 10.5 -> 4.6 ms and
# 10.9 -> 5.7 (Q4_0 4.4); the catalog's Q4_K_M models, whose K >= 2048 rows are their down
# projections in both formats (lavapipe, 129 positions after a 512-token prompt, fidelity.py
# --prompt 512): Gemma-3-270M mean KL divergence 1.0e-4, p99 7.4e-4, top-1 100 %;
# Qwen2.5-Coder-0.5B 2.5e-5, 1.2e-4, 99.2 %.
INT8_MATMUL_FORMATS = frozenset({"q4_0", "q4_1", "q8_0", "q4_k", "q6_k"})
INT8_MATMUL_MIN_K = 2048
INT8_MATMUL_LEVELS = 1


# A decode GEMV of at least GEMV_Q8_INPUT_WEIGHTS weights under "fast" reads its x quantized once
# for all its workgroups by a quantize_rows dispatch (SPREAD) before it (gemv.wgsl Q8_INPUT),
# instead of every workgroup staging f32 x and quantizing it: half the bytes staged, chunks of
# 4,096 x, no quantizing barriers. H200, Q4_0, µs per GEMV (benchmarks/gemv_bandwidth.py; alone
# -> on quantize_rows' x -> with its dispatch before): 4096 x 28672 gated with the norm 41.5 ->
# 30.0 -> 37.3, 14336 x 4096 27.8 -> 20.4 -> 24.7, 4096 x 14336 25.6 -> 19.6 -> 24.3, but 4096 x
# 6144 13.8 -> 12.0 -> ~16.5: the dispatch costs ~4.5 µs (Q4_K and Q6_K alike). With 8 threads a
# 32 in quantize_rows (session 42, same machine: 4096 x 28672 34.0 -> 38.2, 14336 x 4096 20.3 ->
# 23.6, 4096 x 14336 19.6 -> 23.5, 4096 x 6144 12.0 -> 15.5, still more than 13.8). Not MLX (its
# nibble order quantizes evens first, Q8_EVEN_ODD), nor the O projection that merges attention's
# splits as it stages x (COMBINE). Where the GEMV that writes x can quantize it itself (gemv.wgsl
# Q8_OUTPUT: q8_output_layout, GraphBuilder.gemv_quantizes) that dispatch is not needed: the 8B's O
# projection and gate | up do, for gate | up and down (8 -> 6 dispatches a decode layer). H200,
# decode.py at depth 0, three runs each in turns: 326.5-329.6 -> 329.6-332.5 tok/s (+1 %). Not
# below this size even where x would come quantized without a dispatch: the 8B's down projection
# quantizing for the next q|k|v (4096 x 6144: 13.8 us quantizing x in its workgroups, 12.0 on
# quantized x), whose 4,096 outputs in whole 32s a workgroup leave it 128 workgroups instead of
# 256, read 310.8-312.3 tok/s against 331.5-334.4; SmolLM2 with every GEMV but the O on quantized
# x, 743-763 against 821-865 (few workgroups: its 576 outputs in 18).
GEMV_Q8_INPUT_WEIGHTS = 1 << 25

# quantize_rows.wgsl SPREAD: the 32s of x one workgroup of 64 threads quantizes (8 threads each).
QUANTIZE_SPREAD_BLOCKS = 8


def quantize_spread_grid(K: int, rows: int) -> tuple[int, int, int]:
    """quantize_rows.wgsl's workgroups under SPREAD (a decode token's GEMV input)."""
    return (-(-K // (32 * QUANTIZE_SPREAD_BLOCKS)), rows, 1)


def gemv_q8_input(defines: dict, K: int, N: int) -> bool:
    """Whether a decode GEMV over a K x N matrix with these defines (linear_defines) reads x
    quantized once for all its workgroups (Q8_INPUT), by a quantize_rows (SPREAD) dispatch or by
    the GEMV before it."""
    return defines["Q8_ACT"] and not defines["Q8_EVEN_ODD"] and K * N >= GEMV_Q8_INPUT_WEIGHTS


def q8_row_bytes(K: int) -> int:
    """Bytes of one row of K x quantized for gemv.wgsl's Q8_INPUT (shaders/quantize_32.wgsl's
    q8_row_quads: the q1 and q2 words, then each 32's e, e * sum(Q) and sum of x^2, in quads)."""
    return 16 * (K // 8 + -(-3 * (K // 32) // 4))


def q8_output_layout(defines: dict) -> dict | None:
    """The GEMV layout changes under which one workgroup computes whole 32s of outputs, so that
    it can quantize them for the GEMV after it (gemv.wgsl Q8_OUTPUT, in place of a quantize_rows
    dispatch): {} where it already does, None where no layout of the same threads would. Plain
    rows take more rows a thread (RPT), gated ones (a thread's gate and up row) 32 slots of
    fewer lanes. H200, the 8B's decode (GEMV_Q8_INPUT_WEIGHTS): its O projection as 8 lanes x 32
    slots instead of two rows a thread measured the same (327.2-328.2 tok/s against 327.6-328.3)."""
    group_outputs = gemv_features(defines) // defines.get("GROUPS", 1)
    if group_outputs > 128 and not defines["GATED"]:  # (the CPU's wide rows) kept outputs fit 16 KiB
        return {"RPT": 1} if defines["SLOTS"] % 32 == 0 else None
    if group_outputs % 32 == 0:
        return {}
    threads = defines["LANES"] * defines["SLOTS"]
    if defines["GATED"]:
        return {"LANES": threads // 32, "SLOTS": 32} if threads % 32 == 0 and threads >= 32 else None
    rpt = 32 // defines["SLOTS"] if 32 % defines["SLOTS"] == 0 else 0
    return {"RPT": rpt} if 1 <= rpt <= 4 else None


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    return precision


def arithmetic(precision: str, int8_dot: bool, int8_emulated: bool) -> str:
    """The precision a device runs when `precision` is asked: "fast" falls back to "exact" where
    WGSL's packed integer dot products are missing (int8_dot false) or emulated (a browser's CPU
    fallback adapter, SwiftShader: 2 cores, 2026-11-30, GPU time of one GEMV, exact / fast: SmolLM2's
    Q8_0 head 258 / 332 ms, 576 x 960 9.1 / 11.1, 1536 x 576 8.8 / 9.6, gated 576 x 3072 24.7 / 24.4).
    lavapipe, also on the CPU, runs int8 level with exact and keeps "fast" (where CI runs its paths)."""
    check_precision(precision)
    return precision if int8_dot and not int8_emulated else "exact"


def int8_activations(weight_format: str, precision: str) -> bool:
    """Whether a GEMV over this format multiplies int8-quantized activations (Q8_ACT)."""
    return check_precision(precision) == "fast" and weight_format in INT8_FORMATS


def int8_matmul(weight_format: str, precision: str, K: int) -> bool:
    """Whether a prefill matmul over rows of K of this format runs shaders/matmul_int8.wgsl (Q8_MATMUL)."""
    return check_precision(precision) == "fast" and weight_format in INT8_MATMUL_FORMATS and K >= INT8_MATMUL_MIN_K


def matmul_kernel(defines: dict) -> str:
    """The shader of a linear op's many-row form under these defines."""
    return "matmul_int8" if defines.get("Q8_MATMUL") else "matmul"


def matmul_tile(defines: dict) -> tuple[int, int]:
    """(rows, features) of the outputs one workgroup of the op's matmul computes (GATED: half as
    many outputs as features)."""
    return (MATMUL_INT8_ROWS, MATMUL_INT8_FEATURES) if defines.get("Q8_MATMUL") else (MATMUL_TILE, MATMUL_TILE)


# gemv.wgsl GROUPS: a GEMV of at least twice this many workgroups' outputs gives each workgroup
# two groups of them (x staged once for both: linear_plan.gemv_groups).
GEMV_GROUPED_WORKGROUPS = 200


def gemv_groups(defines: dict, N: int) -> int:
    """gemv.wgsl's GROUPS for a GEMV over N weight rows under these defines (GROUPS 1): 2 where
    at least 2 x GEMV_GROUPED_WORKGROUPS workgroups would run, else 1. A workgroup stages x (its
    RMSNorm, its quantizing) once for both groups, and the workgroups fit the GPU at once. H200,
    the 8B shape's decode token (one pass, depth 1): its gate | up (14,336 outputs, 32 a group,
    on int8 x) in 224 workgroups instead of 448 took the token from 2,997 to 2,761 us; three groups
    (150 workgroups) 3,029, four 3,190; two groups of its q | k | v (384 -> 192 workgroups) and O
    projection (128 -> 64) 3,418, of its down projection (256 -> 128) 3,306; its LM head (8,016
    groups) 2, 4 or 8 a workgroup, the same. A CPU adapter's layout keeps one."""
    outputs = N // 2 if defines["GATED"] else N
    groups = -(-outputs // gemv_features({**defines, "GROUPS": 1}))
    return 2 if groups >= 2 * GEMV_GROUPED_WORKGROUPS else 1


def gemv_features(defines: dict) -> int:
    """Output features one GEMV workgroup computes under these defines (GATED: a thread's two
    rows make one output; GROUPS such groups of them)."""
    return defines["SLOTS"] * (1 if defines.get("GATED") else defines["RPT"]) * defines.get("GROUPS", 1)


def linear_defines(
    K: int,
    N: int,
    weight_format: str,
    mlx_group: int = 64,
    *,
    norm: bool = False,
    gated: bool = False,
    gelu: bool = False,
    precision: str = "exact",
    cpu: bool = False,
) -> dict:
    """Defines of a linear op's kernels (gemv and matmul share one bind group and these). norm:
    RMS-normalise x first (the norm binding's weight); gated: the rows are gate | up and the
    outputs act(gate) * up, act GELU-tanh if gelu else SiLU. precision: "fast" gives the GEMV
    int8 activations where int8_activations says so, and the matmul int8 dot products where
    int8_matmul does (its x quantized by a quantize_rows op first: ModelBuilder.quantize_rows).
    cpu: the adapter runs on the CPU (gemv_layout's CPU layout)."""
    return {
        "Q8_ACT": int8_activations(weight_format, precision),
        "Q8_MATMUL": int8_matmul(weight_format, precision, K),
        "Q8_EVEN_ODD": quant.weight_format(weight_format).is_mlx,
        "Q8_INPUT": False,
        "Q8_OUTPUT": False,
        "Q8_OUT_NORM": False,
        **weight_defines(K, weight_format, mlx_group),
        **gemv_layout(K, N, weight_format, gated, cpu, int8_activations(weight_format, precision)),
        "NORM": norm,
        "GATED": gated,
        "GELU": gelu,
        "COMBINE": False,
        "MATMUL_TILE": MATMUL_TILE,
        "MATMUL_INT8_ROWS": MATMUL_INT8_ROWS,
        "MATMUL_INT8_FEATURES": MATMUL_INT8_FEATURES,
        "X_LEVELS": INT8_MATMUL_LEVELS,
        "LOGIT_ROWS": LOGIT_ROWS,
        "MERGE_HEADS": MERGE_HEADS,
    }


LOGIT_ROWS_MAX = 8  # the most rows one forward's LM head scores (1 + drafted tokens to verify)
LOGIT_ROWS = 0xFFFFFFFF  # linear_params rows: the forward's scored rows (Step.logit_rows; gemv.wgsl, matmul.wgsl)
MERGE_HEADS = 64  # the most attention heads gemv.wgsl's COMBINE merges (its workgroup array)


def linear_params(
    K: int,
    N: int,
    *,
    out_stride: int | None = None,
    out_offset: int = 0,
    rows: int = 0,
    bias: bool = False,
    residual: bool = False,
    norm_eps: float = 0.0,
    norm_offset: float = 0.0,
    combine: dict | None = None,
) -> dict:
    """The Params of gemv.wgsl / matmul.wgsl: N weight rows of K (GATED: N / 2 outputs), written
    at out_offset of rows out_stride (default: the outputs) wide; rows 0 = the forward's rows,
    LOGIT_ROWS = its scored rows (the LM head).
    combine: where x's attention partials lie for gemv.wgsl's COMBINE (attention_merge_params)."""
    return {
        "K": K,
        "N": N,
        "out_stride": N if out_stride is None else out_stride,
        "out_offset": out_offset,
        "rows": rows,
        "has_bias": int(bias),
        "has_residual": int(residual),
        "norm_eps": norm_eps,
        "norm_offset": norm_offset,
        **(combine or attention_merge_params()),
    }


def attention_merge_params(partials_at: int = 0, head_dim: int = 0, splits: int = 0, split_len: int = 0) -> dict:
    """gemv.wgsl's COMBINE Params: attention.wgsl's partials at element partials_at of x's
    binding, `splits` of split_len keys per head of head_dim (zeros: no partials)."""
    return {"partials_at": partials_at, "head_dim": head_dim, "splits": splits, "split_len": split_len}


def linear_grid(
    kernel: str,
    rows: int,
    N: int,
    max_per_dim: int = 65535,
    gemv_per_group: int | None = None,
    gated: bool = False,
    matmul_per_group: tuple[int, int] = (MATMUL_TILE, MATMUL_TILE),
) -> tuple[int, int, int]:
    """Workgroups to dispatch for N weight rows (a GEMV workgroup computes `gemv_per_group`
    features: gemv_features of its defines, required for the GEMV; a matmul workgroup
    `matmul_per_group` (rows, features): matmul_tile). gated: N / 2 outputs, a matmul tile's
    weight rows being half gates and half their ups.
    The kernels number workgroups x-fastest, so a count above `max_per_dim` is folded into y; the
    few surplus workgroups of the last line exit at once."""
    if kernel == "gemv":
        if gemv_per_group is None:
            raise ValueError("gemv: gemv_per_group (linear_plan.gemv_features of its defines) is required")
        count = -(-(N // 2 if gated else N) // gemv_per_group)
    elif kernel == "matmul":
        tile_rows, tile = matmul_per_group
        tile = tile // 2 if gated else tile
        count = -(-rows // tile_rows) * -(-(N // 2 if gated else N) // tile)
    else:
        raise ValueError(f"unknown linear kernel {kernel!r}")
    lines = -(-count // max_per_dim)
    if lines > max_per_dim:
        raise ValueError(f"{kernel}: {count} workgroups exceed a {max_per_dim} x {max_per_dim} grid")
    return (-(-count // lines), lines, 1)


def embedding_grid(dim: int, rows: int) -> tuple[int, int, int]:
    """Workgroups for shaders/embedding.wgsl: 256 threads per group, one column each, one grid
    line per row (rows <= 65535)."""
    return (-(-dim // 256), rows, 1)
