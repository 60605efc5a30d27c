// Q4_K / Q5_K sub-block scale and min (ggml get_scale_min_k4): 8 pairs of 6-bit values packed in
// the 12 bytes `scales` (words 1..3 of the block's first 16 bytes). For s < 4: sc = byte s & 63,
// m = byte s + 4 & 63. For s >= 4: the low 4 bits are byte s + 4's low / high nibble, the top 2
// bits the top 2 of byte s - 4 / byte s.
fn scale_byte(scales: vec3<u32>, i: u32) -> u32 {
    let j = i / 4u;  // not scales[j]: see word() in bytes.wgsl
    return (select(select(scales.x, scales.y, j == 1u), scales.z, j == 2u) >> (8u * (i % 4u))) & 0xffu;
}

fn k_scale_min(scales: vec3<u32>, s: u32) -> vec2<f32> {
    // Both forms computed and one selected: a unit's s differs between neighbouring lanes, and
    // an if on it would run both sides one after the other anyway.
    let high = s >= 4u;
    let a = scale_byte(scales, select(s, s - 4u, high));
    let b = scale_byte(scales, s + 4u);
    let sc = select(a & 63u, (b & 15u) | ((a >> 6u) << 4u), high);
    let m = select(b & 63u, (b >> 4u) | ((scale_byte(scales, s) >> 6u) << 4u), high);
    return vec2<f32>(f32(sc), f32(m));
}
// units
// A Q4_K / Q5_K unit (sub-blocks 2 pair and 2 pair + 1, x blocks x0 .. x0 + 7 and x0 + 8 .. x0 + 15):
// d * scale times each sub-block's quant dot (lo, hi), less dmin * min times its x sum.
// head: the block's first 16 bytes (d | dmin, then the 12 scale bytes).
fn k_unit_total(head: vec4<u32>, pair: u32, lo: f32, hi: f32, x0: u32) -> f32 {
    let dm = unpack2x16float(head.x);
    let sm_lo = k_scale_min(head.yzw, 2u * pair);
    let sm_hi = k_scale_min(head.yzw, 2u * pair + 1u);
    return (dm.x * sm_lo.x) * lo - (dm.y * sm_lo.y) * act_sum32(x0)
         + (dm.x * sm_hi.x) * hi - (dm.y * sm_hi.y) * act_sum32(x0 + 8u);
}
