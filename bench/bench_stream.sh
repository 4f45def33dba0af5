#!/usr/bin/env bash
# make bench-stream: two throwaway clusters (source and target), then bench/bench_stream.py.
# BENCH_STREAM_ROWS (default 1000000; 100000 for a quick run), BENCH_STREAM_RATE,
# BENCH_STREAM_LAG_SECONDS: see the script.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
src_env=$(PGTMP_PORT=${BENCH_STREAM_SRC_PORT:-54339} "$root/tests/pgtmp.sh" start)
SRC_DIR=$(eval "$src_env"; echo "$PGTMP_DIR")
SRC_PORT=$(eval "$src_env"; echo "$PGPORT")
trap '"$root/tests/pgtmp.sh" stop "$SRC_DIR"' EXIT
eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"; "$root/tests/pgtmp.sh" stop "$SRC_DIR"' EXIT
export SRC_DIR SRC_PORT SRC_HOST=$SRC_DIR/sock
python3 "$root/bench/bench_stream.py"
