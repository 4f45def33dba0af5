"""CPU seconds used by throwaway clusters' processes (by kind) and by a v7fill client, and the
seconds they spent runnable but waiting for a CPU (/proc/PID/schedstat: on a shared machine
that wait, not the work, can be what limits), with the machine's steal.  Sampled every 0.2 s
so that a process that exits meanwhile (a walsender whose client left) still counts; every
sample is kept, so that a span inside the run (a phase bracketed by a command's log lines)
can be read apart with between()."""
import glob
import os
import threading
import time


def machine_ticks():
    """(all ticks, steal ticks) of the machine so far (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields[:8]), fields[7]


class CpuMonitor:
    def __init__(self, clusters):
        """clusters: {side name: the cluster's directory (holding data/postmaster.pid)}."""
        self.pms = {}
        for side, d in clusters.items():
            with open(os.path.join(d, "data", "postmaster.pid")) as f:
                self.pms[int(f.readline())] = side
        self.first, self.last, self.kind = {}, {}, {}
        self.series = []  # (wall clock, totals as stop() returns them)
        self.client = None
        self.stop_ev = threading.Event()
        self.sample(initial=True)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    @staticmethod
    def schedstat(path):
        """(CPU seconds, seconds runnable waiting for a CPU) of one task."""
        with open(path) as f:
            run_ns, wait_ns = f.read().split()[:2]
        return int(run_ns) / 1e9, int(wait_ns) / 1e9

    def note(self, key, val, initial):
        self.first.setdefault(key, val if initial else (0.0, 0.0))
        self.last[key] = val

    def sample(self, initial=False):
        for stat in glob.glob("/proc/[0-9]*/stat"):
            pid = stat.split("/")[2]
            try:
                with open(stat) as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # after the command name
                side = self.pms.get(int(pid)) or self.pms.get(int(fields[1]))
                if not side:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
                val = self.schedstat(f"/proc/{pid}/schedstat")
            except OSError:
                continue
            key = (side, pid, fields[19])  # starttime tells a reused pid apart
            if "walsender" in cmd:
                kind = "walsender"
            elif "logical replication worker" in cmd:
                kind = "apply"
            elif cmd.rstrip("\0 ").endswith(" DO"):
                kind = "bench"  # a bench's backlog writer and pollers
            elif "[local]" in cmd:
                kind = "backend"
            elif "parallel worker" in cmd:
                kind = "parallel"  # a session's parallel query workers
            elif "autovacuum" in cmd:
                kind = "autovacuum"
            elif any(w in cmd for w in ("checkpointer", "walwriter", "background writer")):
                kind = "wal+ckpt"  # the checkpointer, WAL writer and background writer
            else:
                kind = "other"
            # A process just forked shows the postmaster's command line, one exiting an
            # empty one: neither changes what it was seen to be; a bench's stays the bench's.
            if self.kind.get(key) not in ("bench", None) and kind == "other":
                kind = self.kind[key]
            if self.kind.get(key) != "bench":
                self.kind[key] = kind
            self.note(key, val, initial)
        if self.client:
            task = f"/proc/{self.client}/task"
            for tid in os.listdir(task) if os.path.isdir(task) else []:
                try:
                    val = self.schedstat(f"{task}/{tid}/schedstat")
                except OSError:
                    continue
                self.kind[("client", tid, "")] = "v7fill"
                self.note(("client", tid, ""), val, False)
        self.series.append((time.time(), self.totals()))

    def totals(self):
        """{(side, kind): CPU s, side: CPU s (not the bench's), ("wait", side): s runnable
        waiting, "ticks"/"steal": the machine's} since the first sample."""
        out = {}
        for key, (cpu, wait) in self.last.items():
            side, kind = key[0], self.kind[key]
            d = cpu - self.first[key][0]
            w = wait - self.first[key][1]
            out[(side, kind)] = out.get((side, kind), 0.0) + d
            if kind == "bench":
                continue
            out[side] = out.get(side, 0.0) + d
            out[("wait", side)] = out.get(("wait", side), 0.0) + w
        out["ticks"], out["steal"] = machine_ticks()
        return out

    def run(self):
        while not self.stop_ev.wait(0.2):
            self.sample()

    def stop(self):
        self.stop_ev.set()
        self.thread.join()
        self.sample()
        out = dict(self.series[-1][1])
        out["ticks"] -= self.series[0][1]["ticks"]
        out["steal"] -= self.series[0][1]["steal"]
        return out

    def between(self, t0, t1):
        """The totals' growth from the last sample at or before t0 to the first at or after
        t1 (wall clock, time.time()), and the span that covers."""
        a = next((s for s in reversed(self.series) if s[0] <= t0), self.series[0])
        b = next((s for s in self.series if s[0] >= t1), self.series[-1])
        out = {k: v - a[1].get(k, 0.0) for k, v in b[1].items()}
        return out, b[0] - a[0]


def steal_share(d):
    """The machine's steal over a span, as a share of all its CPU time."""
    return d["steal"] / d["ticks"] if d.get("ticks") else 0.0
