#!/usr/bin/env python3
"""v7fill migrate beside a raw COPY of the same rows into the same target, in one run.

One throwaway cluster (bench_migrate.sh), one database, the usual case (source = target):
  orders  P rows (BENCH_MIGRATE_PARENT, default 1,000,000): id bigserial, created_at over
          3 years, customer_id, status, amount, note;
  items   C rows (BENCH_MIGRATE_CHILD, default 2,000,000): id bigserial, order_id -> orders,
          sku, qty, price.
BENCH_ROWS_BIG=1 uses the issue's 5,000,000 / 10,000,000.

Figures, each beside its baseline from the same run:
  (a) baseline: the rows migrate wrote (legacy key, the minted uuid, the other columns)
      COPY'd TO a file, then `\\copy ... FROM` it (timed alone) into raw_v7: the same
      columns and indexes, partitioned by RANGE (id) with the same windows;
  (b) `migrate` (no writer, no --child): the copy phase's rows/s (the pipeline's own
      figure, and the whole command's wall time) and their ratio to (a);
  (c) `migrate --child items(order_id)` rerun (the parent copied): the child fill, rows/s;
  (d) catch-up: with the migration in phase follow and migrate stopped, N changes
      (BENCH_MIGRATE_CHANGES, default 200,000: 40% inserts, 40% updates, 20% deletes) in
      transactions of 1000 on the parent; then `migrate` timed until caught up: changes/s;
  (e) a concurrent writer (one psql session with \\timing, autocommit, every ~20 ms: insert
      + update of a child row, then bench_parent(): update + insert of a parent row; after
      the switch only the update, by legacy_id): its longest statement with
      nothing else running, during the child fill (c), and during `--switch`.
Where the CPU went in (b), (c) and (d) (bench/cpumon.py, sampled every 0.2 s, each phase
bracketed by the run's log lines): v7fill, the cluster's sessions (v7fill's; in (c) also the
writer's), their parallel workers, the walsender (it decodes the slot), autovacuum, the
checkpointer and WAL writers; the time they waited runnable for a CPU; the machine's steal.
For (d), also how much WAL lay between the slot's position and the end of WAL.
"""
import calendar
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from cpumon import CpuMonitor, steal_share

V7FILL = os.environ["V7FILL"]
BIG = os.environ.get("BENCH_ROWS_BIG", "") not in ("", "0")
P = int(os.environ.get("BENCH_MIGRATE_PARENT", "5000000" if BIG else "1000000"))
C = int(os.environ.get("BENCH_MIGRATE_CHILD", "10000000" if BIG else "2000000"))
CHANGES = int(os.environ.get("BENCH_MIGRATE_CHANGES", "200000"))
WRITER_BASELINE_S = int(os.environ.get("BENCH_MIGRATE_WRITER_SECONDS", "15"))
# BENCH_MIGRATE_ARGS: more arguments for every run that copies or catches up (e.g. "--jobs 2")
EXTRA_ARGS = os.environ.get("BENCH_MIGRATE_ARGS", "").split()
DB = "bench"
CLUSTER = {"db": os.environ["PGTMP_DIR"]}
INTO = "orders_v7"


def psql(sql, db=DB, check=True):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                       capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"psql failed: {r.stderr.strip()}\n  {sql.strip()[:300]}")
    return r.stdout.strip()


def migrate(*args, mon=None):
    """Run v7fill migrate; returns (wall seconds, stdout, stderr). Exit != 0 stops the bench.
    With mon (a CpuMonitor), its client is this run's v7fill."""
    extra = EXTRA_ARGS if "--from" in args else []
    cmd = [V7FILL, "-d", f"dbname={DB}", "migrate", *args, *extra]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if mon:
        mon.client = p.pid
    out, err = p.communicate()
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.stderr.write(out + err)
        raise SystemExit(f"v7fill migrate {' '.join(args)}: exit {p.returncode}")
    return wall, out, err


def log_time(stderr, pattern):
    """The wall clock (seconds since the epoch) of the first log line matching pattern
    (v7fill logs in UTC)."""
    for line in stderr.splitlines():
        if re.search(pattern, line):
            m = re.match(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)? UTC", line)
            if m:
                return calendar.timegm(tuple(int(x) for x in m.groups()[:6])) + float(m[7] or 0)
    return None


