// CPU seconds of the calling thread (Linux: /proc/thread-self/stat's utime + stime; null elsewhere),
// and the harness's tally of its threads' CPU by role: which thread bounds a load on a machine with
// cores to spare (the worker's, the network's, the server's, the store writer's) is the one that spent
// most. run.mjs prints it beside each load.
//
//   threadCpu() -> seconds | null
//   spent(role, seconds)   adds a finished thread's seconds;  tally() -> {role: seconds} so far

import fs from "node:fs";

const TICK = 100;  // USER_HZ: clock ticks per second on Linux
const totals = {};

export function threadCpu() {
  try {
    const stat = fs.readFileSync("/proc/thread-self/stat", "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch { return null; }
}

export function spent(role, seconds) {
  if (typeof seconds === "number") totals[role] = (totals[role] || 0) + seconds;
}

export function tally() { return { ...totals }; }
