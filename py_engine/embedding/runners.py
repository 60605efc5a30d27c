"""Running an embedding graph: token id lists in, one pooled vector per list out.

An encoder (models/bert.py) packs texts one after another into forwards of at most max_rows
rows: no padding, each row's attention confined to its own text by the `spans` input (and a
bidirectional sliding layer's to the rows within `reach` of it, `spans_local`: EmbeddingGemma's),
its position in its text given by `positions` or, with RoPE, by the rotary tables of those
positions; one read per forward. A decoder embedder runs each text as a causal LM prefill from position 0 (in chunks of
max_rows, the KV cache as the engine's), its last-token vector copied out by a Read at the end of
its last chunk. Every forward of a call is submitted before the first read is awaited, so the host
encodes ahead while the GPU runs (desktop) and the inputs rewritten between submits are ordered
after the work that read them (a queue write lands before the submit that follows it)."""

from __future__ import annotations

from array import array

from ..gpu import Read


def _u32(values: list[int]) -> bytes:
    return array("I", values).tobytes()


def _vectors(raw: bytes, count: int, dim: int) -> list[list[float]]:
    floats = array("f")
    floats.frombytes(raw[: count * dim * 4])
    flat = floats.tolist()
    return [flat[i * dim : (i + 1) * dim] for i in range(count)]


def packed_batches(sequences: list[list[int]], max_rows: int) -> list[list[int]]:
    """Indexes of `sequences` grouped in order into forwards of at most max_rows tokens (each
    sequence fits one)."""
    batches, rows = [[]], 0
    for index, ids in enumerate(sequences):
        if rows + len(ids) > max_rows and batches[-1]:
            batches.append([])
            rows = 0
        batches[-1].append(index)
        rows += len(ids)
    return [batch for batch in batches if batch]


class EncoderRunner:
    def __init__(self, device, executor, dim: int, reach: int = 0):
        """dim: a vector's numbers; reach: the rows either side a sliding layer sees."""
        self.device, self.executor, self.dim, self.reach = device, executor, dim, reach
        graph = executor.graph
        self.max_rows = graph.max_rows
        names = [n for n in ("ids", "positions", "spans", "spans_local", "seqs") if n in graph.inputs]
        self.inputs = {n: executor.buffer(n) for n in names}
        self.out = executor.buffer("embeddings")
        bound = {id(t) for op in graph.ops for t in op.bind.values()}  # BERT's graph has a RoPE table it never reads
        self.rotary = [(executor.buffer(n), r) for n, r in graph.rotary.items() if id(graph.inputs[n]) in bound]

    async def run(self, sequences: list[list[int]]) -> list[list[float]]:
        pending = []
        for batch in packed_batches(sequences, self.max_rows):
            ids, positions, spans, local, seqs = [], [], [], [], []
            tables = [[] for _ in self.rotary]
            for index in batch:
                first, count = len(ids), len(sequences[index])
                end = first + count
                ids += sequences[index]
                positions += range(count)
                spans += [first, end] * count
                if "spans_local" in self.inputs:
                    for row in range(first, end):
                        local += [max(first, row - self.reach), min(end, row + self.reach + 1)]
                seqs += [first, end]
                for table, (_, rotary) in zip(tables, self.rotary):
                    table.append(rotary.table(0, count))  # each text's positions from 0
            values = {"ids": ids, "positions": positions, "spans": spans, "spans_local": local, "seqs": seqs}
            for name, buffer in self.inputs.items():
                self.device.write_buffer(buffer, 0, _u32(values[name]))
            for (buffer, _), table in zip(self.rotary, tables):
                self.device.write_buffer(buffer, 0, b"".join(table))
            commands = self.executor.commands(len(ids), 0, logit_rows=len(batch))
            read = Read(self.out, 0, len(batch) * self.dim * 4)
            pending.append((self.device.submit(commands + [read])[0], len(batch)))
        vectors = []
        for read, count in pending:
            vectors += _vectors(await self.device.fetch(read), count, self.dim)
        return vectors


class DecoderRunner:
    def __init__(self, device, executor, dim: int):
        self.device, self.executor, self.dim = device, executor, dim
        self.max_rows = executor.graph.max_rows
        self.ids = executor.buffer("ids")
        self.out = executor.buffer("embeddings")
        self.rotary = [(executor.buffer(name), rotary) for name, rotary in executor.graph.rotary.items()]
        device.write_buffer(executor.buffer("seqs"), 0, _u32([0, 1]))  # the final norm's one row

    async def run(self, sequences: list[list[int]]) -> list[list[float]]:
        pending = []
        for ids in sequences:
            # LongRoPE (Phi-3): a sequence past long_after positions is rotated with the long factors.
            long = any(r.long_after is not None and len(ids) > r.long_after for _, r in self.rotary)
            for start in range(0, len(ids), self.max_rows):
                chunk = ids[start : start + self.max_rows]
                self.device.write_buffer(self.ids, 0, _u32(chunk))
                for buffer, rotary in self.rotary:
                    self.device.write_buffer(buffer, 0, rotary.table(start, len(chunk), long))
                commands = self.executor.commands(len(chunk), start, logit_rows=1)
                if start + len(chunk) == len(ids):
                    pending.append(self.device.submit(commands + [Read(self.out, 0, self.dim * 4)])[0])
                else:
                    self.device.submit(commands)
        return [_vectors(await self.device.fetch(read), 1, self.dim)[0] for read in pending]
