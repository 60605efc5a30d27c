"""The memory's vector search on the GPU: a collection's chunk vectors (unit length, f32), searched by
cosine similarity without the vectors or their scores coming back to the host.

The vectors are rows of shards, each a storage buffer within the device's binding limit; a search is
one GEMV a shard (shaders/gemv.wgsl with the shard as an f32 weight matrix and the query as x) that
writes its rows' dot products into one scores row, then the sampler's top-k passes over that row
(topk_chunks.wgsl, topk_merge.wgsl: the row's first CANDIDATES in descending order, ties to the lower
slot). A few hundred bytes come back however many chunks there are. Slots are dense: removing one
moves the last vector into its place on the GPU (the caller renumbers that chunk). `scores` reads the
whole row back instead, for a filter that the best CANDIDATES cannot satisfy.
"""

from __future__ import annotations

import struct
from array import array

from ..decode.row_draw import CANDIDATES, TILE, params_bytes, sampling_kernel
from ..gpu import Copy, Dispatch, Read
from ..runtime.kernels import STEP_FORMAT
from ..runtime.linear_plan import gemv_features, linear_defines, linear_grid, linear_params

FIRST_ROWS = 1024  # rows the last shard holds at first; doubled as vectors come, up to a full shard
NO_SLOT = 0xFFFFFFFF  # topk_chunks' padding past the scores


