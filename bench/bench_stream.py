#!/usr/bin/env python3
"""v7fill stream beside PostgreSQL's own logical replication, in one run, on one server
profile (BENCH_PROFILE: "tuned", fsync, full_page_writes and synchronous_commit off, or
"production", stock settings on source and target; bench_stream.sh runs each it is given).

Two throwaway clusters (bench_stream.sh): the source (table `ev`, bigint key, 7 columns,
publication `pub`) and the target, which holds
  native.public.ev  the same columns, bigint primary key, fed by CREATE SUBSCRIPTION (in
             its own database: a subscription needs the source's table name);
  ev_v7      partitioned by RANGE (id) on a UUIDv7 key, fed by `v7fill stream --map id=legacy_id`.
Each consumer has its own slot, made before any backlog, and both read the same changes.

Workloads (N = BENCH_STREAM_ROWS, default 1,000,000):
  (1) N rows in 1,000-row transactions;  (2) N/5 single-row transactions;
  (3) one N-row transaction;  (4) N/5 wide rows (a 2 KB note each) in 1,000-row transactions,
  where every read of the socket fills libpq's buffer (a stream that pauses to let messages
  gather must not pause here: docs/streaming.md, "Reading the source in runs").
For each, the backlog is written while both consumers are stopped; then, one after the
other, each is started and timed until caught up (native: until the backlog's last row is
visible in the native copy, polled every 10 ms on the target; v7fill: `--until-caught-up`).
Reported: rows/s, the ratio v7fill/native, the CPU used meanwhile by v7fill, the source
cluster (its walsender decodes) and the target cluster (apply / COPY), each as a share of
one core over the wall time, and v7fill's peak RSS.

Then the apply lag under a steady writer (BENCH_STREAM_RATE rows/s, default 10,000, as
100-row transactions, for BENCH_STREAM_LAG_SECONDS, default 30): the source writes each
row's created_at = clock_timestamp(); a sampler on the target polls every 10 ms for rows
that became visible and records (its clock_timestamp() - created_at) for each.  Both
clusters run on this machine's one clock.  Native and v7fill are measured one after the
other, each with the same writer.

BENCH_STREAM_ARGS: more arguments for every v7fill stream run (e.g. "--group-ms 50").
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from cpumon import CpuMonitor
from stream_rows import COLS, rows_sql

V7FILL = os.environ["V7FILL"]
N = int(os.environ.get("BENCH_STREAM_ROWS", "1000000"))
RATE = int(os.environ.get("BENCH_STREAM_RATE", "10000"))
LAG_SECONDS = int(os.environ.get("BENCH_STREAM_LAG_SECONDS", "30"))
UNTIL_EXIT_GRACE = 15
PERF = os.environ.get("BENCH_STREAM_PERF") == "1"  # perf profile of v7fill's catch-up of (1)
EXTRA_ARGS = os.environ.get("BENCH_STREAM_ARGS", "").split()  # e.g. "--group-ms 50"
PROFILE = os.environ.get("BENCH_PROFILE", "tuned")
# BENCH_STREAM_WORKLOADS: which catch-up workloads (default "1 2 3 4"); a lag phase of 0 s is skipped.
WORKLOADS = [int(k) for k in os.environ.get("BENCH_STREAM_WORKLOADS", "1 2 3 4").split()]
SRC = {"host": os.environ["SRC_HOST"], "port": os.environ["SRC_PORT"], "dir": os.environ["SRC_DIR"]}
TGT = {"host": os.environ["PGHOST"], "port": os.environ["PGPORT"], "dir": os.environ["PGTMP_DIR"]}
SRC_DB, TGT_DB, NATIVE_DB = "src", "tgt", "native"
SRC_CONNINFO = f"host={SRC['host']} port={SRC['port']} user=postgres dbname={SRC_DB}"
TICK = os.sysconf("SC_CLK_TCK")



def psql_cmd(side, db, sql):
    return ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", side["host"],
            "-p", side["port"], "-U", "postgres", "-d", db, "-c", sql]


def query(side, db, sql):
    r = subprocess.run(psql_cmd(side, db, sql), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"psql failed on {db}: {r.stderr.strip()}\n  {sql.strip()[:300]}")
    return r.stdout.strip()


def qs(sql):
    return query(SRC, SRC_DB, sql)


def qt(sql):
    return query(TGT, TGT_DB, sql)


def qn(sql):
    """On the target cluster's database of the native subscription (its table has the
    source's name, public.ev, as a subscription requires)."""
    return query(TGT, NATIVE_DB, sql)


