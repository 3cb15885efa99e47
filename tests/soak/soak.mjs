// The soak run (npm run soak): random interleavings of calls, forks, disposes,
// aborts, worker deaths, saves and restores over several programs, for --minutes (default 10).
// Every model ("actor": inline or in a worker, 1 or 2 threads) has a shadow: an inline
// single-thread model on the same program that replays the actor's calls one at a time. Every
// result must equal the shadow's bit for bit; a call that is aborted or dies part-way must leave
// the actor's state equal to the shadow's with or without it (never anything else). Every await
// has a deadline: a hang is a failure. Memory (RSS) at the end is compared with after warm-up.
//
//   node tests/soak/soak.mjs [--minutes 10] [--seed 1]      (needs build/fixtures: npm test makes them)
import { load, Tensor, TandemError } from '../../node/index.js';
import { fixture } from '../js/helpers.js';
import { HOOKS } from '../../web/options.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const MINUTES = arg('minutes', 10);
let seed = arg('seed', 1) >>> 0;
const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const DEADLINE_MS = 30000;
const POPULATION = 8;

function within(p, what) {
  let t;
  const timeout = new Promise((_, rej) => (t = setTimeout(() => rej(new Error(`HANG: ${what} took over ${DEADLINE_MS} ms`)), DEADLINE_MS)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

// Programs and how to make inputs for each method (from the fixture's recorded calls: same dtypes
// and shapes, new values).
const PROGRAMS = ['dynamic_appender', 'accumulator', 'gru', 'transformer', 'state_io', 'streaming_conv'].map((name) => {
  const { path, spec } = fixture(name);
  const calls = spec.calls.map((c) => ({ method: c.method, inputs: c.inputs }));
  return { name, path, calls };
});

function inputsFor(call) {
  return call.inputs.map((t) => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (t.dtype === 'float32') return new Tensor('float32', Float32Array.from({ length: n }, () => rand() * 2 - 1), t.shape);
    // ids: keep the recorded ones
    if (t.dtype === 'int64') return new Tensor('int64', BigInt64Array.from(t.data.map((v) => BigInt(v))), t.shape);
    if (t.dtype === 'int32') return new Tensor('int32', Int32Array.from(t.data.map(Number)), t.shape);
    return new Tensor(t.dtype, Uint8Array.from(t.data.map(Number)), t.shape);
  });
}

const bits = (t) => new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
const sameBytes = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);
function sameOutputs(a, b) {
  const as = a === undefined ? [] : Array.isArray(a) ? a : [a];
  const bs = b === undefined ? [] : Array.isArray(b) ? b : [b];
  return as.length === bs.length && as.every((t, i) => t.dtype === bs[i].dtype && sameBytes(bits(t), bits(bs[i])));
}

const stats = { calls: 0, aborted: 0, forks: 0, disposes: 0, deaths: 0, saves: 0, restores: 0, mismatches: 0, hangs: 0 };
const failures = [];
function fail(msg) {
  stats.mismatches++;
  if (failures.length < 20) failures.push(msg);
}

async function newActor(program, origin) {
  const worker = rand() < 0.5;
  const threads = rand() < 0.3 ? 2 : 1;
  let handle = null;
  const hooks = worker ? { [HOOKS]: { onWorker: (w) => (handle = w) } } : {};
  const model = await within(load(program.path, { worker, threads, ...hooks }), 'load');
  const shadow = await within(load(program.path, { threads: 1 }), 'load shadow');
  if (origin) {
    await within(model.loadState(origin), 'loadState');
    await shadow.loadState(origin);
  }
  // forks of a worker model run in its worker: `group` is shared with them, so a death removes all
  const group = worker ? { get handle() { return handle; } } : null;
  return { program, model, shadow, worker, group, saved: null, label: `${program.name}/${worker ? 'worker' : 'inline'}/${threads}t` };
}

async function step(actors) {
  const a = pick(actors);
  const r = rand();
  if (r < 0.6) { // a burst of overlapping calls, compared in order with the shadow's
    const calls = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(a.program.calls));
    const ins = calls.map(inputsFor);
    const got = await within(Promise.allSettled(calls.map((c, i) => a.model[c.method](...ins[i]))), `${a.label} calls`);
    for (let i = 0; i < calls.length; i++) {
      let want;
      try {
        want = { status: 'fulfilled', value: await a.shadow[calls[i].method](...ins[i]) };
      } catch (e) {
        want = { status: 'rejected', reason: e };
      }
      stats.calls++;
      const g = got[i];
      const what = `${a.label}: ${calls[i].method}`;
      if (g.status !== want.status) {
        fail(`${what} ${g.status} (${g.reason ?? ''}), the replay ${want.status} (${want.reason ?? ''})`);
      } else if (g.status === 'rejected' && (g.reason?.code !== want.reason?.code || !(g.reason instanceof TandemError))) {
        fail(`${what} rejected with ${g.reason}, the replay with ${want.reason}`);
      } else if (g.status === 'fulfilled' && !sameOutputs(g.value, want.value)) {
        fail(`${what} differs from the single-session replay`);
      }
    }
    if (rand() < 0.15) { // now and then a reset, so positions and caches do not stay full
      const reset = a.program.calls.find((c) => c.method === 'reset');
      if (reset) { await within(a.model.reset(), `${a.label} reset`); await a.shadow.reset(); }
    }
  } else if (r < 0.7) { // an aborted call: it ran whole or not at all
    const c = pick(a.program.calls);
    const ins = inputsFor(c);
    const ctl = new AbortController();
    const p = a.model[c.method](...ins, { signal: ctl.signal });
    if (rand() < 0.5) ctl.abort(); else setTimeout(() => ctl.abort(), 0);
    let ran = true;
    try { await within(p, `${a.label} aborted call`); } catch (e) {
      if (!(e instanceof TandemError) && e?.name !== 'AbortError') throw e;
      ran = false;
    }
    stats.aborted += ran ? 0 : 1;
    const without = await a.shadow.saveState();
    const mine = await within(a.model.saveState(), `${a.label} saveState`);
    const fork = await a.shadow.fork({ state: 'copy' });
    await fork[c.method](...ins).catch((e) => { if (!(e instanceof TandemError)) throw e; });
    const withIt = await fork.saveState();
    fork.dispose();
    if (sameBytes(mine, withIt)) await a.shadow.loadState(withIt);
    else if (!sameBytes(mine, without)) fail(`${a.label}: an aborted ${c.method} left a state that is neither before nor after it`);
  } else if (r < 0.78) { // fork
    if (actors.length >= POPULATION + 4) return;
    const copy = rand() < 0.5;
    const origin = copy ? await within(a.model.saveState(), 'saveState for fork') : null;
    const f = await within(a.model.fork(copy ? { state: 'copy' } : undefined), `${a.label} fork`);
    const sf = await a.shadow.fork(copy ? { state: 'copy' } : undefined);
    if (origin && !sameBytes(await within(f.saveState(), 'fork saveState'), origin)) {
      fail(`${a.label}: fork({state:'copy'}) differs from the state it copied`);
    }
    actors.push({ ...a, model: f, shadow: sf, saved: null, label: `${a.label}+fork` });
    stats.forks++;
  } else if (r < 0.86) { // save, and later restore
    if (a.saved && rand() < 0.6) {
      await within(a.model.loadState(a.saved), `${a.label} loadState`);
      await a.shadow.loadState(a.saved);
      stats.restores++;
    } else {
      a.saved = await within(a.model.saveState(), `${a.label} saveState`);
      if (!sameBytes(a.saved, await a.shadow.saveState())) fail(`${a.label}: saved state differs from the replay's`);
      stats.saves++;
    }
  } else if (r < 0.94) { // dispose with calls in flight: they finish or reject DISPOSED
    const c = pick(a.program.calls);
    const pending = [a.model[c.method](...inputsFor(c)), a.model[c.method](...inputsFor(c))];
    a.model.dispose();
    for (const s of await within(Promise.allSettled(pending), `${a.label} calls at dispose`)) {
      if (s.status === 'rejected' && !(s.reason instanceof TandemError)) fail(`${a.label}: a call at dispose rejected with ${s.reason}`);
    }
    a.shadow.dispose();
    actors.splice(actors.indexOf(a), 1);
    stats.disposes++;
  } else if (a.group?.handle) { // a worker dies: pending and later calls reject WORKER_DIED
    const c = pick(a.program.calls);
    a.group.handle.terminate();
    const s = await within(Promise.allSettled([a.model[c.method](...inputsFor(c))]), `${a.label} call after death`);
    if (s[0].status !== 'rejected' || s[0].reason?.code !== 'TDM_ERR_WORKER_DIED') {
      fail(`${a.label}: a call after the worker died gave ${s[0].status} ${s[0].reason ?? ''}`);
    }
    for (let i = actors.length - 1; i >= 0; i--) {
      if (actors[i].group === a.group) {
        actors[i].model.dispose();
        actors[i].shadow.dispose();
        actors.splice(i, 1);
      }
    }
    stats.deaths++;
  }
}

