// Weight dtype conversion at load time: raw f16 / bf16 / f32 words as stored in the checkpoint
// → OUT (f32, or f16 on shader-f16 devices). Runs once per tensor; Python never touches values.
// Bindings: 0 p (uniform Params), 1 src (read, u32 words of the raw tensor),
//           2 dst (read_write, OUT; elements dst_offset .. dst_offset + count are written).
// Dispatch: n = ceil(count / 256) workgroups of 256 as (min(n, 65535), ceil(n / 65535), 1);
//           p.grid_x is the x size, so the element index is linear over the 2-D grid.
// src_kind: 0 = f16, 1 = bf16, 2 = f32.
struct Params { count: u32, src_kind: u32, grid_x: u32, dst_offset: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<OUT>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * p.grid_x + wid.x) * 256u + lid;
    if (i >= p.count) { return; }
    var value: f32;
    if (p.src_kind == 2u) {
        value = bitcast<f32>(src[i]);
    } else {
        let bits = (src[i / 2u] >> ((i % 2u) * 16u)) & 0xffffu;
        if (p.src_kind == 1u) {
            value = bitcast<f32>(bits << 16u);
        } else {
            value = unpack2x16float(bits).x;
        }
    }
    dst[p.dst_offset + i] = OUT(value);
}
