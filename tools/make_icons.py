"""Render the app icons (static/icon-*.png) from static/icon.svg's design, in pure Python.

    python tools/make_icons.py

The SVG is the source of truth; this draws the same picture (a rounded square filled with the
violet-to-cyan gradient, the white flame, the gradient inner flame) with a small scanline
rasterizer (nonzero winding, 4 sub-rows per pixel, exact horizontal coverage) and writes PNGs with
zlib + struct. No network, no imaging library. Outputs:

    icon-192.png, icon-512.png                     purpose "any": the rounded square, transparent corners
    icon-maskable-192.png, icon-maskable-512.png   purpose "maskable": full-bleed gradient, the flame scaled
                                                   into the central safe zone (a circle of radius 40%)
"""

from __future__ import annotations

import math
import re
import struct
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"

# From static/icon.svg (64 x 64 user units).
STOPS = [(0.0, (0x5A, 0x46, 0xE8)), (0.55, (0x7C, 0x5C, 0xF5)), (1.0, (0x2F, 0xC4, 0xE8))]
GRADIENT = ((8.0, 60.0), (56.0, 4.0))
CORNER = 15.0
FLAME = (
    "M35.5 9c1.4 9.2 14.5 13.6 14.5 27.5C50 46.7 42 54 32 54s-18-7.3-18-17.2c0-8.3 5-13.5 9.2-16.8"
    "-.3 5.9 1.8 9.6 5.6 11-2.4-8.8.1-16.4 6.7-22z"
)
INNER = (
    "M32.3 48.5c-4.7 0-8.1-3.3-8.1-7.6 0-4.4 3.3-7 6.1-9.2.2 3.7 2.2 5.8 4.6 5.8 2 0 3.1-1.7 2.9-4.3"
    " 2.7 2.3 3.4 5.1 3.4 7.7 0 4.3-3.7 7.6-8.9 7.6z"
)
SUB = 4  # sub-rows per pixel


def parse_path(d: str) -> list[list[tuple[float, float]]]:
    """SVG path data (M, L, C, S, Z and their relative forms) flattened into closed polygons."""
    tokens = re.findall(r"[MmLlCcSsZz]|-?(?:\d+\.?\d*|\.\d+)(?:e-?\d+)?", d)
    polys, poly = [], []
    x = y = 0.0
    last_ctrl = None
    cmd = None
    i = 0

    def num():
        nonlocal i
        i += 1
        return float(tokens[i - 1])

    while i < len(tokens):
        if tokens[i].isalpha():
            cmd = tokens[i]
            i += 1
            if cmd in "Zz":
                if poly:
                    polys.append(poly)
                poly, last_ctrl = [], None
                continue
        rel = cmd.islower()
        ox, oy = (x, y) if rel else (0.0, 0.0)
        c = cmd.upper()
        if c == "M":
            if poly:
                polys.append(poly)
            x, y = ox + num(), oy + num()
            poly = [(x, y)]
            cmd = "l" if rel else "L"  # further pairs are line-tos
            last_ctrl = None
        elif c == "L":
            x, y = ox + num(), oy + num()
            poly.append((x, y))
            last_ctrl = None
        elif c in "CS":
            if c == "C":
                c1 = (ox + num(), oy + num())
            else:  # reflection of the previous control point
                c1 = (2 * x - last_ctrl[0], 2 * y - last_ctrl[1]) if last_ctrl else (x, y)
            c2 = (ox + num(), oy + num())
            end = (ox + num(), oy + num())
            p0 = (x, y)
            for k in range(1, 25):
                t = k / 24
                u = 1 - t
                poly.append(
                    (
                        u**3 * p0[0] + 3 * u * u * t * c1[0] + 3 * u * t * t * c2[0] + t**3 * end[0],
                        u**3 * p0[1] + 3 * u * u * t * c1[1] + 3 * u * t * t * c2[1] + t**3 * end[1],
                    )
                )
            last_ctrl = c2
            x, y = end
        else:
            raise ValueError(f"unsupported path command {cmd}")
    if poly:
        polys.append(poly)
    return polys


def rounded_rect(x0, y0, x1, y1, r) -> list[list[tuple[float, float]]]:
    pts = []
    for cx, cy, a0 in ((x1 - r, y0 + r, -90), (x1 - r, y1 - r, 0), (x0 + r, y1 - r, 90), (x0 + r, y0 + r, 180)):
        for k in range(17):
            a = math.radians(a0 + 90 * k / 16)
            pts.append((cx + r * math.cos(a), cy + r * math.sin(a)))
    return [pts]


