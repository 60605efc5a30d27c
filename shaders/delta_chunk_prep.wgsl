// Gated DeltaNet (Qwen3.5's linear attention), many-row forward, step 1 of 3: everything of a chunk
// of C tokens that does not depend on the recurrent state (the chunked "gated delta rule" of
// flash-linear-attention / transformers' torch_chunk_gated_delta_rule). delta_chunk_scan.wgsl then
// walks the chunks in order through the state, delta_norm.wgsl applies the gated RMSNorm.
// Per value head h (key head kh = h / (nv / nk)) and token t of chunk c (rows c*C .. c*C + len):
//   q̂_t = l2norm(q_t), k̂_t = l2norm(k_t), l2norm(x) = x * inverseSqrt(sum(x*x) + 1e-6)
//   beta_t = sigmoid(b_t[h]), g_t = A * softplus(a_t[h] + dt_bias[h]), A = -exp(a_log[h]) when
//   a_is_log = 1, else a_log[h] as stored (llama.cpp's GGUF keeps -exp(A_log)); G_t = sum_{s<=t} g_s
//   L[t][s] = beta_t (k̂_t . k̂_s) exp(G_t - G_s) for s < t (strictly lower), T = (I + L)^-1
//   W = T diag(beta exp(G)) k̂   [C, dk]    U = T diag(beta) v   [C, dv]
//   A[t][s] = dk^-0.5 (q̂_t . k̂_s) exp(G_t - G_s) for s <= t, else 0   [C, C]
//   qf_t = inverseSqrt(|q_t|^2 + 1e-6) dk^-0.5 exp(G_t), kf_t = inverseSqrt(|k_t|^2 + 1e-6)
//   exp(G_last - G_t) (the scan reads q and k raw from mixed and scales them by these),
//   decay = exp(G_last). Tokens past the last row (the last chunk's padding) get zeros.
// T comes by forward substitution, one thread per column. The Gram matrices k.k and q.k (raw) are
// summed over slices of DS dimensions staged in workgroup memory, the norms from the same slices.
// Bindings: 0 step (uniform Step), 1 p (uniform Params; the same struct in all three kernels),
//           2 mixed (read, f32 [rows, conv_dim]: q heads [nk, dk], k heads [nk, dk], v heads [nv, dv]),
//           3 proj (read, f32 [rows, proj_stride]: b [nv] from column b_at, a [nv] from a_at),
//           4 a_log (read, f32 [nv]), 5 dt_bias (read, f32 [nv]),
//           6 chunks (read_write, f32 scratch [nv, n_chunks, BLOCK], n_chunks = ceil(rows / C),
//             BLOCK = C (dk + dv + C + 2) + 4; a block: W [C, dk] at 0, U [C, dv] at C dk,
//             A [C, C] at C (dk + dv), qf [C] at C (dk + dv + C), kf [C] after it, decay at
//             C (dk + dv + C + 2), 3 floats unused; py_engine/models/delta_chunk_plan.py).
// Dispatch: (ceil(step.rows / C), nv, 1) workgroups of 256 threads, one (chunk, value head) each.
//           Workgroup storage: 12.6 KiB.
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
@group(0) @binding(6) var<storage, read_write> chunks: array<f32>;

const C: u32 = 32u;  // tokens per chunk (delta_chunk_plan.CHUNK)
const THREADS: u32 = 256u;
const DS: u32 = 16u;  // dimensions per staged Gram slice
const PAIR_STRIDE: u32 = THREADS / C;  // a thread's 4 Gram pairs: (t, s0 + 8 m), t = lid / 8, s0 = lid % 8

var<workgroup> lower: array<f32, C * C>;  // L, then T diag(beta exp(G) kinv) (W's operator)
var<workgroup> solved: array<f32, C * C>;  // T, then T diag(beta) (U's operator)
var<workgroup> stage: array<f32, 2u * C * DS>;  // a slice of k [C, DS], then of q [C, DS]
var<workgroup> tok_g: array<f32, C>;
var<workgroup> tok_cum: array<f32, C>;  // G
var<workgroup> tok_beta: array<f32, C>;
var<workgroup> tok_kinv: array<f32, C>;
var<workgroup> tok_qinv: array<f32, C>;


