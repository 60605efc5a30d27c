// Pictures for a vision-language model's prompt, decoded in the worker's JavaScript: Pyodide has
// no Pillow, and the browser's own decoders read every format it shows. Registered by worker.js as
// the Python module "wisp_pictures" (py_engine/web/pictures.py calls decode()).
//
//   decode(url, maxPixels, maxSide) -> Promise<{rgba: Uint8Array, width, height, key}>
//       url: a data: URL (OpenAI's image_url), a blob: URL the page made of the user's file, or an
//       http(s) URL (fetched where its site allows it: CORS).
//       rgba: height rows of width pixels, 4 bytes each, straight alpha, R first (vision/input.py
//       Picture); it stays a JavaScript array: Python hands it to the GPU as is (gpu.js writeBuffer).
//       key: the pixels' SHA-256 in hex (Picture.key: the prompt cache reuses a picture it has seen).
//
// The bytes: createImageBitmap with premultiplyAlpha "none" and colorSpaceConversion "none" (no
// ICC or gamma conversion, as Pillow's convert("RGBA") does none), then WebGPU's
// copyExternalImageToTexture into an rgba8unorm texture (premultipliedAlpha false) and back. A 2D
// canvas would be simpler but stores premultiplied pixels: its getImageData changes the colour of
// every translucent pixel (a fully transparent one loses it), where this path gives Pillow's bytes
// bit for bit (tests/test_browser_pictures.py, the fixture's RGB and RGBA PNGs). An animated
// picture gives its first frame (createImageBitmap's choice); EXIF orientation is applied, as the
// browser shows the picture (Pillow's desktop reader keeps the stored orientation).
//
// Errors are thrown with name "PictureError" and one sentence naming the picture; Python makes
// them the request's error.

import { device, check } from "./gpu_device.js";

const BAND_BYTES = 16 << 20;  // read back at most this much at once: a 40-megapixel photo is 160 MB
const MAX_FETCHED = 64 << 20;  // an http(s) picture's bytes at most, as the desktop server's (app/pictures.py)

function fail(message) {
  const err = new Error(message);
  err.name = "PictureError";
  return err;
}

// A URL as an error message names it: a data: URL's whole base64 is no help.
const label = (url) => (url.length > 40 ? `${url.slice(0, 40)}...` : url);

export async function decode(url, maxPixels, maxSide) {
  url = String(url);
  const remote = /^https?:/i.test(url);
  if (!remote && !/^(data|blob):/i.test(url)) {
    throw fail(`${label(url)}: a picture's URL must be a data:, blob: or http(s) URL`);
  }
  let blob;
  try {
    const response = await fetch(url, { credentials: "omit" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    blob = await response.blob();
  } catch (err) {
    throw fail(remote
      ? `${label(url)}: the picture could not be fetched (${err.message}; another site must allow pages to read it: CORS)`
      : `${label(url)}: could not be read (a malformed data: URL, or a blob: URL that was revoked)`);
  }
  if (remote && blob.size > MAX_FETCHED) throw fail(`${label(url)}: a picture of more than ${MAX_FETCHED >> 20} MB`);
  let bitmap;
  try {
    bitmap = await createImageBitmap(blob, { premultiplyAlpha: "none", colorSpaceConversion: "none" });
  } catch {
    const what = blob.type ? `${blob.type}, ` : "";
    throw fail(`${label(url)}: not a picture this browser can read (${what}${blob.size} bytes)`);
  }
  try {
    const { width, height } = bitmap;
    if (width > maxSide || height > maxSide || width * height > maxPixels) {
      throw fail(`${label(url)}: ${width} x ${height} pixels is larger than this engine reads `
        + `(${maxSide} a side, ${Math.floor(maxPixels / 1e6)} megapixels)`);
    }
    const rgba = await pixels(bitmap);
    return { rgba, width, height, key: await digest(rgba) };
  } finally {
    bitmap.close();
  }
}

// The bitmap's RGBA8 bytes through the GPU, in bands no larger than a texture (the default limit
// is 8192 a side) nor BAND_BYTES of read-back.
// The pixels' SHA-256 in hex: vision/input.py Picture.key, which lets the prompt cache go on past a
// picture that a later prompt has again (a second question about the same picture).
async function digest(bytes) {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function pixels(bitmap) {
  check();
  const { width, height } = bitmap;
  const most = device.limits.maxTextureDimension2D;
  const out = new Uint8Array(width * height * 4);
  for (let x0 = 0; x0 < width; x0 += most) {
    const w = Math.min(most, width - x0);
    const stride = Math.ceil((w * 4) / 256) * 256;  // copyTextureToBuffer's bytesPerRow alignment
    const rows = Math.max(1, Math.min(most, Math.floor(BAND_BYTES / stride)));
    for (let y0 = 0; y0 < height; y0 += rows) {
      const h = Math.min(rows, height - y0);
      await readBand(bitmap, x0, y0, w, h, stride, (band) => {
        for (let r = 0; r < h; r++) out.set(band.subarray(r * stride, r * stride + w * 4), ((y0 + r) * width + x0) * 4);
      });
    }
  }
  return out;
}

// The band's rows, stride bytes apart, handed to take() while they are mapped.
async function readBand(bitmap, x, y, w, h, stride, take) {
  const usage = GPUTextureUsage.COPY_DST | GPUTextureUsage.COPY_SRC | GPUTextureUsage.RENDER_ATTACHMENT;
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  let texture = null, staging = null, thrown = null;
  try {
    texture = device.createTexture({ size: [w, h], format: "rgba8unorm", usage, label: "picture" });
    staging = device.createBuffer({ size: stride * h, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ, label: "picture" });
    device.queue.copyExternalImageToTexture({ source: bitmap, origin: [x, y] }, { texture, premultipliedAlpha: false }, [w, h]);
    const encoder = device.createCommandEncoder();
    encoder.copyTextureToBuffer({ texture }, { buffer: staging, bytesPerRow: stride }, [w, h]);
    device.queue.submit([encoder.finish()]);
  } catch (err) {
    thrown = err;
  }
  // Both scopes popped whatever happened, so a failure is this picture's error, not the engine's
  // next call's (gpu_device.js keeps uncaptured errors for that).
  const [invalid, oom] = await Promise.all([device.popErrorScope(), device.popErrorScope()]);
  try {
    const error = thrown || invalid || oom;
    if (error) throw fail(`the picture could not be copied on the GPU (${error.message})`);
    await staging.mapAsync(GPUMapMode.READ);
    take(new Uint8Array(staging.getMappedRange()));
  } finally {
    texture?.destroy();
    staging?.destroy();
  }
}
