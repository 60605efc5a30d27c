// A causal depthwise convolution over time with its rolling state: hybrids' short convolutions.
//   out[t, c] = sum_j w[c, j] * u[t - kernel + 1 + j, c]   (j < kernel; u before position 0 is 0)
// u is the input channel: x[t, c] (Qwen3.5's DeltaNet: q|k|v, then y = SiLU(out)), or with
// GATED_BCX, B[t, c] * X[t, c] where x's row holds B, C and X (channels each; LFM2's in_proj),
// then y = C[t, c] * out.
// The state is a ring of the channels' inputs by position (position q at row q % ring): a
// forward reads the kernel - 1 before its first row (none before position 0: zeros), then writes
// its own last ones. A ring, not just the last inputs, because delta_rule.wgsl's workgroups read
// shared channels while others write them: ring >= kernel - 1 + its rows keeps those apart. The
// engine keeps snapshots where it must go back (py_engine/runtime/recurrent_state.py).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, x_stride]),
//           3 w (read, f32 [channels, kernel]), 4 bias (read, f32 [channels]; with has_bias),
//           5 state (read_write, f32 [ring, channels]), 6 y (read_write, f32 [rows, channels]).
// Dispatch: (ceil(channels / 256), 1, 1) workgroups of 256 threads, a channel each: the rows in
//           order (a decode token's is one; a prefill's runs of max_rows are cheap next to its matmuls).
// kernel <= MAX_KERNEL.
struct Params { channels: u32, kernel: u32, x_stride: u32, has_bias: u32, ring: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const MAX_KERNEL: u32 = 8u;

fn conv_input(row: u32, c: u32) -> f32 {
    let at = row * p.x_stride;
    if (GATED_BCX) { return x[at + c] * x[at + 2u * p.channels + c]; }
    return x[at + c];
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if (c >= p.channels) { return; }
    let k = p.kernel;
    let held = k - 1u;
    // The window of inputs before this row, oldest first: window[0 .. held).
    var window = array<f32, MAX_KERNEL>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (var j = 0u; j < held; j++) {  // positions pos - held + j, from 0 on
        if (step.pos + j >= held) { window[j] = state[((step.pos + j - held) % p.ring) * p.channels + c]; }
    }
    var taps = array<f32, MAX_KERNEL>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (var j = 0u; j < k; j++) { taps[j] = w[c * k + j]; }
    var b = 0.0;
    if (p.has_bias == 1u) { b = bias[c]; }
    for (var row = 0u; row < step.rows; row++) {
        let u = conv_input(row, c);
        var out = b;
        for (var j = 0u; j < held; j++) { out += taps[j] * window[j]; }
        out += taps[held] * u;
        for (var j = 0u; j + 1u < held; j++) { window[j] = window[j + 1u]; }
        if (held > 0u) { window[held - 1u] = u; }
        if (GATED_BCX) {
            y[row * p.channels + c] = x[row * p.x_stride + p.channels + c] * out;
        } else {
            y[row * p.channels + c] = out / (1.0 + safe_exp(-out));  // SiLU
        }
    }
    let end = step.pos + step.rows;
    for (var j = 0u; j < held; j++) {  // positions end - held + j, from 0 on
        if (end + j >= held) { state[((end + j - held) % p.ring) * p.channels + c] = window[j]; }
    }
}
