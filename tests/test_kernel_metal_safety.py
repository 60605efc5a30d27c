"""Metal-safety rules for every kernel (WebKit compiles WGSL to Metal), checked on the WGSL and on lavapipe.

WebKit runs WGSL through Metal with fast math, where exp() of a huge-magnitude argument and tanh() of a
large one can come back NaN, select() over a NaN-carrying lane keeps the NaN alive, and a workgroup
may have no more than 16 KiB of shared memory. So: no select() in attention, every exp() argument
clamped (through each kernel's safe_exp), every tanh() argument clamped, a barrier inside every tree
reduction (no read of a partial racing its overwrite), and <= 16 KiB of var<workgroup> per kernel.
The numeric tests check that masked and extreme attention scores give no NaN/Inf and still match
numpy, that the clamps change nothing at normal values, and the GELU gated-MLP kernel.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import as_f32, attend, device, run_combine, run_kernel  # noqa: F401 (device: a fixture)

from py_engine.decode import row_draw
from py_engine.runtime import linear_plan
from py_engine.runtime.kernels import SHADER_DIR, WEIGHTS_DIR

WORKGROUP_LIMIT = 16384  # bytes: WebGPU's default maxComputeWorkgroupStorageSize, and what iOS grants
SHADERS = sorted(SHADER_DIR.glob("*.wgsl"))


def code(path: Path) -> str:
    """The WGSL with comments stripped (comments may mention exp(, select( freely)."""
    return re.sub(r"//[^\n]*", "", path.read_text())


def function_body(src: str, name: str) -> str:
    m = re.search(rf"\bfn\s+{name}\s*\([^)]*\)[^{{]*\{{", src)
    if not m:
        return ""
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[m.start() : i]


# ---- static rules ----------------------------------------------------------------------------


def test_no_select_in_attention():
    files = sorted(SHADER_DIR.glob("attention*.wgsl"))
    assert len(files) >= 2
    for f in files:
        assert "select(" not in code(f), f"{f.name}: select() in attention (NaN-prone on Metal)"


@pytest.mark.parametrize("path", SHADERS, ids=lambda p: p.name)
def test_exp_arguments_are_clamped(path):
    src = code(path)
    helper = function_body(src, "safe_exp")
    rest = src.replace(helper, "") if helper else src
    assert not re.search(r"\bexp\s*\(", rest), f"{path.name}: exp() outside safe_exp"
    if helper:
        # The one raw exp() sits behind an explicit lower cut and an upper clamp.
        assert re.search(r"if\s*\(\s*x\s*<\s*-80\.0\s*\)\s*\{\s*return 0\.0;", helper)
        assert re.search(r"\bexp\s*\(\s*min\s*\(\s*x\s*,\s*80\.0\s*\)\s*\)", helper)


@pytest.mark.parametrize("path", SHADERS, ids=lambda p: p.name)
def test_tanh_arguments_are_clamped(path):
    for arg in re.findall(r"\btanh\s*\(([^;]*)", code(path)):
        assert arg.lstrip().startswith("clamp(") or re.match(r"\s*inner\s*\)", arg), (
            f"{path.name}: tanh() of an unclamped argument"
        )
    if path.name == "activations.wgsl":
        assert re.search(r"let inner = clamp\(", code(path))


@pytest.mark.parametrize("path", SHADERS, ids=lambda p: p.name)
def test_tree_reductions_have_a_barrier_per_step(path):
    """Every `for (var stride ...)` / `for (var offset ...)` loop over shared memory must hold a
    workgroupBarrier, so no thread reads a partial that another overwrites in the same step."""
    src = code(path)
    for m in re.finditer(r"for\s*\(\s*var\s+(stride|offset)\b[^)]*\)\s*\{", src):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        body = src[m.end() : i]
        if re.search(r"\bvar<workgroup>", src):
            assert "workgroupBarrier()" in body, f"{path.name}: reduction step without a barrier"


# ---- workgroup storage ----------------------------------------------------------------------

SCALARS = {"f32": (4, 4), "u32": (4, 4), "i32": (4, 4), "f16": (2, 2), "bool": (4, 4)}
# Defines the engine specialises kernels with (row_draw.py, linear_plan.py): the only ones that
# reach a workgroup array's size are the integer ones; type aliases are sized at their widest (f32).
LARGEST_VOCAB = 262144  # Gemma 3's vocabulary: the most topk_merge lists the engine asks for
ENGINE_DEFINES = {
    "CANDIDATES": row_draw.CANDIDATES,
    "LISTS": -(-LARGEST_VOCAB // row_draw.TILE),
    "TOPK_TILE": row_draw.TILE,
    "SAMPLING_THREADS": row_draw.THREADS,
    "MATMUL_TILE": linear_plan.MATMUL_TILE,
    "MATMUL_INT8_ROWS": linear_plan.MATMUL_INT8_ROWS,
    "MATMUL_INT8_FEATURES": linear_plan.MATMUL_INT8_FEATURES,
    "MERGE_HEADS": linear_plan.MERGE_HEADS,
    "MLX_GROUP": 64,
    "FINAL": True,
    "VEC4": True,
    "LANES": 2,
    "SLOTS": 128,  # gemv: the most threads linear_plan.gemv_layout may choose, and outputs (the CPU's)
    "RPT": 1,
    "GATED": False,
    "Q8_OUTPUT": True,  # gemv: its outputs kept for quantizing, and quantize_32's arrays
    "Q8_ACT": True,  # gemv: with its int8 scales (the larger)
    "Q8_INPUT": True,  # gemv: 4,096 x a chunk and their scales (the larger)
    "SPREAD": False,  # quantize_rows: a row a workgroup (the larger)
    "Q32_THREADS": 64,  # quantize_32.wgsl alone (its includer defines it)
    "WARPS": 8,  # attention_subgroups: the most subgroups attention_grid.subgroup_warps gives
    "HEAD_DIM": 64,
    "WIDE_HEADS": False,  # attention: heads of at most 256 (True's, 512: test_workgroup_storage_sizes_known)
    "F16_MATH": False,  # attention_tiled: its f32 tile (F16_MATH's, of f16: test_workgroup_storage_sizes_known)
    "select": lambda f, t, cond: t if cond else f,  # WGSL's select in const expressions
    "u32": int,  # WGSL's u32(bool) in const expressions
    "max": max,
}
TYPE_ALIASES = {
    "K": "f32",
    "V": "f32",
    "W": "f32",
    "OUT": "f32",
    "XBlock": "vec4<f32>",
    "WBlock": "vec4<f32>",
    "ATT_MATH": "f32",
}


def split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def const_values(src: str, defines: dict | None = None) -> dict:
    """The integer constants of src (with ENGINE_DEFINES, or `defines` over them), over two passes:
    a constant may use one declared further on (a weight snippet's X_PAD, appended after the kernel)."""
    values = {**ENGINE_DEFINES, **(defines or {})}
    for _ in range(2):
        for name, expr in re.findall(r"\bconst\s+(\w+)\s*(?::\s*\w+)?\s*=\s*([^;]+);", src):
            py = re.sub(r"\b(\d+)u\b", r"\1", expr).replace("/", "//")
            try:
                values[name] = eval(py, {"__builtins__": {}}, dict(values))  # noqa: S307 (our own shaders)
            except Exception:
                pass  # float constants and the like: never an array size
    return values


def type_layout(t: str, src: str, consts: dict) -> tuple[int, int]:
    """(size, align) in bytes of a WGSL type, by the WGSL host-shareable layout rules."""
    t = t.strip()
    t = TYPE_ALIASES.get(t, t)
    if t in SCALARS:
        return SCALARS[t]
    if m := re.fullmatch(r"atomic<\s*(\w+)\s*>", t):
        return SCALARS[m.group(1)]
    if m := re.fullmatch(r"vec([234])<\s*(\w+)\s*>", t):
        n, (s, _) = int(m.group(1)), SCALARS[TYPE_ALIASES.get(m.group(2), m.group(2))]
        align = s * (4 if n == 3 else n)
        return s * n, align
    if t.startswith("array<") and t.endswith(">"):
        elem, count = split_top(t[len("array<") : -1])
        size, align = type_layout(elem, src, consts)
        stride = -(-size // align) * align
        n = eval(re.sub(r"\b(\d+)u\b", r"\1", count).replace("/", "//"), {"__builtins__": {}}, dict(consts))
        return stride * n, align
    if m := re.search(rf"\bstruct\s+{t}\s*\{{([^}}]*)\}}", src):
        offset, struct_align = 0, 1
        for field in split_top(m.group(1)):
            if ":" not in field:
                continue
            size, align = type_layout(field.split(":", 1)[1], src, consts)
            offset = -(-offset // align) * align + size
            struct_align = max(struct_align, align)
        return -(-offset // struct_align) * struct_align, struct_align
    raise AssertionError(f"unknown type {t!r}: teach test_kernel_metal_safety.py its size")


def workgroup_bytes(path: Path, defines: dict | None = None, aliases: dict | None = None) -> int:
    """The kernel's workgroup storage with ENGINE_DEFINES and TYPE_ALIASES (or these over them)."""
    src = code(path)
    if path.stem in ("gemv", "matmul", "matmul_int8", "embedding"):  # their weight snippets are appended (conservative)
        src += "".join(code(f) for f in sorted(WEIGHTS_DIR.glob("*.wgsl")))
    if "load_heads(" in src:  # kernels.py appends attention_heads.wgsl (its Heads struct)
        src += code(SHADER_DIR / "attention_heads.wgsl")
    if "quantize_32(" in src and path.stem != "quantize_32":  # and quantize_32.wgsl (its arrays)
        src += code(SHADER_DIR / "quantize_32.wgsl")
    consts = const_values(src, defines or {})
    total = 0
    for _, t in re.findall(r"var<workgroup>\s*(\w+)\s*:\s*([^;]+);", src):
        for alias, value in (aliases or {}).items():
            t = re.sub(rf"\b{alias}\b", value, t)
        size, align = type_layout(t, src, consts)
        total = -(-total // align) * align + size
    return total


def test_workgroup_layout_rules():
    src = (
        "struct C { value: f32, id: u32 }\nconst T = 256u;\nvar<workgroup> a: array<C, T>;\n"
        "var<workgroup> b: array<array<vec4<f32>, 4>, T / 2u>;\nvar<workgroup> c: atomic<u32>;\n"
    )
    consts = const_values(src)
    assert type_layout("array<C, T>", src, consts) == (2048, 4)
    assert type_layout("array<array<vec4<f32>, 4>, T / 2u>", src, consts) == (8192, 16)
    assert type_layout("vec3<f32>", src, consts) == (12, 16)


@pytest.mark.parametrize("path", SHADERS, ids=lambda p: p.name)
def test_workgroup_storage_at_most_16_kib(path):
    used = workgroup_bytes(path)
    assert used <= WORKGROUP_LIMIT, f"{path.name}: {used} bytes of workgroup storage > 16 KiB"


def test_workgroup_storage_sizes_known():
    """Pin a few sizes so the parser is known to see the arrays at all."""
    sizes = {p.stem: workgroup_bytes(p) for p in SHADERS}
    assert sizes["rmsnorm"] == 256 * 4 + 3 * 256 * 4  # partial sums; Q8_OUTPUT: quantize_32's of 256 threads
    assert (
        sizes["attention"] == (256 + 2 * 256 + 2 * 64) * 16 + (256 + 256) * 4
    )  # the group's q, score parts, weights; ROPE_KV: new k, v
    wide = workgroup_bytes(SHADER_DIR / "attention.wgsl", {"WIDE_HEADS": True})
    assert wide == (512 + 128 + 2 * 64) * 16 + (512 + 512) * 4  # heads of 512: a quarter of the score parts
    assert (
        sizes["gemv"] == 256 * 16 + 4096 // 32 * 9 // 2 * 16 + 4 + 2 * 128 * 4 + 4 + 64 * 8 + 128 * 4 + 3 * 32 * 4
    )  # partial sums, the padded x chunk, (x sums), Q8_INPUT's scales and e * sums, (Q8_ACT's sums), heads' merge,
    # Q8_OUTPUT's 128 outputs and quantize_32's maxima, squares and Q sums of 32 threads
    assert (
        sizes["attention_subgroups"] == 512 * 16 + 256 * 16 + 2 * 256 * 4 + 2 * 8 * 32
    )  # q then the merge, norm sums / exchanges (8 subgroups), new k, v, the subgroups' maxima and sums
    assert sizes["attention_tiled"] == 1024 * 16  # the K and V tiles (no subgroups: and the lanes' dots)
    f16_tiles = workgroup_bytes(SHADER_DIR / "attention_tiled.wgsl", {"F16_MATH": True}, {"ATT_MATH": "f16"})
    assert f16_tiles == 2048 * 8  # F16_MATH: twice the vec4s, of f16
    assert sizes["encoder_attention_tiled"] == 1024 * 16  # its K and V tiles, as attention_tiled's
    assert sizes["repack"] == 2048 * 4
    assert sizes["matmul"] == 2 * 64 * 5 * 16
    assert (
        sizes["matmul_int8"] == 2 * 128 * 16 + 2 * 64 * 4 + 128 * 3 * 16 + 3 * 128 * 4
    )  # x q1, q2, e, sums; w q, scales (INT8_HALF_SCALES: the second halves' too), offsets
    assert sizes["quantize_rows"] == 256 * 4 + 3 * 4  # a row's squares (SPREAD: 64 threads' maxima, squares, Q sums)
    assert sizes["quantize_32"] == 3 * 64 * 4  # (alone: with quantize_rows' SPREAD threads, Q32_THREADS below)
    assert sizes["topk_chunks"] == 1024 * 4 * 2 + 256 * 4
    assert sizes["sample_full"] == 256 * 4 + 128 * 4 * 16 + 4
    assert sizes["gated_mul"] == 0


# ---- attention with masking and extreme scores --------------------------------------------------


def attention_gpu(qkv, k_cache, v_cache, *, nh, nkv, hd, rows, pos, window, scale, softcap, split_len, ring=False):
    """(partials, y) of the many-row attention (no RoPE: its inputs are read only by ROPE_KV);
    ring: the caches are a sliding layer's ring (attention.wgsl RING)."""
    params = {"n_heads": nh, "n_kv_heads": nkv, "head_dim": hd, "capacity": k_cache.shape[1]}
    params |= {"qkv_stride": qkv.shape[1], "rotary_dim": 0, "has_qk_norm": 0, "interleaved": 0, "eps": 0.0}
    out = attend(
        qkv,
        k_cache,
        v_cache,
        params,
        rows,
        pos,
        window,
        {"K_CACHE": "f32", "V_CACHE": "f32"},
        scale=scale,
        softcap=softcap,
        split_len=split_len,
        ring=ring,
    )
    return out["partials"], out["y"]


def attention_ref(qkv, k_cache, v_cache, *, nh, nkv, hd, rows, pos, window, scale, softcap):
    want = np.zeros((rows, nh, hd))
    k, v = k_cache.astype(np.float64), v_cache.astype(np.float64)
    for r in range(rows):
        qp = pos + r
        lo = max(0, qp + 1 - window) if window else 0
        for h in range(nh):
            kvh = h // (nh // nkv)
            q = qkv[r, h * hd : (h + 1) * hd].astype(np.float64)
            scores = k[kvh, lo : qp + 1] @ (q * np.float32(scale))
            if softcap > 0:
                scores = np.tanh(scores / softcap) * softcap
            w = np.exp(scores - scores.max())
            want[r, h] = (w / w.sum()) @ v[kvh, lo : qp + 1]
    return want


ATTN_CASES = [
    # name, nh, nkv, hd, rows, pos, window, split_len, magnitude, softcap, ring (0: a row per position)
    ("window_masks_whole_splits", 4, 2, 16, 3, 150, 5, 8, 1.0, 0.0, 0),
    ("causal_tail_splits_empty", 2, 1, 32, 4, 0, 0, 4, 1.0, 0.0, 0),
    ("huge_negative_scores", 2, 2, 16, 2, 40, 0, 16, 1e15, 0.0, 0),
    ("huge_scores_windowed", 4, 1, 16, 3, 90, 7, 8, 1e15, 0.0, 0),
    ("huge_scores_softcap", 2, 1, 16, 3, 60, 0, 16, 1e15, 50.0, 0),
    ("softcap_normal", 4, 2, 32, 5, 20, 6, 8, 3.0, 30.0, 0),
    ("spread_beyond_exp_clamp", 2, 2, 64, 2, 70, 0, 32, 6.0, 0.0, 0),  # score gaps well past 80
    ("ring_window_masks_whole_splits", 4, 2, 16, 3, 150, 5, 4, 1.0, 0.0, 12),  # rows 150 % 12 on
    ("ring_huge_scores", 4, 1, 16, 3, 90, 7, 8, 1e15, 0.0, 16),
]


def extreme_inputs(name, nh, nkv, hd, rows, pos, mag, ring):
    """(qkv, k_cache, v_cache, capacity) of an ATTN_CASES case: f32 caches of `capacity` rows."""
    rng = np.random.default_rng(len(name) * 31 + pos)
    cap = ring or pos + rows + 9  # no ring: spare capacity past the last key, whole trailing splits masked
    qkv = rng.standard_normal((rows, (nh + 2 * nkv) * hd)).astype(np.float32)
    k_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    v_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    if mag > 1e3:
        # q > 0 and k < 0 everywhere: every score is about -1e30 (mag^2 * head_dim), the size of a
        # "masked" score, and neighbouring scores differ by ~1e29: the softmax is one-hot.
        qkv = (np.abs(qkv) * mag).astype(np.float32)
        k_cache = (-np.abs(k_cache) * mag).astype(np.float32)
    else:
        qkv *= mag
    return qkv, k_cache, v_cache, cap


@pytest.mark.parametrize(
    "name,nh,nkv,hd,rows,pos,window,split_len,mag,softcap,ring", ATTN_CASES, ids=[c[0] for c in ATTN_CASES]
)
def test_masked_attention_no_nan(name, nh, nkv, hd, rows, pos, window, split_len, mag, softcap, ring):
    qkv, k_cache, v_cache, cap = extreme_inputs(name, nh, nkv, hd, rows, pos, mag, ring)
    kw = dict(nh=nh, nkv=nkv, hd=hd, rows=rows, pos=pos, window=window, scale=hd**-0.5, softcap=softcap)
    partials, got = attention_gpu(qkv, k_cache, v_cache, split_len=split_len, ring=bool(ring), **kw)
    assert np.isfinite(partials).all(), "NaN/Inf in the attention partials"
    assert np.isfinite(got).all(), "NaN/Inf in the attention output"
    by_position = np.arange(pos + rows) % cap  # each position's row (a ring's older ones: out of the window)
    want = attention_ref(qkv, k_cache[:, by_position], v_cache[:, by_position], **kw)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_empty_splits_carry_zero_weight():
    """A split wholly outside the window or past the query writes sum 0 (not NaN) and weighs nothing."""
    nh, nkv, hd, rows, pos, window, split_len = 2, 1, 16, 1, 100, 3, 8
    cap = 128
    rng = np.random.default_rng(5)
    qkv = rng.standard_normal((rows, (nh + 2 * nkv) * hd)).astype(np.float32)
    k_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    v_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    partials, _ = attention_gpu(
        qkv,
        k_cache,
        v_cache,
        nh=nh,
        nkv=nkv,
        hd=hd,
        rows=rows,
        pos=pos,
        window=window,
        scale=0.25,
        softcap=0.0,
        split_len=split_len,
    )
    parts = partials.reshape(rows, nh, cap // split_len, hd + 2)
    live = {pos // split_len, (pos - window + 1) // split_len}
    for s in range(cap // split_len):
        if s not in live:
            assert (parts[:, :, s, hd + 1] == 0).all() and (parts[:, :, s, :hd] == 0).all()
    assert np.isfinite(parts).all()


# ---- elementwise activations at the extremes --------------------------------------------------


def gelu_tanh_ref(g):
    g = g.astype(np.float64)
    return 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g**3)))


def run_gated(gelu: bool, gate, up):
    rows, inter = gate.shape
    gate_up = np.concatenate([gate, up], axis=1).astype(np.float32)
    res = run_kernel(
        "gated_mul",
        {"gate_up": gate_up, "y": rows * inter * 4},
        {"inter": inter, "pad0": 0, "pad1": 0, "pad2": 0},
        grid=(-(-inter // 256), rows, 1),
        step=(rows, 0, rows),
        defines={"GELU": gelu},
    )
    return as_f32(res["y"], (rows, inter))


def test_gelu_mul_matches_numpy():
    rng = np.random.default_rng(11)
    rows, inter = 4, 300  # two workgroups per row, the second partly idle
    gate = (rng.standard_normal((rows, inter)) * 3).astype(np.float32)
    up = rng.standard_normal((rows, inter)).astype(np.float32)
    got = run_gated(True, gate, up)
    np.testing.assert_allclose(got, gelu_tanh_ref(gate) * up, rtol=1e-5, atol=1e-6)


def test_gelu_mul_extremes_are_finite_with_the_right_limit():
    gate = np.array([[100.0, -100.0, 1e4, -1e4, 30.0, -30.0, 1e12, -1e12]], np.float32)
    up = np.full_like(gate, 2.0)
    got = run_gated(True, gate, up)
    assert np.isfinite(got).all()
    want = np.where(gate > 0, gate, 0.0) * 2.0  # gelu(x) → x for large x, → 0 for very negative x
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0, :2], gelu_tanh_ref(gate[0, :2]) * 2.0, rtol=1e-6, atol=1e-6)


def test_silu_mul_extremes_are_finite_with_the_right_limit():
    gate = np.array([[100.0, -100.0, 88.0, -88.0, 1e4, -1e4, 0.0, -5.0]], np.float32)
    up = np.full_like(gate, 3.0)
    got = run_gated(False, gate, up)
    assert np.isfinite(got).all()
    g = gate.astype(np.float64)
    want = g / (1 + np.exp(np.minimum(-g, 700))) * 3.0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_safe_exp_keeps_normal_sampling_stats():
    """topk_chunks' per-tile Σ exp(s - max) with logits spread well past the clamp, and -inf logits."""
    vocab = 1500
    rng = np.random.default_rng(9)
    logits = (rng.standard_normal(vocab) * 40).astype(np.float32)
    logits[::97] = -np.inf
    logits[5] = -1e30
    inv_t = 1.3
    res = run_kernel(
        "topk_chunks",
        {"logits": logits, "lists": 2 * row_draw.CANDIDATES * 8, "stats": 2 * 8},
        {"vocab": vocab, "logits_base": 0, "inv_temperature": inv_t},
        grid=(2, 1, 1),
        defines={"CANDIDATES": row_draw.CANDIDATES, "TOPK_TILE": row_draw.TILE, "SAMPLING_THREADS": row_draw.THREADS},
    )
    stats = np.frombuffer(res["stats"], np.float32).reshape(2, 2)
    assert np.isfinite(stats).all()
    for t in range(2):
        tile = logits[t * 1024 : (t + 1) * 1024].astype(np.float64) * np.float32(inv_t)
        m = tile.max()
        assert stats[t, 0] == pytest.approx(m, rel=1e-6)
        assert stats[t, 1] == pytest.approx(np.exp(tile - m).sum(), rel=1e-5)