@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c = wid.x;
    let h = wid.y;
    let rows = step.rows;
    let n_chunks = (rows + C - 1u) / C;
    if (c >= n_chunks || h >= p.nv) { return; }
    let row0 = c * C;
    let len = min(C, rows - row0);
    let kh = key_head(h);
    let q_at = kh * p.dk;
    let k_at = p.nk * p.dk + kh * p.dk;
    let v_at = 2u * p.nk * p.dk + h * p.dv;
    let base = (h * n_chunks + c) * (C * (p.dk + p.dv + C + 2u) + 4u);
    let u_off = base + C * p.dk;
    let a_off = u_off + C * p.dv;
    let qf_off = a_off + C * C;
    let kf_off = qf_off + C;
    let scale = inverseSqrt(f32(p.dk));

    if (lid < C) {
        var g = 0.0;
        var beta = 0.0;
        if (lid < len) {
            let r = (row0 + lid) * p.proj_stride;
            var decay_rate = a_log[h];
            if (p.a_is_log == 1u) { decay_rate = -safe_exp(decay_rate); }
            g = decay_rate * softplus(proj[r + p.a_at + h] + dt_bias[h]);
            beta = 1.0 / (1.0 + safe_exp(-proj[r + p.b_at + h]));
        }
        tok_g[lid] = g;
        tok_beta[lid] = beta;
    }

    // Raw Gram matrices k.k and q.k over DS-dimension slices; thread lid < C also sums token lid's
    // squares (the l2 norms).
    let t = lid / PAIR_STRIDE;
    let s0 = lid % PAIR_STRIDE;
    var kk = vec4<f32>(0.0);
    var qk = vec4<f32>(0.0);
    var k_sq = 0.0;
    var q_sq = 0.0;
    for (var d0 = 0u; d0 < p.dk; d0 += DS) {
        for (var e = lid; e < C * DS; e += THREADS) {
            let tt = e / DS;
            let d = d0 + e % DS;
            var kv = 0.0;
            var qv = 0.0;
            if (tt < len && d < p.dk) {
                let r = (row0 + tt) * p.conv_dim;
                kv = mixed[r + k_at + d];
                qv = mixed[r + q_at + d];
            }
            stage[e] = kv;
            stage[C * DS + e] = qv;
        }
        workgroupBarrier();
        for (var d = 0u; d < DS; d++) {
            let kt = stage[t * DS + d];
            let qt = stage[C * DS + t * DS + d];
            let ks = vec4<f32>(
                stage[s0 * DS + d], stage[(s0 + PAIR_STRIDE) * DS + d],
                stage[(s0 + 2u * PAIR_STRIDE) * DS + d], stage[(s0 + 3u * PAIR_STRIDE) * DS + d],
            );
            kk += kt * ks;
            qk += qt * ks;
        }
        if (lid < C) {
            for (var d = 0u; d < DS; d++) {
                let kv = stage[lid * DS + d];
                let qv = stage[C * DS + lid * DS + d];
                k_sq += kv * kv;
                q_sq += qv * qv;
            }
        }
        workgroupBarrier();
    }
    if (lid < C) {
        var cum = 0.0;
        for (var s = 0u; s <= lid; s++) { cum += tok_g[s]; }
        tok_cum[lid] = cum;
        tok_kinv[lid] = inverseSqrt(k_sq + 1e-6);
        tok_qinv[lid] = inverseSqrt(q_sq + 1e-6);
    }
    workgroupBarrier();

    // L (workgroup) and A (scratch) from the Gram pairs; the per-token factors.
    let cum_last = tok_cum[len - 1u];
    for (var m = 0u; m < 4u; m++) {
        let s = s0 + m * PAIR_STRIDE;
        var l = 0.0;
        var a = 0.0;
        if (t < len && s <= t) {
            let decay = safe_exp(tok_cum[t] - tok_cum[s]);
            if (s < t) { l = tok_beta[t] * kk[m] * tok_kinv[t] * tok_kinv[s] * decay; }
            a = qk[m] * tok_qinv[t] * tok_kinv[s] * scale * decay;
        }
        lower[t * C + s] = l;
        chunks[a_off + t * C + s] = a;
    }
    if (lid < C) {
        var qf = 0.0;
        var kf = 0.0;
        if (lid < len) {
            qf = tok_qinv[lid] * scale * safe_exp(tok_cum[lid]);
            kf = tok_kinv[lid] * safe_exp(cum_last - tok_cum[lid]);
        }
        chunks[qf_off + lid] = qf;
        chunks[kf_off + lid] = kf;
        if (lid == 0u) { chunks[kf_off + C] = safe_exp(cum_last); }
    }
    workgroupBarrier();

    // T = (I + L)^-1 by forward substitution, thread j the column j (it reads only its own column
    // of T and the shared L).
    if (lid < C) {
        let j = lid;
        for (var i = 0u; i < C; i++) {
            var x = 0.0;
            if (i == j) {
                x = 1.0;
            } else if (i > j) {
                for (var s = j; s < i; s++) { x -= lower[i * C + s] * solved[s * C + j]; }
            }
            solved[i * C + j] = x;
        }
    }
    workgroupBarrier();
    for (var e = lid; e < C * C; e += THREADS) {
        let s = e % C;
        let tb = solved[e] * tok_beta[s];  // zero for padding (beta 0)
        lower[e] = tb * tok_kinv[s] * safe_exp(tok_cum[s]);
        solved[e] = tb;
    }
    workgroupBarrier();

    // W = T diag(beta exp(G) kinv) k, U = T diag(beta) v: a thread per (token, column).
    let width = p.dk + p.dv;
    for (var e = lid; e < C * width; e += THREADS) {
        let tt = e / width;
        let col = e % width;
        var acc = 0.0;
        if (col < p.dk) {
            if (tt < len) {
                for (var s = 0u; s <= tt; s++) { acc += lower[tt * C + s] * mixed[(row0 + s) * p.conv_dim + k_at + col]; }
            }
            chunks[base + tt * p.dk + col] = acc;
        } else {
            let j = col - p.dk;
            if (tt < len) {
                for (var s = 0u; s <= tt; s++) { acc += solved[tt * C + s] * mixed[(row0 + s) * p.conv_dim + v_at + j]; }
            }
            chunks[u_off + tt * p.dv + j] = acc;
        }
    }
}
