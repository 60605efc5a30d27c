// A resized RGBA8 image's tiles as the vision tower's input rows: each tile (row-major in its grid)
// cut into patch x patch patches (row-major in the tile), each patch one row of 3 * patch * patch
// values in the order of the patch embedding's Conv2d weight flattened (channel, then ky, then kx),
// so that the tower's first layer is one matmul over these rows.
// A value is level_values[channel * 256 + byte]: the float32 that the image processor makes of that
// 8-bit level, rescaled and normalized by py_engine/vision/patches.py on the host with the
// processor's own arithmetic (SmolVLMImageProcessorPil: f32(f64(byte) * rescale_factor), then
// (that - f32(mean)) / f32(std) in f32), so the rows are the processor's float32 bits exactly, on
// every GPU. Not computed here because it would not be: WGSL lets f32 division be 2.5 ULP off,
// WebKit's Metal runs with fast math, and byte * f32(rescale_factor) in f32 (no f64 on a GPU) lands
// up to 1.2e-7 from the processor with mean = std = 0.5 (SmolVLM's) and 4.8e-7 with CLIP's, on some
// 40% of the levels. Alpha (the top byte) is ignored: compositing onto white comes before resizing.
// Bindings: 0 p (uniform Params), 1 image (read, u32 [image rows][p.image_w] pixels, R in the low
//   byte), 2 level_values (read, f32 [3][256]), 3 patch_rows (read_write, f32 [rows][3 * patch^2]).
//   With tile = p.tile_side and patch = p.patch_side (a divisor of tile): tile t = r * p.grid_cols
//   + c covers the image's pixels from (p.top + r * tile, p.left + c * tile), tile a side; its
//   patch k = py * (tile / patch) + px is patch row p.row_offset + t * (tile / patch)^2 + k.
// Dispatch: (ceil(p.grid_cols * tile / 16), ceil(p.grid_rows * tile / 16), 1) workgroups of
//   16 x 16, a pixel of the grid a thread (its three channels written).
struct Params {
    image_w: u32,
    top: u32,
    left: u32,
    grid_rows: u32,
    grid_cols: u32,
    tile_side: u32,
    patch_side: u32,
    row_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> image: array<u32>;
@group(0) @binding(2) var<storage, read> level_values: array<f32>;
@group(0) @binding(3) var<storage, read_write> patch_rows: array<f32>;

const LEVELS: u32 = 256u;  // an 8-bit channel's values: one table row per channel

@compute @workgroup_size(16, 16)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let x = gid.x;  // in the grid, from its top-left pixel
    let y = gid.y;
    if (x >= p.grid_cols * p.tile_side || y >= p.grid_rows * p.tile_side) { return; }
    let pixel = image[(p.top + y) * p.image_w + p.left + x];
    let tile_index = (y / p.tile_side) * p.grid_cols + x / p.tile_side;
    let in_tile_x = x % p.tile_side;
    let in_tile_y = y % p.tile_side;
    let side = p.patch_side;  // a patch's (`patch` is a WGSL keyword)
    let patches_per_side = p.tile_side / side;
    let patch_index = (in_tile_y / side) * patches_per_side + in_tile_x / side;
    let row = p.row_offset + tile_index * patches_per_side * patches_per_side + patch_index;
    let plane = side * side;  // one channel's values in a row
    let at = row * 3u * plane + (in_tile_y % side) * side + in_tile_x % side;  // ky, kx
    for (var channel = 0u; channel < 3u; channel++) {
        let level = (pixel >> (8u * channel)) & 255u;
        patch_rows[at + channel * plane] = level_values[channel * LEVELS + level];
    }
}
