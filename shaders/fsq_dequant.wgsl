// Finite scalar quantization's decode (NeMo's GroupFiniteScalarQuantizer.decode, NanoCodec's): each
// frame's codes, one per group, become `groups` x `dims` values in [-1, 1], time-major:
//   y[t, g dims + d] = (n - h) / h,  n = (codes[t, g] / base_d) % L_d,  h = L_d / 2 (integer halves:
//   NeMo's num_levels // 2),  base_d = L_0 L_1 ... L_{d-1}
// with L_d the levels of dimension d (level0 .. level3; every group has the same). A code past the
// codebook wraps as NeMo's arithmetic does (the caller checks codes before they get here).
// Bindings: 0 step (uniform Step: rows = frames), 1 p (uniform Params), 2 codes (read, u32
//           [rows, groups]), 3 y (read_write, f32 [rows, groups dims]).
// Dispatch: (ceil(rows groups dims / 256), 1, 1) workgroups of 256 threads, one value each.
struct Params { groups: u32, dims: u32, level0: u32, level1: u32, level2: u32, level3: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let width = p.groups * p.dims;
    if (i >= step.rows * width) { return; }
    let d = i % p.dims;
    let code = codes[i / p.dims];  // frame t's group g: codes[t groups + g], and i / dims = t groups + g
    var levels = array<u32, 4>(p.level0, p.level1, p.level2, p.level3);  // a var: indexed at run time
    var base = 1u;
    for (var k = 0u; k < d; k++) { base *= levels[k]; }
    let mid = levels[d] / 2u;
    let n = (code / base) % levels[d];
    y[i] = (f32(n) - f32(mid)) / f32(mid);
}
