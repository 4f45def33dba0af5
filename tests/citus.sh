#!/usr/bin/env bash
# citus.sh - a throwaway three-node Citus cluster on one machine, for tests and the docs' figures.
#
#   tests/citus.sh start [DIR]   coordinator + two workers (each a tests/pgtmp.sh cluster in
#                                DIR/coord, DIR/w1, DIR/w2, unix sockets only), citus preloaded,
#                                the extension created in the database "postgres" of every node,
#                                the workers added; prints `export ...` lines for the coordinator
#   tests/citus.sh stop DIR      stop the three servers (each by its own pid) and remove DIR
#   tests/citus.sh installed     exit 0 when Citus is installed for the local PostgreSQL
#
# Citus does not propagate CREATE DATABASE: the cluster is used in its "postgres" database.
# CITUS_SHARD_COUNT (default 4) sets citus.shard_count on the coordinator: a test creates
# dozens of partitions, each one table per shard (Citus's default is 32).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
MARK=.v7fill-citus
PGBIN=${PGBIN:-}
if [ -z "$PGBIN" ]; then
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && PGBIN=$d; done
fi

installed() {
    local libdir sharedir
    [ -n "$PGBIN" ] && [ -x "$PGBIN/pg_config" ] || return 1
    libdir=$("$PGBIN/pg_config" --pkglibdir) && sharedir=$("$PGBIN/pg_config" --sharedir) || return 1
    [ -f "$libdir/citus.so" ] && [ -f "$sharedir/extension/citus.control" ]
}

# psql on node DIR/NAME as the cluster's superuser
node_sql() {
    local dir=$1 port=$2
    shift 2
    "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$dir/sock" -p "$port" -U postgres -d postgres "$@"
}

stop_all() {
    local dir=$1
    for n in w2 w1 coord; do
        [ -f "$dir/$n/.v7fill-pgtmp" ] && "$here/pgtmp.sh" stop "$dir/$n" || true
    done
}

cmd=${1:-}
case "$cmd" in
installed)
    installed
    ;;
start)
    installed || { echo "citus: Citus is not installed for $PGBIN (../shared/citus/build.sh installs it)" >&2; exit 1; }
    dir=${2:-}
    if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/v7fill-citus.XXXXXX"); else mkdir -p "$dir"; fi
    touch "$dir/$MARK"
    chmod 755 "$dir"
    base=${CITUS_PORT:-57000}
    trap 'stop_all "$dir"' ERR
    # The three nodes are made side by side (initdb, start, CREATE EXTENSION), not one after
    # the other; any of them failing stops those that started.
    pids=()
    i=0
    for n in coord w1 w2; do
        { PGTMP_PORT=$((base + i)) PGTMP_CONF="shared_preload_libraries = 'citus'
max_prepared_transactions = 100
citus.shard_count = ${CITUS_SHARD_COUNT:-4}" \
              "$here/pgtmp.sh" start "$dir/$n" >/dev/null &&
              node_sql "$dir/$n" $((base + i)) -c "CREATE EXTENSION citus" >/dev/null; } &
        pids+=($!)
        i=$((i + 1))
    done
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    [ "$failed" = 0 ] || { echo "citus: a node did not start" >&2; stop_all "$dir"; exit 1; }
    node_sql "$dir/coord" "$base" -c "SELECT citus_set_coordinator_host('$dir/coord/sock', $base)" >/dev/null
    node_sql "$dir/coord" "$base" -c "SELECT citus_add_node('$dir/w1/sock', $((base + 1)))" >/dev/null
    node_sql "$dir/coord" "$base" -c "SELECT citus_add_node('$dir/w2/sock', $((base + 2)))" >/dev/null
    echo "$base" >"$dir/port"
    echo "export PGHOST='$dir/coord/sock' PGPORT='$base' PGUSER='postgres' PGDATABASE='postgres'"
    echo "export CITUS_DIR='$dir'"
    ;;
stop)
    dir=${2:?usage: citus.sh stop DIR}
    [ -f "$dir/$MARK" ] || { echo "citus: $dir was not made by citus.sh; refusing to touch it" >&2; exit 1; }
    stop_all "$dir"
    rm -rf "$dir"
    ;;
*)
    echo "usage: citus.sh start [DIR] | stop DIR | installed" >&2
    exit 2
    ;;
esac
