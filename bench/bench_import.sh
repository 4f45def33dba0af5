#!/usr/bin/env bash
# make bench (import part): bench/bench_import.py on two throwaway clusters, one per
# server profile: "tuned" (tests/pgtmp.sh as it is: fsync, full_page_writes and
# synchronous_commit off) and "production" (bench/production.conf: stock settings, all three
# on, shared_buffers 128MB, max_wal_size 1GB).  The generated files are shared by both (BENCH_DATA).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
BENCH_DATA=$(mktemp -d "${TMPDIR:-/tmp}/v7fill-bench.XXXXXX")
export BENCH_DATA
chmod 755 "$BENCH_DATA"
dirs=()
cleanup() {
    for d in "${dirs[@]}"; do "$root/tests/pgtmp.sh" stop "$d" || true; done
    rm -rf "$BENCH_DATA"
}
trap cleanup EXIT
for profile in ${BENCH_PROFILES:-tuned production}; do
    eval "$("$root/tests/pgtmp.sh" start)"
    dirs+=("$PGTMP_DIR")
    if [ "$profile" = production ]; then
        cat "$root/bench/production.conf" >>"$PGTMP_DIR/data/postgresql.conf"
        owner=$(stat -c %U "$PGTMP_DIR/data")
        pgbin=${PGBIN:-}
        [ -n "$pgbin" ] || for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && pgbin=$d; done
        if [ "$(id -u)" = 0 ]; then
            runuser -u "$owner" -- "$pgbin/pg_ctl" -D "$PGTMP_DIR/data" -w -t 60 restart -l "$PGTMP_DIR/server.log" >/dev/null
        else
            "$pgbin/pg_ctl" -D "$PGTMP_DIR/data" -w -t 60 restart -l "$PGTMP_DIR/server.log" >/dev/null
        fi
    fi
    BENCH_PROFILE=$profile python3 "$root/bench/bench_import.py"
    "$root/tests/pgtmp.sh" stop "$PGTMP_DIR"
    unset 'dirs[-1]'
done
