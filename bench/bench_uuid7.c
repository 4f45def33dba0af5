/*
 * bench_uuid7: ns per id for CSPRNG and keyed minting, beside the baseline of
 * packing the time bits alone, measured in the same run.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "v7fill/uuid7.h"

#define N 2000000

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int
main(void)
{
    Err err = {0};
    Uuid u;
    uint64_t sink = 0;
    int64_t t0 = INT64_C(1782864000000000);
    double a, base, rnd_ns, keyed_ns;
    IdRandom *r = id_random_new();
    IdKeyer *k;
    uint8_t key[32] = {42};
    static char refs[4096][32];
    static size_t ref_len[4096];

    if (!id_keyer_new(key, sizeof key, &k, &err))
    {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    /* Baseline: only pack the time bits (no checks, no random bits). */
    a = now_s();
    for (int i = 0; i < N; i++)
    {
        uint64_t hi = ((uint64_t) ((t0 + i) / 1000) << 16) | 0x7000u;
        memcpy(u.b, &hi, 8);
        __asm__ volatile("" : : "r"(&u) : "memory");
        sink += u.b[7];
    }
    base = (now_s() - a) * 1e9 / N;

    a = now_s();
    for (int i = 0; i < N; i++)
    {
        uint64_t bits;
        if (!id_random_bits(r, &bits, &err) || !uuid7_from_us(t0 + i, bits, &u, &err))
            return 1;
        sink += u.b[15];
    }
    rnd_ns = (now_s() - a) * 1e9 / N;

    /* References are formatted before the clock starts: only minting is timed. */
    for (int i = 0; i < 4096; i++)
        ref_len[i] = (size_t) snprintf(refs[i], sizeof refs[i], "legacy.orders:%d", i * 7919);
    a = now_s();
    for (int i = 0; i < N / 4; i++)
    {
        uint64_t bits;
        if (!id_keyer_bits(k, refs[i & 4095], ref_len[i & 4095], &bits, &err) ||
            !uuid7_from_us(t0 + i, bits, &u, &err))
            return 1;
        sink += u.b[15];
    }
    keyed_ns = (now_s() - a) * 1e9 / (N / 4);

    printf("uuid7 pack time bits only (baseline): %6.1f ns/id\n", base);
    printf("uuid7 CSPRNG minting:                 %6.1f ns/id  (%.1fx baseline; target <= 25 ns)\n",
           rnd_ns, rnd_ns / base);
    printf("uuid7 keyed HMAC-SHA-256 minting:     %6.1f ns/id  (%.1fx baseline; target <= 200 ns)\n",
           keyed_ns, keyed_ns / base);
    id_random_free(r);
    id_keyer_free(k);
    return sink == 42 ? 2 : 0;
}
