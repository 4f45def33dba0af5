/*
 * Sources of the 62 rand_b bits: keyed HMAC-SHA-256 of the source reference,
 * or OpenSSL's CSPRNG.
 *
 * HMAC is computed from two SHA-256 states precomputed over key^ipad and
 * key^opad (RFC 2104), copied per call, so the key schedule is paid once.
 */
#include <openssl/evp.h>
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
    EVP_MD_CTX *inner_base; /* state after absorbing key ^ ipad */
    EVP_MD_CTX *outer_base; /* state after absorbing key ^ opad */
    EVP_MD_CTX *work;
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
    k->inner_base = EVP_MD_CTX_new();
    k->outer_base = EVP_MD_CTX_new();
    k->work = EVP_MD_CTX_new();
    if (k->inner_base == NULL || k->outer_base == NULL || k->work == NULL)
    {
        id_keyer_free(k);
        return idbits_openssl_err(err, "context allocation");
    }
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x36;
    if (!EVP_DigestInit_ex(k->inner_base, md, NULL) ||
        !EVP_DigestUpdate(k->inner_base, pad, sizeof pad))
    {
        id_keyer_free(k);
        return idbits_openssl_err(err, "HMAC key setup");
    }
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k0[i] ^ 0x5c;
    if (!EVP_DigestInit_ex(k->outer_base, md, NULL) ||
        !EVP_DigestUpdate(k->outer_base, pad, sizeof pad))
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
    EVP_MD_CTX_free(k->inner_base);
    EVP_MD_CTX_free(k->outer_base);
    EVP_MD_CTX_free(k->work);
    free(k);
}

bool
id_keyer_hmac(IdKeyer *k, const void *ref, size_t ref_len, uint8_t out[32], Err *err)
{
    uint8_t inner[SHA256_LEN];
    unsigned int n = 0;

    if (!EVP_MD_CTX_copy_ex(k->work, k->inner_base) || !EVP_DigestUpdate(k->work, ref, ref_len) ||
        !EVP_DigestFinal_ex(k->work, inner, &n))
        return idbits_openssl_err(err, "HMAC");
    if (!EVP_MD_CTX_copy_ex(k->work, k->outer_base) ||
        !EVP_DigestUpdate(k->work, inner, sizeof inner) || !EVP_DigestFinal_ex(k->work, out, &n))
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
    for (int i = 0; i < 8; i++)
        v = (v << 8) | r->buf[r->pos + (size_t) i];
    r->pos += 8;
    *bits = v & UUID7_RAND_MASK;
    return true;
}
