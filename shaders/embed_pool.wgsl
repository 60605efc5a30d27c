// Sentence embeddings: each sequence's rows of the last hidden state pooled into one vector, then
// L2-normalised (torch's F.normalize: v / max(|v|, 1e-12)) when normalize = 1.
//   mode 0 "cls": the sequence's first row; 1 "mean": the mean of its rows; 2 "last": its last row
//   (a decoder embedder's final-norm row of its last token).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, dim]),
//           3 seqs (read, u32 [sequences, 2]: each sequence's first row and end row in x),
//           4 y (read_write, f32 [sequences, dim]).
// Dispatch: (n, 1, 1) workgroups of 256 threads, n >= step.logit_rows (the sequences of this
//           forward), one sequence each; workgroups past step.logit_rows return at once.
// y holds the pooled vector first; each thread then rescales only the elements it wrote itself.
struct Params { dim: u32, mode: u32, normalize: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> seqs: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = wid.x;
    if (s >= step.logit_rows) { return; }
    let first = seqs[2u * s];
    let end = seqs[2u * s + 1u];
    let out = s * p.dim;
    var squares = 0.0;
    for (var j = lid; j < p.dim; j += 256u) {
        var v = 0.0;
        if (p.mode == 1u) {
            for (var r = first; r < end; r++) { v += x[r * p.dim + j]; }
            v = v / f32(max(end - first, 1u));
        } else if (p.mode == 2u) {
            v = x[(end - 1u) * p.dim + j];
        } else {
            v = x[first * p.dim + j];
        }
        y[out + j] = v;
        squares += v * v;
    }
    partial[lid] = squares;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    if (p.normalize == 1u) {
        let scale = 1.0 / max(sqrt(partial[0]), 1e-12);
        for (var j = lid; j < p.dim; j += 256u) { y[out + j] = y[out + j] * scale; }
    }
}