async function run() {
  const actors = [];
  const t0 = Date.now();
  const end = t0 + MINUTES * 60000;
  const warm = t0 + Math.min(60000, MINUTES * 60000 / 5);
  let rssWarm = null;
  while (Date.now() < end) {
    while (actors.length < POPULATION) actors.push(await newActor(pick(PROGRAMS)));
    try {
      await step(actors);
    } catch (e) {
      if (/^HANG/.test(e.message)) stats.hangs++;
      fail(`step threw: ${e.stack ?? e}`);
      break;
    }
    if (rssWarm === null && Date.now() > warm) {
      globalThis.gc?.();
      rssWarm = process.memoryUsage().rss;
    }
  }
  while (actors.length < POPULATION) actors.push(await newActor(pick(PROGRAMS)));
  globalThis.gc?.();
  await new Promise((r) => setTimeout(r, 500));
  const rssEnd = process.memoryUsage().rss;
  for (const a of actors) { a.model.dispose(); a.shadow.dispose(); }
  const growth = rssWarm ? (rssEnd - rssWarm) / rssWarm : 0;
  console.log(`soak: ${MINUTES} min, seed ${arg('seed', 1)}: ${JSON.stringify(stats)}`);
  console.log(`soak: RSS after warm-up ${(rssWarm / 2 ** 20).toFixed(1)} MiB, at the end ${(rssEnd / 2 ** 20).toFixed(1)} MiB ` +
    `(${(growth * 100).toFixed(1)}%)`);
  for (const f of failures) console.log(`FAIL ${f}`);
  const ok = stats.mismatches === 0 && stats.hangs === 0 && growth <= 0.05;
  console.log(ok ? 'soak: 1 passed, 0 failed' : 'soak: 0 passed, 1 failed');
  process.exit(ok ? 0 : 1);
}

run();