def coverage(polys, size: int, transform) -> list[float]:
    """Per-pixel coverage (0..1) of the polygons (nonzero winding) on a size x size grid."""
    edges = []
    for poly in polys:
        pts = [transform(p) for p in poly]
        for (ax, ay), (bx, by) in zip(pts, pts[1:] + pts[:1]):
            if ay != by:
                edges.append((ax, ay, bx, by, 1 if by > ay else -1))
    cov = [0.0] * (size * size)
    for row in range(size * SUB):
        sy = (row + 0.5) / SUB
        crossings = []
        for ax, ay, bx, by, w in edges:
            if (ay <= sy < by) or (by <= sy < ay):
                crossings.append((ax + (sy - ay) * (bx - ax) / (by - ay), w))
        if not crossings:
            continue
        crossings.sort()
        base = (row // SUB) * size
        wind = 0
        for (xa, w), (xb, _) in zip(crossings, crossings[1:]):
            wind += w
            if wind == 0 or xb <= xa:
                continue
            xa, xb = max(xa, 0.0), min(xb, float(size))
            px = int(xa)
            while px < size and px < xb:
                lo, hi = max(xa, px), min(xb, px + 1)
                if hi > lo:
                    cov[base + px] += (hi - lo) / SUB
                px += 1
    return cov


def gradient_color(u: float, v: float) -> tuple[float, float, float]:
    (x0, y0), (x1, y1) = GRADIENT
    dx, dy = x1 - x0, y1 - y0
    t = min(1.0, max(0.0, ((u - x0) * dx + (v - y0) * dy) / (dx * dx + dy * dy)))
    for (t0, c0), (t1, c1) in zip(STOPS, STOPS[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0)
            return tuple(a + (b - a) * f for a, b in zip(c0, c1))
    return STOPS[-1][1]


def render(size: int, maskable: bool) -> bytes:
    """RGBA rows of the icon. Design units (64) map to pixels; the maskable icon fills the square
    with the gradient and shrinks the flame (which spans ~45 units) into the 80% safe circle."""
    scale = size / 64
    if maskable:
        flame_scale, centre = 0.75, (32.0, 31.5)  # flame box ~36 x 45 units -> fits radius 25.6 units

        def to_px(p):
            return (
                (centre[0] + (p[0] - centre[0]) * flame_scale) * scale,
                (centre[1] + (p[1] - centre[1]) * flame_scale) * scale,
            )

        background = [1.0] * (size * size)
    else:

        def to_px(p):
            return (p[0] * scale, p[1] * scale)

        background = coverage(rounded_rect(0, 0, 64, 64, CORNER), size, lambda p: (p[0] * scale, p[1] * scale))
    flame = coverage(parse_path(FLAME), size, to_px)
    inner = coverage(parse_path(INNER), size, to_px)
    out = bytearray()
    for y in range(size):
        out.append(0)  # PNG filter: none
        for x in range(size):
            i = y * size + x
            grad = gradient_color((x + 0.5) / scale, (y + 0.5) / scale)
            a_bg = min(1.0, background[i])
            a_fl, a_in = min(1.0, flame[i]), min(1.0, inner[i])
            # Layers (premultiplied "over"): gradient square, white flame, gradient inner flame.
            rgb = [c * a_bg for c in grad]
            alpha = a_bg
            rgb = [255 * a_fl + c * (1 - a_fl) for c in rgb]
            alpha = a_fl + alpha * (1 - a_fl)
            rgb = [g * a_in + c * (1 - a_in) for g, c in zip(grad, rgb)]
            alpha = a_in + alpha * (1 - a_in)
            if alpha > 0:
                out += bytes(min(255, round(c / alpha)) for c in rgb)
            else:
                out += b"\0\0\0"
            out.append(round(alpha * 255))
    return bytes(out)


def png(size: int, rows: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def main() -> int:
    for size in (192, 512):
        for maskable in (False, True):
            path = STATIC / f"icon-{'maskable-' if maskable else ''}{size}.png"
            path.write_bytes(png(size, render(size, maskable)))
            print(f"make_icons: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
