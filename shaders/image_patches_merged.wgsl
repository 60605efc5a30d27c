// A resized RGBA8 picture as a Qwen-VL vision tower's input rows (Qwen3.5: transformers'
// Qwen2VLImageProcessor's patchify): the picture is cut into patch x patch patches, and each patch is one
// row of 3 * temporal * patch^2 values in the order of the patch embedding's Conv3d weight (channel, frame,
// ky, kx), the picture's one frame written `temporal` times (the processor repeats a still picture's
// frame to fill the temporal patch). Rows go in merge-block order: the merge x merge patches that the
// merger joins into one token are consecutive, blocks row-major over the grid, patches row-major in a
// block. A value is level_values[channel * 256 + byte], the processor's float for that 8-bit level
// (py_engine/vision/patches.py: image_patches.wgsl says why on the host). Alpha is ignored: compositing
// onto white comes before resizing.
// Bindings: 0 p (uniform Params), 1 image (read, u32 [p.image_h][p.image_w] pixels, R in the low byte),
//   2 level_values (read, f32 [3][256]), 3 patch_rows (read_write, f32 [rows][3 * temporal * patch^2]).
//   The picture is p.image_w = grid_w * patch_side wide; patch (py, px) is row
//   ((py / merge) * (grid_w / merge) + px / merge) * merge^2 + (py % merge) * merge + px % merge.
// Dispatch: (ceil(p.image_w / 16), ceil(p.image_h / 16), 1) workgroups of 16 x 16, a pixel a thread.
struct Params { image_w: u32, image_h: u32, patch_side: u32, merge: u32, temporal: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> image: array<u32>;
@group(0) @binding(2) var<storage, read> level_values: array<f32>;
@group(0) @binding(3) var<storage, read_write> patch_rows: array<f32>;

const LEVELS: u32 = 256u;  // an 8-bit channel's values: one table row per channel

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let x = gid.x;
    let y = gid.y;
    if (x >= p.image_w || y >= p.image_h) { return; }
    let pixel = image[y * p.image_w + x];
    let side = p.patch_side;  // a patch's (`patch` is a WGSL keyword)
    let m = p.merge;
    let px = x / side;
    let py = y / side;
    let blocks_w = p.image_w / side / m;
    let row = ((py / m) * blocks_w + px / m) * m * m + (py % m) * m + px % m;
    let plane = side * side;  // one frame of one channel
    let at = row * 3u * p.temporal * plane + (y % side) * side + x % side;
    for (var channel = 0u; channel < 3u; channel++) {
        let value = level_values[channel * LEVELS + ((pixel >> (8u * channel)) & 255u)];
        for (var frame = 0u; frame < p.temporal; frame++) {
            patch_rows[at + (channel * p.temporal + frame) * plane] = value;
        }
    }
}
