// Numbers as the page shows them: sizes, durations, rates, WebGPU limits.

export const fmtSize = (bytes) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${Math.max(1, Math.round(bytes / 1e6))} MB`);
export function fmtProgressBytes(done, total) {
  if (total >= 1e9) return `${(done / 1e9).toFixed(2)} / ${(total / 1e9).toFixed(2)} GB`;
  return `${Math.round(done / 1e6)} / ${Math.round(total / 1e6)} MB`;
}
export const fmtMs = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`);
export const fmtRate = (r) => (r >= 100 ? r.toFixed(0) : r.toFixed(1));
export function fmtLimit(key, value) {
  if (typeof value !== "number") return String(value);
  if (/size|bytes/i.test(key) && value >= 1024) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = value, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[u]}`;
  }
  return value.toLocaleString("en-US");
}
