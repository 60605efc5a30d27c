// KV cache of f32 elements (word i is element i). kernels.py appends this for K_CACHE/V_CACHE="f32",
// with $name = k or v and $cache the kernel's binding; the part after "// store" only where the
// kernel binds the cache read_write (writing a read-only binding would not compile).
fn ${name}_at(i: u32) -> f32 { return ${cache}[i]; }
fn ${name}_pair(pair: u32) -> vec2<f32> { return vec2<f32>(${cache}[2u * pair], ${cache}[2u * pair + 1u]); }
// What a store of `value` then a read give back (the cache's rounding).
fn ${name}_stored_pair(value: vec2<f32>) -> vec2<f32> { return value; }
// store
fn ${name}_store_pair(pair: u32, value: vec2<f32>) {
    ${cache}[2u * pair] = value.x;
    ${cache}[2u * pair + 1u] = value.y;
}
