// One pass of Pillow's 8-bit separable resampling (libImaging/Resample.c, the 4-bytes-a-pixel
// path), bit for bit: along x (VERTICAL = false) or along y (VERTICAL = true), each output channel
// clamp((2^21 + sum_i c[first + i] * k_i) >> 22, 0, 255) over the integer taps k_i that
// py_engine/vision/resample.py computes as Pillow does (22 fraction bits). A pixel is one u32, R in
// the low byte (the browser's ImageData bytes, Pillow's RGB/RGBA storage); all four bytes take the
// same arithmetic, so alpha is resampled as Pillow resamples a 4-band image (RGBX, RGBa): opaque
// stays 255, and an RGB image's fourth byte is don't-care.
// Bindings: 0 p (uniform Params), 1 src (read, u32 [src rows][p.src_w] pixels),
//   2 plan (read, i32 [out size along the pass][p.plan_stride]: per output index its first
//   source index, its tap count, then its taps, zero-padded to plan_stride - 2),
//   3 dst (read_write, u32 [p.out_h][p.out_w] pixels).
//   Along x: dst[y][x] from src row y, pixels first .. first + count of plan[x].
//   Along y: dst[y][x] from src column x, rows first .. first + count of plan[y] (src_w = out_w).
// Defines: VERTICAL (above).
// Dispatch: (ceil(p.out_w / 16), ceil(p.out_h / 16), 1) workgroups of 16 x 16, a pixel a thread.
struct Params { src_w: u32, out_w: u32, out_h: u32, plan_stride: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> plan: array<i32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

const PRECISION_BITS: u32 = 22u;  // Pillow's 32 - 8 - 2

fn channels(pixel: u32) -> vec4<i32> {
    return vec4<i32>((vec4<u32>(pixel) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u));
}

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let x = gid.x;
    let y = gid.y;
    if (x >= p.out_w || y >= p.out_h) { return; }
    let index = select(x, y, VERTICAL);  // the output index along the pass
    let row = index * p.plan_stride;
    let first = u32(plan[row]);
    let count = u32(plan[row + 1u]);
    var acc = vec4<i32>(1 << (PRECISION_BITS - 1u));
    for (var i = 0u; i < count; i++) {
        let at = select(y * p.src_w + first + i, (first + i) * p.src_w + x, VERTICAL);
        acc += channels(src[at]) * plan[row + 2u + i];
    }
    let c = vec4<u32>(clamp(acc >> vec4<u32>(PRECISION_BITS), vec4<i32>(0), vec4<i32>(255)));
    dst[y * p.out_w + x] = c.x | (c.y << 8u) | (c.z << 16u) | (c.w << 24u);
}
