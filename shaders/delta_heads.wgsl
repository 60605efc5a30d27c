// Not a kernel: helpers of the Gated DeltaNet kernels (delta_rule.wgsl, delta_chunk_prep.wgsl,
// delta_chunk_scan.wgsl); kernels.py appends them to kernels that call key_head. They read the
// kernels' shared Params (nk, nv, heads_tiled).

// The key head a value head reads: HF groups value heads by key head (h / (nv / nk)); llama.cpp's
// files store them tiled (stored head h is HF's (h % nk) * (nv / nk) + h / nk), so h % nk.
fn key_head(h: u32) -> u32 {
    if (p.heads_tiled == 1u) { return h % p.nk; }
    return h / (p.nv / p.nk);
}

// Whether h is the first value head reading its key head (the one that stores its conv inputs).
fn key_head_first(h: u32) -> bool {
    if (p.heads_tiled == 1u) { return h < p.nk; }
    return h % (p.nv / p.nk) == 0u;
}

// softplus(x) = log(1 + exp(x)); x itself past torch's threshold of 20.
fn softplus(x: f32) -> f32 {
    if (x > 20.0) { return x; }
    return log(1.0 + safe_exp(x));
}