def run_v7fill(extra, log):
    """v7fill stream with extra arguments; returns the Popen."""
    cmd = [V7FILL, "-d", f"host={TGT['host']} port={TGT['port']} user=postgres dbname={TGT_DB}",
           "stream", "ev_v7", "--source", SRC_CONNINFO, "--from", "public.ev",
           "--publication", "pub", "--slot", "v7", "--map", "id=legacy_id"] + EXTRA_ARGS + extra
    return subprocess.Popen(cmd, stdout=log, stderr=log)


def wait_v7fill(p, what):
    _, status, ru = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"v7fill stream ({what}) failed with status {code}; see its log above")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def setup(tmp):
    query(SRC, "postgres", f"CREATE DATABASE {SRC_DB}")
    query(TGT, "postgres", f"CREATE DATABASE {TGT_DB}")
    query(TGT, "postgres", f"CREATE DATABASE {NATIVE_DB}")
    qs(f"CREATE TABLE ev (id bigint PRIMARY KEY, {COLS}); CREATE PUBLICATION pub FOR TABLE ev")
    qn(f"CREATE TABLE ev (id bigint PRIMARY KEY, {COLS})")
    qt(f"CREATE TABLE ev_v7 (id uuid NOT NULL PRIMARY KEY, legacy_id bigint NOT NULL, {COLS}) "
       "PARTITION BY RANGE (id)")
    # Native: a slot made beforehand, a disabled subscription on it.  The launcher starts
    # an apply worker at most once per wal_retrieve_retry_interval (5 s by default): each
    # ENABLE below would wait for it.
    qn("ALTER SYSTEM SET wal_retrieve_retry_interval = '100ms'")
    qn("SELECT pg_reload_conf()")
    qs("SELECT pg_create_logical_replication_slot('native', 'pgoutput')")
    qn(f"CREATE SUBSCRIPTION native CONNECTION '{SRC_CONNINFO}' PUBLICATION pub "
       "WITH (create_slot = false, slot_name = 'native', enabled = false, copy_data = false)")
    # v7fill: its first run makes its slot and copies the (empty) table.
    with open(os.path.join(tmp, "v7fill-setup.log"), "w") as log:
        wait_v7fill(run_v7fill(["--until-caught-up"], log), "setup")


def native_catch_up(last_id):
    """Enable the subscription, wait until row last_id is visible, disable it."""
    mon = CpuMonitor({"src": SRC["dir"], "tgt": TGT["dir"]})
    t0 = time.monotonic()
    qn("ALTER SUBSCRIPTION native ENABLE")
    qn(f"DO $$ BEGIN WHILE NOT EXISTS (SELECT 1 FROM ev WHERE id = {last_id}) LOOP "
       "PERFORM pg_sleep(0.01); END LOOP; END $$")
    wall = time.monotonic() - t0
    cpu = mon.stop()
    qn("ALTER SUBSCRIPTION native DISABLE")
    # Wait for the apply worker to leave, so that it does not run beside v7fill.
    qn("DO $$ BEGIN WHILE EXISTS (SELECT 1 FROM pg_stat_subscription WHERE subname = 'native' "
       "AND pid IS NOT NULL) LOOP PERFORM pg_sleep(0.05); END LOOP; END $$")
    return {"wall": wall, "cpu": cpu, "client": 0.0, "rss": 0}


