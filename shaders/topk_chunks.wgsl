// Top-k, pass 1 of 2. Workgroup w bitonic-sorts its tile of TILE logits (ids [w * TILE, (w + 1) * TILE))
// in the sampling order (logit descending, ties → lower id) and keeps the first CANDIDATES. It also
// records the tile's max of s = logit * inv_temperature and Σ exp(s - max), from which pass 2 gets
// the log-sum-exp of the whole row: candidate probabilities are then exact, not renormalised.
// Ids past the vocabulary pad the last tile with id 0xffffffff, last in the order.
// Bindings: 0 p (uniform Params), 1 logits (read, f32 row starting at element p.logits_base),
//           2 lists (read_write, Candidate [tiles * CANDIDATES]), 3 stats (read_write, TileStats [tiles]).
// Dispatch: (tiles = ceil(vocab / TILE), 1, 1) workgroups of THREADS threads.
// Defines (py_engine/decode/row_draw.py): TOPK_TILE = TILE (a power of two, >= CANDIDATES), CANDIDATES,
//   SAMPLING_THREADS = THREADS (threads per workgroup).
struct Params { vocab: u32, logits_base: u32, inv_temperature: f32 }
struct Candidate { value: f32, id: u32 }
struct TileStats { max_scaled: f32, sum_exp: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> lists: array<Candidate>;
@group(0) @binding(3) var<storage, read_write> stats: array<TileStats>;

const THREADS = SAMPLING_THREADS;  // threads per workgroup (define, row_draw.THREADS)
const TILE = TOPK_TILE;  // logits per workgroup (define, row_draw.TILE)
const NO_ID = 0xffffffffu;
const F32_MAX = 0x1.fffffep+127f;

var<workgroup> tile_value: array<f32, TILE>;
var<workgroup> tile_id: array<u32, TILE>;
var<workgroup> partial: array<f32, THREADS>;

// Whether tile slot a comes before slot b in the sampling order (padding comes last).
fn beats(a: u32, b: u32) -> bool {
    let va = tile_value[a];
    let vb = tile_value[b];
    return tile_id[a] != NO_ID && (tile_id[b] == NO_ID || va > vb || (va == vb && tile_id[a] < tile_id[b]));
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let first = wid.x * TILE;
    for (var slot = lid; slot < TILE; slot += THREADS) {
        let id = first + slot;
        let real = id < p.vocab;
        tile_value[slot] = select(0.0, logits[p.logits_base + min(id, p.vocab - 1u)], real);
        tile_id[slot] = select(NO_ID, id, real);
    }
    workgroupBarrier();

    // Bitonic sort, descending: each step compares TILE / 2 pairs (i, i + half), two per thread.
    for (var size = 2u; size <= TILE; size <<= 1u) {
        for (var half = size >> 1u; half > 0u; half >>= 1u) {
            for (var pair = lid; pair < TILE / 2u; pair += THREADS) {
                let i = (pair / half) * 2u * half + pair % half;
                let j = i + half;
                let descending = (i & size) == 0u;
                if (select(beats(i, j), beats(j, i), descending)) {
                    let v = tile_value[i]; tile_value[i] = tile_value[j]; tile_value[j] = v;
                    let d = tile_id[i]; tile_id[i] = tile_id[j]; tile_id[j] = d;
                }
            }
            workgroupBarrier();
        }
    }

    for (var k = lid; k < CANDIDATES; k += THREADS) {
        lists[wid.x * CANDIDATES + k] = Candidate(tile_value[k], tile_id[k]);
    }
    let max_scaled = tile_value[0] * p.inv_temperature;
    var sum = 0.0;
    for (var slot = lid; slot < TILE; slot += THREADS) {
        // Padding and -inf logits carry no mass; skipping them also avoids -inf - -inf in an all -inf tile.
        if (tile_id[slot] != NO_ID && tile_value[slot] >= -F32_MAX) {
            sum += safe_exp(tile_value[slot] * p.inv_temperature - max_scaled);
        }
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    if (lid == 0u) { stats[wid.x] = TileStats(max_scaled, partial[0]); }
}
