/*
 * UUIDv7 (RFC 9562 section 5.7) with the sub-millisecond fraction in rand_a
 * (section 6.2 method 3).
 *
 *   bytes 0-5   Unix milliseconds, big-endian (48 bits)
 *   byte  6     version 0111 in the high nibble, then 12 bits rand_a:
 *               floor(us_within_ms * 4096 / 1000)
 *   byte  8     variant 10 in the top two bits, then 62 bits rand_b
 *
 * Times before the epoch or past the 48-bit millisecond range are errors.
 */
#ifndef V7FILL_UUID7_H
#define V7FILL_UUID7_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"

#define UUID7_MAX_MS    ((INT64_C(1) << 48) - 1)
#define UUID7_MAX_US    (UUID7_MAX_MS * 1000 + 999)
#define UUID_TEXT_LEN   36
#define UUID_TEXT_SIZE  37
#define UUID7_RAND_MASK ((UINT64_C(1) << 62) - 1)

typedef struct Uuid
{
    uint8_t b[16];
} Uuid;

/* Check that `us` is encodable; the error names the time. */
V7FILL_MUST_CHECK bool uuid7_check_time(int64_t us, Err *err);

/* Mint from a time (µs since epoch) and 62 bits for rand_b (upper bits ignored). */
V7FILL_MUST_CHECK bool uuid7_from_us(int64_t us, uint64_t rand62, Uuid *out, Err *err);

/* The id after `prev` in a batch (RFC 9562 section 6.2 monotonicity): minted at
 * `us` like uuid7_from_us, but when it shares prev's millisecond and rand_a, its
 * 62-bit tail is prev's plus a step of 1..2^32 taken from rand62, so it sorts
 * after prev, never equals it, and carries the same time.  The tail of a tick's
 * first id is kept below 2^61, which leaves room for 2^28 ids in one tick; past
 * that an EC_LIMIT error.  prev NULL mints the first id.  The caller keeps `us`
 * from going backwards (an id minted at an earlier time sorts before prev). */
V7FILL_MUST_CHECK bool uuid7_next(const Uuid *prev, int64_t us, uint64_t rand62, Uuid *out,
                                  Err *err);

/* The smallest UUIDv7 of the millisecond containing `us`: time bits, version 7,
 * variant 10, every other bit zero.  Partition bounds and range queries use it. */
V7FILL_MUST_CHECK bool uuid7_floor(int64_t us, Uuid *out, Err *err);

/* Same with version and variant bits zero (pg_partman 5.2+'s bound convention). */
V7FILL_MUST_CHECK bool uuid7_floor_bare(int64_t us, Uuid *out, Err *err);

/* Version nibble (0-15) and whether the variant is RFC 9562's 10. */
int uuid_version(const Uuid *u);
bool uuid_variant_rfc(const Uuid *u);

/* Ok when `u` is a UUIDv7 with RFC variant; otherwise an EC_FORMAT error that
 * says which version it is ("not a UUIDv7 (version 4)"). */
V7FILL_MUST_CHECK bool uuid7_check(const Uuid *u, Err *err);

/* Milliseconds since the epoch carried by the id. */
int64_t uuid7_ms(const Uuid *u);
/* Microseconds: ms*1000 plus the fraction decoded from rand_a (exact inverse of
 * the minting formula for every µs value; rand_a above 4091, which v7fill never
 * mints, decodes to 999 so the time stays in the id's millisecond). */
int64_t uuid7_us(const Uuid *u);
/* rand_a's 12 bits (0 when the id carries no sub-millisecond fraction). */
unsigned uuid7_rand_a(const Uuid *u);

/* Parse canonical text (8-4-4-4-12 hex, any case).  Braces, missing dashes,
 * wrong length or non-hex characters are EC_FORMAT errors quoting the text. */
V7FILL_MUST_CHECK bool uuid_parse(const char *text, size_t len, Uuid *out, Err *err);

/* Lowercase canonical form into out[UUID_TEXT_SIZE]. */
void uuid_format(const Uuid *u, char *out);

int uuid_compare(const Uuid *a, const Uuid *b);

/*
 * Sources of rand_b bits.
 *
 * Keyed: HMAC-SHA-256(key, source reference), first 62 bits.  The key schedule
 * is computed once; one IdKeyer is not thread-safe (keep one per thread).
 * Random: OpenSSL's CSPRNG, drawn in 4 KiB blocks.
 */
typedef struct IdKeyer IdKeyer;

V7FILL_MUST_CHECK bool id_keyer_new(const uint8_t *key, size_t key_len, IdKeyer **out, Err *err);
void id_keyer_free(IdKeyer *k);
/* 62 bits derived from `ref` (any bytes). */
V7FILL_MUST_CHECK bool id_keyer_bits(IdKeyer *k, const void *ref, size_t ref_len, uint64_t *bits,
                                     Err *err);
/* The full 32-byte HMAC of `ref` (used as the lookup table's reference hash). */
V7FILL_MUST_CHECK bool id_keyer_hmac(IdKeyer *k, const void *ref, size_t ref_len, uint8_t out[32],
                                     Err *err);
/* The same HMAC over a reference given in pieces (begin, add..., end): a
 * reference of many megabytes need not be assembled in memory. */
void id_keyer_hmac_begin(IdKeyer *k);
void id_keyer_hmac_add(IdKeyer *k, const void *data, size_t len);
V7FILL_MUST_CHECK bool id_keyer_hmac_end(IdKeyer *k, uint8_t out[32], Err *err);

typedef struct IdRandom IdRandom;

IdRandom *id_random_new(void);
void id_random_free(IdRandom *r);
V7FILL_MUST_CHECK bool id_random_bits(IdRandom *r, uint64_t *bits, Err *err);

#endif /* V7FILL_UUID7_H */
