/*
 * UUIDv7 layout, text form and version checks.  Pure: no I/O, no clock.
 */
#include "v7fill/uuid7.h"

#include <endian.h>
#include <string.h>

#include "v7fill/civil.h"

bool
uuid7_check_time(int64_t us, Err *err)
{
    char text[40];

    if (us < 0)
    {
        civil_format_rfc3339(us, true, text, sizeof text);
        err_set(err, EC_FORMAT, "time %s is before 1970-01-01T00:00:00Z and cannot be a UUIDv7",
                text);
        return false;
    }
    if (us > UUID7_MAX_US)
    {
        civil_format_rfc3339(us, true, text, sizeof text);
        err_set(err, EC_FORMAT, "time %s is past the 48-bit millisecond range of UUIDv7", text);
        return false;
    }
    return true;
}

static void
uuid7_pack(int64_t ms, unsigned rand_a, uint64_t rand62, Uuid *out)
{
    uint64_t hi = htobe64(((uint64_t) ms << 16) | 0x7000u | (rand_a & 0x0fffu));
    uint64_t lo = htobe64((UINT64_C(2) << 62) | (rand62 & UUID7_RAND_MASK));

    memcpy(out->b, &hi, 8);
    memcpy(out->b + 8, &lo, 8);
}

bool
uuid7_from_us(int64_t us, uint64_t rand62, Uuid *out, Err *err)
{
    int64_t ms;
    int64_t frac;

    if (!uuid7_check_time(us, err))
        return false;
    ms = us / 1000;
    frac = us % 1000;
    uuid7_pack(ms, (unsigned) (frac * 4096 / 1000), rand62, out);
    return true;
}

bool
uuid7_next(const Uuid *prev, int64_t us, uint64_t rand62, Uuid *out, Err *err)
{
    uint64_t tail;
    uint64_t step;
    uint64_t lo;

    /* A new tick starts its tail below 2^61: 2^61 steps of at most 2^32 leave
     * room for more than 2^28 ids of one tick before the tail could run out. */
    if (!uuid7_from_us(us, rand62 & (UUID7_RAND_MASK >> 1), out, err))
        return false;
    if (prev == NULL || memcmp(out->b, prev->b, 8) != 0)
        return true;
    /* Same millisecond and rand_a as the previous id: the tail counts up by a
     * random step of 1..2^32, so the batch increases and stays unguessable. */
    memcpy(&lo, prev->b + 8, 8);
    tail = be64toh(lo) & UUID7_RAND_MASK;
    step = (rand62 >> 30) + 1;
    if (tail > UUID7_RAND_MASK - step)
    {
        char text[UUID_TEXT_SIZE];
        uuid_format(prev, text);
        return err_set(err, EC_LIMIT,
                       "no UUIDv7 after %s is left in its 1/4096 ms tick: the 62-bit tail is "
                       "used up",
                       text);
    }
    lo = htobe64((UINT64_C(2) << 62) | (tail + step));
    memcpy(out->b + 8, &lo, 8);
    return true;
}

bool
uuid7_floor(int64_t us, Uuid *out, Err *err)
{
    if (!uuid7_check_time(us, err))
        return false;
    uuid7_pack(us / 1000, 0, 0, out);
    return true;
}

bool
uuid7_floor_bare(int64_t us, Uuid *out, Err *err)
{
    if (!uuid7_floor(us, out, err))
        return false;
    out->b[6] &= 0x0f;
    out->b[8] &= 0x3f;
    return true;
}

int
uuid_version(const Uuid *u)
{
    return u->b[6] >> 4;
}

bool
uuid_variant_rfc(const Uuid *u)
{
    return (u->b[8] & 0xc0) == 0x80;
}

bool
uuid7_check(const Uuid *u, Err *err)
{
    char text[UUID_TEXT_SIZE];
    static const Uuid nil;

    uuid_format(u, text);
    if (memcmp(u, &nil, sizeof nil) == 0)
        return err_set(err, EC_FORMAT, "%s is the nil UUID, not a UUIDv7", text);
    if (uuid_version(u) != 7)
        return err_set(err, EC_FORMAT, "%s is not a UUIDv7 (version %d)", text, uuid_version(u));
    if (!uuid_variant_rfc(u))
        return err_set(err, EC_FORMAT, "%s is not a UUIDv7 (variant bits are not 10)", text);
    return true;
}

