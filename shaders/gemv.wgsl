// Linear layer for a few rows (decode): y[r, out_offset + n] = x[r, :] . w[n, :]
//                                        (+ bias[n] if has_bias) (+ residual[r, out_offset + n] if has_residual)
// Bindings (identical to matmul.wgsl; one bind group serves both):
//   0 step (uniform Step), 1 p (uniform Params),
//   2 x (read, f32 [rows, K]), 3 w (read, [N, K] weights in format WEIGHTS, as uploaded),
//   4 bias (read, f32 [N]), 5 residual (read, f32 [rows, out_stride]),
//   6 y (read_write, f32 [rows, out_stride]).
//   rows = p.rows, or step.rows when p.rows == 0. bias / residual are dummies when unused.
// Defines (py_engine/linear_plan.py: weight_defines, gemv_layout): WEIGHTS names the format;
//   kernels.py appends shaders/weights/<format>.wgsl, whose units part gives UNIT (weights per
//   unit), UNIT_QUADS, unit_x (a unit's activations into registers) and unit_dot (one weight
//   row's unit against them), so this file never reads w itself. VEC4 = (K % 4 == 0): x is read
//   as vec4 (XBlock), else one f32 at a time (float formats only). LANES threads split a weight
//   row's units, SLOTS such groups make a workgroup, and each thread keeps RPT rows (<= 4)
//   whose units share one load of the activations; STEP units per lane per loop iteration keep
//   several loads in flight. SUBGROUPS (kernels.py, from the device): reduce with subgroup
//   shuffles, else through workgroup memory.
// Dispatch: ceil(N / (SLOTS * RPT)) workgroups of LANES * SLOTS threads, laid out by linear_grid
//   over x and y (x fastest) so that no dimension exceeds 65535. Rows of x are taken one after
//   another; the workgroup's weights are cache-hot after the first.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<XBlock>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const THREADS: u32 = LANES * SLOTS;

var<workgroup> partial: array<vec4<f32>, THREADS>;  // [thread] its RPT partial dot products

// An activation block widened to f32 (a one-k block, VEC4 false, is splatted).
fn act_block(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }

fn x_quads(first: u32, xs: ptr<function, array<vec4<f32>, UNIT_QUADS>>) {
    for (var i = 0u; i < UNIT_QUADS; i++) { (*xs)[i] = act_block(first + i); }
}

// Unit u of rows n.x .. n.w (the first RPT of them) against the activations in xs.
fn unit_rows(n: vec4<u32>, u: u32, xs: ptr<function, array<vec4<f32>, UNIT_QUADS>>) -> vec4<f32> {
    var d = vec4<f32>(0.0);
    d.x = unit_dot(n.x, u, p.K, p.N, xs);
    if (RPT > 1u) { d.y = unit_dot(n.y, u, p.K, p.N, xs); }
    if (RPT > 2u) { d.z = unit_dot(n.z, u, p.K, p.N, xs); }
    if (RPT > 3u) { d.w = unit_dot(n.w, u, p.K, p.N, xs); }
    return d;
}

fn write_output(r: u32, n: u32, dot_value: f32) {
    let at = r * p.out_stride + p.out_offset + n;
    var v = dot_value;
    if (p.has_bias != 0u) { v += bias[n]; }
    if (p.has_residual != 0u) { v += residual[at]; }
    y[at] = v;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32,
//#endif
) {
    let rows = select(p.rows, step.rows, p.rows == 0u);
    let group = wid.x + wid.y * groups.x;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let n0 = (group * SLOTS + slot) * RPT;
    // Rows past N (in the last workgroup) read row N - 1 and write nothing: every thread runs
    // the same loop, so the reductions below stay in uniform control flow.
    let n = min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.N - 1u));
    let units = p.K / UNIT;
    let steps = (units + STEP * LANES - 1u) / (STEP * LANES);
    let x_row_blocks = select(p.K, p.K / 4u, VEC4);

    for (var r = 0u; r < rows; r++) {
        let x_row = r * x_row_blocks;
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < steps; s++) {
            let u = lane + s * STEP * LANES;
            if (STEP > 1u && u + LANES < units) {
                // Two units' loads issued before either is used.
                var xa: array<vec4<f32>, UNIT_QUADS>;
                var xb: array<vec4<f32>, UNIT_QUADS>;
                unit_x(u, x_row, &xa);
                unit_x(u + LANES, x_row, &xb);
                acc += unit_rows(n, u, &xa) + unit_rows(n, u + LANES, &xb);
            } else if (u < units) {
                var xa: array<vec4<f32>, UNIT_QUADS>;
                unit_x(u, x_row, &xa);
                acc += unit_rows(n, u, &xa);
            }
        }
        // Sum acc over the slot's LANES threads; lane 0 ends up with the total.
//#if SUBGROUPS
        // Butterfly within each subgroup (lanes l and l ^ o share a subgroup while o < its size),
        // then workgroup memory across the subgroups of a slot when a slot spans several.
        for (var o = LANES / 2u; o > 0u; o >>= 1u) {
            acc += select(vec4<f32>(0.0), subgroupShuffleXor(acc, o), o < subgroup_size);
        }
        let span = min(LANES, subgroup_size);
        partial[lid] = acc;
        workgroupBarrier();
        if (lane == 0u) {
            for (var k = span; k < LANES; k += span) { acc += partial[lid + k]; }
        }
//#else
        partial[lid] = acc;
        workgroupBarrier();
        for (var stride = LANES / 2u; stride > 1u; stride >>= 1u) {
            if (lane < stride) { partial[lid] += partial[lid + stride]; }
            workgroupBarrier();
        }
        if (lane == 0u) { acc = partial[lid] + partial[lid + 1u]; }
//#endif
        if (lane == 0u) {
            for (var j = 0u; j < RPT; j++) {
                if (n0 + j < p.N) { write_output(r, n0 + j, acc[j]); }
            }
        }
        workgroupBarrier();  // `partial` is rewritten for the next row
    }
}
