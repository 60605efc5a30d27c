// Not a kernel: where a KV head's keys lie in its cache, for the attention kernels
// (attention_tiled.wgsl, and attention.wgsl / attention_subgroups.wgsl through attention_heads.wgsl),
// which py_engine/runtime/kernels.py appends it to. It uses the kernel's RING, its Step and its
// Params p's capacity. A cache holds `capacity` rows a KV head; a sliding layer's (RING) is a ring
// that the positions past capacity wrap around.

// RING: where the kv head's rows end (ring_start sets it). A key's row counted on past it
// (kv_base + position) wraps to the head's first rows.
var<private> ring_end: u32;

// The cache row of kv_base + a key position: itself, or (RING) less capacity past the wrap.
fn cache_row(at: u32) -> u32 {
    if (RING && at >= ring_end) { return at - p.capacity; }
    return at;
}

// KV head kvh's (kv_base, oldest): kv_base + a key position is its row (RING: before the wrap,
// cache_row); the positions the cache holds start at oldest (RING: once kv_len passes capacity),
// and the rows of the lap before oldest's are kv_base's offset. Sets ring_end.
fn ring_start(kvh: u32) -> vec2<u32> {
    var kv_base = kvh * p.capacity;
    var oldest = 0u;
    if (RING && step.kv_len > p.capacity) {
        oldest = step.kv_len - p.capacity;
        kv_base -= oldest - oldest % p.capacity;
    }
    ring_end = kvh * p.capacity + p.capacity;
    return vec2<u32>(kv_base, oldest);
}
