// Gated DeltaNet, many-row forward, step 2 of 3: the chunks in order through the recurrent state
// (after delta_chunk_prep.wgsl; delta_norm.wgsl follows). Per value head h and chunk, with
// the prep's W, U, A, qf, kf, decay, the state S [dk, dv] before the chunk and q, k read raw from
// mixed (Q_t = qf_t q_t, K_t = kf_t k_t):
//   V = U - W S                      (the part of the chunk's values the state does not predict)
//   o = Q S + A V                    (written raw into y: the norm kernel gates and normalises it)
//   S = decay S + K^T V
// Columns j of S evolve independently, so a workgroup owns the TJ columns j0 .. j0 + TJ of one
// head's S, kept in workgroup memory for the whole forward. step.pos == 0: S starts at zero (the
// state buffer's contents are ignored), else from state; the final S is written back to state.
// Bindings: 0 step (uniform Step), 1 p (uniform Params; the prep's), 2 mixed (read, f32 [rows,
//           conv_dim]: q heads, k heads, v heads), 3 chunks (read, the prep's scratch [nv, n_chunks,
//           BLOCK]), 4 state (read_write, f32 [nv, dk, dv]: S_h[i][j] at (h dk + i) dv + j),
//           5 y (read_write, f32 [rows, nv dv]: o per row and value head, before the norm).
// Dispatch: (nv, ceil(dv / TJ), 1) workgroups of 256 threads; dk <= DK_MAX. Phase one: a thread per
//           (token, 2 columns); the state update: a thread per (key dimension, 8 columns).
//           Workgroup storage: 10.1 KiB.
struct Params {
    nk: u32, nv: u32, dk: u32, dv: u32,
    conv_dim: u32, proj_stride: u32, z_at: u32, b_at: u32,
    a_at: u32, a_is_log: u32, eps: f32, heads_tiled: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> mixed: array<f32>;
@group(0) @binding(3) var<storage, read> chunks: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const C: u32 = 32u;  // tokens per chunk: delta_chunk_prep.wgsl's
const TJ: u32 = 16u;  // state columns per workgroup (delta_chunk_plan.SCAN_COLUMNS)
const DK_MAX: u32 = 128u;
const THREADS: u32 = 256u;
const LANES: u32 = THREADS / C;  // threads per token in phase one, 2 columns each: TJ = 2 LANES

var<workgroup> tile: array<f32, DK_MAX * TJ>;  // S[i][j0 + jj] at i TJ + jj
var<workgroup> fresh: array<f32, C * TJ>;  // V of the chunk, [C, TJ]
var<workgroup> kfac: array<f32, C>;
var<workgroup> chunk_decay: f32;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let j0 = wid.y * TJ;
    if (h >= p.nv || j0 >= p.dv) { return; }
    let rows = step.rows;
    let n_chunks = (rows + C - 1u) / C;
    let kh = key_head(h);
    let q_at = kh * p.dk;
    let k_at = p.nk * p.dk + kh * p.dk;
    let block = C * (p.dk + p.dv + C + 2u) + 4u;
    let y_stride = p.nv * p.dv;

    for (var e = lid; e < p.dk * TJ; e += THREADS) {
        let col = j0 + e % TJ;
        var s = 0.0;
        if (step.pos > 0u && col < p.dv) { s = state[(h * p.dk + e / TJ) * p.dv + col]; }
        tile[e] = s;
    }

    let t = lid / LANES;  // phase one: token t, columns jj, jj + 1 of the tile
    let jj = (lid % LANES) * 2u;
    let col = j0 + jj;
    for (var c = 0u; c < n_chunks; c++) {
        let base = (h * n_chunks + c) * block;
        let u_off = base + C * p.dk;
        let a_off = u_off + C * p.dv;
        let qf_off = a_off + C * C;
        let kf_off = qf_off + C;
        let row0 = c * C;
        let len = min(C, rows - row0);
        if (lid < C) { kfac[lid] = chunks[kf_off + lid]; }
        if (lid == 0u) { chunk_decay = chunks[kf_off + C]; }
        workgroupBarrier();  // the tile (first chunk: its load; later: the last update)

        // V = U - W S and Q S, from the state before the chunk.
        var o = vec2<f32>(0.0);
        var v = vec2<f32>(0.0);
        if (t < len) {
            var ws = vec2<f32>(0.0);
            var qs = vec2<f32>(0.0);
            let w_row = base + t * p.dk;
            let q_row = (row0 + t) * p.conv_dim + q_at;
            for (var i = 0u; i < p.dk; i++) {
                let s = vec2<f32>(tile[i * TJ + jj], tile[i * TJ + jj + 1u]);
                ws += chunks[w_row + i] * s;
                qs += mixed[q_row + i] * s;
            }
            let u_row = u_off + t * p.dv;
            var u = vec2<f32>(0.0);
            if (col < p.dv) { u.x = chunks[u_row + col]; }
            if (col + 1u < p.dv) { u.y = chunks[u_row + col + 1u]; }
            v = u - ws;  // zero past dv: the tile's columns there stay zero
            o = chunks[qf_off + t] * qs;
        }
        fresh[t * TJ + jj] = v.x;
        fresh[t * TJ + jj + 1u] = v.y;
        workgroupBarrier();

        // o = Q S + A V (the chunk's own tokens) into y.
        if (t < len) {
            let a_row = a_off + t * C;
            for (var s = 0u; s <= t; s++) {
                o += chunks[a_row + s] * vec2<f32>(fresh[s * TJ + jj], fresh[s * TJ + jj + 1u]);
            }
            let y_row = (row0 + t) * y_stride + h * p.dv;
            if (col < p.dv) { y[y_row + col] = o.x; }
            if (col + 1u < p.dv) { y[y_row + col + 1u] = o.y; }
        }
        // S = decay S + K^T V: thread (key dimension i, columns jb .. jb + 8).
        let decay = chunk_decay;
        for (var e = lid; e < p.dk * 2u; e += THREADS) {
            let i = e / 2u;
            let at = i * TJ + (e % 2u) * 8u;
            var lo = vec4<f32>(tile[at], tile[at + 1u], tile[at + 2u], tile[at + 3u]) * decay;
            var hi = vec4<f32>(tile[at + 4u], tile[at + 5u], tile[at + 6u], tile[at + 7u]) * decay;
            let fresh_at = at - i * TJ;
            for (var s = 0u; s < len; s++) {
                let kv = kfac[s] * mixed[(row0 + s) * p.conv_dim + k_at + i];
                let f = s * TJ + fresh_at;
                lo += kv * vec4<f32>(fresh[f], fresh[f + 1u], fresh[f + 2u], fresh[f + 3u]);
                hi += kv * vec4<f32>(fresh[f + 4u], fresh[f + 5u], fresh[f + 6u], fresh[f + 7u]);
            }
            tile[at] = lo.x;
            tile[at + 1u] = lo.y;
            tile[at + 2u] = lo.z;
            tile[at + 3u] = lo.w;
            tile[at + 4u] = hi.x;
            tile[at + 5u] = hi.y;
            tile[at + 6u] = hi.z;
            tile[at + 7u] = hi.w;
        }
        workgroupBarrier();  // fresh and kfac are rewritten by the next chunk
    }

    for (var e = lid; e < p.dk * TJ; e += THREADS) {
        let col = j0 + e % TJ;
        if (col < p.dv) { state[(h * p.dk + e / TJ) * p.dv + col] = tile[e]; }
    }
}