class VectorIndex:
    """Vectors of `dim` floats in slots 0 .. count - 1. shard_rows: the rows of a full shard (default:
    as many as one storage binding holds)."""

    def __init__(self, device, kernels, dim: int, shard_rows: int | None = None):
        self.device, self.kernels, self.dim = device, kernels, dim
        self.count = 0
        most = device.caps.limits.max_storage_binding // (4 * dim)
        self.shard_rows = min(shard_rows or most, most)
        self._shards: list[list] = []  # [buffer, capacity in rows]
        self._defines = linear_defines(dim, self.shard_rows, "f32", cpu=device.caps.cpu)
        self._gemv = kernels.get("gemv", **self._defines)
        self._chunks = sampling_kernel(kernels, "topk_chunks", CANDIDATES=CANDIDATES, TOPK_TILE=TILE)
        self._query = device.create_buffer(4 * dim, label="memory query")
        self._step = device.create_buffer(16, "uniform", label="memory step")
        device.write_buffer(self._step, 0, struct.pack(STEP_FORMAT, 1, 0, 1, 1))
        self._dummy = device.create_buffer(16, label="memory dummy")
        self._moving = device.create_buffer(4 * dim, label="memory moved row")  # (a copy's ends differ)
        self._result = device.create_buffer(8 * CANDIDATES + 4, label="memory top")
        self._topk_params = device.create_buffer(16, "uniform", label="memory topk params")
        self._planned_for: list = []  # the shard buffers the scores row and dispatches were made for
        self._unprepared = True  # kernels made since the last device.prepare() (the GEMV, a plan's top-k)
        self._made: list = []  # buffers of the current plan
        self._parts = None

    @property
    def capacity(self) -> int:
        return sum(capacity for _, capacity in self._shards)

    def add(self, vectors) -> range:
        """Append vectors (each `dim` floats); returns their slots."""
        first = self.count
        flat = array("f")
        for vector in vectors:
            if len(vector) != self.dim:
                raise ValueError(f"a vector of {len(vector)} values for an index of {self.dim}")
            flat.extend(vector)
        rows = len(flat) // self.dim
        self._reserve(first + rows)
        done = 0
        while done < rows:
            shard, at = divmod(first + done, self.shard_rows)
            take = min(rows - done, self.shard_rows - at)
            part = flat[done * self.dim : (done + take) * self.dim].tobytes()
            self.device.write_buffer(self._shards[shard][0], 4 * at * self.dim, part)
            done += take
        self.count += rows
        return range(first, first + rows)

    def remove(self, slot: int) -> int | None:
        """Empty `slot`: the last vector moves there. Returns the slot it came from (None when the
        removed one was the last)."""
        if not 0 <= slot < self.count:
            raise IndexError(f"slot {slot} of {self.count}")
        last = self.count - 1
        self.count = last
        if slot == last:
            return None
        (src, at_src), (dst, at_dst) = self._where(last), self._where(slot)
        row = 4 * self.dim
        self.device.submit([Copy(src, at_src, self._moving, 0, row), Copy(self._moving, 0, dst, at_dst, row)])
        return last

    async def search(self, query, k: int) -> list[tuple[int, float]]:
        """The k (at most CANDIDATES) slots whose vectors have the largest dot product with `query`,
        best first, with it."""
        if not 0 < k <= CANDIDATES:
            raise ValueError(f"k must be 1 .. {CANDIDATES}, not {k}")
        if self.count == 0:
            return []
        commands = self._score_commands(query)
        topk = self._chunks.pack_params({"vocab": self.count, "logits_base": 0, "inv_temperature": 1.0})
        self.device.write_buffer(self._topk_params, 0, topk)
        _, chunks_group, merge, _ = self._plan()
        commands += [Dispatch(self._chunks.handle, chunks_group, (-(-self.count // TILE), 1, 1)), merge]
        read = (await self._submit(commands + [Read(self._result, 0, 8 * CANDIDATES)]))[0]
        found = struct.unpack("<" + "fI" * CANDIDATES, await self.device.fetch(read))
        pairs = [(found[i + 1], found[i]) for i in range(0, 2 * CANDIDATES, 2)]
        return [(slot, score) for slot, score in pairs if slot < self.count][:k]

    async def scores(self, query) -> list[float]:
        """Every slot's dot product with `query` (the row read back: count floats)."""
        if self.count == 0:
            return []
        commands = self._score_commands(query)
        scores = self._plan()[0]
        read = (await self._submit(commands + [Read(scores, 0, 4 * self.count)]))[0]
        return array("f", await self.device.fetch(read)).tolist()

    def destroy(self) -> None:
        for buffer in [b for b, _ in self._shards] + self._made:
            self.device.destroy_buffer(buffer)
        for buffer in (self._query, self._step, self._dummy, self._moving, self._result, self._topk_params):
            self.device.destroy_buffer(buffer)
        self._shards, self._made, self._planned_for = [], [], []

    # ---- inside ----

    def _where(self, slot: int) -> tuple:
        shard, at = divmod(slot, self.shard_rows)
        return self._shards[shard][0], 4 * at * self.dim

    def _reserve(self, rows: int) -> None:
        """Shards for `rows` vectors: full ones, then a last one doubled (contents copied) as needed."""
        while self.capacity < rows:
            if self._shards and self._shards[-1][1] < self.shard_rows:
                old, held = self._shards[-1]
                grown = min(2 * held, self.shard_rows)
                buffer = self.device.create_buffer(4 * grown * self.dim, label="memory vectors")
                self.device.submit([Copy(old, 0, buffer, 0, 4 * held * self.dim)])
                self.device.destroy_buffer(old)
                self._shards[-1] = [buffer, grown]
            else:
                first = min(FIRST_ROWS, self.shard_rows)
                self._shards.append([self.device.create_buffer(4 * first * self.dim, label="memory vectors"), first])

    def _score_commands(self, query) -> list:
        if len(query) != self.dim:
            raise ValueError(f"a query of {len(query)} values for an index of {self.dim}")
        self.device.write_buffer(self._query, 0, array("f", query).tobytes())
        gemvs = self._plan()[3]
        commands = []
        for s, (params, kernel, group) in enumerate(gemvs):
            rows = min(self.shard_rows, self.count - s * self.shard_rows)
            if rows <= 0:
                break
            packed = kernel.pack_params(
                linear_params(self.dim, rows, out_stride=self.capacity, out_offset=s * self.shard_rows, rows=1)
            )
            self.device.write_buffer(params, 0, packed)
            grid = linear_grid(
                "gemv", 1, rows, self.device.caps.limits.max_workgroups_per_dim, gemv_features(self._defines)
            )
            commands.append(Dispatch(kernel.handle, group, grid))
        return commands

    def _plan(self):
        """(scores buffer, topk_chunks' bind group, topk_merge's dispatch, per shard (params buffer,
        kernel, bind group)) for the current shards, made again when they changed."""
        shards = [buffer for buffer, _ in self._shards]
        if len(shards) != len(self._planned_for) or any(a is not b for a, b in zip(shards, self._planned_for)):
            self._parts = self._make_plan()
            self._planned_for = shards
            self._unprepared = True
        return self._parts

    async def _submit(self, commands: list) -> list:
        """submit, the kernels of a new plan awaited first (the page compiles them asynchronously:
        submitted before that, they are compiled synchronously, stalling the worker)."""
        if self._unprepared:
            await self.device.prepare()
            self._unprepared = False
        return self.device.submit(commands)

    def _make_plan(self) -> tuple:
        device, capacity = self.device, self.capacity
        for buffer in self._made:
            device.destroy_buffer(buffer)
        # The merge's list count is a define: powers of two keep its variants few (tiles past the
        # scores come out as padding, last in the order).
        lists = 1 << max(0, (-(-capacity // TILE) - 1).bit_length())
        scores = device.create_buffer(4 * capacity, label="memory scores")
        tile_lists = device.create_buffer(8 * CANDIDATES * lists, label="memory topk lists")
        stats = device.create_buffer(8 * lists, label="memory topk stats")
        self._made = [scores, tile_lists, stats]
        bound_lists, bound_stats = (tile_lists, 0, 8 * CANDIDATES * lists), (stats, 0, 8 * lists)
        chunks_group = device.create_bind_group(
            self._chunks.handle, [(self._topk_params, 0, 16), (scores, 0, 4 * capacity), bound_lists, bound_stats]
        )
        merge = sampling_kernel(self.kernels, "topk_merge", CANDIDATES=CANDIDATES, LISTS=lists)
        merge_group = device.create_bind_group(
            merge.handle, [bound_lists, bound_stats, (self._result, 0, 8 * CANDIDATES + 4)]
        )
        gemvs = []
        for buffer, held in self._shards:
            params = device.create_buffer(params_bytes(self._gemv), "uniform", label="memory gemv")
            self._made.append(params)
            bound = {
                "step": (self._step, 0, 16),
                "p": (params, 0, params_bytes(self._gemv)),
                "x": (self._query, 0, 4 * self.dim),
                "w": (buffer, 0, 4 * held * self.dim),
                "y": (scores, 0, 4 * capacity),
            }
            resources = [bound.get(b.name, (self._dummy, 0, 16)) for b in self._gemv.bindings]
            gemvs.append((params, self._gemv, device.create_bind_group(self._gemv.handle, resources)))
        return scores, chunks_group, Dispatch(merge.handle, merge_group, (1, 1, 1)), gemvs
