/*
 * libFuzzer target for the pgoutput decoder.  Input: a sequence of CopyData
 * payloads, each a 2-byte big-endian length then that many bytes (a short
 * last piece is taken as it is), decoded in order by one decoder so that the
 * Stream Start..Stop state is exercised.  Each payload is copied into a
 * buffer of exactly its size, so any read past it is an ASan finding.
 * Beyond "no crash", it checks the promises of pgoutput.h:
 *
 * - a failure is EC_FORMAT with a "pgoutput: " message and leaves the
 *   stream-block state as it was;
 * - every value, string and column a success returns lies inside the payload
 *   (or is a constant substitution), with counts within their limits;
 * - the xid field is reported exactly inside a stream block, and only
 *   Stream Start / Stream Stop move the block state;
 * - LSN text round-trips.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/pgoutput.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *lo, *hi;

static void
check_in(const char *p, size_t len)
{
    if (len > 0 && (p == NULL || p < lo || p + len > hi))
        abort();
}

/* A string inside the payload (its NUL included) or the "pg_catalog" substitution. */
static void
check_str(const char *s)
{
    if (s == NULL)
        abort();
    if (strcmp(s, "pg_catalog") == 0 && (s < lo || s >= hi))
        return;
    check_in(s, strlen(s) + 1);
}

static void
check_tuple(const PgoTuple *t)
{
    if (t->ncols > PGO_MAX_COLUMNS)
        abort();
    for (uint16_t i = 0; i < t->ncols; i++)
    {
        const PgoValue *v = &t->values[i];
        if (strchr("nutb", v->kind) == NULL || v->kind == 0)
            abort();
        if (v->kind == 'n' || v->kind == 'u')
        {
            if (v->data != NULL || v->len != 0)
                abort();
        }
        else
            check_in(v->data, v->len);
    }
}

static void
check_message(const PgoMessage *m, bool was_in_stream, bool in_stream)
{
    if (m->has_xid != (was_in_stream && strchr("RYIUDTM", m->type) != NULL))
        abort();
    if (in_stream != (m->type == 'S' || (was_in_stream && m->type != 'E')))
        abort();
    switch (m->type)
    {
    case 'O':
        check_str(m->origin_name);
        break;
    case 'R':
        check_str(m->nspname);
        check_str(m->relname);
        if (m->ncols > PGO_MAX_COLUMNS || strchr("dnfi", m->replident) == NULL)
            abort();
        for (uint16_t i = 0; i < m->ncols; i++)
            check_str(m->cols[i].name);
        break;
    case 'Y':
        check_str(m->type_nspname);
        check_str(m->type_name);
        break;
    case 'I':
    case 'U':
    case 'D':
        check_tuple(&m->old_tuple);
        check_tuple(&m->new_tuple);
        if ((m->type == 'I' && m->old_kind != 0) || (m->type == 'D' && m->old_kind == 0))
            abort();
        break;
    case 'T':
        if (m->truncate_flags > 3 || (size_t) m->nrelids * 4 > (size_t) (hi - lo))
            abort();
        for (uint32_t i = 0; i < m->nrelids; i++)
            (void) m->relids[i]; /* ASan: inside the scratch array */
        break;
    case 'M':
        check_str(m->prefix);
        check_in(m->content, m->content_len);
        break;
    case 'B': case 'C': case 'S': case 'E': case 'c': case 'A':
        break;
    default:
        abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    PgoDecoder *d = pgo_decoder_new();
    size_t pos = 0;

    while (pos < size)
    {
        size_t len = size - pos >= 2 ? ((size_t) data[pos] << 8 | data[pos + 1]) : 0;
        char *buf;
        bool was_in_stream = pgo_decoder_in_stream(d);
        PgoFrame f;
        Err err;

        pos += size - pos >= 2 ? 2 : size - pos;
        if (len > size - pos)
            len = size - pos;
        buf = malloc(len ? len : 1);
        memcpy(buf, data + pos, len);
        pos += len;
        lo = buf;
        hi = buf + len;
        err_clear(&err);
        if (pgo_decode(d, buf, len, &f, &err))
        {
            char text[PGO_LSN_TEXT_SIZE];
            uint64_t back;

            pgo_lsn_format(f.data_start, text);
            if (!pgo_lsn_parse(text, &back) || back != f.data_start)
                abort();
            if (f.kind == 'w')
                check_message(&f.msg, was_in_stream, pgo_decoder_in_stream(d));
            else if (f.kind != 'k' || pgo_decoder_in_stream(d) != was_in_stream)
                abort();
        }
        else if (err.code != EC_FORMAT || strncmp(err.msg, "pgoutput: ", 10) != 0 ||
                 pgo_decoder_in_stream(d) != was_in_stream)
            abort();
        free(buf);
    }
    pgo_decoder_free(d);
    return 0;
}
