#!/usr/bin/env bash
# pgtmp.sh - a throwaway PostgreSQL cluster for tests and the demo.
#
#   tests/pgtmp.sh start [DIR]   create and start a cluster; prints `export ...` lines
#   tests/pgtmp.sh env DIR       print the environment for a running cluster
#   tests/pgtmp.sh stop DIR      stop the cluster started in DIR (by its own pid) and remove DIR
#
# The cluster lives in a temporary directory, listens only on a unix socket in
# that directory (no TCP unless PGTMP_TCP_PORT is set), has wal_level=logical
# and room for replication slots.  Invoked as root it runs the server as an
# unprivileged user (PGTMP_USER, default postgres) through runuser, because
# PostgreSQL refuses to run as root.  It only ever touches the directory it
# created: stop refuses a directory without its marker file.  PGTMP_CONF: more
# postgresql.conf lines (tests/citus.sh: shared_preload_libraries = 'citus').
# PGTMP_ENV: NAME=VALUE words added to the server's environment at start (and
# only there), e.g. a preloaded libfaketime (tests/integration/t_stream_clocks.sh).
set -euo pipefail

PGBIN=${PGBIN:-}
if [ -z "$PGBIN" ]; then
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && PGBIN=$d; done
fi
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || { echo "pgtmp: PostgreSQL server binaries not found (set PGBIN)" >&2; exit 1; }
PORT=${PGTMP_PORT:-54329}
MARK=.v7fill-pgtmp

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "${PGTMP_USER:-postgres}" -- "$@"
    else
        "$@"
    fi
}

print_env() {
    local dir=$1
    echo "export PGHOST='$dir/sock' PGPORT='$PORT' PGUSER='postgres' PGDATABASE='postgres'"
    echo "export PGTMP_DIR='$dir'"
}

cmd=${1:-}
case "$cmd" in
start)
    dir=${2:-}
    if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/v7fill-pg.XXXXXX"); else mkdir -p "$dir"; fi
    touch "$dir/$MARK"
    mkdir -p "$dir/sock"
    if [ "$(id -u)" = 0 ]; then chown -R "${PGTMP_USER:-postgres}" "$dir"; chmod 755 "$dir"; fi
    as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    listen="''"
    [ -n "${PGTMP_TCP_PORT:-}" ] && { listen=127.0.0.1; PORT=$PGTMP_TCP_PORT; }
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = $listen
port = $PORT
unix_socket_directories = '$dir/sock'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 100
shared_buffers = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
log_min_messages = warning
logging_collector = off
${PGTMP_CONF:-}
CONF
    # shellcheck disable=SC2086
    as_owner env ${PGTMP_ENV:-} "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    print_env "$dir"
    ;;
env)
    print_env "${2:?usage: pgtmp.sh env DIR}"
    ;;
stop)
    dir=${2:?usage: pgtmp.sh stop DIR}
    [ -f "$dir/$MARK" ] || { echo "pgtmp: $dir was not made by pgtmp.sh; refusing to touch it" >&2; exit 1; }
    if [ -f "$dir/data/postmaster.pid" ]; then
        pid=$(head -n1 "$dir/data/postmaster.pid")
        as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: pgtmp.sh start [DIR] | env DIR | stop DIR" >&2
    exit 2
    ;;
esac
