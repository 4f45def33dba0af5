"""The source table of the stream benchmarks (bench_stream.py, bench_walsender.py): `ev`, a
bigint key and 7 columns, and the rows its workloads insert."""

COLS = "created_at timestamptz NOT NULL, account_id bigint NOT NULL, kind text NOT NULL, " \
       "amount numeric(12,2), payload jsonb, note text"


def rows_sql(base, n, wide=False):
    """INSERT of n source rows with keys base+1 .. base+n, created_at = now by the clock;
    wide: a 2,048-byte note (the row's md5 64 times: a 2 KB message per row on the wire)."""
    k = f"({base} + g)"
    note = f"repeat(md5({k}::text), 64)" if wide else f"'note ' || {k} % 1000"
    return (f"INSERT INTO ev SELECT {k}, clock_timestamp(), 1000 + {k} % 5000, "
            f"(ARRAY['signup','login','purchase','refund','logout'])[1 + {k} % 5], "
            f"CASE WHEN {k} % 3 = 0 THEN ({k} % 100000) / 100.0 END, "
            f"jsonb_build_object('n', {k} % 100), {note} "
            f"FROM generate_series(1, {n}) g")
