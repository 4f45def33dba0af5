#!/usr/bin/env bash
# make bench-stream: bench/bench_stream.py on two throwaway clusters (source and target), once
# per server profile (BENCH_PROFILES, default "tuned production"): "tuned" (tests/pgtmp.sh as
# it is: fsync, full_page_writes and synchronous_commit off) and "production" (the same
# stock settings on source and target: bench/production.conf, as bench_import.sh).
# BENCH_STREAM_ROWS (default 1000000; 100000 for a quick run), BENCH_STREAM_RATE,
# BENCH_STREAM_LAG_SECONDS: see the script.  BENCH_STREAM_WALSENDER=1 then also measures the
# source walsender's CPU per million rows by pgoutput option (text, binary, streaming) with
# bench/bench_walsender.py on the same source cluster; BENCH_STREAM_WALSENDER=only does that
# alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
dirs=()
cleanup() {
    for d in "${dirs[@]}"; do "$root/tests/pgtmp.sh" stop "$d" || true; done
}
trap cleanup EXIT
for profile in ${BENCH_PROFILES:-tuned production}; do
    case "$profile" in
    tuned) conf= ;;
    production) conf=$(cat "$root/bench/production.conf") ;;
    *) echo "bench_stream: unknown profile $profile (tuned, production)" >&2; exit 2 ;;
    esac
    src_env=$(PGTMP_CONF=$conf PGTMP_PORT=${BENCH_STREAM_SRC_PORT:-54339} "$root/tests/pgtmp.sh" start)
    SRC_DIR=$(eval "$src_env"; echo "$PGTMP_DIR")
    SRC_PORT=$(eval "$src_env"; echo "$PGPORT")
    dirs+=("$SRC_DIR")
    eval "$(PGTMP_CONF=$conf "$root/tests/pgtmp.sh" start)"
    dirs+=("$PGTMP_DIR")
    export SRC_DIR SRC_PORT SRC_HOST=$SRC_DIR/sock
    if [ "${BENCH_STREAM_WALSENDER:-}" != only ]; then
        BENCH_PROFILE=$profile python3 "$root/bench/bench_stream.py"
    fi
    if [ -n "${BENCH_STREAM_WALSENDER:-}" ]; then
        BENCH_PROFILE=$profile python3 "$root/bench/bench_walsender.py"
    fi
    "$root/tests/pgtmp.sh" stop "$PGTMP_DIR"
    "$root/tests/pgtmp.sh" stop "$SRC_DIR"
    dirs=()
done
