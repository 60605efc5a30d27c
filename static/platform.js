// Which WebGPU implementation the page runs on, decided from the user agent on the page — never
// from the adapter's vendor (an Apple GPU under Chrome is Dawn, not WebKit; a hardware-keyed gate
// once made a desktop engine 8x slower). Workers have no navigator.maxTouchPoints, so the page
// decides and passes the answer to the worker with every load.
//
//   detectPlatform(navigator) -> {webkit, ios, ipadAsMac, reason}
//     webkit:    WebKit's WebGPU: Safari on macOS (AppleWebKit without Chrome/Chromium/Edg/…),
//                and every browser on iPhone / iPad / iPod (they all must use WebKit)
//     ios:       iPhone / iPad / iPod, including iPadOS posing as a Mac (Macintosh UA with
//                maxTouchPoints > 1: desktop-class browsing on iPad)
//     reason:    a short human-readable why, for the diagnostics panel

const IOS_DEVICE = /\b(iPhone|iPad|iPod)\b/;
const OTHER_ENGINE = /(Chrome|Chromium|CriOS|Edg|EdgiOS|Firefox|FxiOS|OPR)\//;  // HeadlessChrome/ too

export function detectPlatform(nav = globalThis.navigator) {
  const ua = String(nav?.userAgent || "");
  const touchPoints = Number(nav?.maxTouchPoints || 0);
  if (IOS_DEVICE.test(ua)) {
    return { webkit: true, ios: true, ipadAsMac: false, reason: `iOS device (${ua.match(IOS_DEVICE)[1]}): every browser there is WebKit` };
  }
  const mac = /\bMacintosh\b/.test(ua);
  if (mac && touchPoints > 1 && /AppleWebKit\//.test(ua)) {
    return { webkit: true, ios: true, ipadAsMac: true, reason: `iPadOS posing as a Mac (Macintosh UA, ${touchPoints} touch points)` };
  }
  if (/AppleWebKit\//.test(ua) && !OTHER_ENGINE.test(ua) && /\bSafari\//.test(ua)) {
    return { webkit: true, ios: false, ipadAsMac: false, reason: "Safari (AppleWebKit without Chrome/)" };
  }
  return { webkit: false, ios: false, ipadAsMac: false, reason: "not WebKit (Dawn or another engine)" };
}