def v7fill_catch_up(tmp, name, total):
    """v7fill stream --until-caught-up over the backlog.  Timed, like native, until the
    backlog's rows are committed in the target (v7fill.stream counts total inserts),
    polled every 10 ms; its own exit is awaited UNTIL_EXIT_GRACE s more, then it is
    stopped with SIGTERM and that is reported."""
    perf_data = os.path.join(tmp, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-a", "-F", "199", "-o", perf_data, "-q"],
                            stdout=subprocess.DEVNULL) if PERF and name == "w1" else None
    mon = CpuMonitor({"src": SRC["dir"], "tgt": TGT["dir"]})
    t0 = time.monotonic()
    logpath = os.path.join(tmp, f"v7fill-{name}.log")
    poller = subprocess.Popen(psql_cmd(TGT, TGT_DB, f"""
        DO $$ BEGIN WHILE (SELECT inserted FROM v7fill.stream WHERE slot = 'v7') < {total} LOOP
            PERFORM pg_sleep(0.01); END LOOP; END $$"""))
    with open(logpath, "w") as log:
        p = run_v7fill(["--until-caught-up"], log)
        mon.client = p.pid
        if poller.wait() != 0:
            raise SystemExit("the v7fill catch-up poller failed")
        wall = time.monotonic() - t0
        cpu = mon.stop()
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
            perf_report(perf_data, mon)
        exited = False
        deadline = time.monotonic() + UNTIL_EXIT_GRACE
        while time.monotonic() < deadline and not exited:
            exited = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            time.sleep(0.05)
        if not exited:
            p.send_signal(signal.SIGTERM)
        try:
            client, rss = wait_v7fill(p, name)
        except SystemExit:
            sys.stderr.write(open(logpath).read())
            raise
    return {"wall": wall, "cpu": cpu, "client": client, "rss": rss, "exited": exited,
            "log": open(logpath).read().strip().splitlines()[-1:]}


def perf_report(data, mon):
    """The hottest functions of v7fill's client, the source's walsender and the target's
    sessions, from a system-wide profile (the machine is shared: filtered by pid)."""
    groups = {"v7fill client": [], "source walsender": [], "target sessions": []}
    for key, kind in mon.kind.items():
        if key[0] == "client":
            groups["v7fill client"].append(key[1])
        elif key[0] == "src" and kind == "walsender":
            groups["source walsender"].append(key[1])
        elif key[0] == "tgt" and kind == "backend":
            groups["target sessions"].append(key[1])
    for what, pids in groups.items():
        if not pids:
            continue
        r = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-q", "--percentage", "relative",
                            "--sort", "dso,sym", "--tid" if what == "v7fill client" else "--pid",
                            ",".join(pids)], capture_output=True, text=True)
        top = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()][:12]
        print(f"      perf, {what}:\n        " + "\n        ".join(top), flush=True)


def backlog(kind, base):
    """Write a workload's backlog on the source; returns (rows, transactions)."""
    t0 = time.monotonic()
    if kind == 1:
        n = N
        qs(f"DO $$ BEGIN FOR i IN 0..{n // 1000 - 1} LOOP "
           f"{rows_sql(f'{base} + i * 1000', 1000)}; COMMIT; END LOOP; END $$")
        txns = n // 1000
    elif kind == 2:
        n = N // 5
        qs(f"DO $$ BEGIN FOR i IN 0..{n - 1} LOOP {rows_sql(f'{base} + i', 1)}; COMMIT; "
           "END LOOP; END $$")
        txns = n
    elif kind == 4:
        n = N // 5 // 1000 * 1000
        qs(f"DO $$ BEGIN FOR i IN 0..{n // 1000 - 1} LOOP "
           f"{rows_sql(f'{base} + i * 1000', 1000, wide=True)}; COMMIT; END LOOP; END $$")
        txns = n // 1000
    else:
        n = N
        qs(rows_sql(base, n))
        txns = 1
    print(f"  backlog ({kind}): {n:,} rows in {txns:,} transactions written in "
          f"{time.monotonic() - t0:.1f} s", flush=True)
    return n, txns


def share(r, key):
    return 100 * r["cpu"].get(key, 0.0) / r["wall"]


def shares(r, sides):
    """CPU used, and time spent waiting for a CPU, as % of one core over the wall time."""
    used = " / ".join(f"{share(r, s):.0f}%" for s in sides)
    wait = " / ".join(f"{share(r, ('wait', s)):.0f}%" for s in sides)
    return f"{used} | {wait}"


