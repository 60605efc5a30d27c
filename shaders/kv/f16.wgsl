// KV cache of native f16 elements (needs shader-f16; never on WebKit). See kv/f32.wgsl.
fn ${name}_at(i: u32) -> f32 { return f32(${cache}[i]); }
fn ${name}_pair(pair: u32) -> vec2<f32> { return vec2<f32>(f32(${cache}[2u * pair]), f32(${cache}[2u * pair + 1u])); }
// What a store of `value` then a read give back (the cache's rounding).
fn ${name}_stored_pair(value: vec2<f32>) -> vec2<f32> { return vec2<f32>(f32(f16(value.x)), f32(f16(value.y))); }
// store
fn ${name}_store_pair(pair: u32, value: vec2<f32>) {
    ${cache}[2u * pair] = f16(value.x);
    ${cache}[2u * pair + 1u] = f16(value.y);
}
