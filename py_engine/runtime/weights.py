"""Weight upload: checkpoint bytes go to the GPU exactly as stored.

A graph weight tensor is a shard (a row range) of the row-concatenation of one or more checkpoint
tensors (q|k|v, gate|up) that share one weight format. Matrices are read by the kernels in their
stored format (f32, f16, bf16, ggml blocks, MLX 4-bit: shaders/weights/), so their bytes are
placed as they are. Only tensors the kernels need in another dtype — f32 norm weights and biases
stored as 16-bit floats, the rare matrix no format reads raw — are placed raw into a temporary
buffer and converted by `convert.wgsl` once every placement has landed. Identical shards (a tied
LM head and the embedding) share one buffer. Block formats with a `repack` (quant.py) are then
rewritten in place by `repack.wgsl`, so the kernels read aligned 16-byte quants; the footprint
does not grow.

Bytes move only through the model source's placements (formats/source.py): on the desktop they
are written at once from a memory map, in the browser JavaScript streams them at `finish`."""

from __future__ import annotations

from ..errors import ModelFileError
from ..formats.mlx import MlxQuantized
from ..gpu import Dispatch
from .graph import Tensor, ceil_div
from .quant import FORMATS, REPACK_CHUNK

SRC_KIND = {"F16": 0, "BF16": 1, "F32": 2}
SRC_BYTES = {"F16": 2, "BF16": 2, "F32": 4}
# Stored dtype that each weight format reads as it is (the ggml block formats: their own names).
RAW_SOURCE = {
    "f32": "F32",
    "f16": "F16",
    "f16_packed": "F16",
    "bf16": "BF16",
    "mlx4_f16": "MLX4_F16",
    "mlx4_bf16": "MLX4_BF16",
}


def raw_source(weight_format: str) -> str:
    return RAW_SOURCE.get(weight_format, weight_format.upper())


REPACK_TILE_WORDS = 2048  # shaders/repack.wgsl's TILE_WORDS