def lag_phase(which, base, tmp):
    """The steady writer for LAG_SECONDS while `which` applies; lag percentiles."""
    per_txn = 100
    ntx = RATE * LAG_SECONDS // per_txn
    interval_ms = 1000.0 * per_txn / RATE
    last = base + ntx * per_txn
    table, key = ("ev", "id") if which == "native" else ("ev_v7", "legacy_id")
    db = NATIVE_DB if which == "native" else TGT_DB
    proc = None
    if which == "native":
        qn("ALTER SUBSCRIPTION native ENABLE")
        # The apply worker runs and what the slot held is applied, before the writer starts.
        qn(f"DO $$ BEGIN WHILE NOT EXISTS (SELECT 1 FROM ev WHERE id = {base}) OR NOT EXISTS "
           "(SELECT 1 FROM pg_stat_subscription WHERE subname = 'native' AND pid IS NOT NULL) "
           "LOOP PERFORM pg_sleep(0.01); END LOOP; END $$")
    else:
        log = open(os.path.join(tmp, "v7fill-lag.log"), "w")
        wait_v7fill(run_v7fill(["--until-caught-up"], log), "lag catch-up")
        proc = run_v7fill([], log)
    time.sleep(2)  # connected and idle
    sampler = subprocess.Popen(psql_cmd(TGT, db, f"""
        DO $$ DECLARE v_last bigint := {base}; m bigint;
                      hard_stop timestamptz := clock_timestamp() + interval '{LAG_SECONDS + 60} s';
        BEGIN
          WHILE v_last < {last} AND clock_timestamp() < hard_stop LOOP
            WITH s AS (SELECT {key} AS k, extract(epoch FROM clock_timestamp() - created_at) AS lag
                         FROM {table} WHERE {key} > v_last),
                 ins AS (INSERT INTO lag_samples SELECT '{which}', k, lag FROM s RETURNING k)
            SELECT max(k) INTO m FROM ins;
            IF m IS NOT NULL THEN v_last := m; END IF;
            COMMIT;
            PERFORM pg_sleep(0.01);
          END LOOP;
        END $$"""))
    mon = CpuMonitor({"src": SRC["dir"], "tgt": TGT["dir"]})
    mon.client = proc.pid if proc else None
    t0 = time.monotonic()
    qs(f"""DO $$ DECLARE t0 timestamptz := clock_timestamp();
           BEGIN FOR i IN 0..{ntx - 1} LOOP
             {rows_sql(f'{base} + i * {per_txn}', per_txn)}; COMMIT;
             PERFORM pg_sleep(greatest(0, extract(epoch FROM t0 + (i + 1) * interval '{interval_ms} ms'
                                                             - clock_timestamp())));
           END LOOP; END $$""")
    wrote = time.monotonic() - t0
    if sampler.wait() != 0:
        raise SystemExit("the lag sampler failed")
    cpu = mon.stop()
    wall = time.monotonic() - t0
    client, rss = 0.0, 0
    if which == "native":
        qn("ALTER SUBSCRIPTION native DISABLE")
    else:
        proc.send_signal(signal.SIGTERM)
        client, rss = wait_v7fill(proc, "lag")
        log.close()
    p50, p99, mx, seen = query(TGT, db, 
        "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY lag)::numeric, 3), "
        "round(percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)::numeric, 3), "
        f"round(max(lag)::numeric, 3), count(*) FROM lag_samples WHERE which = '{which}'").split("|")
    return {"p50": float(p50), "p99": float(p99), "max": float(mx), "seen": int(seen),
            "rows": ntx * per_txn, "rate": ntx * per_txn / wrote, "wall": wall, "cpu": cpu,
            "client": client, "rss": rss}, last


TMP = tempfile.mkdtemp(prefix="bench-stream.")


