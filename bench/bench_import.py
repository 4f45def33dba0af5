#!/usr/bin/env python3
"""Import throughput of v7fill beside its peers, on one server profile (BENCH_PROFILE).

bench_import.sh runs this once per profile, each on its own throwaway cluster:
  tuned       the test cluster: fsync, full_page_writes and synchronous_commit off,
              shared_buffers 256MB, max_wal_size 4GB;
  production  stock settings: fsync, full_page_writes and synchronous_commit on,
              shared_buffers 128MB, max_wal_size 1GB (checkpoints and full-page
              writes happen during the load).

For each size (BENCH_ROWS, default "1000000 5000000"; BENCH_ROWS_BIG adds a size,
e.g. 20000000): N events over 36 months (7 columns, references ev:{legacy_id}), then
BENCH_RUNS rounds (default 3) of every method, each from an empty table (dropped and
made again with its 38 monthly partitions, then CHECKPOINT), the methods of a round in
an order rotated by one per round (interleaved: no method always runs first or on a
warm cache):
  (a)  raw COPY ... FROM STDIN (FORMAT csv) of the rows v7fill wrote (same ids);
  (a2) the same rows in two halves over two connections at once;
  (b)  COPY of the rows plus one lookup row each, keyed by a SHA-256 hash of the
       reference (random keys), one transaction;
  v7fill --jobs 1, v7fill --jobs 2 (fresh imports);
  re-import (v7fill --jobs 1 again, every row a duplicate; after the --jobs 2 run);
  .zst (v7fill --jobs 1 from the zstd-compressed file);
  pgloader (the Debian package; the CSV with precomputed ids, as for (a)), when installed,
       for sizes up to BENCH_PGLOADER_MAX rows (default 1M: it loads about 17k rows/s).
Printed per method: median rows/s with min-max, ratio to (a), client and server CPU,
peak RSS (of the client; for (a2) the larger psql), and the server wait events seen in
pg_stat_activity, sampled every 0.2 s (CPU = active without a wait event; Lock:extend
with the kind of relation being extended), and the machine's steal time in the median
run (the share of CPU time a virtual machine's hypervisor took: on a shared host it
changes from minute to minute, and a run that met more of it is slower).
BENCH_METHODS=a,jobs1,jobs2 (keys: a a2 b jobs1 jobs2 reimport zst pgloader) runs a
subset; (a) always runs.  Then the
per-row cost growth across sizes and, when perf is installed and BENCH_PERF=1, the
client's top functions in one --jobs 1 run.
"""
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

V7FILL = os.environ["V7FILL"]
PROFILE = os.environ.get("BENCH_PROFILE", "tuned")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
DATA = os.environ.get("BENCH_DATA") or tempfile.mkdtemp()
PSQL = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1"]
SCHEMA = """
CREATE TABLE {t} (
    id uuid NOT NULL PRIMARY KEY, created_at timestamptz NOT NULL, account_id bigint NOT NULL,
    kind text NOT NULL, amount numeric(12,2), payload jsonb, note text
) PARTITION BY RANGE (id);
"""
# A backend waiting for a relation's extension lock also names the relation's kind: a
# partition's heap or index, or an unpartitioned table's (the lookup; v7fill's checkpoint
# row hardly ever extends) — "Lock:extend@partition-heap".  Plain "Lock:extend": the lock
# was granted between the two reads.
WAITS = ("SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') || coalesce(("
         "SELECT '@' || CASE WHEN c.relispartition THEN 'partition' ELSE 'lookup' END || "
         "CASE WHEN c.relkind = 'i' THEN '-index' ELSE '-heap' END "
         "FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
         "WHERE l.pid = a.pid AND l.locktype = 'extend' AND NOT l.granted LIMIT 1), '') "
         "FROM pg_stat_activity a WHERE a.backend_type = 'client backend' "
         "AND a.state = 'active' AND a.pid <> pg_backend_pid() \\watch 0.2\n")


def psql(sql):
    r = subprocess.run(PSQL + ["-At", "-c", sql], check=True, capture_output=True, text=True)
    return r.stdout.strip()


def server_cpu():
    """CPU seconds used so far by every postgres process of the throwaway cluster."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    with open(os.path.join(os.environ["PGTMP_DIR"], "data", "postmaster.pid")) as f:
        pm = int(f.readline())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == pm or int(fields[1]) == pm:
            total += sum(int(x) for x in fields[11:15]) / tick
    return total


class Run:
    def __init__(self, wall, cpu, rss, server, waits, steal):
        self.wall, self.cpu, self.rss, self.server, self.waits = wall, cpu, rss, server, waits
        self.steal = steal


def cpu_ticks():
    """The machine's CPU time so far (/proc/stat's first line): (all ticks, steal ticks).
    Steal is the time a virtual machine's CPUs were ready to run while the hypervisor ran
    something else: on a shared host it slows every method by a share that changes from one
    minute to the next, so each figure is printed with the steal seen during it."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return sum(ticks[:8]), (ticks[7] if len(ticks) > 7 else 0)


