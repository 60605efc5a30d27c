// One-time, in-place repack of a weight binding after upload (py_engine/runtime/quant.py says why): the
// binding's `blocks` blocks of `block_bytes`, counted over all its rows, form chunks of 8, and each
// chunk is rewritten field by field: field f of every block of the chunk, then field f + 1, ...
// Fields are (offset in the stored block, bytes), up to four; a field of 0 bytes ends the list.
// Every size and offset is even, so the work is in 16-bit halves. Chunks are 16-byte multiples
// and each workgroup only reads and writes its own chunks, so no workgroup sees another's writes.
// Bindings: 0 p (uniform Params), 1 w (read_write, u32 words).
// Dispatch: ceil(chunks / chunks_per_group) workgroups of 256 threads, x-fastest with grid_x
//   workgroups per line (py_engine/runtime/weights.py: repack_commands).
struct Params {
    block_bytes: u32, blocks: u32, chunks_per_group: u32, grid_x: u32,
    off0: u32, size0: u32, off1: u32, size1: u32, off2: u32, size2: u32, off3: u32, size3: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;

const CHUNK: u32 = 8u;         // blocks per chunk; quant.REPACK_CHUNK
const TILE_WORDS: u32 = 2048u; // chunks_per_group * chunk words <= this (8 KiB)

var<workgroup> tile: array<u32, TILE_WORDS>;

fn half_at(h: u32) -> u32 { return (tile[h / 2u] >> (16u * (h % 2u))) & 0xffffu; }

// The stored half (index within this group's span) that repacked half `h` comes from.
fn source_half(h: u32, span_halves: u32, blocks: u32) -> u32 {
    if (h >= span_halves) { return h; }  // the padding of the binding's last word stays
    let block_halves = p.block_bytes / 2u;
    let chunk_halves = CHUNK * block_halves;
    let k = h / chunk_halves;
    var rest = h % chunk_halves;
    let count = min(CHUNK, blocks - CHUNK * k);  // blocks in this chunk
    var offs = array<u32, 4>(p.off0, p.off1, p.off2, p.off3);
    var sizes = array<u32, 4>(p.size0, p.size1, p.size2, p.size3);
    for (var f = 0u; f < 4u; f++) {
        let field = sizes[f] / 2u;
        if (rest < count * field) {
            return k * chunk_halves + (rest / field) * block_halves + offs[f] / 2u + rest % field;
        }
        rest -= count * field;
    }
    return h;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let group = wid.x + wid.y * p.grid_x;
    let chunks = (p.blocks + CHUNK - 1u) / CHUNK;
    let first_chunk = group * p.chunks_per_group;
    if (first_chunk >= chunks) { return; }
    let first_block = first_chunk * CHUNK;
    let blocks = min(p.chunks_per_group * CHUNK, p.blocks - first_block);  // this group's
    let base = first_block * p.block_bytes / 4u;  // a chunk boundary: a 16-byte multiple
    let span_halves = blocks * p.block_bytes / 2u;
    let words = (span_halves + 1u) / 2u;
    for (var i = lid; i < words; i += 256u) { tile[i] = w[base + i]; }
    workgroupBarrier();
    for (var i = lid; i < words; i += 256u) {
        let lo = half_at(source_half(2u * i, span_halves, blocks));
        let hi = half_at(source_half(2u * i + 1u, span_halves, blocks));
        w[base + i] = lo | (hi << 16u);
    }
}
