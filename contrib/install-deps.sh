#!/bin/sh
# Install v7fill's build and test dependencies on Debian 12 (apt-get).
#   contrib/install-deps.sh               install everything listed below
#   contrib/install-deps.sh --if-missing  only when something is missing (used by make check/demo)
set -eu
PKGS="build-essential pkg-config libpq-dev libzstd-dev zstd libcsv-dev libssl-dev libcmocka-dev \
libjansson-dev libxxhash-dev libmicrohttpd-dev postgresql-15 postgresql-15-partman faketime"

missing() {
    command -v cc >/dev/null 2>&1 || return 0
    command -v pkg-config >/dev/null 2>&1 || return 0
    pkg-config --exists libpq libzstd libcrypto cmocka jansson libxxhash libmicrohttpd || return 0
    [ -f /usr/include/csv.h ] || return 0
    command -v zstd >/dev/null 2>&1 || return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || return 0
    ls /usr/share/postgresql/*/extension/pg_partman.control >/dev/null 2>&1 || return 0
    ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || return 0
    return 1
}

if [ "${1:-}" = "--if-missing" ] && ! missing; then
    exit 0
fi
echo "v7fill: installing build and test dependencies with apt-get: $PKGS" >&2
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "v7fill: dependencies installed" >&2
