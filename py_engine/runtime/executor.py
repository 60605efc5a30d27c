"""Executor: turns a Graph into GPU buffers, bind groups and one compute pass per forward.

Activations are pooled by liveness (a tensor's buffer is reused once its last reader has run;
an op's outputs never share a buffer with its inputs). Bind groups and op Params are built once;
per forward only the Step uniform, the token ids and the cos/sin rows are written — each only
when its bytes change."""

from __future__ import annotations

import logging
import struct

from ..gpu import Copy, Dispatch
from .graph import Graph
from .kernels import STEP_FORMAT
from .linear_plan import choose_linear, matmul_kernel
from .memory import pool_activations

log = logging.getLogger("wisp")


STEP_BYTES = struct.calcsize(STEP_FORMAT)


def step_bytes(rows: int, pos: int, logit_rows: int = 1) -> bytes:
    """The Step uniform of a forward of `rows` tokens at position `pos` whose LM head scores its
    last `logit_rows` rows."""
    return struct.pack(STEP_FORMAT, rows, pos, pos + rows, logit_rows)


class Executor:
    def __init__(self, device, kernels, graph: Graph, weights, shared: dict | None = None):
        """shared: buffers another executor holds (Tensor -> buffer), which this graph's ops bind
        where they bind the same Tensor (a speech decoder reads the cross K/V its encoder wrote)."""
        self.device = device
        self.kernels = kernels
        self.graph = graph
        self.buffers = dict(shared or {})
        self.activation_bytes = self._allocate(weights)
        self.step = device.create_buffer(16, "uniform", label="step")
        self._last_step = None
        self._params = device.create_buffer(256 * len(graph.ops), "uniform", label="op params")
        self._bind = [self._prepare(i, op) for i, op in enumerate(graph.ops)]
        self._dispatches = {}  # (rows, fold level) → the forward's dispatches, as device.batch prepared them
        self.kv_bytes = sum(t.nbytes for t in graph.tensors if t.kind == "state")

    # buffers ---------------------------------------------------------------------------------
    def _allocate(self, weights) -> int:
        """Weights from the uploader, dedicated buffers for inputs/outputs/state, a pool for activations."""
        slot_of, sizes = pool_activations(self.graph)
        pool = [self.device.create_buffer(size, label="activation") for size in sizes]
        for op in self.graph.ops:
            for t in op.bind.values():
                if t in self.buffers:
                    continue
                if t.kind == "weight":
                    self.buffers[t] = weights.upload(t)
                elif t.kind == "activation":
                    self.buffers[t] = pool[slot_of[t]]
                else:
                    self.buffers[t] = self.device.create_buffer(t.nbytes, label=t.name)
        log.info("%d tensors → %d buffers, %.1f MB", len(slot_of), len(pool), sum(sizes) / 1e6)
        return sum(sizes)

    def buffer(self, name: str):
        tensor = self.graph.inputs.get(name) or self.graph.outputs[name]
        return self.buffers[tensor]

    def _prepare(self, index: int, op):
        """The op's Params written and one bind group; its kernels by name: gemv and matmul for a
        linear op (with fold_defines, "gemv_fold" too), else the op's kernel and, with
        decode_defines, its one-row variant "decode" (with many_rows, "many_rows" too); and the
        variants with a bind group of their own (a linear op's int8 matmul and its GEMV on quantized
        x, or quantizing its outputs: Op.matmul_bind, Op.gemv_bind, which gemv_fold shares; a many_rows
        kernel binding more than the op's own)."""
        if op.kernel == "linear":
            kernels = {n: self.kernels.get(n, **op.defines) for n in ("gemv",)}
            kernels["matmul"] = self.kernels.get(matmul_kernel(op.defines), **op.defines)
            if op.fold_defines:
                kernels["gemv_fold"] = self.kernels.get("gemv", **{**op.defines, **op.fold_defines})
        else:
            kernels = {op.kernel: self.kernels.get(op.kernel, **op.defines)}
            if op.decode_defines:
                kernels["decode"] = self.kernels.get(op.kernel, **{**op.defines, **op.decode_defines})
            if op.many_rows:
                kernels["many_rows"] = self.kernels.get(op.many_rows[1], **op.defines)
        # The variants share their bindings: one bind group serves all, but those with a group of
        # their own (a GEMV that quantizes its outputs, gemv.wgsl Q8_OUTPUT, binds two more).
        first = kernels["matmul"] if op.kernel == "linear" else next(iter(kernels.values()))
        self.device.write_buffer(self._params, index * 256, first.pack_params(op.params))
        renamed = {"matmul": op.matmul_bind, "gemv": op.gemv_bind, "gemv_fold": op.gemv_bind}
        groups = {
            v: self._bind_group(index, op, kernels[v], names)
            for v, names in renamed.items()
            if names is not None and v in kernels
        }
        # A many-rows kernel that binds more than the op's own (attention_tiled.wgsl PICTURE_SPANS).
        many = kernels.get("many_rows")
        if many is not None and [b.name for b in many.bindings] != [b.name for b in first.bindings]:
            groups["many_rows"] = self._bind_group(index, op, many, {})
        return self._bind_group(index, op, first, {}), kernels, groups

    def _bind_group(self, index: int, op, kernel, renamed: dict):
        """A bind group of `kernel` for op `index`: binding b takes the tensor op.bind[renamed.get(b, b)]."""
        resources = []
        for b in kernel.bindings:
            if b.name == "step":
                resources.append((self.step, 0, 16))
            elif b.name == "p":
                resources.append((self._params, index * 256, 256))
            else:
                buf = self.buffers[op.bind[renamed.get(b.name, b.name)]]
                resources.append((buf, 0, buf.size))
        return self.device.create_bind_group(kernel.handle, resources)

    # forward ---------------------------------------------------------------------------------
    def commands(self, rows: int, pos: int, logit_rows: int = 1) -> list:
        """Write the Step uniform for a forward of `rows` tokens at position `pos` (its LM head
        scoring the last `logit_rows`); return its dispatches."""
        step = step_bytes(rows, pos, logit_rows)
        if step != self._last_step:
            self.device.write_buffer(self.step, 0, step)
            self._last_step = step
        return self._dispatch_list(rows, pos)

    def staged_commands(self, rows: int, pos: int, staging, offset: int) -> list:
        """The forward's dispatches after a copy of its Step from `staging` at `offset`, where the
        caller writes step_bytes(rows, pos): several forwards can then share one submit (a write
        lands before the submit that follows it, so each would see the last one written)."""
        self._last_step = None  # the copy changes the Step behind write_buffer's back
        return [Copy(staging, offset, self.step, 0, STEP_BYTES)] + self._dispatch_list(rows, pos)

    def _dispatch_list(self, rows: int, pos: int) -> list:
        key = (rows, self.graph.folds(rows, pos + rows))
        if key not in self._dispatches:
            self._dispatches[key] = self.device.batch(
                [
                    Dispatch(
                        self._bind[i][1][variant].handle,
                        self._bind[i][2].get(variant, self._bind[i][0]),
                        op.grid(op.fixed_rows or rows),
                    )
                    for i, op, variant in self._plan(*key)
                ]
            )
        return list(self._dispatches[key])

    def _plan(self, rows: int, fold: int = 0) -> list:
        """(op index, op, kernel variant) of each dispatch of a forward of `rows` tokens at fold
        level `fold` (Graph.folds: which layers merge their attention in the O projection)."""
        plan = []
        for i, op in enumerate(self.graph.ops):
            one_row = (op.fixed_rows or rows) == 1
            if not self.graph.dispatched(op, op.fixed_rows or rows, fold):
                continue
            if op.kernel == "linear":
                variant = choose_linear(op.fixed_rows or rows)
                if op.fold_defines and op.folded(fold):
                    variant = "gemv_fold"
            elif op.many_rows and (op.fixed_rows or rows) > op.many_rows[0]:
                variant = "many_rows"
            else:
                variant = "decode" if one_row and op.decode_defines else op.kernel
            plan.append((i, op, variant))
        return plan

    def kernel_names(self, rows: int, fold: int = 0) -> list[str]:
        """The kernel of each dispatch of a forward of `rows` tokens (linear ops: gemv or matmul;
        a one-row forward's attention takes RoPE + KV append in, and rope_kv is not dispatched;
        fold: Graph.folds' level, True for every layer: the attention's merge runs inside the O
        projection's GEMV)."""
        shader = {"decode": None, "gemv_fold": "gemv"}  # variants of a kernel (None: the op's own)
        return [
            op.many_rows[1] if variant == "many_rows" else shader.get(variant, variant) or op.kernel
            for _, op, variant in self._plan(rows, fold)
        ]
