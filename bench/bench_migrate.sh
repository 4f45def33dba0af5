#!/usr/bin/env bash
# make bench-migrate: one throwaway cluster, then bench/bench_migrate.py (v7fill migrate's
# copy phase beside a raw COPY of the same rows into the same target, the child fill, the
# capture's catch-up, a concurrent writer's longest wait during the fill and the switch).
# BENCH_MIGRATE_PARENT (default 1000000), BENCH_MIGRATE_CHILD (default 2000000),
# BENCH_ROWS_BIG=1 for the issue's 5M / 10M, BENCH_MIGRATE_CHANGES (default 200000),
# BENCH_MIGRATE_ARGS (more arguments for the runs that copy or catch up, e.g. "--jobs 2").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
eval "$(PGTMP_PORT=${BENCH_MIGRATE_PORT:-54341} "$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
python3 "$root/bench/bench_migrate.py"
