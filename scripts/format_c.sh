#!/usr/bin/env bash
# clang-format (.clang-format) over the C sources: src/ (but src/schema.h, which scripts/gen_schema.py
# writes), include/, tests/c/ and tests/fuzz/. `scripts/format_c.sh` rewrites the files in place;
# `scripts/format_c.sh --check` changes nothing, lists each file clang-format would change with how
# many lines, and exits 1 if there is any. CLANG_FORMAT picks the binary (default: clang-format-19,
# else clang-format; Debian's clang-format-19 package).
set -euo pipefail
cd "$(dirname "$0")/.."
CF="${CLANG_FORMAT:-$(command -v clang-format-19 || command -v clang-format || true)}"
[ -n "$CF" ] || { echo "format_c: clang-format not found: apt-get install clang-format-19 (or set CLANG_FORMAT)" >&2; exit 2; }
mapfile -t FILES < <(ls src/*.c src/*.h src/kernels/*.c src/kernels/*.h include/*.h tests/c/*.c tests/c/*.h tests/fuzz/*.c | grep -v '^src/schema\.h$')
if [ "${1:-}" != --check ]; then
  "$CF" --style=file -i "${FILES[@]}"
  exit 0
fi
changed=0 lines=0
for f in "${FILES[@]}"; do
  n=$("$CF" --style=file "$f" | diff "$f" - | grep -c '^<' || true)
  if [ "$n" -gt 0 ]; then
    echo "$f: $n lines"
    changed=$((changed + 1)) lines=$((lines + n))
  fi
done
echo "format_c: $changed of ${#FILES[@]} files, $lines lines would change"
[ "$changed" -eq 0 ]
