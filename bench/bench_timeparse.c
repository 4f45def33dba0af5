/*
 * Time parser throughput.  Each figure is printed beside a baseline measured
 * in the same run on the same strings: a loop that only sums the bytes of
 * each string, i.e. the unavoidable cost of touching the input.
 *
 * Corpora (1000 distinct strings each, generated deterministically):
 *   iso        UTC instants 2020-2030 as RFC 3339 ("...T...123456Z"), PostgreSQL
 *              output ("... 12:00:00.5+00") and explicit offsets ("+05:30")
 *   epoch-ms   the same instants as decimal milliseconds, some with a fraction
 *   zone       local wall times in Europe/Berlin without an offset, spread over
 *              two years (so DST rules matter), warm per-day cache; the cold
 *              first pass with a fresh parser is reported too
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/civil.h"
#include "v7fill/timeparse.h"

#define CORPUS   1000
#define TEXT_MAX 40
#define REPS     2000
#define TRIALS   3

typedef struct Corpus
{
    char text[CORPUS][TEXT_MAX];
    size_t len[CORPUS];
} Corpus;

static volatile uint64_t sink;

static uint64_t
rng_next(uint64_t *state)
{
    /* splitmix64: deterministic, good enough to spread the corpus */
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

/* Distinct instants: one per slot of (span / CORPUS), jittered within it. */
static int64_t
instant(int i, int64_t start_us, int64_t span_us, uint64_t *rng)
{
    int64_t slot = span_us / CORPUS;

    return start_us + slot * i + (int64_t) (rng_next(rng) % (uint64_t) slot);
}

static void
make_iso(Corpus *c)
{
    uint64_t rng = 1;
    int64_t start = INT64_C(1577836800000000); /* 2020-01-01T00:00:00Z */
    int64_t span = INT64_C(10) * 365 * US_PER_DAY;

    for (int i = 0; i < CORPUS; i++)
    {
        int64_t us = instant(i, start, span, &rng);
        CivilTime ct;

        switch (i % 4)
        {
        case 0:
        case 1:
            civil_from_us(us, &ct);
            snprintf(c->text[i], TEXT_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", ct.year,
                     ct.month, ct.day, ct.hour, ct.minute, ct.second, ct.usec);
            break;
        case 2:
            civil_from_us(us, &ct);
            snprintf(c->text[i], TEXT_MAX, "%04d-%02d-%02d %02d:%02d:%02d.%d+00", ct.year,
                     ct.month, ct.day, ct.hour, ct.minute, ct.second, ct.usec / 100000);
            break;
        default:
            civil_from_us(us + 5 * US_PER_HOUR + 30 * US_PER_MIN, &ct);
            snprintf(c->text[i], TEXT_MAX, "%04d-%02d-%02dT%02d:%02d:%02d+05:30", ct.year,
                     ct.month, ct.day, ct.hour, ct.minute, ct.second);
            break;
        }
        c->len[i] = strlen(c->text[i]);
    }
}

static void
make_epoch_ms(Corpus *c)
{
    uint64_t rng = 2;
    int64_t start = INT64_C(1577836800000000);
    int64_t span = INT64_C(10) * 365 * US_PER_DAY;

    for (int i = 0; i < CORPUS; i++)
    {
        int64_t us = instant(i, start, span, &rng);

        if (i % 2 == 0)
            snprintf(c->text[i], TEXT_MAX, "%lld", (long long) (us / 1000));
        else
            snprintf(c->text[i], TEXT_MAX, "%lld.%03d", (long long) (us / 1000),
                     (int) (us % 1000));
        c->len[i] = strlen(c->text[i]);
    }
}

static void
make_zone(Corpus *c)
{
    uint64_t rng = 3;
    int64_t start = INT64_C(1767225600000000); /* 2026-01-01 */
    int64_t span = INT64_C(2) * 365 * US_PER_DAY;

    for (int i = 0; i < CORPUS; i++)
    {
        CivilTime ct;

        /* wall time digits; read back in Europe/Berlin */
        civil_from_us(instant(i, start, span, &rng), &ct);
        snprintf(c->text[i], TEXT_MAX, "%04d-%02d-%02d %02d:%02d:%02d", ct.year, ct.month,
                 ct.day, ct.hour, ct.minute, ct.second);
        c->len[i] = strlen(c->text[i]);
    }
}

/* ns per string of the best trial: touch every byte, nothing else. */
static double
bench_baseline(const Corpus *c)
{
    double best = 1e30;

    for (int t = 0; t < TRIALS; t++)
    {
        uint64_t sum = 0;
        double t0 = now_ns();

        for (int r = 0; r < REPS; r++)
        {
            for (int i = 0; i < CORPUS; i++)
            {
                const unsigned char *s = (const unsigned char *) c->text[i];

                for (size_t k = 0; k < c->len[i]; k++)
                    sum += s[k];
            }
            sink += sum;
        }
        double ns = (now_ns() - t0) / ((double) REPS * CORPUS);
        if (ns < best)
            best = ns;
    }
    return best;
}

/* ns per parse of the best trial; exits if anything fails to parse. */
static double
bench_parse(const TimeParser *p, const Corpus *c, int reps, int trials)
{
    double best = 1e30;

    for (int t = 0; t < trials; t++)
    {
        uint64_t sum = 0;
        double t0 = now_ns();

        for (int r = 0; r < reps; r++)
        {
            for (int i = 0; i < CORPUS; i++)
            {
                Err err;
                int64_t us;

                if (!time_parse(p, c->text[i], c->len[i], &us, &err))
                {
                    fprintf(stderr, "bench_timeparse: %s\n", err.msg);
                    exit(1);
                }
                sum += (uint64_t) us;
            }
        }
        sink += sum;
        double ns = (now_ns() - t0) / ((double) reps * CORPUS);
        if (ns < best)
            best = ns;
    }
    return best;
}

static TimeParser *
parser(const char *format, const char *tz)
{
    TimeParser *p;
    Err err;

    if (!time_parser_new(format, tz, &p, &err))
    {
        fprintf(stderr, "bench_timeparse: %s\n", err.msg);
        exit(1);
    }
    return p;
}

static void
report(const char *name, double parse_ns, double base_ns)
{
    printf("timeparse %s: %.1f ns/parse (baseline touch-bytes %.1f ns/string, ratio %.1fx)\n",
           name, parse_ns, base_ns, parse_ns / base_ns);
}

int
main(void)
{
    static Corpus iso, ms, zone;
    TimeParser *p;
    double base, cold;

    make_iso(&iso);
    make_epoch_ms(&ms);
    make_zone(&zone);
    printf("timeparse: %d distinct strings per corpus, %d passes, best of %d trials\n", CORPUS,
           REPS, TRIALS);

    p = parser("iso", NULL);
    base = bench_baseline(&iso);
    report("iso", bench_parse(p, &iso, REPS, TRIALS), base);
    time_parser_free(p);

    p = parser("epoch-ms", NULL);
    base = bench_baseline(&ms);
    report("epoch-ms", bench_parse(p, &ms, REPS, TRIALS), base);
    time_parser_free(p);

    /* cold: a fresh parser, one pass, every local day looked up in libc */
    p = parser("iso", "Europe/Berlin");
    cold = bench_parse(p, &zone, 1, 1);
    base = bench_baseline(&zone);
    report("iso Europe/Berlin", bench_parse(p, &zone, REPS, TRIALS), base);
    printf("timeparse iso Europe/Berlin first pass (cold day cache): %.1f ns/parse\n", cold);
    time_parser_free(p);
    return 0;
}
