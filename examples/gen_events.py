#!/usr/bin/env python3
"""Regenerate examples/events.csv.zst: a few thousand events over ~3 years.

Deliberate defects, so the demo shows every path:
  - 40 exact duplicate lines (same bytes again later in the file)
  - a row whose id is a uuid4        -> rejected "not a UUIDv7 (version 4)"
  - a row from the future (2031)     -> rejected "clock ahead"
  - a malformed line (a field short) -> rejected "expected 7 fields, found 6"
  - an amount the server refuses     -> rejected by PostgreSQL (SQLSTATE 22P02)
Most rows carry no id (v7fill mints one from created_at); some carry a UUIDv7
that is kept.  Deterministic (fixed seed).
"""
import datetime as dt
import json
import random
import subprocess
import sys

random.seed(7)
start = dt.datetime(2023, 12, 1, tzinfo=dt.timezone.utc)
end = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
span = (end - start).total_seconds()
kinds = ["signup", "login", "purchase", "refund", "logout", "password_reset"]


def uuid7_at(t, rnd):
    ms = int(t.timestamp() * 1000)
    b = bytearray(ms.to_bytes(6, "big") + rnd.randbytes(10))
    b[6] = 0x70 | (b[6] & 0x0F)
    b[8] = 0x80 | (b[8] & 0x3F)
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def csv_field(s):
    if s is None:
        return ""
    if any(c in s for c in ',"\n\r') or s == "":
        return '"' + s.replace('"', '""') + '"'
    return s


rows = []
for i in range(4000):
    t = start + dt.timedelta(seconds=random.random() * span, microseconds=random.randrange(1000000))
    kind = random.choice(kinds)
    amount = f"{random.randrange(100, 100000) / 100:.2f}" if kind in ("purchase", "refund") else None
    payload = json.dumps({"ip": f"10.{i % 256}.{i // 256}.7", "agent": random.choice(["web", "ios", "android"])})
    note = random.choice([None, "", "first visit", 'said "hi", left', "multi\nline note"])
    rid = uuid7_at(t, random) if i % 10 == 0 else None
    rows.append([rid, t.strftime("%Y-%m-%d %H:%M:%S.%f+00"), str(1000 + i % 97), kind, amount, payload, note])
rows.sort(key=lambda r: r[1])

lines = ["id,created_at,account_id,kind,amount,payload,note"]
for r in rows:
    lines.append(",".join(csv_field(x) for x in r))
# exact duplicates: 40 lines repeated at the end
for r in random.sample(rows[1:], 40):
    lines.append(",".join(csv_field(x) for x in r))
lines.append('f47ac10b-58cc-4372-a567-0e02b2c3d479,2025-03-03 10:00:00+00,1001,login,,"{""ip"": ""10.9.9.9""}",uuid4 id')
lines.append(',2031-01-01 00:00:00+00,1002,login,,"{}",from a wrong clock')
lines.append(',2025-04-04 10:00:00+00,1003,login,,"{}"')
lines.append(',2025-05-05 10:00:00+00,1004,purchase,12.3.4,"{}",an amount the server refuses')
data = ("\n".join(lines) + "\n").encode()
out = sys.argv[1] if len(sys.argv) > 1 else "examples/events.csv.zst"
subprocess.run(["zstd", "-q", "-19", "-f", "-o", out], input=data, check=True)
