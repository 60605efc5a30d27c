// The per-tile steps of a flash-attention online softmax over keys [lo, hi) of a row, shared by
// attention_tiled.wgsl and encoder_attention_tiled.wgsl (kernels.py appends this to kernels that call
// tile_weights). Scores come 4 keys a vec4, keys first .. first + 3.

// A row's running tile maximum `top` with scores s of keys first .. first + 3, those in [lo, hi).
fn masked_top(top: vec4<f32>, s: vec4<f32>, first: u32, lo: u32, hi: u32) -> vec4<f32> {
    var out = top;
    for (var k = 0u; k < 4u; k++) {
        let key = first + k;
        if (key >= lo && key < hi) { out[k] = max(out[k], s[k]); }
    }
    return out;
}

// The weights exp(s - peak) of keys first .. first + 3; a key outside [lo, hi) weighs exactly 0
// (all are inside when `whole`).
fn tile_weights(s: vec4<f32>, peak: f32, first: u32, lo: u32, hi: u32, whole: bool) -> vec4<f32> {
    if (whole) {
        return vec4<f32>(safe_exp(s.x - peak), safe_exp(s.y - peak), safe_exp(s.z - peak), safe_exp(s.w - peak));
    }
    var w = vec4<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        let key = first + k;
        if (key >= lo && key < hi) { w[k] = safe_exp(s[k] - peak); }
    }
    return w;
}
