// The error codes, declared once each: the runtime's statuses in include/tandem.h (named by the wasm's
// tdm_status_string) and the JS side's in web/errors.js (JS_ERROR_CODES). Every code the JS throws is
// one of them, and the typings' ErrorCode and docs/api.md's table list exactly these.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { JS_ERROR_CODES, TandemError } from '../../web/errors.js';
import { compileRuntime, instantiateRuntime } from '../../web/loader.js';
import { Runtime } from '../../web/runtime.js';
import { ROOT } from './helpers.js';

const read = (p) => readFileSync(join(ROOT, p), 'utf8');
const header = read('include/tandem.h');
const STATUS_ENUM = header.match(/typedef enum tdm_status \{([\s\S]*?)\} tdm_status;/)[1];
const C_CODES = [...STATUS_ENUM.matchAll(/\b(TDM_ERR_\w+) = \d+/g)].map((m) => m[1]);
const JS_CODES = Object.keys(JS_ERROR_CODES);
const ALL = [...C_CODES, ...JS_CODES];

test("the runtime's status strings are include/tandem.h's statuses", async () => {
  const module = await compileRuntime('errors.test:tandem.wasm', () => readFileSync(join(ROOT, 'web/tandem.wasm')));
  const rt = new Runtime(await instantiateRuntime(module));
  const named = [];
  for (let code = 1; code < 256; code++) {
    const name = rt.str(rt.x.tdm_status_string(code));
    if (name !== 'TDM_ERR_UNKNOWN_STATUS') named.push(name);
  }
  assert.ok(C_CODES.includes('TDM_ERR_SHAPE') && C_CODES.length >= 13, C_CODES.join(' '));
  assert.deepEqual(named, C_CODES);
});

test('JS_ERROR_CODES: the JS-only codes, none a runtime status, each with its meaning', () => {
  assert.ok(Object.isFrozen(JS_ERROR_CODES));
  assert.deepEqual(JS_CODES.filter((c) => C_CODES.includes(c)), [], 'a JS code that is also a runtime status');
  for (const [code, meaning] of Object.entries(JS_ERROR_CODES)) {
    assert.match(code, /^TDM_ERR_[A-Z_]+$/);
    assert.ok(typeof meaning === 'string' && meaning.length > 10, code);
  }
  assert.equal(new TandemError('TDM_ERR_ABORTED', 'x').name, 'AbortError');
  assert.equal(new TandemError('TDM_ERR_DISPOSED', 'x').name, 'TandemError');
});

test('every error code in web/ and node/ is a runtime status or in JS_ERROR_CODES', () => {
  const unknown = [];
  for (const dir of ['web', 'node']) {
    for (const name of readdirSync(join(ROOT, dir), { recursive: true }).filter((n) => n.endsWith('.js'))) {
      for (const [, code] of read(`${dir}/${name}`).matchAll(/['"`](TDM_ERR_\w+)/g)) {
        if (!ALL.includes(code)) unknown.push(`${dir}/${name}: ${code}`);
      }
    }
  }
  assert.deepEqual(unknown, [], 'declare these in web/errors.js JS_ERROR_CODES (or include/tandem.h)');
});

test("the typings' ErrorCode and docs/api.md's error table list exactly these codes", () => {
  const union = read('web/tandem.d.ts').match(/export type ErrorCode =([^;]*);/)[1];
  assert.deepEqual([...union.matchAll(/'(TDM_\w+)'/g)].map((m) => m[1]).sort(), [...ALL].sort(), 'web/tandem.d.ts ErrorCode');
  const doc = read('docs/api.md');
  const table = doc.slice(doc.indexOf('### Error codes'), doc.indexOf('\n### ', doc.indexOf('### Error codes') + 1));
  const rows = [...table.matchAll(/^\| `(TDM_\w+)` \|/gm)].map((m) => m[1]);
  assert.deepEqual(rows.sort(), [...ALL].sort(), "docs/api.md's error table");
});
