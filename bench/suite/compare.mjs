// compare.mjs — the timing the bench scripts use (bench/suite/bench.mjs, threads.mjs, toolchain.mjs).

/** Median milliseconds per call of each async function of `fns` ({ name: fn }). Each round runs
 * every function once (enough calls for ~minMs/4), in turn, so that a slow spell of this noisy
 * machine hits every runtime alike instead of the one measured at that moment; the garbage
 * collector runs before each (node --expose-gc), so no runtime pays for another's garbage. `clock`
 * is what is measured, in milliseconds: the wall clock by default (cpuMs: this process's CPU time). */
export async function compare(fns, { rounds = 9, minMs = 150, clock = () => performance.now() } = {}) {
  const names = Object.keys(fns), reps = {}, per = {};
  for (const n of names) {
    for (let i = 0; i < 3; i++) await fns[n]();
    let k = 1;
    for (;;) {
      const t0 = clock();
      for (let i = 0; i < k; i++) await fns[n]();
      if (clock() - t0 >= minMs / 4 || k > 1 << 16) break;
      k *= 2;
    }
    reps[n] = k;
    per[n] = [];
  }
  for (let r = 0; r < rounds; r++)
    for (const n of names) {
      globalThis.gc?.();
      const t0 = clock();
      for (let i = 0; i < reps[n]; i++) await fns[n]();
      per[n].push((clock() - t0) / reps[n]);
    }
  const median = (a) => a.sort((x, y) => x - y)[a.length >> 1];
  return Object.fromEntries(names.map((n) => [n, median(per[n])]));
}

/** This process's CPU time in milliseconds (user + system): a clock for compare() on a machine shared
 * with other work, where the wall clock counts their time slices too. Single-threaded work only. */
export function cpuMs() {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e3;
}
