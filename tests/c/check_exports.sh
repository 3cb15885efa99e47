#!/usr/bin/env bash
# The native shared library exports exactly the functions include/tandem.h marks TDM_API (built
# with hidden visibility): nothing internal (kernels, tdm__ helpers, SIMDe) and nothing missing.
# ctest runs it: check_exports.sh build/native/libtandem.so include/tandem.h
set -euo pipefail
lib=$1 header=$2
want=$(grep -E '^TDM_API ' "$header" | grep -oE 'tdm_[a-z0-9_]+\(' | tr -d '(' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
if [ "$want" != "$have" ]; then
  echo "exported symbols differ from tandem.h's TDM_API functions (< only in tandem.h, > only exported):"
  diff <(echo "$want") <(echo "$have") || true
  exit 1
fi
echo "check_exports: $(echo "$want" | wc -l) API functions, nothing else exported"
