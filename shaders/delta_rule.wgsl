// Qwen3.5's Gated DeltaNet, token by token (the recurrent form: a decode token's, and a verifying
// forward's few rows, each computed as a decode token computes it; delta_chunk_*.wgsl take a
// prefill's many rows). Per value head h (key head kh: key_head below), token t in order:
//   q = l2norm(q_kh) * dk^-0.5, k = l2norm(k_kh)     (l2norm(x) = x * inverseSqrt(sum(x^2) + 1e-6))
//   beta = sigmoid(b_h), g = A_h * softplus(a_h + dt_bias_h), A_h = -exp(a_log_h) (a_is_log = 1;
//   llama.cpp's files store A itself: a_is_log = 0)
//   S = exp(g) S;  delta_j = (v_j - sum_i S[i][j] k_i) * beta;  S[i][j] += k_i delta_j;
//   y[t, h * dv + j] = o_j = sum_i S[i][j] q_i   (raw: delta_norm.wgsl applies the gated RMSNorm)
// S is the layer's state [nv, dk, dv] (S[i][j] at (h * dk + i) * dv + j). Columns of S evolve
// independently, so a workgroup owns TILE columns of one head, its 256 threads GROUPS rows of
// each (thread (r, c): column c, rows r, r + GROUPS, …), and keeps them in registers across the
// forward's rows: the state is read once and written once. A forward from position 0 starts from
// zeros (the buffer is not read); the engine snapshots it where it may go back
// (py_engine/recurrent_state.py).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 mixed (read, f32 [rows, conv_dim]: q
//           heads (nk x dk), k heads (nk x dk), v heads (nv x dv), after short_conv's SiLU),
//           3 proj (read, f32 [rows, proj_stride]: b (nv) at b_at, a (nv) at a_at),
//           4 a_log (read, f32 [nv]), 5 dt_bias (read, f32 [nv]),
//           6 state (read_write, f32 [nv, dk, dv]), 7 y (read_write, f32 [rows, nv * dv]).
// Dispatch: (nv, ceil(dv / TILE), 1) workgroups of 256 threads. dk <= 256. H100, Qwen3.5-0.8B's
//           shape (16 heads of 128 x 128), a decode token: 71 µs a layer with a workgroup per head
//           walking its columns; this way, a few.
struct Params {
    nk: u32, nv: u32, dk: u32, dv: u32,
    conv_dim: u32, proj_stride: u32, z_at: u32, b_at: u32,
    a_at: u32, a_is_log: u32, eps: f32, heads_tiled: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> mixed: array<f32>;
@group(0) @binding(3) var<storage, read> proj: array<f32>;
@group(0) @binding(4) var<storage, read> a_log: array<f32>;
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 256u;
const TILE: u32 = 16u;  // columns a workgroup owns
const GROUPS: u32 = THREADS / TILE;  // threads sharing a column
const HELD: u32 = 16u;  // rows a thread holds: dk <= GROUPS * HELD
var<workgroup> q: array<f32, 256>;
var<workgroup> k: array<f32, 256>;
var<workgroup> sums: array<vec2<f32>, 256>;

// (sum over the workgroup of a.x, of a.y); every thread gets both.
fn workgroup_sums(lid: u32, a: vec2<f32>) -> vec2<f32> {
    sums[lid] = a;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { sums[lid] += sums[lid + stride]; }
        workgroupBarrier();
    }
    let total = sums[0];
    workgroupBarrier();
    return total;
}

// Column c's sum of the GROUPS threads' parts (every thread gets its column's), in a fixed order.
fn column_sum(lid: u32, c: u32, part: f32) -> f32 {
    sums[lid] = vec2<f32>(part, 0.0);
    workgroupBarrier();
    var total = 0.0;
    for (var g = 0u; g < GROUPS; g++) { total += sums[g * TILE + c].x; }
    workgroupBarrier();
    return total;
}

fn softplus(x: f32) -> f32 {
    if (x > 20.0) { return x; }  // as torch's threshold
    return log(1.0 + safe_exp(x));
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let c = lid % TILE;
    let r = lid / TILE;
    let j = wid.y * TILE + c;
    let column = j < p.dv;
    let kh = key_head(h);
    let dk = p.dk;
    let dv = p.dv;
    var held = array<f32, HELD>();  // S[r + GROUPS m][j]; zero from position 0
    if (step.pos > 0u && column) {
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { held[m] = state[(h * dk + i) * dv + j]; }
        }
    }
    var decay_rate = a_log[h];
    if (p.a_is_log == 1u) { decay_rate = -safe_exp(decay_rate); }
    for (var t = 0u; t < step.rows; t++) {
        let row = t * p.conv_dim;
        var squares = vec2<f32>(0.0);
        if (lid < dk) {
            let qi = mixed[row + kh * dk + lid];
            let ki = mixed[row + p.nk * dk + kh * dk + lid];
            q[lid] = qi;
            k[lid] = ki;
            squares = vec2<f32>(qi * qi, ki * ki);
        }
        let total = workgroup_sums(lid, squares);  // its barriers also publish q and k
        let q_scale = inverseSqrt(total.x + 1e-6) * inverseSqrt(f32(dk));
        let k_scale = inverseSqrt(total.y + 1e-6);
        let beta = 1.0 / (1.0 + safe_exp(-proj[t * p.proj_stride + p.b_at + h]));
        let decay = safe_exp(decay_rate * softplus(proj[t * p.proj_stride + p.a_at + h] + dt_bias[h]));
        var part = 0.0;
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { part += held[m] * k[i]; }
        }
        let kv = column_sum(lid, c, part) * decay * k_scale;
        var v = 0.0;
        if (column) { v = mixed[row + 2u * p.nk * dk + h * dv + j]; }
        let delta = (v - kv) * beta * k_scale;
        var out = 0.0;
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) {
                held[m] = decay * held[m] + k[i] * delta;
                out += held[m] * q[i];
            }
        }
        let o = column_sum(lid, c, out) * q_scale;
        if (r == 0u && column) { y[t * p.nv * dv + h * dv + j] = o; }
    }
    if (column) {
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { state[(h * dk + i) * dv + j] = held[m]; }
        }
    }
}

// The key head a value head reads: HF groups value heads by key head (h / (nv / nk)); llama.cpp's
// files store them tiled (stored head h is HF's (h % nk) * (nv / nk) + h / nk), so h % nk.
fn key_head(h: u32) -> u32 {
    if (p.heads_tiled == 1u) { return h % p.nk; }
    return h / (p.nv / p.nk);
}
