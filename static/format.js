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
// Bytes as storage amounts: "0 MB", "512 KB", "98 MB", "1.2 GB".
export function fmtBytes(bytes) {
  const b = Math.max(0, Number(bytes) || 0);
  if (b >= 1e9) return `${(b / 1e9).toFixed(b >= 1e11 ? 0 : 1)} GB`;
  if (b >= 1e6 || b === 0) return `${Math.round(b / 1e6)} MB`;
  return `${Math.max(1, Math.round(b / 1e3))} KB`;
}
// A download speed: "12.3 MB/s", "850 KB/s".
export const fmtSpeed = (bps) => (bps >= 1e6 ? `${(bps / 1e6).toFixed(1)} MB/s` : `${Math.max(1, Math.round(bps / 1e3))} KB/s`);
// Time left: "6 s left", "2 min 5 s left", "1 h 4 min left".
export function fmtEta(s) {
  const t = Math.max(0, Math.ceil(s));
  if (t < 60) return `${t} s left`;
  if (t < 3600) return `${Math.floor(t / 60)} min ${t % 60} s left`;
  return `${Math.floor(t / 3600)} h ${Math.floor((t % 3600) / 60)} min left`;
}
