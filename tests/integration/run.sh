#!/usr/bin/env bash
# Integration suite: runs every tests/integration/t_*.sh (or those named on the command line),
# each in its own database of a throwaway cluster (tests/pgtmp.sh), and prints
# "N passed, N failed".
#
# TEST_JOBS=N (default 1) runs N tests at a time, each worker with a cluster of its own, so a
# test that restarts, reconfigures or counts things across its cluster only ever sees its own
# worker's. The tests that take longest start first; the rest follow in name order.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
export V7FILL_ROOT=$root
[ -x "$V7FILL" ] || { echo "integration: $V7FILL not built" >&2; exit 1; }
jobs=${TEST_JOBS:-1}
case $jobs in
    '' | *[!0-9]* | 0) echo "integration: TEST_JOBS must be a positive integer, not '$jobs'" >&2; exit 2 ;;
esac

if [ $# -gt 0 ]; then tests=("$@"); else tests=("$here"/t_*.sh); fi
# Longest first (over 30 s each in a plain build, 2-5x that under the sanitizers), so that the
# workers finish close together.
slow=(t_citus t_stream_large t_migrate_e2e_childtable t_stream_multi t_stream_streaming
      t_stream_clocks t_migrate_e2e t_fault_outage t_stream_kill t_privileges_stream
      t_import_dedup t_fault_commit_ack t_migrate_childreverse t_migrate_twodb_childtable
      t_migrate_childtable t_stream_spool_limit)
if [ "$jobs" -gt 1 ]; then
    ordered=()
    for s in "${slow[@]}"; do
        for t in "${tests[@]}"; do t_name=${t##*/}; [ "${t_name%.sh}" = "$s" ] && ordered+=("$t"); done
    done
    for t in "${tests[@]}"; do
        t_name=${t##*/}
        case " ${slow[*]} " in *" ${t_name%.sh} "*) ;; *) ordered+=("$t") ;; esac
    done
    tests=("${ordered[@]}")
fi

work=$(mktemp -d)
pids=()
began=$(date +%s)
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    wait
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# worker N: start a cluster, then claim tests one by one (mkdir is atomic) until none is left.
# Each result is printed whole, under a lock, and counted in $work/result.N.
worker() {
    local n=$1 t name log start msg env
    trap - INT TERM EXIT
    env=$("$root/tests/pgtmp.sh" start) || { echo "setup" >"$work/result.$n.fail"; return; }
    eval "$env"
    trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT
    trap 'exit 130' INT TERM
    : >"$work/result.$n"
    for t in "${tests[@]}"; do
        name=${t##*/}
        name=${name%.sh}
        mkdir "$work/claim.$name" 2>/dev/null || continue
        log="$work/log.$name"
        msg="$work/msg.$name"
        start=$(date +%s)
        if (cd "$root" && bash "$t") >"$log" 2>&1; then
            echo "ok $name" >>"$work/result.$n"
            echo "ok   $name ($(( $(date +%s) - start ))s)" >"$msg"
        else
            echo "FAIL $name" >>"$work/result.$n"
            { echo "FAIL $name"; sed 's/^/    /' "$log" | tail -n 60; } >"$msg"
        fi
        flock "$work/print.lock" cat "$msg"
        rm -f "$log" "$msg"
    done
}

for n in $(seq 1 "$jobs"); do
    worker "$n" &
    pids+=($!)
done
wait "${pids[@]}"
pids=()

passed=$(cat "$work"/result.* 2>/dev/null | grep -c '^ok ')
failed_names=$(cat "$work"/result.* 2>/dev/null | sed -n 's/^FAIL //p' | sort | tr '\n' ' ' | sed 's/ $//')
failed=$(cat "$work"/result.* 2>/dev/null | grep -c '^FAIL ')
if ls "$work"/result.*.fail >/dev/null 2>&1; then
    echo "integration: a worker could not start its cluster" >&2
    failed=$((failed + 1))
fi
total=$(printf '%s\n' "${tests[@]##*/}" | sort -u | wc -l) # a test named twice runs once
missing=$(( total - passed - failed ))
[ "$missing" -le 0 ] || echo "integration: $missing of $total tests did not run (a worker ended early)" >&2
echo "integration: $passed passed, $failed failed${failed_names:+ ($failed_names)}, in $(( $(date +%s) - began ))s ($jobs at a time)"
[ "$failed" = 0 ] && [ "$missing" -le 0 ]
