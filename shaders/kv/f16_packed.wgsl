// KV cache of f16 pairs packed in u32 words (pack2x16float: element 2i in the low half), with no
// native f16 type anywhere: WebKit's Metal back end has miscompiled f16 code, and iPad memory wants
// half the f32 bytes. Word layout equals a little-endian f16 array. See kv/f32.wgsl.
fn ${name}_at(i: u32) -> f32 { return unpack2x16float(${cache}[i >> 1u])[i & 1u]; }
fn ${name}_pair(pair: u32) -> vec2<f32> { return unpack2x16float(${cache}[pair]); }
// What a store of `value` then a read give back (the cache's rounding).
fn ${name}_stored_pair(value: vec2<f32>) -> vec2<f32> { return unpack2x16float(pack2x16float(value)); }
// store
fn ${name}_store_pair(pair: u32, value: vec2<f32>) { ${cache}[pair] = pack2x16float(value); }