int64_t
uuid7_ms(const Uuid *u)
{
    int64_t ms = 0;
    for (int i = 0; i < 6; i++)
        ms = (ms << 8) | u->b[i];
    return ms;
}

unsigned
uuid7_rand_a(const Uuid *u)
{
    return ((unsigned) (u->b[6] & 0x0f) << 8) | u->b[7];
}

int64_t
uuid7_us(const Uuid *u)
{
    /* rand_a = floor(f * 4096 / 1000) is injective on 0..999 because 4096 > 1000,
     * so the smallest f mapping to rand_a, ceil(rand_a * 1000 / 4096), inverts it. */
    int64_t a = uuid7_rand_a(u);
    int64_t frac = (a * 1000 + 4095) / 4096;
    /* rand_a 4092..4095 are never minted (they would decode to 1000 µs); ids of
     * other generators may carry them: stay inside the id's own millisecond. */
    return uuid7_ms(u) * 1000 + (frac > 999 ? 999 : frac);
}

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool
uuid_parse(const char *text, size_t len, Uuid *out, Err *err)
{
    /* What PostgreSQL's uuid input accepts: 32 hex digits in either case, a
     * hyphen allowed after any group of four but the last, the whole
     * optionally in braces.  The usual 8-4-4-4-12 form is one of them. */
    size_t i = 0;
    size_t end = len;
    int shown = (int) (len > 64 ? 64 : len);

    if (len >= 2 && text[0] == '{' && text[len - 1] == '}')
    {
        i = 1;
        end = len - 1;
    }
    for (int byte = 0; byte < 16; byte++)
    {
        int hi;
        int lo;

        if (end - i < 2)
            return err_set(err, EC_FORMAT,
                           "invalid UUID \"%.*s\": expected 32 hex digits (8-4-4-4-12), got %d",
                           shown, text, 2 * byte + (end - i == 1 && hex_value(text[i]) >= 0));
        hi = hex_value(text[i]);
        lo = hex_value(text[i + 1]);
        if (hi < 0 || lo < 0)
            return err_set(err, EC_FORMAT,
                           "invalid UUID \"%.*s\": %s at position %zu", shown, text,
                           text[i + (hi >= 0)] == '-' ? "misplaced '-'" : "non-hex character",
                           i + (hi >= 0) + 1);
        out->b[byte] = (uint8_t) (hi << 4 | lo);
        i += 2;
        if (byte % 2 == 1 && byte < 15 && i < end && text[i] == '-')
            i++;
    }
    if (i != end)
        return err_set(err, EC_FORMAT,
                       "invalid UUID \"%.*s\": unexpected characters after 32 hex digits at "
                       "position %zu",
                       shown, text, i + 1);
    return true;
}

#define HEX_PAIRS(h)                                                                       \
    h "0" h "1" h "2" h "3" h "4" h "5" h "6" h "7" h "8" h "9" h "a" h "b" h "c" h "d" h "e" h "f"
/* "00" to "ff": a byte's two hex digits by one lookup */
static const char hex_pairs[513] =
    HEX_PAIRS("0") HEX_PAIRS("1") HEX_PAIRS("2") HEX_PAIRS("3") HEX_PAIRS("4") HEX_PAIRS("5")
        HEX_PAIRS("6") HEX_PAIRS("7") HEX_PAIRS("8") HEX_PAIRS("9") HEX_PAIRS("a") HEX_PAIRS("b")
            HEX_PAIRS("c") HEX_PAIRS("d") HEX_PAIRS("e") HEX_PAIRS("f");

static inline char *
hex_bytes(char *p, const uint8_t *b, int n)
{
    for (int i = 0; i < n; i++)
    {
        memcpy(p, hex_pairs + 2 * b[i], 2);
        p += 2;
    }
    return p;
}

void
uuid_format(const Uuid *u, char *out)
{
    /* 8-4-4-4-12: the groups spelled out, no test per byte for a dash */
    char *p = hex_bytes(out, u->b, 4);
    *p++ = '-';
    p = hex_bytes(p, u->b + 4, 2);
    *p++ = '-';
    p = hex_bytes(p, u->b + 6, 2);
    *p++ = '-';
    p = hex_bytes(p, u->b + 8, 2);
    *p++ = '-';
    p = hex_bytes(p, u->b + 10, 6);
    *p = '\0';
}

int
uuid_compare(const Uuid *a, const Uuid *b)
{
    return memcmp(a->b, b->b, sizeof a->b);
}