def main():
    tmp = TMP
    setup(tmp)
    version = qs("SHOW server_version")
    durability = ", ".join(f"{g} {qs('SHOW ' + g)}" for g in
                           ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers"))
    print(f"\n== stream, {PROFILE} profile: {N:,} rows per workload, 7 columns, two clusters "
          f"(PostgreSQL {version}, {durability}, the same on both), {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at start"
          + (f", v7fill stream {' '.join(EXTRA_ARGS)}" if EXTRA_ARGS else ""),
          flush=True)
    base = 0
    results = []
    for kind in WORKLOADS:
        n, txns = backlog(kind, base)
        base += n
        qs("CHECKPOINT")
        qt("CHECKPOINT")
        nat = native_catch_up(base)
        qn("CHECKPOINT")
        v7 = v7fill_catch_up(tmp, f"w{kind}", base)
        got_n = int(qn("SELECT count(*) FROM ev"))
        got_v = int(qt("SELECT count(*) FROM ev_v7"))
        if got_n != base or got_v != base:
            raise SystemExit(f"workload {kind}: source has {base} rows, native {got_n}, ev_v7 {got_v}")
        results.append((kind, n, txns, nat, v7))
        print(f"  ({kind}) native {n / nat['wall']:9,.0f} rows/s ({nat['wall']:.1f} s)   "
              f"v7fill {n / v7['wall']:9,.0f} rows/s ({v7['wall']:.1f} s, peak RSS "
              f"{v7['rss'] / 1024:.1f} MiB)   v7fill/native {nat['wall'] / v7['wall']:.2f}x",
              flush=True)
        print(f"      v7fill: {' '.join(v7['log'])}", flush=True)
        if not v7["exited"]:
            print(f"      NOTE: v7fill --until-caught-up had not exited {UNTIL_EXIT_GRACE} s after "
                  "the rows were committed; stopped with SIGTERM", flush=True)

    lag = {}
    if LAG_SECONDS > 0:
        # Lag: an index to find new rows by the legacy key on the v7fill target.
        qt("CREATE INDEX ON ev_v7 (legacy_id)")
        for q in (qt, qn):
            q("CREATE UNLOGGED TABLE lag_samples (which text, k bigint, lag float8)")
        for which in ("native", "v7fill"):
            lag[which], base = lag_phase(which, base, tmp)

    labels = {1: "(1) 1,000-row txns", 2: "(2) single-row txns", 3: "(3) one txn",
              4: "(4) 2 KB rows, 1,000-row txns"}
    print(f"\n[{PROFILE} profile] Catch-up from a backlog.  CPU used, and time runnable but waiting for a CPU, as % of "
          "one core over the wall time: client = v7fill, src = source cluster (its walsender "
          "decodes), tgt = target cluster (apply worker / v7fill's sessions)")
    print("| workload | rows | native rows/s | v7fill rows/s | v7fill/native | native CPU src / tgt "
          "| native waited src / tgt | v7fill CPU client / src / tgt | v7fill waited client / src / tgt "
          "| v7fill peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind, n, txns, nat, v7 in results:
        extra = f" ({txns / v7['wall']:,.0f} txn/s)" if kind == 2 else ""
        print(f"| {labels[kind]} | {n:,} | {n / nat['wall']:,.0f} | {n / v7['wall']:,.0f}{extra} | "
              f"{nat['wall'] / v7['wall']:.2f}x | {shares(nat, ('src', 'tgt'))} | "
              f"{shares(v7, ('client', 'src', 'tgt'))} | {v7['rss'] / 1024:.1f} MiB |")
    if lag:
        print(f"\n[{PROFILE} profile] Apply lag, steady writer ({RATE:,} rows/s asked for {LAG_SECONDS} s as "
              "100-row transactions; source commit to visible on the target, sampled every 10 ms)")
        print("| consumer | writer achieved | rows seen | lag p50 | lag p99 | lag max "
              "| CPU client / src / tgt | waited client / src / tgt | peak RSS |")
        print("|---|---|---|---|---|---|---|---|---|")
        for which in ("native", "v7fill"):
            r = lag[which]
            rss = f"{r['rss'] / 1024:.1f} MiB" if which == "v7fill" else "-"
            print(f"| {which} | {r['rate']:,.0f} rows/s | {r['seen']:,} of {r['rows']:,} | "
                  f"{r['p50'] * 1000:.0f} ms | {r['p99'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms | "
                  f"{shares(r, ('client', 'src', 'tgt'))} | {rss} |")

    def kinds(r):
        return ", ".join(f"{side}/{kind} {v:.1f}" for (side, kind), v in sorted(
            (k, v) for k, v in r["cpu"].items() if isinstance(k, tuple) and k[0] != "wait"))
    print(f"\n[{PROFILE} profile] CPU seconds by process (wal+ckpt = checkpointer, WAL writer, background writer; other = the rest of the cluster; bench = this "
          "script's 10 ms pollers and writer, left out of the shares above):")
    for kind, _, _, nat, v7 in results:
        print(f"  {labels[kind]}: native {kinds(nat)} | v7fill {kinds(v7)}")
    print("\nThe source's decoding per slot (pg_stat_replication_slots): " + "; ".join(
        qs("SELECT string_agg(format('%s: %s txns, spilled %s txns %s', slot_name, total_txns, "
           "spill_txns, pg_size_pretty(spill_bytes)), '|' ORDER BY slot_name) "
           "FROM pg_stat_replication_slots").split("|")))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        sys.stderr.write(f"bench-stream: v7fill's logs are kept in {TMP}\n")
        raise
    shutil.rmtree(TMP)
