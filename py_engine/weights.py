"""Weight upload: checkpoint bytes go to the GPU exactly as stored.

A graph weight tensor is a shard (a row range) of the row-concatenation of one or more checkpoint
tensors (q|k|v, gate|up) that share one weight format. Matrices are read by the kernels in their
stored format (f32, f16, bf16, ggml blocks, MLX 4-bit: shaders/weights/), so their bytes are copied
as they are. Only f32 vectors (norm weights, biases) stored as 16-bit floats — and the rare
matrix a format can't read raw — are staged and converted by `convert.wgsl`. Identical shards
(a tied LM head and the embedding) share one buffer."""
from __future__ import annotations

from .errors import ModelFileError
from .formats.mlx import MlxQuantized
from .gpu import Dispatch
from .graph import Tensor, ceil_div

SRC_KIND = {"F16": 0, "BF16": 1, "F32": 2}
SRC_BYTES = {"F16": 2, "BF16": 2, "F32": 4}
DST_BYTES = {"f32": 4, "f16": 2}
STAGING_BYTES = 16 << 20
# Stored dtype that each weight format reads as it is (the ggml block formats: their own names).
RAW_SOURCE = {"f32": "F32", "f16": "F16", "f16_packed": "F16", "bf16": "BF16",
              "mlx4_f16": "MLX4_F16", "mlx4_bf16": "MLX4_BF16"}


def raw_source(weight_format: str) -> str:
    return RAW_SOURCE.get(weight_format, weight_format.upper())


class WeightUploader:
    def __init__(self, device, kernels, tensors: dict, reader, progress=None):
        self.device = device
        self.progress = progress  # (bytes uploaded, bytes expected) after each weight
        self.expected = 0
        self.kernels = kernels
        self.tensors = tensors  # checkpoint name → TensorInfo
        self.reader = reader  # .view(info) → bytes-like
        self.uploaded = {}
        self.bytes_uploaded = 0
        self._staging = None
        self._params = device.create_buffer(16, "uniform")

    def info(self, name: str):
        try:
            return self.tensors[name]
        except KeyError:
            path = next(iter(self.tensors.values())).path if self.tensors else "model"
            raise ModelFileError(path, f"missing tensor {name!r}") from None

    def upload(self, t: Tensor):
        key = (t.weight, t.rows, t.dtype)
        if key not in self.uploaded:
            buffer = self.device.create_buffer(t.nbytes, label=t.name)
            self._fill(buffer, t)
            self.uploaded[key] = buffer
            self.bytes_uploaded += t.nbytes
            if self.progress:
                self.progress(self.bytes_uploaded, max(self.expected, self.bytes_uploaded))
        return self.uploaded[key]

    def expect(self, weights) -> None:
        """Announce the graph's weight tensors, so progress can report a total."""
        self.expected = sum({(t.weight, t.rows, t.dtype): t.nbytes for t in weights}.values())

    def _fill(self, buffer, t: Tensor):
        if t.weight.role == "matrix" and all(self.info(p).dtype == raw_source(t.dtype) for p in t.weight.parts):
            self._copy_raw(buffer, t)
        else:
            self._convert(buffer, t)

    def _copy_raw(self, buffer, t: Tensor):
        """Stored bytes, row range by row range. Rows of some block formats (34-byte Q8_0 blocks,
        210-byte Q6_K blocks) start at 2-byte offsets, which a GPU write can't target: such a shard
        is assembled on the host and written once."""
        pieces = list(self._raw_pieces(t))
        if all(at % 4 == 0 and len(data) % 4 == 0 for at, data in pieces):
            for at, data in pieces:
                self.device.write_buffer(buffer, at, data)
            return
        whole = bytearray(buffer.size)
        for at, data in pieces:
            whole[at:at + len(data)] = data
        self.device.write_buffer(buffer, 0, whole)

    def _raw_pieces(self, t: Tensor):
        """(byte offset in the shard, stored bytes) for each part's rows inside the shard."""
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
                    src = self.reader.view(section)
                    yield base + (lo - shard_start) * row_bytes, src[(lo - first) * row_bytes:(hi - first) * row_bytes]
                    base += count * row_bytes
            first += rows

    def _convert(self, buffer, t: Tensor):
        shard_start, shard_rows = t.rows
        first = 0  # first row of the current part in the concatenated matrix
        for name in t.weight.parts:
            info = self.info(name)
            if info.dtype not in SRC_KIND:
                raise ModelFileError(info.path, f"tensor {name!r}: dtype {info.dtype} is not a float weight")
            rows = info.shape[0] if info.shape else 1
            row_elems = (info.nbytes // SRC_BYTES[info.dtype]) // max(rows, 1)
            lo, hi = max(first, shard_start), min(first + rows, shard_start + shard_rows)
            if lo < hi:
                src = self.reader.view(info)
                row_bytes = row_elems * SRC_BYTES[info.dtype]
                chunk = src[(lo - first) * row_bytes:(hi - first) * row_bytes]
                self._write(buffer, (lo - shard_start) * row_elems, chunk, info.dtype, t.dtype)
            first += rows

    def _write(self, buffer, dst_elem: int, data, src_dtype: str, dst_dtype: str):
        dst_offset = dst_elem * DST_BYTES[dst_dtype]
        if src_dtype == dst_dtype.upper() and dst_offset % 4 == 0 and len(data) % 4 == 0:
            self.device.write_buffer(buffer, dst_offset, data)
            return
        kernel = self.kernels.get("convert", OUT=dst_dtype)
        elem = SRC_BYTES[src_dtype]
        step = STAGING_BYTES // elem // 2 * 2
        count_all = len(data) // elem
        for start in range(0, count_all, step):
            count = min(step, count_all - start)
            raw = data[start * elem:(start + count) * elem]
            if len(raw) % 4:
                raw = bytes(raw) + bytes(4 - len(raw) % 4)
            self.device.write_buffer(self._staging_buffer(), 0, raw)
            groups = ceil_div(count, 256)
            grid = (min(groups, 65535), ceil_div(groups, 65535), 1)
            self.device.write_buffer(self._params, 0, kernel.pack_params(
                {"count": count, "src_kind": SRC_KIND[src_dtype], "grid_x": grid[0], "dst_offset": dst_elem + start}))
            bind = self.device.create_bind_group(kernel.handle, [
                (self._params, 0, 16), (self._staging, 0, STAGING_BYTES), (buffer, 0, buffer.size)])
            self.device.submit([Dispatch(kernel.handle, bind, grid)])

    def _staging_buffer(self):
        if self._staging is None:
            self._staging = self.device.create_buffer(STAGING_BYTES, label="weight staging")
        return self._staging

    def release_staging(self):
        if self._staging is not None:
            self.device.destroy_buffer(self._staging)
            self._staging = None
