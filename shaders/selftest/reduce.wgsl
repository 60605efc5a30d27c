// Self-test: the shared-memory tree reduction every norm, GEMV and softmax kernel relies on.
// Each workgroup sums ROWS rows one after another through the same `partial` array, so it also
// checks the barrier between *reading* a row's result and *overwriting* `partial` with the next
// row (the last thread reads partial[0], which thread 0 overwrites next): a device that drops or
// reorders barriers gives wrong sums. u32 sums wrap, so the CPU reference is exact.
// Bindings: 0 x (read, u32 [groups * ROWS * ROW_WORDS]), 1 sums (read_write, u32 [groups * ROWS]).
// Dispatch: (groups, 1, 1) workgroups of 256 threads.
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;

const THREADS: u32 = 256u;
const ROWS: u32 = 4u;          // keep in step with py_engine/selftest/compute_checks.py
const ROW_WORDS: u32 = 1024u;  // keep in step with py_engine/selftest/compute_checks.py

var<workgroup> partial: array<u32, THREADS>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    for (var r = 0u; r < ROWS; r++) {
        let row = wid.x * ROWS + r;
        var sum = 0u;
        for (var i = lid; i < ROW_WORDS; i += THREADS) {
            sum += x[row * ROW_WORDS + i];
        }
        partial[lid] = sum;
        workgroupBarrier();
        for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
            if (lid < stride) { partial[lid] += partial[lid + stride]; }
            workgroupBarrier();
        }
        if (lid == THREADS - 1u) { sums[row] = partial[0]; }
        workgroupBarrier();  // the read above must happen before thread 0 stores the next row's partial
    }
}