def timed(cmds, stdins=None):
    """Run the commands at once; wall seconds, their CPU seconds, the largest peak RSS
    (KiB), server CPU seconds, and the wait events sampled meanwhile."""
    sampler = subprocess.Popen(PSQL + ["-At"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    sampler.stdin.write(WAITS)
    sampler.stdin.flush()
    s0 = server_cpu()
    c0 = cpu_ticks()
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, stdin=(stdins or [None] * len(cmds))[i],
                              stdout=subprocess.DEVNULL) for i, c in enumerate(cmds)]
    cpu, rss = 0.0, 0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmds[0][:3])} failed with status {p.returncode}")
        cpu += ru.ru_utime + ru.ru_stime
        rss = max(rss, ru.ru_maxrss)
    wall = time.monotonic() - t0
    c1 = cpu_ticks()
    steal = (c1[1] - c0[1]) / max(1, c1[0] - c0[0])
    time.sleep(0.5)  # the backends' CPU counts once the postmaster has reaped them
    server = server_cpu() - s0
    sampler.send_signal(signal.SIGINT)
    out, _ = sampler.communicate(timeout=30)
    waits = {}
    for line in out.splitlines():
        line = line.strip()
        if line and not line[0].isdigit() and " " not in line:
            waits[line] = waits.get(line, 0) + 1
    return Run(wall, cpu, rss, server, waits, steal)


def generate(path, n):
    """n events over 36 months in time order (legacy ids ascend with time)."""
    random.seed(1)
    start = 1_700_000_000  # 2023-11-14
    span = 36 * 30 * 86400
    kinds = ["signup", "login", "purchase", "refund", "logout"]
    with open(path, "w") as f:
        f.write("legacy_id,created_at,account_id,kind,amount,payload,note\n")
        for i in range(n):
            t = start + (i + random.random()) * span / n
            sec = int(t)
            us = int((t - sec) * 1e6)
            ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec)) + f".{us:06d}+00"
            amount = f"{random.randrange(100, 100000) / 100:.2f}" if i % 3 == 0 else ""
            f.write(f'{i},{ts},{1000 + i % 5000},{kinds[i % 5]},{amount},'
                    f'"{{""n"": {i % 100}}}",note {i % 1000}\n')


def make_table(t):
    psql(f"DROP TABLE IF EXISTS {t}, {t}_source_ref, {t}_ref CASCADE")
    psql(SCHEMA.format(t=t))
    subprocess.run([V7FILL, "-q", "partitions", t, "--from", "2023-11-01", "--to", "2027-01-01",
                    "--granularity", "month"], check=True, stdout=subprocess.DEVNULL)


def fresh(t):
    """An empty table t (and no v7fill state for it), then a CHECKPOINT."""
    make_table(t)
    psql("DO $$ BEGIN IF to_regclass('v7fill.checkpoint') IS NOT NULL THEN "
         f"DELETE FROM v7fill.checkpoint WHERE target_table = '{t}'; END IF; END $$")
    psql("CHECKPOINT")


