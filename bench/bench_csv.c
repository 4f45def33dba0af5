/*
 * bench_csv: throughput of the CSV source, beside a baseline measured in the
 * same run on the same file: fread in 1 MiB blocks and count lines with
 * memchr, i.e. the cost of getting the bytes into memory and looking at
 * each once.  The same pair is measured on a zstd copy of the file (the
 * baseline there decompresses with ZSTD_decompressStream and counts lines).
 *
 * The file (~100 MB, generated deterministically into a temporary
 * directory) has 7 columns shaped like an orders dump: integer id,
 * timestamp, customer name (some quoted, some with commas), amount, status,
 * country, a note that is often empty (NULL), sometimes quoted with doubled
 * quotes or an embedded newline.  Each figure is the best of TRIALS runs,
 * after one untimed pass to warm the page cache.
 *
 * The plain file is also read with every line through libcsv
 * (CsvOptions.libcsv_only), which shows what the one-line fast path saves.
 *
 * Set BENCH_CSV_MB to change the size.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "v7fill/source_csv.h"

#define TRIALS 3
#define BLOCK  ((size_t) 1 << 20)

static volatile uint64_t sink;

static uint64_t
rng_next(uint64_t *state)
{
    /* splitmix64: deterministic and cheap */
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static uint64_t
generate(const char *path, size_t target, uint64_t *rows)
{
    static const char *first[] = {"Anna", "Ben", "Chloé", "Dmitri", "Eve", "Farid", "Grace",
                                  "Hiro"};
    static const char *last[] = {"Meyer", "O'Neil", "Nakamura", "Smith, Jr.", "Dubois",
                                 "García"};
    static const char *status[] = {"new", "paid", "shipped", "cancelled"};
    static const char *country[] = {"DE", "FR", "JP", "US", "BR", "IN"};
    FILE *f = fopen(path, "wb");
    uint64_t rng = 42;
    uint64_t written = 0;
    uint64_t n = 0;
    int64_t t = INT64_C(1704067200); /* 2024-01-01 */

    if (f == NULL)
        return 0;
    written += (uint64_t) fprintf(f, "id,created_at,customer,amount,status,country,note\n");
    while (written < target)
    {
        uint64_t r = rng_next(&rng);
        const char *fn = first[r % 8];
        const char *ln = last[(r >> 8) % 6];
        struct tm tm;
        time_t tt;
        char ts[32];
        const char *note;

        t += (int64_t) ((r >> 16) % 7);
        tt = (time_t) t;
        gmtime_r(&tt, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S+00", &tm);
        switch ((r >> 24) % 10)
        {
            case 0:
                note = "\"gift, wrap it\"";
                break;
            case 1:
                note = "\"said \"\"leave at door\"\"\"";
                break;
            case 2:
                note = "\"line one\nline two\"";
                break;
            case 3:
                note = "\"\"";
                break;
            default:
                note = "";
                break;
        }
        written += (uint64_t) fprintf(f, "%" PRIu64 ",%s,%s%s %s%s,%" PRIu64 ".%02u,%s,%s,%s\n",
                                      n + 1, ts, strchr(ln, ',') ? "\"" : "", fn, ln,
                                      strchr(ln, ',') ? "\"" : "", (r >> 32) % 5000,
                                      (unsigned) ((r >> 44) % 100), status[(r >> 52) % 4],
                                      country[(r >> 56) % 6], note);
        n++;
    }
    fclose(f);
    *rows = n;
    return written;
}

static bool
compress_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    FILE *out = fopen(dst, "wb");
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t in_cap = ZSTD_CStreamInSize();
    size_t out_cap = ZSTD_CStreamOutSize();
    char *ibuf = malloc(in_cap);
    char *obuf = malloc(out_cap);
    bool ok = in && out && cctx && ibuf && obuf;

    if (ok)
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
    while (ok)
    {
        size_t n = fread(ibuf, 1, in_cap, in);
        bool last = n < in_cap;
        ZSTD_inBuffer ib = {ibuf, n, 0};
        bool finished;

        do
        {
            ZSTD_outBuffer ob = {obuf, out_cap, 0};
            size_t rem = ZSTD_compressStream2(cctx, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);

            if (ZSTD_isError(rem))
            {
                ok = false;
                break;
            }
            fwrite(obuf, 1, ob.pos, out);
            finished = last ? rem == 0 : ib.pos == ib.size;
        } while (!finished);
        if (last)
            break;
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    ZSTD_freeCCtx(cctx);
    free(ibuf);
    free(obuf);
    return ok;
}

/* Baseline: bytes into memory and every byte looked at once. */
static double
baseline_plain(const char *path, uint64_t *lines)
{
    FILE *f = fopen(path, "rb");
    char *buf = malloc(BLOCK);
    double t0 = now_s();
    size_t n;

    *lines = 0;
    while ((n = fread(buf, 1, BLOCK, f)) > 0)
        for (const char *p = buf, *end = buf + n; (p = memchr(p, '\n', (size_t) (end - p))) != NULL;
             p++)
            (*lines)++;
    t0 = now_s() - t0;
    fclose(f);
    free(buf);
    return t0;
}

static double
baseline_zstd(const char *path, uint64_t *lines)
{
    FILE *f = fopen(path, "rb");
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t in_cap = ZSTD_DStreamInSize();
    char *ibuf = malloc(in_cap);
    char *obuf = malloc(BLOCK);
    double t0 = now_s();
    size_t n;

    *lines = 0;
    while ((n = fread(ibuf, 1, in_cap, f)) > 0)
    {
        ZSTD_inBuffer ib = {ibuf, n, 0};

        while (ib.pos < ib.size)
        {
            ZSTD_outBuffer ob = {obuf, BLOCK, 0};

            if (ZSTD_isError(ZSTD_decompressStream(d, &ob, &ib)))
                exit(1);
            for (const char *p = obuf, *end = obuf + ob.pos;
                 (p = memchr(p, '\n', (size_t) (end - p))) != NULL; p++)
                (*lines)++;
        }
    }
    t0 = now_s() - t0;
    fclose(f);
    ZSTD_freeDCtx(d);
    free(ibuf);
    free(obuf);
    return t0;
}

static CsvOptions source_opts;

/* The source: every record, every field touched (as the pipeline would). */
static double
run_source(const char *path, uint64_t *records)
{
    Source *s;
    Err err = {0};
    double t0 = now_s();
    uint64_t sum = 0;

    *records = 0;
    if (!source_csv_open(path, &source_opts, &s, &err))
    {
        fprintf(stderr, "bench_csv: %s\n", err.msg);
        exit(1);
    }
    for (;;)
    {
        Record rec;
        bool eof;

        if (!source_next(s, &rec, &eof, &err))
        {
            fprintf(stderr, "bench_csv: %s\n", err.msg);
            exit(1);
        }
        if (eof)
            break;
        if (rec.error)
        {
            fprintf(stderr, "bench_csv: line %" PRIu64 ": %s\n", rec.line, rec.error);
            exit(1);
        }
        for (size_t i = 0; i < rec.nfields; i++)
            sum += rec.fields[i].len;
        (*records)++;
    }
    source_close(s);
    sink += sum;
    return now_s() - t0;
}

typedef double (*Runner)(const char *path, uint64_t *count);

static double
best_of(Runner fn, const char *path, uint64_t *count)
{
    double best = 1e30;

    for (int i = 0; i < TRIALS; i++)
    {
        double t = fn(path, count);

        if (t < best)
            best = t;
    }
    return best;
}

static void
report(const char *what, uint64_t bytes, uint64_t records, double t_src, double t_base)
{
    double mb = (double) bytes / 1e6;

    printf("csv %-6s source_csv %7.1f MB/s %6.2f M records/s | baseline %7.1f MB/s | "
           "ratio %.2f\n",
           what, mb / t_src, (double) records / t_src / 1e6, mb / t_base, t_base / t_src);
}

int
main(void)
{
    char dir[] = "/tmp/v7fill-bench-csv-XXXXXX";
    char plain[64];
    char zst[64];
    const char *env = getenv("BENCH_CSV_MB");
    size_t target = (size_t) (env ? atoi(env) : 100) * 1000 * 1000;
    uint64_t rows = 0;
    uint64_t bytes;
    uint64_t records;
    uint64_t lines;
    double t_src;
    double t_base;

    if (mkdtemp(dir) == NULL)
    {
        perror("bench_csv: mkdtemp");
        return 1;
    }
    snprintf(plain, sizeof plain, "%s/orders.csv", dir);
    snprintf(zst, sizeof zst, "%s/orders.csv.zst", dir);
    bytes = generate(plain, target, &rows);
    if (bytes == 0 || !compress_file(plain, zst))
    {
        fprintf(stderr, "bench_csv: could not write the test files in %s\n", dir);
        return 1;
    }
    printf("bench_csv: %.1f MB, %" PRIu64 " records, 7 columns; best of %d\n", (double) bytes / 1e6,
           rows, TRIALS);

    csv_options_default(&source_opts);
    (void) baseline_plain(plain, &lines); /* warm the page cache */
    t_base = best_of(baseline_plain, plain, &lines);
    t_src = best_of(run_source, plain, &records);
    if (records != rows)
    {
        fprintf(stderr, "bench_csv: read %" PRIu64 " records, wrote %" PRIu64 "\n", records, rows);
        return 1;
    }
    report("plain", bytes, records, t_src, t_base);
    source_opts.libcsv_only = true;
    t_src = best_of(run_source, plain, &records);
    report("libcsv", bytes, records, t_src, t_base);
    source_opts.libcsv_only = false;

    (void) baseline_zstd(zst, &lines);
    t_base = best_of(baseline_zstd, zst, &lines);
    t_src = best_of(run_source, zst, &records);
    report("zstd", bytes, records, t_src, t_base);

    unlink(plain);
    unlink(zst);
    rmdir(dir);
    return 0;
}