def repack_params(weight_format: str, blocks: int, max_per_dim: int = 65535) -> tuple[dict, tuple]:
    """repack.wgsl's Params and grid for a binding of `blocks` blocks of this format."""
    fmt = FORMATS[weight_format]
    per_group = max(1, REPACK_TILE_WORDS // (REPACK_CHUNK * fmt.block_bytes // 4))
    groups = max(1, ceil_div(ceil_div(blocks, REPACK_CHUNK), per_group))
    grid_x = min(groups, max_per_dim)
    params = {"block_bytes": fmt.block_bytes, "blocks": blocks, "chunks_per_group": per_group, "grid_x": grid_x}
    fields = list(fmt.repack) + [(0, 0)] * (4 - len(fmt.repack))
    for i, (offset, size) in enumerate(fields):
        params[f"off{i}"], params[f"size{i}"] = offset, size
    return params, (grid_x, ceil_div(groups, grid_x), 1)


class WeightUploader:
    def __init__(self, device, kernels, tensors: dict, source, progress=None):
        self.device = device
        self.kernels = kernels
        self.tensors = tensors  # checkpoint name → TensorInfo
        self.source = source  # formats/source.py: ModelSource
        self.progress = progress  # (bytes landed, bytes expected)
        self.expected = 0
        self.landed = 0
        self.uploaded = {}
        self.bytes_uploaded = 0
        self._conversions = []  # (raw buffer, stored dtype, elements, dst buffer, dst dtype, dst element offset)
        self._repacks = []  # (buffer, weight format, blocks)

    def info(self, name: str):
        try:
            return self.tensors[name]
        except KeyError:
            path = next(iter(self.tensors.values())).path if self.tensors else "model"
            raise ModelFileError(path, f"missing tensor {name!r}") from None

    def expect(self, weights) -> None:
        """Announce the graph's weight tensors, so progress can report a total."""
        self.expected = sum({(t.weight, t.rows, t.dtype): t.nbytes for t in weights}.values())

    def upload(self, t: Tensor):
        key = (t.weight, t.rows, t.dtype)
        if key not in self.uploaded:
            buffer = self.device.create_buffer(t.nbytes, label=t.name)
            if t.weight.role == "matrix" and all(self.info(p).dtype == raw_source(t.dtype) for p in t.weight.parts):
                self._report(self.source.place(self.device, buffer, list(self._raw_pieces(t))))
                fmt = FORMATS[t.dtype]
                if fmt.repack:
                    k = self.info(t.weight.parts[0]).shape[-1]
                    self._repacks.append((buffer, t.dtype, t.rows[1] * k // fmt.block_elems))
            else:
                self._place_for_conversion(buffer, t)
            self.uploaded[key] = buffer
            self.bytes_uploaded += t.nbytes
        return self.uploaded[key]

    async def finish(self) -> None:
        """Let every placement land, then run the conversions and repacks and free their temporaries."""
        await self.source.flush(self.device, self._report)
        for out in {conversion[4] for conversion in self._conversions}:
            self.kernels.get("convert", OUT=out)
        if self._repacks:
            self.kernels.get("repack")
        await self.device.prepare()
        temporary = []
        for raw, dtype, count, dst, out, dst_elem in self._conversions:
            temporary += [raw, self._convert(raw, dtype, count, dst, out, dst_elem)]
        for buffer, fmt, blocks in self._repacks:
            temporary.append(self._repack(buffer, fmt, blocks))
        if temporary:
            last = self._repacks[-1][0] if self._repacks else self._conversions[-1][3]
            await self.device.read_buffer(last, 0, 4)  # conversions and repacks done
            for buffer in temporary:
                self.device.destroy_buffer(buffer)
        self._conversions.clear()
        self._repacks.clear()

    def _report(self, nbytes: int) -> None:
        self.landed += nbytes
        if self.progress and nbytes:
            self.progress(self.landed, max(self.expected, self.landed))

    def _raw_pieces(self, t: Tensor):
        """(byte offset in the shard, file, file start, length) for each part's rows inside it."""
        shard_start, count = t.rows
        first = 0
        for name in t.weight.parts:
            info = self.info(name)
            rows = info.shape[0]
            lo, hi = max(first, shard_start), min(first + rows, shard_start + count)
            if lo < hi:
                # An MLX tensor is three sections (packed, scales, biases), each laid out by rows.
                sections = (info.packed, info.scales, info.biases) if isinstance(info, MlxQuantized) else (info,)
                base = 0
                for section in sections:
                    row_bytes = section.nbytes // rows
                    yield (
                        base + (lo - shard_start) * row_bytes,
                        section.path,
                        section.start + (lo - first) * row_bytes,
                        (hi - lo) * row_bytes,
                    )
                    base += count * row_bytes
            first += rows

    def _place_for_conversion(self, buffer, t: Tensor):
        """Each part's rows, raw, into a buffer of their own; converted into place at finish."""
        shard_start, shard_rows = t.rows
        first = 0
        for name in t.weight.parts:
            info = self.info(name)
            if info.dtype not in SRC_KIND:
                raise ModelFileError(info.path, f"tensor {name!r}: dtype {info.dtype} is not a float weight")
            rows = info.shape[0] if info.shape else 1
            row_elems = (info.nbytes // SRC_BYTES[info.dtype]) // max(rows, 1)
            lo, hi = max(first, shard_start), min(first + rows, shard_start + shard_rows)
            if lo < hi:
                row_bytes = row_elems * SRC_BYTES[info.dtype]
                length = (hi - lo) * row_bytes
                raw = self.device.create_buffer(-(-length // 4) * 4, label=f"{name} raw")
                self._report(
                    self.source.place(self.device, raw, [(0, info.path, info.start + (lo - first) * row_bytes, length)])
                )
                self._conversions.append(
                    (raw, info.dtype, (hi - lo) * row_elems, buffer, t.dtype, (lo - shard_start) * row_elems)
                )
            first += rows

    def _repack(self, buffer, fmt: str, blocks: int):
        """Dispatch repack.wgsl over one weight buffer, in place; returns its params buffer."""
        kernel = self.kernels.get("repack")
        values, grid = repack_params(fmt, blocks, self.device.caps.limits.max_workgroups_per_dim)
        params = self.device.create_buffer(64, "uniform")
        self.device.write_buffer(params, 0, kernel.pack_params(values))
        bind = self.device.create_bind_group(kernel.handle, [(params, 0, 64), (buffer, 0, buffer.size)])
        self.device.submit([Dispatch(kernel.handle, bind, grid)])
        return params

    def _convert(self, raw, dtype: str, count: int, dst, out: str, dst_elem: int):
        """Dispatch convert.wgsl from a raw buffer into place; returns its params buffer."""
        kernel = self.kernels.get("convert", OUT=out)
        params = self.device.create_buffer(16, "uniform")
        groups = ceil_div(count, 256)
        grid = (min(groups, 65535), ceil_div(groups, 65535), 1)
        self.device.write_buffer(
            params,
            0,
            kernel.pack_params(
                {"count": count, "src_kind": SRC_KIND[dtype], "grid_x": grid[0], "dst_offset": dst_elem}
            ),
        )
        bind = self.device.create_bind_group(kernel.handle, [(params, 0, 16), (raw, 0, raw.size), (dst, 0, dst.size)])
        self.device.submit([Dispatch(kernel.handle, bind, grid)])
        return params
