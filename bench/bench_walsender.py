#!/usr/bin/env python3
"""What the source's walsender costs per million rows, by what the slot's consumer asks of
pgoutput (bench_stream.sh with BENCH_STREAM_WALSENDER=1 or only).

On the source cluster of bench_stream.sh (SRC_HOST, SRC_PORT, SRC_DIR), in a database of its
own: the stream bench's table `ev` and its workloads (1) N rows in 1,000-row transactions and
(3) one N-row transaction (N = BENCH_STREAM_ROWS, default 1,000,000).  Each consumer is
pg_recvlogical on a slot of its own, made before the workload's backlog, writing to /dev/null,
with these pgoutput options (publication_names=pub for all):
  text              proto_version 1: what v7fill asks, and a subscription without binary
  binary            proto_version 1, binary true: column values in their types' binary send
                    format instead of their text output
  streaming         proto_version 2, streaming on: a transaction larger than
                    logical_decoding_work_mem is sent while it is decoded instead of being
                    spilled to disk and sent at its commit ((3) only)
  streaming+binary  both ((3) only)
The consumers run one at a time.  For each: its walsender's CPU seconds (/proc/PID/schedstat,
time on a CPU since the process started: robust to the machine's other load), from its start
until it has sent past a logical message written after the backlog
(pg_stat_replication.sent_lsn), the wall time, and what the slot spilled or streamed
(pg_stat_replication_slots).  BENCH_WALSENDER_REPEAT (default 1) runs each consumer that many
times, interleaved.
"""
import glob
import os
import shutil
import signal
import subprocess
import time

from stream_rows import COLS, rows_sql

N = int(os.environ.get("BENCH_STREAM_ROWS", "1000000"))
REPEAT = int(os.environ.get("BENCH_WALSENDER_REPEAT", "1"))
PROFILE = os.environ.get("BENCH_PROFILE", "tuned")
SRC = {"host": os.environ["SRC_HOST"], "port": os.environ["SRC_PORT"]}
DB = "walsender"
CONSUMERS = {
    "text": ["proto_version=1"],
    "binary": ["proto_version=1", "binary=true"],
    "streaming": ["proto_version=2", "streaming=on"],
    "streaming+binary": ["proto_version=2", "streaming=on", "binary=true"],
}
WORKLOADS = {1: ("text", "binary"), 3: ("text", "binary", "streaming", "streaming+binary")}


def recvlogical():
    found = shutil.which("pg_recvlogical")
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        if os.access(os.path.join(d, "pg_recvlogical"), os.X_OK):
            found = os.path.join(d, "pg_recvlogical")
    if not found:
        raise SystemExit("bench-walsender: pg_recvlogical not found")
    return found


def q(sql, db=DB):
    r = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", SRC["host"],
                        "-p", SRC["port"], "-U", "postgres", "-d", db, "-c", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"psql failed: {r.stderr.strip()}\n  {sql.strip()[:300]}")
    return r.stdout.strip()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def consume(prog, slot, opts, mark):
    """One consumer on slot until its walsender has sent past mark: (CPU s, wall s)."""
    cmd = [prog, "-h", SRC["host"], "-p", SRC["port"], "-U", "postgres", "-d", DB, "--slot", slot,
           "--start", "-f", "/dev/null", "-F", "0", "-s", "1", "-o", "publication_names=pub"]
    for o in opts:
        cmd += ["-o", o]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        pid, cpu = None, 0.0
        while time.monotonic() - t0 < 3600:
            if p.poll() is not None:
                raise SystemExit(f"pg_recvlogical {slot} ended: {p.stderr.read().strip()}")
            if pid is None:
                pid = q(f"SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{slot}'") or None
            else:
                cpu = cpu_seconds(pid)  # before the check: what it used up to the mark at least
                if q(f"SELECT sent_lsn > '{mark}'::pg_lsn FROM pg_stat_replication WHERE pid = {pid}") == "t":
                    cpu = cpu_seconds(pid)
                    break
            time.sleep(0.05)
        else:
            raise SystemExit(f"pg_recvlogical {slot}: not past {mark} after an hour")
        wall = time.monotonic() - t0
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    return cpu, wall


def main():
    prog = recvlogical()
    q(f"CREATE DATABASE {DB}", "postgres")
    q(f"CREATE TABLE ev (id bigint PRIMARY KEY, {COLS}); CREATE PUBLICATION pub FOR TABLE ev")
    print(f"\n== walsender cost, {PROFILE} profile: PostgreSQL {q('SHOW server_version')}, "
          f"logical_decoding_work_mem {q('SHOW logical_decoding_work_mem')}, {N:,} rows per "
          f"workload, {REPEAT} run(s) of each consumer, load average {os.getloadavg()[0]:.1f} "
          "at start", flush=True)
    print("| workload | consumer | walsender CPU s | per 1M rows | wall s | spilled | streamed |")
    print("|---|---|---|---|---|---|---|")
    base = 0
    for kind, names in WORKLOADS.items():
        slots = [(f"w{kind}_{name.replace('+', '_')}_{r}", name) for r in range(REPEAT)
                 for name in names]
        for slot, _ in slots:
            q(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
        if kind == 1:
            q(f"DO $$ BEGIN FOR i IN 0..{N // 1000 - 1} LOOP "
              f"{rows_sql(f'{base} + i * 1000', 1000)}; COMMIT; END LOOP; END $$")
        else:
            q(rows_sql(base, N))
        base += N
        mark = q("SELECT pg_logical_emit_message(false, 'bench', '')")
        q("CHECKPOINT")
        label = {1: "(1) 1,000-row txns", 3: "(3) one txn"}[kind]
        for slot, name in slots:
            cpu, wall = consume(prog, slot, CONSUMERS[name], mark)
            # its walsender gone (it reports the slot's statistics as it exits)
            q(f"DO $$ BEGIN WHILE (SELECT active FROM pg_replication_slots WHERE slot_name = "
              f"'{slot}') LOOP PERFORM pg_sleep(0.05); END LOOP; END $$")
            spill, stream = q(
                "SELECT pg_size_pretty(spill_bytes), pg_size_pretty(stream_bytes) FROM "
                f"pg_stat_replication_slots WHERE slot_name = '{slot}'").split("|")
            print(f"| {label} | {name} | {cpu:.1f} | {cpu * 1e6 / N:.1f} | {wall:.1f} | {spill} "
                  f"| {stream} |", flush=True)
            q(f"SELECT pg_drop_replication_slot('{slot}')")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    q(f"DROP DATABASE {DB}", "postgres")


if __name__ == "__main__":
    main()
