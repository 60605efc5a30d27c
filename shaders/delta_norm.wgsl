// Gated DeltaNet's output norm (after delta_rule.wgsl, or the many-row forward's
// delta_chunk_scan.wgsl): the gated RMSNorm over each value head's dv outputs, in place:
//   y[r, h dv + j] = o_j * inverseSqrt(mean_j(o_j^2) + eps) * norm[j] * silu(z[r, h dv + j])
// with o = y[r, h dv .. h dv + dv] as the scan wrote it and z from proj's column z_at.
// Bindings: 0 step (uniform Step), 1 p (uniform Params; the prep's), 2 proj (read, f32 [rows,
//           proj_stride]: z [nv, dv] from column z_at), 3 norm (read, f32 [dv]),
//           4 y (read_write, f32 [rows, nv dv]).
// Dispatch: (nv, step.rows, 1) workgroups of 64 threads, one (value head, row) each.
struct Params {
    nk: u32, nv: u32, dk: u32, dv: u32,
    conv_dim: u32, proj_stride: u32, z_at: u32, b_at: u32,
    a_at: u32, a_is_log: u32, eps: f32, heads_tiled: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> proj: array<f32>;
@group(0) @binding(3) var<storage, read> norm: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 64u;
var<workgroup> partial: array<f32, THREADS>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let r = wid.y;
    if (h >= p.nv || r >= step.rows) { return; }
    let y_row = r * p.nv * p.dv + h * p.dv;
    let z_row = r * p.proj_stride + p.z_at + h * p.dv;
    var sum = 0.0;
    for (var j = lid; j < p.dv; j += THREADS) {
        let o = y[y_row + j];
        sum += o * o;
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.dv) + p.eps);
    for (var j = lid; j < p.dv; j += THREADS) {
        let z = proj[z_row + j];
        y[y_row + j] = y[y_row + j] * scale * norm[j] * (z / (1.0 + safe_exp(-z)));
    }
}
