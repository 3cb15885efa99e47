// docs/api.md documents every public JS name: what web/tandem.js, node/index.js and
// web/tandem.d.ts export, every member of a loaded Model and WorkerModel, and every error code.
// A name is documented when it has its own heading (### `name(...)`, #### `model.name(...)`)
// or a row in one of the reference tables (| `name` | ... |); a heading for a function or method
// must also show an example (a code block before the next heading).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as web from '../../web/tandem.js';
import * as node from '../../node/index.js';
import { fixture, ROOT } from './helpers.js';

const doc = readFileSync(`${ROOT}docs/api.md`, 'utf8');

/** name -> the text of its section (headings) or row (tables). */
function documented() {
  const names = new Map();
  const lines = doc.split('\n');
  for (const [i, line] of lines.entries()) {
    const h = line.match(/^#{2,4} `([\w.$<>[\]]+)/);
    if (h) {
      let end = i + 1;
      while (end < lines.length && !/^#{1,4} /.test(lines[end])) end++;
      names.set(h[1], lines.slice(i, end).join('\n'));
    }
    const row = line.match(/^\| `([\w.]+)` \|/);
    if (row && !names.has(row[1])) names.set(row[1], line); // a heading of the same name says more
  }
  return names;
}

test('docs/api.md names every export of web/tandem.js, node/index.js and web/tandem.d.ts', () => {
  const names = documented();
  const dts = readFileSync(`${ROOT}web/tandem.d.ts`, 'utf8');
  const typed = [...dts.matchAll(/^export (?:declare )?(?:type|interface|class|function|const) (\w+)/gm)].map((m) => m[1]);
  assert.ok(typed.includes('load') && typed.includes('CallOptions') && typed.includes('ForkOptions'), 'the .d.ts exports were read');
  const exported = new Set([...Object.keys(web), ...Object.keys(node), ...typed]);
  const missing = [...exported].filter((n) => !names.has(n));
  assert.deepEqual(missing, [], 'exported names without an entry in docs/api.md');
  for (const n of [...Object.keys(web), ...Object.keys(node)]) {
    if (typeof web[n] === 'function' || typeof node[n] === 'function') {
      assert.ok(names.get(n).includes('```'), `docs/api.md: ${n} has no example`);
    }
  }
});

test('docs/api.md names every member of Model and WorkerModel', async () => {
  const names = documented();
  const members = new Set();
  for (const opts of [{}, { worker: true }]) {
    const m = await load(fixture('accumulator').path, opts);
    for (let o = Object.getPrototypeOf(m); o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
      Object.getOwnPropertyNames(o).filter((n) => n !== 'constructor' && !n.startsWith('_')).forEach((n) => members.add(n));
      if (Object.getOwnPropertySymbols(o).includes(Symbol.dispose)) members.add('[Symbol.dispose]');
    }
    m.dispose();
  }
  assert.ok(members.has('fork') && members.has('readState') && members.has('memoryBytes'), [...members].join(' '));
  const missing = [...members].filter((n) => n === '[Symbol.dispose]' ? !/model\[Symbol\.dispose\]\(\)/.test(doc)
    : !names.has(`model.${n}`));
  assert.deepEqual(missing, [], 'Model / WorkerModel members without a `model.<name>` entry in docs/api.md');
  assert.ok(names.has('model.<method>'), 'docs/api.md describes calling a program method');
  for (const n of members) {
    if (n !== '[Symbol.dispose]') assert.ok(names.get(`model.${n}`).includes('```'), `docs/api.md: model.${n} has no example`);
  }
});

test('docs/api.md lists every error code of the typings', () => {
  const names = documented();
  const dts = readFileSync(`${ROOT}web/tandem.d.ts`, 'utf8');
  const union = dts.match(/export type ErrorCode =([^;]*);/)[1];
  const codes = [...union.matchAll(/'(TDM_\w+)'/g)].map((m) => m[1]);
  assert.ok(codes.includes('TDM_ERR_ABORTED') && codes.length >= 16, codes.join(' '));
  assert.deepEqual(codes.filter((c) => !names.has(c)), [], 'error codes missing from docs/api.md');
});

const { load } = node;
