#!/usr/bin/env bash
# make bench (import part): a throwaway cluster, then bench/bench_import.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
python3 "$root/bench/bench_import.py"
