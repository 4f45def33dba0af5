# The systemd unit contrib/v7fill-stream@.service (issue 20): `systemd-analyze verify` of an
# instance reports nothing, with the binary and the EnvironmentFile where a test may put them
# (the built binary, a stub .conf in a temp dir) and the man page of Documentation= on a
# MANPATH as `make install` puts it.  Skipped without systemd-analyze (.ci/run installs it).
source "$(dirname "$0")/lib.sh"
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skipped: systemd-analyze not installed"
    exit 0
fi
cd "$T_TMP"
unit="$V7FILL_ROOT/contrib/v7fill-stream@.service"
bin=$(cd "$(dirname "$V7FILL")" && pwd)/$(basename "$V7FILL")
grep -q '^ExecStart=/usr/local/bin/v7fill ' "$unit" || fail "ExecStart runs /usr/local/bin/v7fill"
grep -q '^EnvironmentFile=/etc/v7fill/%i.conf$' "$unit" || fail "EnvironmentFile is /etc/v7fill/%i.conf"
sed -e "s|^ExecStart=/usr/local/bin/v7fill |ExecStart=$bin |" \
    -e "s|^EnvironmentFile=/etc/v7fill/%i.conf|EnvironmentFile=$T_TMP/%i.conf|" \
    "$unit" >"v7fill-stream@.service"
cat >orders.conf <<'CONF'
TARGET='dbname=app user=v7fill'
TABLE=orders_v7
SOURCE='host=legacy dbname=shop user=v7fill_repl'
FROM=public.orders
PUBLICATION=v7fill_pub
SLOT=v7fill_orders
OPTIONS='--map id=legacy_id --metrics-listen 127.0.0.1:9187'
CONF
mkdir -p man/man1
cp "$V7FILL_ROOT/docs/v7fill.1" man/man1/
run_expect 0 env MANPATH="$T_TMP/man" systemd-analyze verify "$T_TMP/v7fill-stream@orders.service"
assert_eq "" "$OUT" "systemd-analyze verify reports nothing"
# what the unit promises, read back
grep -q '^Restart=on-failure$' "$unit" || fail "the unit restarts the stream on failure"
grep -q '^KillSignal=SIGTERM$' "$unit" || fail "the unit stops the stream with SIGTERM"
! grep -qiE '^[^#]*password' "$unit" || fail "a password in the unit"
echo "ok"
