// The checks every backend passes, the same ones on each: wasm on this thread and in a worker
// (tests/js/backends.test.js, Node) and WebGPU (tests/browser/webgpu.test.js, Chromium). Plain ESM
// without Node modules, so a page imports it too. The program is tests/fixtures/make.py's
// accumulator: forward(x) adds x into state [3] and returns 2 * state; reset() zeroes it.

/** Throws `message` unless `ok`. */
function check(ok, message) {
  if (!ok) throw new Error(message);
}

const same = (got, want, what) => {
  const g = Array.from(got.data ?? got, Number);
  check(g.length === want.length && g.every((v, i) => Math.abs(v - want[i]) <= 1e-5 * Math.max(1, Math.abs(want[i]))),
    `${what}: [${g}], expected [${want}]`);
};

/** Resolves to the rejection of `p`, failing when it resolves or rejects with another code. */
async function rejects(p, code, what, pattern) {
  try {
    await p;
  } catch (e) {
    check(e.code === code, `${what}: ${e.code} (${e.message}), expected ${code}`);
    if (pattern) check(pattern.test(e.message), `${what}: message '${e.message}' does not match ${pattern}`);
    return e;
  }
  throw new Error(`${what}: resolved, expected ${code}`);
}

/**
 * Runs the checks on a model loaded with `load(source, options)`; `calls` is the fixture's call
 * sequence (accumulator.json's calls); `expect`: { device, profile } (profile: whether
 * model.profile runs there). Resolves to the names of the checks that ran; throws on the first
 * failure, naming it.
 */
