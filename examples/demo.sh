#!/usr/bin/env bash
# make demo: the main job on the bundled example in a throwaway cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
V7FILL=${V7FILL:-$root/build/v7fill}
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
echo "== throwaway cluster at $PGHOST"
psql -X -q -v ON_ERROR_STOP=1 -f "$root/examples/schema.sql"
echo "== month bounds (v7fill uuid floor)"
for m in 2026-07-01 2026-08-01 2026-09-01 2026-10-01; do
    printf '%s  %s\n' "$m" "$("$V7FILL" uuid floor "$m")"
done