def cpu_line(mon, t0, t1):
    """Where the CPU went between two wall-clock moments of a run: seconds (and cores, over
    the span) of v7fill, the cluster's sessions, its walsender and its other processes; the
    seconds they waited runnable for a CPU; the machine's steal."""
    if t0 is None or t1 is None:
        return "not bracketed (log lines missing)"
    d, span = mon.between(t0, t1)
    parts = []
    for label, key in (("v7fill", ("client", "v7fill")), ("sessions", ("db", "backend")),
                       ("their parallel workers", ("db", "parallel")),
                       ("walsender", ("db", "walsender")), ("autovacuum", ("db", "autovacuum")),
                       ("checkpointer+WAL writer+bgwriter", ("db", "wal+ckpt")),
                       ("other", ("db", "other"))):
        v = d.get(key, 0.0)
        parts.append(f"{label} {v:.1f} s ({v / span:.2f} cores)")
    return (f"{span:.1f} s: " + ", ".join(parts) +
            f"; runnable waiting for a CPU: v7fill {d.get(('wait', 'client'), 0.0):.1f} s, "
            f"cluster {d.get(('wait', 'db'), 0.0):.1f} s; steal {100 * steal_share(d):.0f}%")


class Writer:
    """One psql session (autocommit, \\timing) writing the child and the parent every ~20 ms
    until stopped; the longest statement it saw, and its errors (after the switch the parent
    is the new table: an insert without an id may be refused there)."""

    def __init__(self):
        self.proc = subprocess.Popen(["psql", "-X", "-q", "-d", DB], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.out = []
        self.reader = threading.Thread(target=lambda: self.out.extend(self.proc.stdout), daemon=True)
        self.reader.start()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.proc.stdin.write("\\timing on\n")
        self.thread.start()

    def run(self):
        i = 0
        while not self.stop_ev.is_set():
            i += 1
            k = 1 + (i * 7919) % P
            self.proc.stdin.write(
                f"INSERT INTO items (order_id, sku, qty, price) VALUES ({k}, {i % 1000}, 1, 9.99);\n"
                f"UPDATE items SET qty = qty + 1 WHERE id = {1 + (i * 104729) % C};\n"
                f"SELECT bench_parent({k}, {i});\n")
            self.proc.stdin.flush()
            time.sleep(0.02)

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        self.proc.stdin.write("\\q\n")
        self.proc.stdin.close()
        self.proc.wait()
        self.reader.join()
        times = [float(m[1]) for line in self.out if (m := re.match(r"Time: ([0-9.]+) ms", line))]
        errors = [line.strip() for line in self.out if line.startswith("ERROR")]
        return (max(times) if times else float("nan")), len(times), errors


def main():
    psql("CREATE DATABASE " + DB, db="postgres")
    t0 = time.monotonic()
    psql(f"""
CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL,
  customer_id integer NOT NULL, status text NOT NULL, amount numeric(12,2), note text);
INSERT INTO orders SELECT g, timestamptz '2023-01-01' + (g::float8 / {P}) * interval '1095 days',
  g % 50000, (ARRAY['new','paid','shipped','done'])[1 + g % 4], (g % 100000) / 100.0,
  'note ' || g % 1000 FROM generate_series(1, {P}) g;
SELECT setval('orders_id_seq', {P});
CREATE TABLE items (id bigserial PRIMARY KEY, order_id bigint REFERENCES orders (id),
  sku integer NOT NULL, qty integer NOT NULL, price numeric(10,2));
INSERT INTO items SELECT g, 1 + (g * 7919::bigint) % {P}, g % 1000, 1 + g % 5, (g % 1000) / 10.0
  FROM generate_series(1, {C}) g;
SELECT setval('items_id_seq', {C});
CREATE INDEX ON items (order_id);""")
    psql("VACUUM ANALYZE orders")
    psql("VACUUM ANALYZE items")
    psql(f"""
-- the writer's parent statements: orders.id before the switch, orders.legacy_id after it
-- (the table named orders is then the new one, its id a uuid; only updates there)
CREATE FUNCTION bench_parent(k bigint, i bigint) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  IF to_regclass('orders_legacy') IS NULL THEN
    EXECUTE 'UPDATE orders SET amount = amount + 1 WHERE id = $1' USING k;
    EXECUTE 'INSERT INTO orders (created_at, customer_id, status, amount, note)
             VALUES (now(), $1 % 5000, ''new'', 1.00, ''writer'')' USING i;
  ELSE
    EXECUTE 'UPDATE orders SET amount = amount + 1 WHERE legacy_id = $1' USING k;
  END IF;
END $f$;
CHECKPOINT;""")
    print(f"bench-migrate: parent {P:,} rows, child {C:,} rows (made in {time.monotonic() - t0:.0f} s)",
          flush=True)
    load_before = open("/proc/loadavg").read().split()[:3]

    # (e) baseline: the writer with nothing else running
    w = Writer()
    time.sleep(WRITER_BASELINE_S)
    w_base, w_base_n, w_base_err = w.stop()

    # (b) the copy phase, no writer
    psql("CHECKPOINT")
    mon = CpuMonitor(CLUSTER)
    wall_copy, out, err = migrate("--from", "public.orders", "--key", "id", "--time-column",
                                  "created_at", "--into", INTO, mon=mon)
    mon.stop()
    # the copy's last line: the progress lines before it carry the same words (at 5M rows
    # the first match was a progress line at 1.23M rows, and the baseline's rate was wrong)
    ms = re.findall(r"\(snapshot\): (\d+) rows read, (\d+) inserted, (\d+) rows/s", err)
    copied = int(psql(f"SELECT count(*) FROM {INTO}"))
    pipe_rate = int(ms[-1][2]) if ms else float("nan")
    t_slot, t_done = log_time(err, r"slot .* created at"), log_time(err, r"initial copy of .* done")
    phase_s = (t_done - t_slot) if t_slot is not None and t_done is not None else float("nan")
    cpu_copy = cpu_line(mon, t_slot, t_done)
    # (a) baseline: a raw COPY of the same rows into the same kind of target, same windows
    cols = psql(f"SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
                f"WHERE attrelid = '{INTO}'::regclass AND attnum > 0 AND NOT attisdropped")
    parts = psql(f"SELECT string_agg(format('CREATE TABLE raw_v7_%s PARTITION OF raw_v7 %s;', "
                 f"c.oid, pg_get_expr(c.relpartbound, c.oid)), ' ') "
                 f"FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                 f"WHERE i.inhparent = '{INTO}'::regclass")
    psql(f"CREATE TABLE raw_v7 (LIKE {INTO} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) "
         f"PARTITION BY RANGE (id); ALTER TABLE raw_v7 ADD PRIMARY KEY (id); "
         f"CREATE INDEX ON raw_v7 (legacy_id); {parts}")
    tmp = tempfile.mkdtemp(prefix="bench-migrate-")
    path = os.path.join(tmp, "rows.copy")
    psql(f"\\copy (SELECT {cols} FROM {INTO}) TO '{path}'")
    psql("CHECKPOINT")
    t0 = time.monotonic()
    psql(f"\\copy raw_v7 ({cols}) FROM '{path}'")
    raw_s = time.monotonic() - t0
    os.unlink(path)
    os.rmdir(tmp)
    raw_rate = copied / raw_s
    psql("DROP TABLE raw_v7; CHECKPOINT")

    # (c) the child fill, under the writer
    w = Writer()
    time.sleep(1)
    mon = CpuMonitor(CLUSTER)
    wall_fill, out_fill, err_fill = migrate("--from", "public.orders", "--key", "id", "--time-column",
                                            "created_at", "--into", INTO, "--child", "public.items(order_id)",
                                            mon=mon)
    mon.stop()
    w_fill, w_fill_n, w_fill_err = w.stop()
    t_f0 = log_time(err_fill, r"order_id_uuid added|trigger .* in place|phase follow")
    t_f1 = log_time(err_fill, r"order_id_uuid filled")
    fill_s = (t_f1 - t_f0) if t_f0 is not None and t_f1 is not None else wall_fill
    cpu_fill = cpu_line(mon, t_f0, t_f1)
    child_line = next((line for line in out_fill.splitlines() if line.startswith("child ")), "")
    mr = re.search(r"rows=(\d+)", child_line)
    child_rows = int(mr[1]) if mr else C

    # The child's index on order_id_uuid (the new foreign key's deletes use it): migrate
    # builds it itself now; this only checks it is there (0 s when it is).
    t0 = time.monotonic()
    psql("CREATE INDEX CONCURRENTLY IF NOT EXISTS items_order_id_uuid_idx ON items (order_id_uuid)")
    index_s = time.monotonic() - t0

    # (d) catch-up of the capture: CHANGES changes in transactions of 1000, migrate stopped
    per = 1000
    ntx = CHANGES // per
    ins, upd, dele = per * 2 // 5, per * 2 // 5, per - 2 * (per * 2 // 5)
    slot_sql = ("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
                "FROM pg_replication_slots WHERE slot_name = 'v7fill_" + INTO + "'")
    lsn_before = psql("SELECT pg_current_wal_lsn()")
    psql(f"""
DO $$
DECLARE base bigint := (SELECT max(id) FROM orders) + 1000;
BEGIN
  FOR t IN 0..{ntx - 1} LOOP
    INSERT INTO orders SELECT base + t * {ins} + g, now() - interval '1 day', g, 'new', 1.00, 'catch-up'
      FROM generate_series(1, {ins}) g;
    UPDATE orders SET amount = amount + 1, status = 'upd'
      WHERE id IN (SELECT 1 + ((t * {upd} + g) * 7919::bigint) % {P} FROM generate_series(1, {upd}) g);
    DELETE FROM orders WHERE id > base + t * {ins} AND id <= base + t * {ins} + {dele};
    COMMIT;
  END LOOP;
  -- the writer's inserts take keys from the sequence: past these explicit ones
  PERFORM setval('orders_id_seq', (SELECT max(id) FROM orders));
END $$;""")
    changes = ntx * per
    changes_wal = int(psql(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn_before}')"))
    backlog_wal = int(psql(slot_sql) or 0)
    mon = CpuMonitor(CLUSTER)
    wall_catch, out_catch, err_catch = migrate("--into", INTO, "--from", "public.orders", "--key", "id",
                                               "--time-column", "created_at", mon=mon)
    mon.stop()
    mc = re.search(r"updated=(\d+) deleted=(\d+).*elapsed=([0-9.]+)s", out_catch)
    catch_s = float(mc[3]) if mc else wall_catch
    # The capture's span: from the run's first log line, its own elapsed time (the run then
    # verifies, which is not the catch-up's work).
    t_c0 = log_time(err_catch, r".")
    cpu_catch = cpu_line(mon, t_c0, t_c0 + catch_s if t_c0 is not None else None)

    # (e) the switch under the writer
    # In one database the catch-up's own writes (target, map) are WAL the slot has not
    # passed yet: --switch refuses a capture more than 16 MB behind, so catch up once more.
    # The slot's position moves past that WAL only when it applies a later source
    # transaction: catch up again with the writer running, then switch.
    w = Writer()
    time.sleep(2)
    migrate("--into", INTO, "--from", "public.orders", "--key", "id", "--time-column", "created_at")
    try:
        wall_switch, out_sw, err_sw = migrate("--into", INTO, "--switch")
    except SystemExit as e:
        wall_switch, out_sw = float("nan"), f"refused: {e}"
    time.sleep(2)
    w_sw, w_sw_n, w_sw_err = w.stop()
    load_after = open("/proc/loadavg").read().split()[:3]

    def row(what, value, base, ratio=True):
        r = f"{value / base:.2f}x" if ratio and base else ""
        print(f"| {what} | {value} | {base} | {r} |")

    print()
    print(f"v7fill migrate, parent {P:,} rows, child {C:,} rows, one database, "
          f"{os.cpu_count()} CPUs, load average before {' '.join(load_before)}, after {' '.join(load_after)}"
          + (f", migrate {' '.join(EXTRA_ARGS)}" if EXTRA_ARGS else ""))
    print()
    print("| figure | v7fill | baseline | ratio |")
    print("|---|---|---|---|")
    row("copy phase, rows/s (pipeline's figure) vs raw COPY into the same target", pipe_rate, round(raw_rate))
    row("copy phase, rows/s (slot created -> copy done)", round(copied / phase_s), round(raw_rate))
    row("whole first `migrate` run, rows/s (setup, copy, catch-up)", round(copied / wall_copy), round(raw_rate))
    print(f"| child fill, rows/s ({child_rows:,} rows in {fill_s:.1f} s, under the writer) | "
          f"{round(child_rows / fill_s)} | | |")
    print(f"| catch-up of the capture, changes/s ({changes:,} changes, {ntx} tx; whole command "
          f"{wall_catch:.1f} s) | {round(changes / catch_s)} | | |")
    print(f"| writer's longest statement, ms, during the child fill ({w_fill_n} stmts) vs alone "
          f"({w_base_n} stmts) | {w_fill:.1f} | {w_base:.1f} | {w_fill / w_base:.1f}x |")
    print(f"| writer's longest statement, ms, during a catch-up and --switch ({wall_switch:.1f} s; {w_sw_n} stmts) "
          f"vs alone | {w_sw:.1f} | {w_base:.1f} | {w_sw / w_base:.1f}x |")
    print()
    print(f"raw COPY: {copied:,} rows in {raw_s:.1f} s; migrate copy: {phase_s:.1f} s "
          f"(command {wall_copy:.1f} s)")
    print("child:", child_line)
    print(f"index on items (order_id_uuid), made by the bench before the catch-up: {index_s:.1f} s")
    print("catch-up:", next((line for line in out_catch.splitlines() if "read=" in line), ""))
    print(f"catch-up's WAL: {backlog_wal / 2**20:.1f} MiB from the slot's position to the end of WAL "
          f"when it started, {changes_wal / 2**20:.1f} MiB of it the {changes:,} changes'")
    print("CPU, copy phase:", cpu_copy)
    print("CPU, child fill:", cpu_fill)
    print("CPU, catch-up:", cpu_catch)
    for name, errs in (("alone", w_base_err), ("fill", w_fill_err), ("switch", w_sw_err)):
        if errs:
            print(f"writer errors ({name}): {len(errs)}, first: {errs[0]}")
    print("switch:", " / ".join(out_sw.strip().splitlines()[:3]))


if __name__ == "__main__":
    main()