def median_run(runs):
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def bench_size(n):
    csv = os.path.join(DATA, f"ev{n}.csv")
    if not os.path.exists(csv):
        generate(csv + ".tmp", n)
        os.rename(csv + ".tmp", csv)
    zst = csv + ".zst"
    if not os.path.exists(zst):
        subprocess.run(["zstd", "-q", "-3", "-f", csv, "-o", zst], check=True)
    rej = os.path.join(DATA, "rej.csv")
    imp = [V7FILL, "-q", "import", "ev", "--source-ref", "ev:{legacy_id}", "--ignore-column",
           "legacy_id", "--no-progress", "--no-analyze", "--rejects", rej]
    # The rows v7fill writes (ids precomputed for the peers), and (b)'s lookup rows.
    fresh("ev")
    subprocess.run(imp[:4] + [csv] + imp[4:], check=True, stdout=subprocess.DEVNULL)
    rows = os.path.join(DATA, f"rows{n}.csv")
    refs = os.path.join(DATA, f"refs{n}.csv")
    psql(f"\\copy (SELECT * FROM ev ORDER BY id) TO '{rows}' (FORMAT csv)")
    psql(f"\\copy (SELECT encode(substr(sha256(convert_to('ev:' || (row_number() OVER "
         f"(ORDER BY id) - 1), 'UTF8')), 1, 16), 'hex')::uuid, id, ref FROM ev_source_ref "
         f"ORDER BY id) TO '{refs}' (FORMAT csv)")
    half = os.path.join(DATA, f"rows{n}.")
    subprocess.run(["split", "-n", "l/2", "-d", rows, half], check=True)
    script = os.path.join(DATA, "b.sql")
    with open(script, "w") as f:
        f.write(f"BEGIN;\n\\copy ev_b FROM '{rows}' (FORMAT csv)\n"
                f"\\copy ev_b_ref FROM '{refs}' (FORMAT csv)\nCOMMIT;\n")
    pgl = os.path.join(DATA, "load.pgl")
    with open(pgl, "w") as f:
        f.write(f"LOAD CSV FROM '{rows}' INTO postgresql://{os.environ.get('PGUSER', 'postgres')}"
                f"@unix:{os.environ['PGHOST']}:{os.environ['PGPORT']}/"
                f"{os.environ['PGDATABASE']}?tablename=ev_p\n"
                "WITH fields terminated by ',', fields optionally enclosed by '\"'\n"
                "SET work_mem to '16MB';\n")

    def m_a():
        fresh("ev_a")
        with open(rows) as f:
            return timed([PSQL + ["-c", "COPY ev_a FROM STDIN (FORMAT csv)"]], [f])

    def m_a2():
        fresh("ev_a")
        with open(half + "00") as f0, open(half + "01") as f1:
            return timed([PSQL + ["-c", "COPY ev_a FROM STDIN (FORMAT csv)"]] * 2, [f0, f1])

    def m_b():
        fresh("ev_b")
        psql("CREATE TABLE ev_b_ref (ref_key uuid PRIMARY KEY, id uuid NOT NULL, ref text)")
        psql("CHECKPOINT")
        return timed([PSQL + ["-f", script]])

    def v7(jobs, path=csv, keep=False):
        if not keep:
            fresh("ev")
        return timed([imp[:4] + [path] + imp[4:] + ["--jobs", str(jobs)]])

    def m_pgloader():
        fresh("ev_p")
        return timed([["pgloader", "--quiet", pgl]])

    methods = [("(a) COPY", m_a), ("(a2) 2x COPY", m_a2), ("(b) COPY+lookup", m_b),
               ("v7fill --jobs 1", lambda: v7(1)), ("v7fill --jobs 2", lambda: v7(2)),
               ("re-import", lambda: v7(1, keep=True)), ("v7fill .zst", lambda: v7(1, zst))]
    # pgloader loads about 17k rows/s here: it runs up to BENCH_PGLOADER_MAX rows (default
    # 1M), so that a 5M or 20M size does not spend most of the benchmark on the peer.
    have_pgloader = (subprocess.run(["sh", "-c", "command -v pgloader"],
                                    capture_output=True).returncode == 0
                     and n <= int(os.environ.get("BENCH_PGLOADER_MAX", "1000000")))
    if have_pgloader:
        methods.append(("pgloader", m_pgloader))
    # BENCH_METHODS: a subset, by key (e.g. "a,jobs1,jobs2" for a 20M size in less than an
    # hour); (a) always runs, every ratio is to it.
    keys = {"(a) COPY": "a", "(a2) 2x COPY": "a2", "(b) COPY+lookup": "b",
            "v7fill --jobs 1": "jobs1", "v7fill --jobs 2": "jobs2", "re-import": "reimport",
            "v7fill .zst": "zst", "pgloader": "pgloader"}
    chosen = os.environ.get("BENCH_METHODS", "").replace(" ", "")
    if chosen:
        unknown = set(chosen.split(",")) - set(keys.values())
        if unknown:
            raise SystemExit(f"BENCH_METHODS: unknown {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(keys.values())})")
        methods = [m for m in methods if keys[m[0]] in chosen.split(",") + ["a"]]
    names = [m[0] for m in methods]
    results = {name: [] for name in names}
    # the re-import needs the table a fresh import left: it follows --jobs 2 (or --jobs 1)
    before = next((x for x in ("v7fill --jobs 2", "v7fill --jobs 1") if x in names), None)
    if before is None:
        methods = [m for m in methods if m[0] != "re-import"]
        names = [m[0] for m in methods]
    for r in range(RUNS):
        order = methods[r % len(methods):] + methods[:r % len(methods)]
        if "re-import" in names:
            order = [m for m in order if m[0] != "re-import"]
            i = [m[0] for m in order].index(before)
            order.insert(i + 1, next(m for m in methods if m[0] == "re-import"))
        for name, fn in order:
            results[name].append(fn())
    if any(x.startswith("v7fill") for x in names):
        got = int(psql("SELECT count(*) FROM ev"))
        assert got == n, f"v7fill imported {got} of {n} rows"

    a = statistics.median(n / x.wall for x in results["(a) COPY"])
    print(f"\n== {PROFILE} profile: {n:,} rows, 7 columns, 38 monthly partitions "
          f"(PostgreSQL {psql('SHOW server_version')}; fsync {psql('SHOW fsync')}, "
          f"full_page_writes {psql('SHOW full_page_writes')}, synchronous_commit "
          f"{psql('SHOW synchronous_commit')}, shared_buffers {psql('SHOW shared_buffers')}, "
          f"max_wal_size {psql('SHOW max_wal_size')}); median of {RUNS}, min-max")
    print(f"  {'method':18} {'rows/s':>9} {'(min-max)':>19} {'x (a)':>6} {'client CPU':>10} "
          f"{'server CPU':>10} {'peak RSS':>9} {'steal':>5}  server wait events (samples)")
    per_row = {}
    for name in names:
        runs = results[name]
        rates = sorted(n / x.wall for x in runs)
        m = median_run(runs)
        waits = {}
        for x in runs:
            for k, v in x.waits.items():
                waits[k] = waits.get(k, 0) + v
        top = ", ".join(f"{k} {v}" for k, v in sorted(waits.items(), key=lambda kv: -kv[1])[:6])
        print(f"  {name:18} {statistics.median(rates):9,.0f} "
              f"{f'({rates[0]:,.0f}-{rates[-1]:,.0f})':>19} {statistics.median(rates) / a:6.2f} "
              f"{m.cpu:9.2f}s {m.server:9.2f}s {m.rss / 1024:7.1f}MB "
              f"{100 * m.steal:4.0f}%  {top}")
        per_row[name] = (1e6 * m.wall / n, m.rss)
    steals = [x.steal for name in names for x in results[name]]
    if max(steals) >= 0.05:
        print(f"  steal: the hypervisor took {100 * min(steals):.0f}-{100 * max(steals):.0f}% of "
              f"this machine's CPU time during the runs (the column: the median run's); a method "
              f"whose runs met more of it is slower than this machine can do, and the ratios "
              f"compare runs that met different shares")
    def rate(name):
        return statistics.median(n / x.wall for x in results[name]) if name in names else None

    j1, j2, again = rate("v7fill --jobs 1"), rate("v7fill --jobs 2"), rate("re-import")
    parts = []
    if j1:
        parts.append(f"--jobs 1 {j1 / a:.2f}x (a) (>= 0.8)")
    if j2:
        parts.append(f"--jobs 2 {j2 / a:.2f}x (a) (>= 1.0)")
    if again and j1:
        parts.append(f"re-import {again / j1:.1f}x fresh (>= 5)")
    p = rate("pgloader")
    if p and j1:
        # The "30x pgloader" read both ways: the fresh import against pgloader's
        # (which would need about 4x a raw COPY here), and the re-import against it (pgloader
        # cannot skip what a table already holds: a second load duplicates or fails).
        parts.append(f"fresh {j1 / p:.1f}x pgloader" +
                     (f", re-import {again / p:.0f}x pgloader" if again else "") + " (>= 30)")
    print("  targets: " + ", ".join(parts))
    if os.environ.get("BENCH_PERF") == "1":
        fresh("ev")
        prof = os.path.join(DATA, "perf.data")
        subprocess.run(["perf", "record", "-q", "-g", "-o", prof, "--"] + imp[:4] + [csv] +
                       imp[4:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rep = subprocess.run(["perf", "report", "-i", prof, "--no-children", "--stdio",
                              "--percent-limit", "3", "-g", "none"], capture_output=True,
                             text=True).stdout
        print("  client profile (perf, --jobs 1, functions >= 3%):")
        for line in rep.splitlines():
            if line.strip() and not line.startswith("#"):
                print("    " + line.strip())
    return per_row


def main():
    sizes = [int(x) for x in os.environ.get("BENCH_ROWS", "1000000 5000000").split()]
    if int(os.environ.get("BENCH_ROWS_BIG", "0") or 0):
        sizes.append(int(os.environ["BENCH_ROWS_BIG"]))
    print(f"# noisy when the machine is shared: every figure is a median of {RUNS} "
          f"interleaved runs, with its range")
    costs = [(n, bench_size(n)) for n in sizes]
    if len(costs) > 1:
        (n0, c0), (n1, c1) = costs[0], costs[-1]
        for name in ("v7fill --jobs 1", "v7fill --jobs 2"):
            if name not in c0 or name not in c1:
                continue
            print(f"== {PROFILE}: {name} {n0:,} -> {n1:,} rows: cost per row "
                  f"{c0[name][0]:.2f} -> {c1[name][0]:.2f} us "
                  f"({100 * (c1[name][0] / c0[name][0] - 1):+.0f}%, target < +15%); peak RSS "
                  f"{c0[name][1] / 1024:.1f} -> {c1[name][1] / 1024:.1f} MiB "
                  f"({100 * (c1[name][1] / c0[name][1] - 1):+.0f}%, target within 10%)")


if __name__ == "__main__":
    sys.exit(main())
