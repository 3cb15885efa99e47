// ESLint's flat config for the JS of the repo: web/ and demo/ (browsers, workers and Node), node/,
// tests/js, tests/browser, tests/soak and bench/**/*.mjs (Node; the browser tests' page callbacks run in the page).
// `npm run lint` runs it (scripts/test.sh too). The recommended rules find mistakes; the stylistic
// ones hold the style the code is written in (2-space indent, single quotes, semicolons) and lines of
// at most 140 characters, without reformatting what already reads well.
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import globals from 'globals';

export default [
  { ignores: ['node_modules/', 'build/', 'dist/'] },
  js.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 'latest',
      sourceType: 'module',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { '@stylistic': stylistic },
    rules: {
      // mistakes
      'no-unused-vars': ['error', { args: 'after-used', caughtErrors: 'none', ignoreRestSiblings: true }],
      'no-var': 'error',
      // a `let` read by a closure before its one assignment (web/loader.js's exports) stays a let
      'prefer-const': ['error', { destructuring: 'all', ignoreReadBeforeAssign: true }],
      eqeqeq: ['error', 'smart'],
      'no-shadow-restricted-names': 'error',
      'no-implicit-globals': 'error',
      'no-throw-literal': 'error',
      'no-self-compare': 'error',
      'no-unused-private-class-members': 'error',
      // style
      '@stylistic/max-len': ['error', { code: 140, tabWidth: 2, ignoreUrls: true }],
      '@stylistic/semi': ['error', 'always'],
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
      '@stylistic/no-tabs': 'error',
      '@stylistic/no-trailing-spaces': 'error',
      '@stylistic/eol-last': 'error',
      '@stylistic/no-multiple-empty-lines': ['error', { max: 1, maxBOF: 0, maxEOF: 0 }],
      '@stylistic/comma-dangle': ['error', 'always-multiline'],
      '@stylistic/comma-spacing': 'error',
      '@stylistic/key-spacing': 'error',
      '@stylistic/keyword-spacing': 'error',
      '@stylistic/space-before-blocks': 'error',
      '@stylistic/space-infix-ops': 'error',
      '@stylistic/arrow-parens': ['error', 'always'],
      '@stylistic/arrow-spacing': 'error',
      '@stylistic/brace-style': ['error', '1tbs', { allowSingleLine: true }],
      '@stylistic/indent': ['error', 2, { SwitchCase: 1, flatTernaryExpressions: true, ignoredNodes: ['ConditionalExpression *'] }],
    },
  },
  {
    // the package's modules run in pages and workers as well as in Node; the demo only in pages
    // (and page.evaluate's callbacks, in the browser tests and the in-page benchmark)
    files: ['web/**/*.js', 'demo/**/*.js', 'tests/browser/**/*.js', 'bench/suite/llm.mjs'],
    languageOptions: { globals: { ...globals.browser, ...globals.worker, ...globals.audioWorklet } },
  },
];