export async function backendChecks({ load, Tensor, source, options, calls, expect }) {
  const ran = [];
  const step = async (name, fn) => {
    try {
      await fn();
    } catch (e) {
      e.message = `${name}: ${e.message}`;
      throw e;
    }
    ran.push(name);
  };
  const m = await load(source, options);
  const f32 = (...v) => new Float32Array(v);
  try {
    await step('members', () => {
      check(m.device === expect.device, `device ${m.device}, expected ${expect.device}`);
      check(m.methods.map((x) => x.name).sort().join() === 'forward,reset', `methods ${m.methods.map((x) => x.name)}`);
      check(Object.isFrozen(m.methods) && Object.isFrozen(m.methods[0].inputs), 'methods are deep-frozen');
      check(JSON.stringify(m.state) === '[{"name":"state","dtype":"float32","shape":[3]}]', `state ${JSON.stringify(m.state)}`);
      check(typeof m.forward === 'function' && typeof m.reset === 'function', 'model.<method> functions');
      check(m.threads === (expect.device === 'webgpu' ? 1 : options.threads ?? m.threads) && m.threads >= 1, `threads ${m.threads}`);
      check(m.simd === 'relaxed' || m.simd === 'simd128', `simd ${m.simd}`);
      check(m.stateBytes >= 12 && Number.isInteger(m.scratchBytes), `stateBytes ${m.stateBytes}, scratchBytes ${m.scratchBytes}`);
      check(m.tokenizer === null && m.deviceReason === null, 'no tokenizer, no device reason');
      check(typeof m[Symbol.dispose] === 'function', 'Symbol.dispose');
    });
    await step('memoryBytes', () => {
      const n = m.memoryBytes;
      check(typeof n === 'number' && n > 0 && n % 65536 === 0, `memoryBytes ${n}: a number of whole wasm pages`);
    });
    await step('the call sequence', async () => {
      for (const [k, c] of calls.entries()) {
        const spec = m.methods.find((x) => x.name === c.method);
        if (k % 2) { // every other call by name (model.run), its inputs as { data, shape }
          const shaped = (t) => ({ data: new Float32Array(t.data), shape: t.shape });
          const out = await m.run(c.method, Object.fromEntries(c.inputs.map((t, i) => [spec.inputs[i].name, shaped(t)])));
          check(Object.keys(out).join() === spec.outputs.map((o) => o.name).join(), `call ${k} (${c.method}): named ${Object.keys(out)}`);
          if (c.outputs.length) same(out[spec.outputs[0].name], c.outputs[0].data, `call ${k} (${c.method}), by name`);
          continue;
        }
        const out = await m[c.method](...c.inputs.map((t) => new Tensor(t.dtype, t.data, t.shape)));
        if (c.outputs.length === 0) check(out === undefined, `call ${k} (${c.method}): ${out}, expected undefined`);
        else same(out, c.outputs[0].data, `call ${k} (${c.method})`);
      }
      same((await m.readState('state')).data, calls.at(-1).outputs[0].data.map((v) => v / 2), 'state after the sequence');
      await m.reset();
    });
    await step('FIFO: calls made without waiting run in the order made', async () => {
      const x = f32(1, 2, 3);
      const p = [m.forward(x), m.call('forward', x), m.readState('state'), m.writeState('state', f32(10, 10, 10)), m.forward(x)];
      x.fill(100); // inputs are read when the call is made
      const [a, b, s, , c] = await Promise.all(p);
      same(a, [2, 4, 6], 'first');
      same(b, [4, 8, 12], 'second');
      same(s, [2, 4, 6], 'state read between');
      same(c, [22, 24, 26], 'after writeState');
      await m.reset();
    });
    await step('rejected calls leave the state and the queue as they were', async () => {
      await m.forward(f32(1, 1, 1));
      await rejects(m.forward(f32(1, 1)), 'TDM_ERR_INVALID_ARGUMENT', 'two elements for three', /expected float32\[3\]/);
      await rejects(m.call('nope', 1), 'TDM_ERR_NOT_FOUND', 'no such method', /the program has/);
      await rejects(m.forward(f32(1, 1, 1), 2), 'TDM_ERR_INVALID_ARGUMENT', 'an extra input', /takes 1 input/);
      await rejects(m.readState('nope'), 'TDM_ERR_NOT_FOUND', 'no such state', /the program has state/);
      await rejects(m.writeState('state', f32(1)), 'TDM_ERR_INVALID_ARGUMENT', 'a state of the wrong size');
      await rejects(m.seed(1), 'TDM_ERR_NOT_FOUND', 'seed without __rng__', /no random numbers/);
      const ac = new AbortController();
      ac.abort();
      const e = await rejects(m.forward(f32(5, 5, 5), { signal: ac.signal }), 'TDM_ERR_ABORTED', 'an aborted signal');
      check(e.name === 'AbortError', `name ${e.name}`);
      same(await m.readState('state'), [1, 1, 1], 'state after the rejected calls');
    });
    await step('saveState / loadState / resetState', async () => {
      const saved = await m.saveState();
      check(saved instanceof Uint8Array && saved.length === 32 + m.stateBytes, `saved ${saved.length} bytes`);
      await m.forward(f32(1, 2, 3));
      await m.loadState(saved);
      same(await m.readState('state'), [1, 1, 1], 'state after loadState');
      const bad = saved.slice();
      bad[0] ^= 1;
      await rejects(m.loadState(bad), 'TDM_ERR_STATE_MISMATCH', 'bytes that are no saved state');
      await rejects(m.loadState(saved.subarray(0, saved.length - 4)), 'TDM_ERR_STATE_MISMATCH', 'truncated saved state');
      await rejects(m.loadState('bytes'), 'TDM_ERR_INVALID_ARGUMENT', 'not bytes');
      same(await m.readState('state'), [1, 1, 1], 'state after the rejected loads');
      await m.resetState();
      same(await m.readState('state'), [0, 0, 0], 'state after resetState');
    });
    await step('profile', async () => {
      if (!expect.profile) {
        await rejects(m.profile('forward', f32(1, 1, 1)), 'TDM_ERR_DEVICE', 'profile where it does not run');
        return;
      }
      const p = await m.profile('forward', f32(1, 1, 1));
      same(p.outputs, [2, 2, 2], 'profile outputs');
      check(p.ops.length > 0 && p.ops.every((o) => typeof o.ms === 'number' && typeof o.name === 'string'), 'profile ops');
      check(p.stateBytes === m.stateBytes && Array.isArray(p.flagged), 'profile totals');
      await m.reset();
    });
    await step('fork: its own state, initial or a copy', async () => {
      await m.forward(f32(1, 2, 3));
      const fresh = await m.fork();
      const copy = await m.fork({ state: 'copy' });
      check(Object.getPrototypeOf(fresh) === Object.getPrototypeOf(m), 'a fork is of the same class');
      same(await fresh.readState('state'), [0, 0, 0], 'fork() starts at the initial values');
      same(await copy.readState('state'), [1, 2, 3], "fork({ state: 'copy' }) starts at this state");
      same(await copy.forward(f32(1, 1, 1)), [4, 6, 8], 'the copy runs on');
      same(await fresh.forward(f32(1, 1, 1)), [2, 2, 2], 'the fresh one runs on');
      same(await m.readState('state'), [1, 2, 3], 'the forks leave this state alone');
      same(await m.forward(f32(0, 0, 0)), [2, 4, 6], 'this model runs on');
      check(fresh.memoryBytes > 0, 'a fork has memoryBytes');
      await rejects(m.fork({ stat: 'copy' }), 'TDM_ERR_INVALID_ARGUMENT', 'an unknown fork option', /unknown option 'stat'.*: state/);
      await rejects(m.fork({ state: 'both' }), 'TDM_ERR_INVALID_ARGUMENT', 'a bad fork state', /'initial' or 'copy'/);
      fresh.dispose();
      same(await copy.forward(f32(0, 0, 0)), [4, 6, 8], 'a fork runs on after another is disposed');
      copy.dispose();
      same(await m.forward(f32(0, 0, 0)), [2, 4, 6], 'this model runs on after its forks are disposed');
    });
    await step('an unknown load option is rejected, naming it and the valid ones', async () => {
      await rejects(load(source, { ...options, thread: 2 }), 'TDM_ERR_INVALID_ARGUMENT', 'a misspelt option',
        /unknown option 'thread'; the options are: threads, simd, device, gpuWeights, wasm, wasmThreads, wasmPaths, worker, onProgress/);
      await rejects(load(source, { ...options, worker: 'yes' }), 'TDM_ERR_INVALID_ARGUMENT', 'a bad value', /worker must be true or false/);
    });
  } finally {
    m.dispose();
  }
  await step('dispose', async () => {
    m.dispose(); // twice: nothing
    await rejects(m.forward(f32(1, 1, 1)), 'TDM_ERR_DISPOSED', 'a call after dispose');
    await rejects(m.readState('state'), 'TDM_ERR_DISPOSED', 'a state read after dispose');
    await rejects(m.fork(), 'TDM_ERR_DISPOSED', 'a fork after dispose');
    const d = await load(source, options);
    const pending = d.forward(f32(1, 1, 1));
    const waiting = d.forward(f32(1, 1, 1));
    d.dispose();
    // a call that started (wasm on this thread: finished when made) may resolve; one still waiting rejects
    await pending.catch((e) => check(e.code === 'TDM_ERR_DISPOSED', `the first call: ${e.code}`));
    const settled = await waiting.then(() => 'resolved', (e) => e.code);
    check(settled === 'TDM_ERR_DISPOSED' || (expect.device === 'wasm' && !options.worker && settled === 'resolved'),
      `the waiting call: ${settled}`);
  });
  return ran;
}
