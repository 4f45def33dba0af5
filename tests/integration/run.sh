#!/usr/bin/env bash
# Integration suite: starts one throwaway cluster (tests/pgtmp.sh), runs every
# tests/integration/t_*.sh (or those named on the command line) against it,
# each in its own database, stops the cluster, and prints "N passed, N failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export V7FILL=${V7FILL:-$root/build/v7fill}
export V7FILL_ROOT=$root
[ -x "$V7FILL" ] || { echo "integration: $V7FILL not built" >&2; exit 1; }

eval "$("$root/tests/pgtmp.sh" start)"
trap '"$root/tests/pgtmp.sh" stop "$PGTMP_DIR"' EXIT

if [ $# -gt 0 ]; then tests=("$@"); else tests=("$here"/t_*.sh); fi
passed=0
failed=0
failed_names=()
for t in "${tests[@]}"; do
    name=$(basename "$t" .sh)
    log=$(mktemp)
    start=$(date +%s)
    if (cd "$root" && bash "$t") >"$log" 2>&1; then
        passed=$((passed + 1))
        echo "ok   $name ($(( $(date +%s) - start ))s)"
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        echo "FAIL $name"
        sed 's/^/    /' "$log" | tail -n 60
    fi
    rm -f "$log"
done
echo "integration: $passed passed, $failed failed"
[ "$failed" = 0 ]
