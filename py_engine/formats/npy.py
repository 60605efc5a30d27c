"""Write a 1-D float32 .npy file without numpy (format version 1.0)."""

from __future__ import annotations

import struct


def write_npy_f32(path, values) -> None:
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({len(values)},), }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{len(values)}f", *values))
