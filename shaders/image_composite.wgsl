// An RGBA8 picture composited onto opaque white, in place, as the HF image processors' convert_rgb
// does it (Pillow's Image.alpha_composite(white, picture), libImaging/AlphaComposite.c), bit for
// bit: with the destination white and opaque, Pillow's coefficients are 128 a and 128 (255 - a)
// exactly, so each channel is ((t >> 8) + t) >> 15 with t = 128 (c a + 255 (255 - a)) + 128^2, and
// a transparent pixel (a = 0) is white. The result is opaque (alpha 255), as the RGB the processor
// converts it to, so the resize after it treats it as an RGB picture.
// Bindings: 0 p (uniform Params), 1 pixels (read_write, u32 [p.count]: R in the low byte).
// Dispatch: ceil(p.count / 256) workgroups of 256 threads, a pixel a thread, laid out over x and y
//   (x fastest, at most 65535 along x).
struct Params { count: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> pixels: array<u32>;

// Channel c of alpha a over white, Pillow's integer steps (SHIFTFORDIV255, 7 bits of precision).
fn over_white(c: u32, a: u32) -> u32 {
    let t = 128u * (c * a + 255u * (255u - a)) + (128u << 7u);
    return (((t >> 8u) + t) >> 8u) >> 7u;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i >= p.count) { return; }
    let v = pixels[i];
    let a = v >> 24u;
    if (a == 255u) { return; }
    var out = 0xffffffffu;  // a = 0: Pillow copies the white destination
    if (a > 0u) {
        out = over_white(v & 0xffu, a) | (over_white((v >> 8u) & 0xffu, a) << 8u)
            | (over_white((v >> 16u) & 0xffu, a) << 16u) | 0xff000000u;
    }
    pixels[i] = out;
}
