/*
 * Sources of the 62 rand_b bits: keyed HMAC-SHA-256 of the source reference,
 * or OpenSSL's CSPRNG.
 *
 * HMAC is computed from two SHA-256 states precomputed over key^ipad and
 * key^opad (RFC 2104), copied per call, so the key schedule is paid once.
 * A reference of up to 55 bytes (padding included, one block) costs exactly
 * two SHA256_Transform calls on blocks padded here; longer ones go through
 * SHA256_Update/Final.  A unit test holds both paths to OpenSSL's HMAC().
 * The states are OpenSSL's low-level SHA256_CTX: copying one is a plain struct
 * copy, where EVP_MD_CTX_copy_ex costs more than the two compressions of a
 * short reference (measured in bench_uuid7: 336 ns/id with EVP contexts).
 * The low-level API is deprecated in OpenSSL 3 but kept, and still the fastest
 * path; the deprecation warnings are silenced for this file only.
 */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <endian.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/uuid7.h"

#define SHA256_BLOCK 64
#define SHA256_LEN   32
#define RANDOM_BLOCK 4096

struct IdKeyer
{
    SHA256_CTX inner_base; /* state after absorbing key ^ ipad */
    SHA256_CTX outer_base; /* state after absorbing key ^ opad */
    SHA256_CTX stream;     /* id_keyer_hmac_begin .. _end */
    bool stream_ok;
};

static bool
idbits_openssl_err(Err *err, const char *what)
{
    return err_set(err, EC_INTERNAL, "OpenSSL %s failed", what);
}

bool
id_keyer_new(const uint8_t *key, size_t key_len, IdKeyer **out, Err *err)
{
    uint8_t k0[SHA256_BLOCK] = {0};
    uint8_t pad[SHA256_BLOCK];
    IdKeyer *k;
    const EVP_MD *md = EVP_sha256();

    if (key_len > SHA256_BLOCK)
    {
        unsigned int n = 0;
        if (!EVP_Digest(key, key_len, k0, &n, md, NULL))
            return idbits_openssl_err(err, "SHA-256");
    }
    else
        memcpy(k0, key, key_len);

    k = xcalloc(1, sizeof *k);
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x36;
    if (!SHA256_Init(&k->inner_base) || !SHA256_Update(&k->inner_base, pad, sizeof pad))
    {
        id_keyer_free(k);
        return idbits_openssl_err(err, "HMAC key setup");
    }
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x5c;
    if (!SHA256_Init(&k->outer_base) || !SHA256_Update(&k->outer_base, pad, sizeof pad))
    {
        id_keyer_free(k);
        return idbits_openssl_err(err, "HMAC key setup");
    }
    memset(k0, 0, sizeof k0);
    memset(pad, 0, sizeof pad);
    *out = k;
    return true;
}

void
id_keyer_free(IdKeyer *k)
{
    if (k == NULL)
        return;
    memset(k, 0, sizeof *k);
    free(k);
}

/* The SHA-256 state words as the digest's bytes (big-endian). */
static void
sha256_state_bytes(const SHA256_CTX *c, uint8_t out[SHA256_LEN])
{
    for (int i = 0; i < 8; i++)
    {
        uint32_t be = htobe32(c->h[i]);

        memcpy(out + 4 * i, &be, 4);
    }
}

/* One final block: msg, then SHA-256's padding (0x80, zeros, the bit length
 * of everything hashed, which here includes the 64-byte key block). */
static void
sha256_last_block(SHA256_CTX *c, const void *msg, size_t len, uint8_t block[SHA256_BLOCK])
{
    uint64_t be = htobe64((uint64_t) (SHA256_BLOCK + len) * 8);

    memset(block, 0, SHA256_BLOCK - 8);
    memcpy(block, msg, len);
    block[len] = 0x80;
    memcpy(block + SHA256_BLOCK - 8, &be, 8);
    SHA256_Transform(c, block);
}

bool
id_keyer_hmac(IdKeyer *k, const void *ref, size_t ref_len, uint8_t out[32], Err *err)
{
    uint8_t inner[SHA256_LEN];
    SHA256_CTX work;

    if (ref_len <= SHA256_BLOCK - 9)
    {
        /* A reference that fits one block with its padding (nearly all do):
         * one compression per half, straight from the precomputed states,
         * without SHA256_Update/Final's buffering and cleansing.  Only the
         * state words matter to SHA256_Transform. */
        uint8_t block[SHA256_BLOCK];

        memcpy(work.h, k->inner_base.h, sizeof work.h);
        sha256_last_block(&work, ref, ref_len, block);
        sha256_state_bytes(&work, inner);
        memcpy(work.h, k->outer_base.h, sizeof work.h);
        sha256_last_block(&work, inner, sizeof inner, block);
        sha256_state_bytes(&work, out);
        return true;
    }
    work = k->inner_base;
    if (!SHA256_Update(&work, ref, ref_len) || !SHA256_Final(inner, &work))
        return idbits_openssl_err(err, "HMAC");
    work = k->outer_base;
    if (!SHA256_Update(&work, inner, sizeof inner) || !SHA256_Final(out, &work))
        return idbits_openssl_err(err, "HMAC");
    return true;
}

void
id_keyer_hmac_begin(IdKeyer *k)
{
    k->stream = k->inner_base;
    k->stream_ok = true;
}

void
id_keyer_hmac_add(IdKeyer *k, const void *data, size_t len)
{
    if (len > 0 && !SHA256_Update(&k->stream, data, len))
        k->stream_ok = false;
}

bool
id_keyer_hmac_end(IdKeyer *k, uint8_t out[32], Err *err)
{
    uint8_t inner[SHA256_LEN];
    SHA256_CTX work;

    if (!k->stream_ok || !SHA256_Final(inner, &k->stream))
        return idbits_openssl_err(err, "HMAC");
    work = k->outer_base;
    if (!SHA256_Update(&work, inner, sizeof inner) || !SHA256_Final(out, &work))
        return idbits_openssl_err(err, "HMAC");
    return true;
}

bool
id_keyer_bits(IdKeyer *k, const void *ref, size_t ref_len, uint64_t *bits, Err *err)
{
    uint8_t mac[SHA256_LEN];
    uint64_t v = 0;

    if (!id_keyer_hmac(k, ref, ref_len, mac, err))
        return false;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | mac[i];
    *bits = v & UUID7_RAND_MASK;
    return true;
}

struct IdRandom
{
    uint8_t buf[RANDOM_BLOCK];
    size_t pos;
};

IdRandom *
id_random_new(void)
{
    IdRandom *r = xcalloc(1, sizeof *r);
    r->pos = RANDOM_BLOCK;
    return r;
}

void
id_random_free(IdRandom *r)
{
    if (r == NULL)
        return;
    memset(r->buf, 0, sizeof r->buf);
    free(r);
}

bool
id_random_bits(IdRandom *r, uint64_t *bits, Err *err)
{
    uint64_t v = 0;

    if (r->pos + 8 > RANDOM_BLOCK)
    {
        if (RAND_bytes(r->buf, RANDOM_BLOCK) != 1)
            return idbits_openssl_err(err, "RAND_bytes");
        r->pos = 0;
    }
    memcpy(&v, r->buf + r->pos, sizeof v); /* random bytes: byte order is irrelevant */
    r->pos += 8;
    *bits = v & UUID7_RAND_MASK;
    return true;
}
