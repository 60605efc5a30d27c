// GroupNorm over time-major activations x [rows, channels] (torch's nn.GroupNorm on [channels,
// frames]): the channels fall into `groups` runs of channels / groups, and each group is normalised
// over all its channels AND all rows together (Moonshine's front-end, one group: the statistics of
// the whole window), then scaled and shifted per channel:
//   y[r, c] = (x[r, c] - mean_g) * inverseSqrt(var_g + eps) * w[c] + b[c],   g = c / (channels / groups),
// with var_g the biased variance (divided by the count), as torch computes it. rows: Params' rows, or
// where length_at is not NO_LENGTH this forward's own, lengths[length_at] (conv1d.wgsl's lengths input:
// a window of audio of any length; Params' rows is then the most, which the grid covers).
// Two dispatches of this file, by the boolean define STATS:
//   STATS = true:  one workgroup a group: mean_g, then var_g as the mean square of x - mean_g (two
//                  passes, layernorm.wgsl's reason: a single pass of sums and sums of squares loses
//                  digits where the mean is large next to the spread); writes stats[g] = (mean, rstd).
//   STATS = false: one thread an element: y from x and stats.
// Bindings: 0 p (uniform Params), 1 lengths (read, u32; with length_at), 2 x (read, f32 [rows,
//           channels]), 3 stats (STATS: read_write, else read; f32 [groups, 2]),
//           STATS = false only: 4 w (read, f32 [channels]), 5 b (read, f32 [channels]),
//           6 y (read_write, f32 [rows, channels]).
// Dispatch: STATS (groups, 1, 1); else (ceil(channels / 256), Params' rows, 1); workgroups of 256 threads.
struct Params { rows: u32, channels: u32, groups: u32, eps: f32, length_at: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lengths: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

const NO_LENGTH: u32 = 0xffffffffu;

fn rows() -> u32 {
    if (p.length_at == NO_LENGTH) { return p.rows; }
    return min(lengths[p.length_at], p.rows);
}
//#if STATS
@group(0) @binding(3) var<storage, read_write> stats: array<f32>;

var<workgroup> partial: array<f32, 256>;

// The sum of `mine` over the workgroup's 256 threads (every thread gets it).
fn workgroup_sum(lid: u32, mine: f32) -> f32 {
    partial[lid] = mine;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();  // everyone has read partial[0] before it is reused
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let width = p.channels / p.groups;
    let first = wid.x * width;
    let count = rows() * width;  // the group's elements: element i is row i / width, channel first + i % width
    var sum = 0.0;
    for (var i = lid; i < count; i += 256u) { sum += x[(i / width) * p.channels + first + i % width]; }
    let mean = workgroup_sum(lid, sum) / f32(count);
    var squares = 0.0;
    for (var i = lid; i < count; i += 256u) {
        let d = x[(i / width) * p.channels + first + i % width] - mean;
        squares += d * d;
    }
    let rstd = inverseSqrt(workgroup_sum(lid, squares) / f32(count) + p.eps);
    if (lid == 0u) {
        stats[2u * wid.x] = mean;
        stats[2u * wid.x + 1u] = rstd;
    }
}
//#else
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> b: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let row = gid.y;
    if (c >= p.channels || row >= rows()) { return; }
    let g = c / (p.channels / p.groups);
    let at = row * p.channels + c;
    y[at] = (x[at] - stats[2u * g]) * stats[2u * g + 1u] * w[c] + b[c];
}
//#endif
