// RMSNorm: y[r, :] = x[r, :] * inverseSqrt(mean(x[r, :]^2) + eps) * (w + w_offset)
//          (+ residual[r, :] when add_residual = 1: a post-norm, Gemma 2/3's sublayer outputs)
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, dim]),
//           3 w (read, f32 [dim]), 4 residual (read, f32 [rows, dim]; read only with add_residual),
//           5 y (read_write, f32 [rows, dim]).
// Defines: SUBGROUPS (kernels.py, from the device): the sum of squares reduces by subgroups.
// Dispatch: (step.rows, 1, 1) workgroups of 256 threads, one row each. With p.last_row_only = 1
//           (the LM head's input), workgroup i < step.logit_rows normalises row step.rows -
//           step.logit_rows + i into row i of y (1 row: the last position; more when drafted
//           tokens are verified); dispatch at least that many, the rest return at once.
//           w_offset is 1 for Gemma-style (1 + w) weights.
// Q8_OUTPUT (define; the LM head's input where its GEMV reads x quantized, gemv.wgsl Q8_INPUT):
//   6 yq (read_write, [rows][q8_row_quads of dim] vec4<u32>) also takes y's rows as quantize_rows.wgsl
//   SPREAD would leave them (shaders/quantize_32.wgsl: the same bits as the GEMV quantizing y
//   itself), so that the head's many workgroups do not each stage and quantize it. dim % 32 == 0.
// OUT_SCALE (define; Gemma 4's layer_scalar): the output (residual added) times out_scale[0],
//   7 out_scale (6 without Q8_OUTPUT; read, f32 [1]): a checkpoint's weight, so a buffer, not a param.
//#optional Q8_OUTPUT
//#optional OUT_SCALE
struct Params { dim: u32, eps: f32, w_offset: f32, last_row_only: u32, add_residual: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> residual: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
//#if Q8_OUTPUT
@group(0) @binding(6) var<storage, read_write> yq: array<vec4<u32>>;

const Q32_THREADS: u32 = 256u;  // shaders/quantize_32.wgsl: every thread, a vec4 each

// Word i of yq (shaders/quantize_32.wgsl's store_q8).
fn q8_word(i: u32, value: u32) { yq[i / 4u][i % 4u] = value; }
//#endif
//#if OUT_SCALE
//#if Q8_OUTPUT
@group(0) @binding(7) var<storage, read> out_scale: array<f32>;
//#else
@group(0) @binding(6) var<storage, read> out_scale: array<f32>;
//#endif
fn scaled(v: f32) -> f32 { return v * out_scale[0]; }
fn scaled4(v: vec4<f32>) -> vec4<f32> { return v * out_scale[0]; }
//#else
fn scaled(v: f32) -> f32 { return v; }
fn scaled4(v: vec4<f32>) -> vec4<f32> { return v; }
//#endif

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32,
//#endif
) {
    var src_row = wid.x;
    if (p.last_row_only == 1u) {
        if (wid.x >= step.logit_rows) { return; }
        src_row = step.rows - step.logit_rows + wid.x;
    }
    let src = src_row * p.dim;
    let dst = wid.x * p.dim;
    // Four elements' loads before their adds (same order of adds as one at a time): a rolled
    // loop of one load and its use waits a memory latency per element, which was most of this
    // kernel's time. The same below for the output.
    var sum = 0.0;
    var i = lid;
    for (; i + 768u < p.dim; i += 1024u) {
        let v = vec4<f32>(x[src + i], x[src + i + 256u], x[src + i + 512u], x[src + i + 768u]);
        sum = (((sum + v.x * v.x) + v.y * v.y) + v.z * v.z) + v.w * v.w;
    }
    for (; i < p.dim; i += 256u) {
        let v = x[src + i];
        sum += v * v;
    }
//#if SUBGROUPS
    // A sum per subgroup, then the subgroups' sums in order: one barrier instead of eight.
    // Subgroups hold consecutive invocations (as gemv.wgsl assumes).
    let subgroup_sum = subgroupAdd(sum);
    if (subgroup_lane == 0u) { partial[lid / subgroup_size] = subgroup_sum; }
    workgroupBarrier();
    var total = 0.0;
    for (var k = 0u; k < 256u / subgroup_size; k++) { total += partial[k]; }
//#else
    partial[lid] = sum;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let total = partial[0];
//#endif
    let scale = inverseSqrt(total / f32(p.dim) + p.eps);
    var j = lid;
    for (; j + 768u < p.dim; j += 1024u) {
        let v = vec4<f32>(x[src + j], x[src + j + 256u], x[src + j + 512u], x[src + j + 768u]);
        let g = vec4<f32>(w[j], w[j + 256u], w[j + 512u], w[j + 768u]) + p.w_offset;
        var out = v * scale * g;
        if (p.add_residual == 1u) {
            out += vec4<f32>(residual[src + j], residual[src + j + 256u], residual[src + j + 512u], residual[src + j + 768u]);
        }
        out = scaled4(out);
        y[dst + j] = out.x;
        y[dst + j + 256u] = out.y;
        y[dst + j + 512u] = out.z;
        y[dst + j + 768u] = out.w;
    }
    for (; j < p.dim; j += 256u) {
        var out = x[src + j] * scale * (w[j] + p.w_offset);
        if (p.add_residual == 1u) { out += residual[src + j]; }
        y[dst + j] = scaled(out);
    }
//#if Q8_OUTPUT
    // The row again (cache-hot), a vec4 of consecutive elements a thread, with y's arithmetic.
    for (var first = 0u; first < p.dim / 4u; first += 256u) {  // uniform: barriers in quantize_32
        let v4 = first + lid;
        let live = 4u * v4 < p.dim;
        var out = vec4<f32>(0.0);
        if (live) {
            let k = 4u * v4;
            let v = vec4<f32>(x[src + k], x[src + k + 1u], x[src + k + 2u], x[src + k + 3u]);
            let g = vec4<f32>(w[k], w[k + 1u], w[k + 2u], w[k + 3u]) + p.w_offset;
            out = v * scale * g;
            if (p.add_residual == 1u) {
                out += vec4<f32>(residual[src + k], residual[src + k + 1u], residual[src + k + 2u], residual[src + k + 3u]);
            }
            out = scaled4(out);
        }
        let q = quantize_32(lid, out, out, live);
        if (live) { store_q8(q, wid.x, p.dim, v4, lid % 8u == 0u); }
    }
//#endif
}
