// Typed files: the declarations `python -m tandem inspect --dts` writes (tests/fixtures/make.py writes
// them for four fixtures) checked by `tsc --noEmit --strict` with tests/types/typed-files.ts, a use of
// each that also holds calls the types must refuse (@ts-expect-error).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES, ROOT } from './helpers.js';

const TYPED = ['input_writes', 'delayed', 'dynamic_appender', 'branch_guard'];

test('tsc --noEmit --strict over the generated declarations and an example using them', () => {
  const dir = join(ROOT, 'build/types'); // where tests/types/typed-files.ts imports them from
  mkdirSync(dir, { recursive: true });
  for (const name of TYPED) {
    const from = join(FIXTURES, `${name}.d.ts`);
    assert.ok(existsSync(from), `missing ${from}: run tests/fixtures/make.py first (npm test does)`);
    copyFileSync(from, join(dir, `${name}.d.ts`));
  }
  assert.match(readFileSync(join(dir, 'input_writes.d.ts'), 'utf8'), /export interface InputWritesModel extends Model<InputWritesMethods>/);
  try {
    execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', join(ROOT, 'tests/types/tsconfig.typed-files.json')],
      { cwd: ROOT, stdio: 'pipe', encoding: 'utf8' });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
});
