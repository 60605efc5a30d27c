// Rotary embedding shared by rope_kv.wgsl and attention.wgsl (ROPE_KV); kernels.py appends it to
// kernels that call rope_pair. Split-half (HF rotate_half) or interleaved pairs (llama.cpp's layout).

// The dims (a, b) that rotation i of a head turns together.
fn rope_pair(i: u32, rotary_dim: u32, interleaved: bool) -> vec2<u32> {
    if (interleaved) { return vec2<u32>(2u * i, 2u * i + 1u); }
    return vec2<u32>(i, i + rotary_dim / 2u);
}

// (xa, xb) turned by the angle whose (cos, sin) is cs.
fn rope_turn(x: vec2<f32>, cs: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(x.x * cs.x - x.y * cs.y, x.y * cs.x + x.x * cs.y);
}
