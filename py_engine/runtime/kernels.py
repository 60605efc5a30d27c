"""WGSL kernels: load `shaders/<name>.wgsl`, specialise it, and read its interface from the source.

A kernel file declares its own bindings and, if it has any, a `struct Params` of 4-byte scalars.
Both are parsed here, so Python binds buffers and packs parameters *by name* and can never drift
out of step with the shader. Specialisation prepends `alias`/`const` lines (e.g. `alias W = f16;`)
and `enable f16;` when a define names f16 (kernels use f16 only through such aliases); the shared
`Step` uniform struct (rows of this forward, first position, KV length, and how many of its last
rows the LM head scores) is defined for every kernel.
The define WEIGHTS="<format>" is not emitted: it appends `shaders/weights/<format>.wgsl` (the
kernel's `weight_block`, dequantizing that format) and the helper snippets it builds on.
Kernels that call gate_act get shaders/activations.wgsl (SiLU, GELU-tanh); those that call
rope_pair get shaders/rope.wgsl; those that call key_head (DeltaNet's) shaders/delta_heads.wgsl;
those that call load_heads (a decode token's attention) shaders/attention_heads.wgsl; those that
call quantize_32 (a 32 of x in two int8 levels) or q8_row_quads shaders/quantize_32.wgsl; those
(kernels or snippets) that call ring_start (where a KV head's keys lie) shaders/kv_ring.wgsl; those
that call tile_weights (a flash attention's per-tile softmax) shaders/tile_softmax.wgsl.
A weight snippet's part after its `// units` line (the GEMV's unit_x / unit_dot; float_units.wgsl
for the float formats) is appended only to kernels that call unit_dot. A units part may hold two
forms, after a `// f32 units` and an `// int8 units` line (what comes before them, UNIT and
X_PAD, serves both): the define Q8_ACT (int8 activations, block formats only) picks the second.
Lines between `//#if NAME`, `//#else` and `//#endif` are kept or dropped by the boolean define
NAME, for code that must not reach a compiler at all when the define is false (subgroup builtins
need the feature); a kernel's `//#optional NAME` line makes NAME false unless given. SUBGROUPS is defined for every kernel that mentions it, from the device's
capabilities; where the host's WGSL wants `enable subgroups;` (the browser; naga refuses it),
that line is emitted.
The defines K_CACHE / V_CACHE="<format>" likewise choose the KV cache's storage (f32, f16, or
f16_packed: f16 pairs in u32 words): they alias K / V to the stored word type and append
`shaders/kv/<format>.wgsl` with $name k / v, so a kernel reads k_at(i), v_pair(i), … and writes
k_store_pair(…) without knowing the format. A kernel that binds a cache as array<vec4<u32>> (16-byte
words: attention_subgroups.wgsl) gets the boolean K_F32 / V_F32 instead (f16 and f16_packed share
their bytes).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from string import Template

from ..gpu import Binding
from . import quant

# An installed wheel (desktop or Pyodide) carries the shaders as the package data py_engine/shaders;
# in the repository (and an editable install) they sit at the top level, beside py_engine/.
_ENGINE = Path(__file__).resolve().parent.parent  # py_engine/ (this file is py_engine/runtime/kernels.py)
SHADER_DIR = _ENGINE / "shaders" if (_ENGINE / "shaders").is_dir() else _ENGINE.parent / "shaders"
WEIGHTS_DIR = SHADER_DIR / "weights"
SAFE_EXP = "\n" + (SHADER_DIR / "safe_exp.wgsl").read_text()  # appended to every kernel (Metal-safe exp)
ACTIVATIONS = "\n" + (SHADER_DIR / "activations.wgsl").read_text()  # to kernels that call gate_act
ROPE = "\n" + (SHADER_DIR / "rope.wgsl").read_text()  # to kernels that call rope_pair
DELTA_HEADS = "\n" + (SHADER_DIR / "delta_heads.wgsl").read_text()  # to kernels that call key_head
ATTENTION_HEADS = "\n" + (SHADER_DIR / "attention_heads.wgsl").read_text()  # to kernels that call load_heads
LINEAR_OUTPUTS = "\n" + (SHADER_DIR / "linear_outputs.wgsl").read_text()  # to kernels that call write_output
QUANTIZE_32 = "\n" + (SHADER_DIR / "quantize_32.wgsl").read_text()  # to kernels that call quantize_32 / q8_row_quads
KV_RING = "\n" + (SHADER_DIR / "kv_ring.wgsl").read_text()  # to kernels (and snippets) that call ring_start
TILE_SOFTMAX = "\n" + (SHADER_DIR / "tile_softmax.wgsl").read_text()  # to kernels that call tile_weights

# Helper snippets a weight format's snippet builds on, besides bytes.wgsl (the byte reads of
# every non-float format).
_WEIGHT_HELPERS = {
    "q4_k": ("k_scales",),
    "q5_k": ("k_scales",),
    "q5_0": ("q5_bits",),
    "q5_1": ("q5_bits",),
    "mlx4_f16": ("mlx4",),
    "mlx4_bf16": ("mlx4",),
}

KV_DIR = SHADER_DIR / "kv"
KV_WORDS = {"f32": "f32", "f16": "f16", "f16_packed": "u32"}  # KV cache format → the word stored
KV_BYTES = {"f32": 4, "f16": 2, "f16_packed": 2}  # bytes per cached element

STEP_STRUCT = "struct Step { rows: u32, pos: u32, kv_len: u32, logit_rows: u32 }\n"
STEP_FORMAT = "<4I"

_BINDING_RE = re.compile(
    r"@group\(0\)\s*@binding\((\d+)\)\s*var<\s*(uniform|storage\s*,\s*read_write|storage\s*,\s*read|storage)\s*>\s*(\w+)"
)
_PARAMS_RE = re.compile(r"struct\s+Params\s*\{([^}]*)\}", re.S)
_FIELD_RE = re.compile(r"(\w+)\s*:\s*(u32|i32|f32)")
_PACK = {"u32": "I", "i32": "i", "f32": "f"}


def parse_bindings(source: str) -> list[Binding]:
    out = []
    for idx, space, name in _BINDING_RE.findall(source):
        space = space.replace(" ", "")
        kind = "uniform" if space == "uniform" else ("rw" if space == "storage,read_write" else "read")
        out.append(Binding(int(idx), name, kind))
    out.sort(key=lambda b: b.index)
    if [b.index for b in out] != list(range(len(out))):
        raise ValueError("kernel bindings must be numbered 0..n-1 without gaps")
    return out


def parse_params(source: str) -> list[tuple[str, str]]:
    m = _PARAMS_RE.search(source)
    return _FIELD_RE.findall(m.group(1)) if m else []


def specialise(source: str, defines: dict, enables: tuple = ()) -> str:
    lines = []
    for key, value in sorted(defines.items()):
        if isinstance(value, bool):
            lines.append(f"const {key}: bool = {str(value).lower()};")
        elif isinstance(value, int):
            lines.append(f"const {key}: u32 = {value}u;")
        else:
            lines.append(f"alias {key} = {value};")
    head = "\n".join(lines) + "\n" + STEP_STRUCT
    if any("f16" in str(v) for v in defines.values()):
        head = "enable f16;\n" + head
    return "".join(f"enable {e};\n" for e in enables) + head + source


def weight_snippets(weight_format: str, units: bool = False, int8: bool = False) -> str:
    """The WGSL appended to a kernel for WEIGHTS=weight_format: helpers, then the format's own
    (with its GEMV units part when `units`: the int8-activation units when `int8`)."""
    fmt = quant.weight_format(weight_format)  # ValueError for an unknown format
    if int8 and fmt.is_float:
        raise ValueError(f"{weight_format}: int8 activations (Q8_ACT) are for block formats only")
    names = () if fmt.is_float else ("bytes",)
    names += _WEIGHT_HELPERS.get(weight_format, ()) + (weight_format,)
    parts = [(WEIGHTS_DIR / f"{n}.wgsl").read_text().partition("\n// units\n") for n in names]
    text = "".join("\n" + main for main, _, _ in parts)
    if units:
        text += "\n" + (WEIGHTS_DIR / "float_units.wgsl").read_text() if fmt.is_float else ""
        for _, _, unit_part in parts:
            shared, _, forms = unit_part.partition("// f32 units\n")
            f32_form, _, int8_form = forms.partition("\n// int8 units\n")
            text += "\n" + shared + (int8_form if int8 else f32_form)
    return text


_IF_RE = re.compile(r"^\s*//#(if|else|endif)\b\s*(\w*)")
_OPTIONAL_RE = re.compile(r"^\s*//#optional\s+(\w+)\s*$", re.M)


def preprocess(source: str, defines: dict) -> str:
    """Keep the lines of `//#if NAME` blocks whose boolean define is true (their `//#else` part
    otherwise); blocks nest. An unknown or non-boolean NAME is an error, but for a NAME that the
    kernel declares `//#optional NAME`: false unless given (a variant that most users never ask for)."""
    defines = {**{name: False for name in _OPTIONAL_RE.findall(source)}, **defines}
    out, keep = [], [True]
    for line in source.split("\n"):
        m = _IF_RE.match(line)
        if not m:
            if all(keep):
                out.append(line)
            continue
        word, name = m.groups()
        if word == "if":
            if not isinstance(defines.get(name), bool):
                raise ValueError(f"//#if {name}: needs a boolean define {name}")
            keep.append(defines[name])
        elif len(keep) == 1:
            raise ValueError(f"//#{word} without //#if")
        elif word == "else":
            keep[-1] = not keep[-1]
        else:
            keep.pop()
    if len(keep) != 1:
        raise ValueError("//#if without //#endif")
    return "\n".join(out)


def kv_snippet(cache_format: str, name: str, binding: Binding | None) -> str:
    """The accessors of one KV cache (name "k" or "v", bound as k_cache / v_cache); the store
    half only where the kernel binds the cache read_write."""
    if cache_format not in KV_WORDS:
        raise ValueError(f"unknown KV cache format {cache_format!r} (known: {', '.join(KV_WORDS)})")
    if binding is None:
        raise ValueError(f"{name.upper()}_CACHE given to a kernel without a {name}_cache binding")
    read, store = (KV_DIR / f"{cache_format}.wgsl").read_text().split("\n// store\n")
    text = read + ("\n" + store if binding.kind == "rw" else "")
    return "\n" + Template(text).substitute(name=name, cache=binding.name)


def assemble(
    name: str, defines: dict | None = None, subgroups: bool = False, subgroups_enable: bool = False
) -> tuple[str, list[Binding], list[tuple[str, str]]]:
    """(the WGSL that is compiled, its bindings, its Params fields) of shaders/<name>.wgsl with
    `defines`, for a device with or without subgroups (subgroups_enable: its WGSL wants `enable
    subgroups;`). `python -m py_engine kernel NAME --define K=V` prints the source."""
    path = SHADER_DIR / f"{name}.wgsl"
    if not re.fullmatch(r"\w+(/\w+)*", name) or not path.is_file():
        raise ValueError(f"no kernel {name!r} in {SHADER_DIR}")
    raw = path.read_text()
    defines = dict(defines or {})
    weights = defines.pop("WEIGHTS", None)
    enables = ()
    if "SUBGROUPS" in raw:
        defines.setdefault("SUBGROUPS", subgroups)
        if defines["SUBGROUPS"] and subgroups_enable:
            enables = ("subgroups",)
    raw = preprocess(raw, defines)
    bindings = parse_bindings(raw)
    outputs = LINEAR_OUTPUTS if "write_output(" in raw else ""
    helpers = SAFE_EXP + outputs + (ACTIVATIONS if "gate_act(" in raw + outputs else "")
    helpers += (ATTENTION_HEADS if "load_heads(" in raw else "") + (DELTA_HEADS if "key_head(" in raw else "")
    helpers += ROPE if "rope_pair(" in raw + helpers else ""
    helpers += KV_RING if "ring_start(" in raw + helpers else ""
    helpers += TILE_SOFTMAX if "tile_weights(" in raw else ""
    if "quantize_32(" in raw or "q8_row_quads(" in raw:
        quantize, _, store = QUANTIZE_32.partition("\n// store\n")
        helpers += quantize + (store if "store_q8(" in raw else "")
    helpers += weight_snippets(weights, "unit_dot(" in raw, defines.get("Q8_ACT", False)) if weights else ""
    by_name = {b.name: b for b in bindings}
    for cache in ("k", "v"):
        cache_format = defines.pop(f"{cache.upper()}_CACHE", None)
        if cache_format is None:
            continue
        if re.search(rf"var<[^>]*>\s*{cache}_cache\s*:\s*array<vec4<u32>>", raw):  # read as 16-byte words
            if cache_format not in KV_WORDS:
                raise ValueError(f"unknown KV cache format {cache_format!r} (known: {', '.join(KV_WORDS)})")
            defines[f"{cache.upper()}_F32"] = cache_format == "f32"
        else:
            helpers += kv_snippet(cache_format, cache, by_name.get(f"{cache}_cache"))
            defines[cache.upper()] = KV_WORDS[cache_format]
    return specialise(raw + helpers, defines, enables), bindings, parse_params(raw)


class Kernel:
    """A compiled kernel plus what Python needs to bind it and fill its Params."""

    def __init__(self, device, name: str, defines: dict | None = None):
        caps = device.caps
        source, self.bindings, self.params = assemble(name, defines, caps.subgroups, caps.subgroups_enable)
        self.name = name
        self._format = "<" + "".join(_PACK[t] for _, t in self.params)
        self.handle = device.create_kernel(name, source, self.bindings)

    def pack_params(self, values: dict) -> bytes:
        missing = [n for n, _ in self.params if n not in values]
        extra = set(values) - {n for n, _ in self.params}
        if missing or extra:
            raise KeyError(f"{self.name}: params missing {missing}, unknown {sorted(extra)}")
        data = struct.pack(self._format, *(values[n] for n, _ in self.params))
        return data + bytes(-len(data) % 16)


class KernelCache:
    def __init__(self, device):
        self.device = device
        self._kernels = {}

    def get(self, name: str, **defines) -> Kernel:
        key = (name, tuple(sorted(defines.items())))
        if key not in self._kernels:
            self._kernels[key] = Kernel(self.device, name, defines)
        return self._kernels[key]
