"""The graph IR: tensors and ops in execution order, emitted by a model family's generator.

An op names its kernel, binds tensors to the kernel's bindings *by name*, carries static Params
and a grid function of the number of rows in this forward. Everything that changes per forward
(rows, first position) lives in the shared Step uniform, so Params are written once.
Weights are declared as WeightSpecs (checkpoint tensors concatenated along rows, e.g. q|k|v) and
split into shards when one would exceed a storage binding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class WeightSpec:
    parts: tuple  # checkpoint tensor names, concatenated along rows (dim 0)
    role: str  # "matrix": stored in the device's weight dtype; "vector": f32


@dataclass(eq=False)
class Tensor:
    name: str
    nbytes: int
    kind: str  # "activation", "input", "output", "state", "weight" or "dummy"
    weight: WeightSpec | None = None
    rows: tuple = (0, 0)  # weight shards: [first row, row count) of the concatenated matrix
    dtype: str = "f32"


@dataclass(eq=False)
class Op:
    kernel: str  # shader name; "linear" picks gemv or matmul per forward
    bind: dict
    params: dict
    grid: Callable[[int], tuple]  # rows of this forward → workgroup grid
    defines: dict = field(default_factory=dict)
    fixed_rows: int = 0  # rows this op always sees (the LM head: 1); 0 = the forward's rows
    # A one-row forward (decode): decode_defines specialise the kernel further (attention takes
    # RoPE + KV append in), and a decode_skip op is not dispatched (its work is done by such a one).
    decode_defines: dict | None = None
    decode_skip: bool = False
    # A decode token whose KV length is at most fold_until merges its layer's attention splits inside
    # the O projection's GEMV (fold_defines, e.g. COMBINE) and skips the fold_skip op (the merge).
    # Per layer: a sliding layer's ring has fewer splits than a full layer's cache.
    fold_defines: dict | None = None
    fold_skip: bool = False
    fold_until: int = 0
    # Dispatched only in forwards of lo <= rows <= hi (None: every forward): an op with a one-row
    # form of its own and a many-row form of several kernels (DeltaNet's delta rule).
    rows_range: tuple[int, int] | None = None
    # (above, kernel): forwards of more than `above` rows run that kernel instead (the same
    # Params and defines, and bindings: one bind group serves both, unless that kernel binds more,
    # as attention_tiled.wgsl's PICTURE_SPANS does): attention's tiled form for prompts.
    many_rows: tuple[int, str] | None = None
    # A linear op whose matmul takes other inputs than its GEMV (matmul_int8.wgsl reads x as
    # quantize_rows left it): binding name -> the key in `bind` of its tensor, in a second bind group.
    matmul_bind: dict | None = None
    # The same for its GEMV (gemv.wgsl Q8_INPUT reads x as a spread quantize_rows left it; a GEMV
    # that quantizes its outputs, Q8_OUTPUT, binds yq and ys too: {} where nothing is renamed).
    gemv_bind: dict | None = None

    def folded(self, fold: int) -> bool:
        """Whether this op takes its folded form in a forward of fold level `fold` (Graph.folds)."""
        return bool(fold) and self.fold_until >= fold


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Graph:
    def __init__(self, max_rows: int):
        self.max_rows = max_rows
        self.ops: list[Op] = []
        self.tensors: list[Tensor] = []
        self.outputs: dict[str, Tensor] = {}
        self.inputs: dict[str, Tensor] = {}
        self.fold_levels: list[int] = []  # the ops' distinct fold_until, ascending
        self.rotary: dict = {}  # cos/sin input name -> models.rope.Rotary (the engine fills each per forward)
        # How far past a forward's first position the sliding layers' KV rings tolerate writes
        # (kv_cache.py); None: every layer caches the whole context.
        self.ring_slack: int | None = None
        # Hybrids' recurrent states (conv windows, DeltaNet's S): state that holds one position
        # only, which the engine snapshots to go back (recurrent_state.py).
        self.recurrent: list[Tensor] = []

    @property
    def fold_until(self) -> int:
        """The most keys (KV length) at which a decode token folds every layer's merge (0: none)."""
        return self.fold_levels[0] if self.fold_levels else 0

    def folds(self, rows: int, kv_len: int) -> int:
        """The fold level of a forward of `rows` tokens ending at KV length kv_len: 0 where no op
        folds, else the least Op.fold_until that kv_len fits; the ops whose fold_until reaches it
        fold (Op.folded). The forwards of one level share one plan."""
        if rows == 1:
            for level in self.fold_levels:
                if kv_len <= level:
                    return level
        return 0

    def tensor(self, name: str, nbytes: int, kind: str = "activation", **extra) -> Tensor:
        t = Tensor(name, nbytes, kind, **extra)
        self.tensors.append(t)
        return t

    def op(self, kernel: str, bind: dict, params: dict, grid, defines=None, fixed_rows: int = 0, **decode) -> Op:
        """decode: decode_defines / decode_skip / fold_defines / fold_skip / fold_until / rows_range /
        many_rows / matmul_bind / gemv_bind (Op)."""
        self.ops.append(Op(kernel, bind, params, grid, defines or {}, fixed_rows, **decode))
        level = self.ops[-1].fold_until
        if level and level not in self.fold_levels:
            self.fold_levels = sorted([*self.fold_levels, level])
        return self.ops[-1]

    def dispatched(self, op: Op, rows: int, fold: int = 0) -> bool:
        """Whether `op` runs in a forward of `rows` tokens of fold level `fold` (folds(); True:
        every op that can fold does)."""
        if op.rows_range and not op.rows_range[0] <= rows <= op.rows_range[1]:
            return False
        return not (rows == 1 and op.decode_skip) and not (op.fold_skip and op.folded(fold))

    def ops_per_layer(self, layers: int, rows: int = 1, fold: int = 0) -> float:
        """Dispatches per layer of a forward of `rows` (1: a decode token) at fold level `fold`
        (folds(); True: every layer folds): ops from the first that binds a weight or cache of
        layer 0 to the last that binds one of the last layer (the embedding, final norm and LM
        head are outside)."""
        marked = [
            (i, int(m.group(1)))
            for i, op in enumerate(self.ops)
            for t in op.bind.values()
            if t.kind in ("weight", "state") and (m := re.search(r"(?:layers\.|_cache\.)(\d+)", t.name))
        ]
        first = min(i for i, layer in marked if layer == 0)
        last = max(i for i, layer in marked if layer == layers - 1)
        return sum(1 for op in self.ops[first : last + 1] if self.dispatched(op, rows, fold)) / layers

    def summary(self) -> str:
        kinds = {}
        for t in self.tensors:
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        return f"{len(self.ops)} ops, tensors: {kinds}"
