/*
 * pgoutput decoding and the Standby Status Update, on hand-built payloads
 * (big-endian, laid out as in the shared pgoutput reference, sections 3.3 and 4).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/pgoutput.h"
#include "v7fill/source_pgoutput.h"

#define FRAME_LSN UINT64_C(0x16B3F00)
#define PG_TIME   INT64_C(1000000) /* 2000-01-01 00:00:01 UTC */
#define UNIX_TIME (PGO_EPOCH_OFFSET_US + PG_TIME)

/* A payload being built. */
typedef struct P
{
    uint8_t b[8192];
    size_t n;
} P;

static void
put8(P *p, uint8_t v)
{
    assert_true(p->n < sizeof p->b);
    p->b[p->n++] = v;
}

static void
put16(P *p, uint16_t v)
{
    put8(p, (uint8_t) (v >> 8));
    put8(p, (uint8_t) v);
}

static void
put32(P *p, uint32_t v)
{
    put16(p, (uint16_t) (v >> 16));
    put16(p, (uint16_t) v);
}

static void
put64(P *p, uint64_t v)
{
    put32(p, (uint32_t) (v >> 32));
    put32(p, (uint32_t) v);
}

static void
putmem(P *p, const void *data, size_t len)
{
    assert_true(p->n + len <= sizeof p->b);
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

/* A pgoutput String: NUL-terminated. */
static void
putstr(P *p, const char *s)
{
    putmem(p, s, strlen(s) + 1);
}

/* A TupleData value of kind 't' or 'b'. */
static void
putval(P *p, char kind, const char *data)
{
    put8(p, (uint8_t) kind);
    put32(p, (uint32_t) strlen(data));
    putmem(p, data, strlen(data));
}

/* An XLogData frame whose data starts at lsn, then the message's type byte. */
static P
xlog_at(char type, uint64_t lsn)
{
    P p = {.n = 0};
    put8(&p, 'w');
    put64(&p, lsn);
    put64(&p, lsn);
    put64(&p, (uint64_t) PG_TIME);
    put8(&p, (uint8_t) type);
    return p;
}

/* An XLogData header at FRAME_LSN, then the message's type byte. */
static P
xlog(char type)
{
    return xlog_at(type, FRAME_LSN);
}


static P
msg_begin(void)
{
    P p = xlog('B');
    put64(&p, 0x1000);
    put64(&p, (uint64_t) PG_TIME);
    put32(&p, 731);
    return p;
}

static P
msg_commit(void)
{
    P p = xlog('C');
    put8(&p, 0);
    put64(&p, 0x1000);
    put64(&p, 0x1030);
    put64(&p, (uint64_t) PG_TIME);
    return p;
}

static P
msg_origin(void)
{
    P p = xlog('O');
    put64(&p, 0xABCDEF);
    putstr(&p, "upstream_a");
    return p;
}

/* Relation 16384 with an empty schema name (pg_catalog), two columns. */
static void
relation_body(P *p)
{
    put32(p, 16384);
    putstr(p, "");
    putstr(p, "orders");
    put8(p, 'd');
    put16(p, 2);
    put8(p, 1);
    putstr(p, "id");
    put32(p, 20);
    put32(p, UINT32_MAX); /* -1 */
    put8(p, 0);
    putstr(p, "amount");
    put32(p, 1700);
    put32(p, 655366);
}

static P
msg_relation(void)
{
    P p = xlog('R');
    relation_body(&p);
    return p;
}

static P
msg_type(void)
{
    P p = xlog('Y');
    put32(&p, 16407);
    putstr(&p, "public");
    putstr(&p, "mood");
    return p;
}

/* Four columns: text "42", null, unchanged toast, binary "\x01\x02". */
static void
insert_body(P *p)
{
    put32(p, 16384);
    put8(p, 'N');
    put16(p, 4);
    putval(p, 't', "42");
    put8(p, 'n');
    put8(p, 'u');
    putval(p, 'b', "\x01\x02");
}

static P
msg_insert(void)
{
    P p = xlog('I');
    insert_body(&p);
    return p;
}

/* Update with an old key tuple K[2]{t:7,n}, new tuple {t:8,u}. */
static P
msg_update_k(void)
{
    P p = xlog('U');
    put32(&p, 16384);
    put8(&p, 'K');
    put16(&p, 2);
    putval(&p, 't', "7");
    put8(&p, 'n');
    put8(&p, 'N');
    put16(&p, 2);
    putval(&p, 't', "8");
    put8(&p, 'u');
    return p;
}

static P
msg_update_n(void)
{
    P p = xlog('U');
    put32(&p, 16384);
    put8(&p, 'N');
    put16(&p, 1);
    putval(&p, 't', "hello");
    return p;
}

static P
msg_delete_o(void)
{
    P p = xlog('D');
    put32(&p, 16384);
    put8(&p, 'O');
    put16(&p, 2);
    putval(&p, 't', "7");
    putval(&p, 't', "12.50");
    return p;
}

static P
msg_truncate(void)
{
    P p = xlog('T');
    put32(&p, 2);
    put8(&p, 3);
    put32(&p, 16384);
    put32(&p, 16390);
    return p;
}

static P
msg_message(void)
{
    P p = xlog('M');
    put8(&p, 1);
    put64(&p, 0x2000);
    putstr(&p, "v7fill");
    put32(&p, 3);
    putmem(&p, "a\0b", 3);
    return p;
}

static P
msg_stream_start(void)
{
    P p = xlog('S');
    put32(&p, 900);
    put8(&p, 1);
    return p;
}

static P
msg_stream_stop(void)
{
    return xlog('E');
}

static P
msg_stream_commit(void)
{
    P p = xlog('c');
    put32(&p, 900);
    put8(&p, 0);
    put64(&p, 0x3000);
    put64(&p, 0x3050);
    put64(&p, (uint64_t) PG_TIME);
    return p;
}

static P
msg_stream_abort(void)
{
    P p = xlog('A');
    put32(&p, 900);
    put32(&p, 901);
    return p;
}

/* An Insert inside a stream block: the subxact's xid after the type byte. */
static P
msg_stream_insert(void)
{
    P p = xlog('I');
    put32(&p, 901);
    insert_body(&p);
    return p;
}

static P
msg_stream_relation(void)
{
    P p = xlog('R');
    put32(&p, 901);
    relation_body(&p);
    return p;
}

static P
keepalive(uint8_t reply)
{
    P p = {.n = 0};
    put8(&p, 'k');
    put64(&p, UINT64_C(0x16B374D848));
    put64(&p, (uint64_t) PG_TIME);
    put8(&p, reply);
    return p;
}

static bool
decode(PgoDecoder *d, const P *p, PgoFrame *f, Err *err)
{
    err_clear(err);
    return pgo_decode(d, (const char *) p->b, p->n, f, err);
}

static void
decode_ok(PgoDecoder *d, const P *p, PgoFrame *f)
{
    Err err;
    if (!decode(d, p, f, &err))
        fail_msg("decode failed: %s", err.msg);
}

/* Decode that must fail with EC_FORMAT and a message containing `want`. */
static void
decode_fails(PgoDecoder *d, const P *p, const char *want)
{
    PgoFrame f;
    Err err;

    assert_false(decode(d, p, &f, &err));
    assert_int_equal(err.code, EC_FORMAT);
    if (strstr(err.msg, want) == NULL)
        fail_msg("error \"%s\" does not contain \"%s\"", err.msg, want);
}

static void
enter_stream(PgoDecoder *d)
{
    PgoFrame f;
    P s = msg_stream_start();
    decode_ok(d, &s, &f);
    assert_true(pgo_decoder_in_stream(d));
}

static void
assert_value(const PgoValue *v, char kind, const char *data)
{
    assert_int_equal(v->kind, kind);
    if (data == NULL)
    {
        assert_null(v->data);
        assert_int_equal(v->len, 0);
        return;
    }
    assert_int_equal(v->len, strlen(data));
    assert_memory_equal(v->data, data, v->len);
}

static void
test_begin_commit_origin(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P b = msg_begin(), c = msg_commit(), o = msg_origin();
    (void) state;

    decode_ok(d, &b, &f);
    assert_int_equal(f.kind, 'w');
    assert_int_equal(f.data_start, FRAME_LSN);
    assert_int_equal(f.wal_end, FRAME_LSN);
    assert_int_equal(f.send_time_us, UNIX_TIME);
    assert_int_equal(f.msg.type, 'B');
    assert_int_equal(f.msg.final_lsn, 0x1000);
    assert_int_equal(f.msg.commit_time_us, UNIX_TIME);
    assert_int_equal(f.msg.xid, 731);
    assert_false(f.msg.has_xid);

    decode_ok(d, &c, &f);
    assert_int_equal(f.msg.type, 'C');
    assert_int_equal(f.msg.commit_lsn, 0x1000);
    assert_int_equal(f.msg.end_lsn, 0x1030);
    assert_int_equal(f.msg.commit_time_us, UNIX_TIME);

    decode_ok(d, &o, &f);
    assert_int_equal(f.msg.type, 'O');
    assert_int_equal(f.msg.origin_lsn, 0xABCDEF);
    assert_string_equal(f.msg.origin_name, "upstream_a");

    c.b[26] = 1; /* Commit flags must be 0 */
    decode_fails(d, &c, "pgoutput: bad Commit message at 0/16B3F00: flags 0x01 at offset 1");
    pgo_decoder_free(d);
}

static void
test_relation_and_type(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P r = msg_relation(), y = msg_type();
    (void) state;

    decode_ok(d, &r, &f);
    assert_int_equal(f.msg.type, 'R');
    assert_int_equal(f.msg.relid, 16384);
    assert_string_equal(f.msg.nspname, "pg_catalog");
    assert_string_equal(f.msg.relname, "orders");
    assert_int_equal(f.msg.replident, 'd');
    assert_int_equal(f.msg.ncols, 2);
    assert_true(f.msg.cols[0].key);
    assert_string_equal(f.msg.cols[0].name, "id");
    assert_int_equal(f.msg.cols[0].type_oid, 20);
    assert_int_equal(f.msg.cols[0].typmod, -1);
    assert_false(f.msg.cols[1].key);
    assert_string_equal(f.msg.cols[1].name, "amount");
    assert_int_equal(f.msg.cols[1].type_oid, 1700);
    assert_int_equal(f.msg.cols[1].typmod, 655366);

    decode_ok(d, &y, &f);
    assert_int_equal(f.msg.type, 'Y');
    assert_int_equal(f.msg.type_oid, 16407);
    assert_string_equal(f.msg.type_nspname, "public");
    assert_string_equal(f.msg.type_name, "mood");

    /* replica identity byte sits after "\0orders\0" */
    r.b[25 + 5 + 1 + 7] = 'x';
    decode_fails(d, &r, "unknown replica identity 'x' at offset 13");
    pgo_decoder_free(d);
}

static void
test_too_many_columns_is_an_error(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    P r = xlog('R'), i = xlog('I');
    (void) state;

    put32(&r, 1);
    putstr(&r, "s");
    putstr(&r, "t");
    put8(&r, 'f');
    put16(&r, PGO_MAX_COLUMNS + 1);
    decode_fails(d, &r, "1665 columns at offset 10 (at most 1664)");

    put32(&i, 1);
    put8(&i, 'N');
    put16(&i, 0xFFFF);
    decode_fails(d, &i, "65535 columns at offset 6");
    pgo_decoder_free(d);
}

static void
test_insert_values_of_every_kind(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P i = msg_insert();
    (void) state;

    decode_ok(d, &i, &f);
    assert_int_equal(f.msg.type, 'I');
    assert_int_equal(f.msg.relid, 16384);
    assert_int_equal(f.msg.old_kind, 0);
    assert_int_equal(f.msg.new_tuple.ncols, 4);
    assert_value(&f.msg.new_tuple.values[0], 't', "42");
    assert_value(&f.msg.new_tuple.values[1], 'n', NULL);
    assert_value(&f.msg.new_tuple.values[2], 'u', NULL);
    assert_value(&f.msg.new_tuple.values[3], 'b', "\x01\x02");
    /* the text borrows the payload: not NUL-terminated, followed by the next kind byte */
    assert_ptr_equal(f.msg.new_tuple.values[0].data, (const char *) i.b + 25 + 1 + 4 + 1 + 2 + 1 + 4);

    i.b[25 + 1 + 4 + 1 + 2 + 1 + 4 + 2] = 'x'; /* the 'n' after the text value */
    decode_fails(d, &i, "pgoutput: bad Insert message at 0/16B3F00: unknown column kind 'x' at offset 15");
    i = msg_insert();
    i.b[25 + 5] = 'K';
    decode_fails(d, &i, "unknown tuple marker 'K' at offset 5");
    pgo_decoder_free(d);
}

static void
test_update_forms(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P k = msg_update_k(), n = msg_update_n();
    (void) state;

    decode_ok(d, &k, &f);
    assert_int_equal(f.msg.type, 'U');
    assert_int_equal(f.msg.old_kind, 'K');
    assert_int_equal(f.msg.old_tuple.ncols, 2);
    assert_value(&f.msg.old_tuple.values[0], 't', "7");
    assert_value(&f.msg.old_tuple.values[1], 'n', NULL);
    assert_int_equal(f.msg.new_tuple.ncols, 2);
    assert_value(&f.msg.new_tuple.values[0], 't', "8");
    assert_value(&f.msg.new_tuple.values[1], 'u', NULL);

    k.b[25 + 5] = 'O';
    decode_ok(d, &k, &f);
    assert_int_equal(f.msg.old_kind, 'O');
    assert_value(&f.msg.old_tuple.values[0], 't', "7");
    assert_value(&f.msg.new_tuple.values[0], 't', "8");

    decode_ok(d, &n, &f);
    assert_int_equal(f.msg.old_kind, 0);
    assert_int_equal(f.msg.old_tuple.ncols, 0);
    assert_int_equal(f.msg.new_tuple.ncols, 1);
    assert_value(&f.msg.new_tuple.values[0], 't', "hello");

    /* the 'N' between old and new tuple is required */
    k = msg_update_k();
    k.b[25 + 5 + 3 + 6 + 1] = 'X';
    decode_fails(d, &k, "unknown new tuple marker 'X' at offset 15");
    pgo_decoder_free(d);
}

static void
test_update_error_names_lsn_type_and_offset(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P u = xlog('U');
    Err err;
    (void) state;

    put32(&u, 16384);
    put8(&u, 'N');
    put16(&u, 2);
    putval(&u, 't', "123456789"); /* offsets 8..21 */
    put8(&u, 't');                /* offset 22, its length at 23 */
    put16(&u, 0);
    assert_false(pgo_decode(d, (const char *) u.b, u.n, &f, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_string_equal(err.msg, "pgoutput: truncated Update message at 0/16B3F00 (needs 4 bytes "
                                 "at offset 23, has 2)");
    pgo_decoder_free(d);
}

static void
test_delete_and_truncate(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P del = msg_delete_o(), t = msg_truncate();
    (void) state;

    decode_ok(d, &del, &f);
    assert_int_equal(f.msg.type, 'D');
    assert_int_equal(f.msg.relid, 16384);
    assert_int_equal(f.msg.old_kind, 'O');
    assert_value(&f.msg.old_tuple.values[1], 't', "12.50");
    assert_int_equal(f.msg.new_tuple.ncols, 0);
    del.b[25 + 5] = 'K';
    decode_ok(d, &del, &f);
    assert_int_equal(f.msg.old_kind, 'K');
    del.b[25 + 5] = 'N';
    decode_fails(d, &del, "unknown tuple marker 'N' at offset 5 (expected one of KO)");

    decode_ok(d, &t, &f);
    assert_int_equal(f.msg.type, 'T');
    assert_int_equal(f.msg.nrelids, 2);
    assert_int_equal(f.msg.truncate_flags, 3);
    assert_int_equal(f.msg.relids[0], 16384);
    assert_int_equal(f.msg.relids[1], 16390);
    t.b[25 + 5] = 4;
    decode_fails(d, &t, "flags 0x04 at offset 5");
    t = msg_truncate();
    t.b[25 + 1] = 0x40; /* 2^30 relations in 8 bytes */
    decode_fails(d, &t, "pgoutput: truncated Truncate message at 0/16B3F00 (needs 4294967304 bytes at offset 6, has 8)");
    pgo_decoder_free(d);
}

static void
test_logical_message(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P m = msg_message();
    (void) state;

    decode_ok(d, &m, &f);
    assert_int_equal(f.msg.type, 'M');
    assert_true(f.msg.transactional);
    assert_int_equal(f.msg.message_lsn, 0x2000);
    assert_string_equal(f.msg.prefix, "v7fill");
    assert_int_equal(f.msg.content_len, 3);
    assert_memory_equal(f.msg.content, "a\0b", 3);
    m.b[25 + 1] = 0;
    decode_ok(d, &m, &f);
    assert_false(f.msg.transactional);
    pgo_decoder_free(d);
}

static void
test_stream_block_and_its_xid_fields(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P s = msg_stream_start(), e = msg_stream_stop(), c = msg_stream_commit(),
      a = msg_stream_abort(), si = msg_stream_insert(), sr = msg_stream_relation(),
      b = msg_begin(), i = msg_insert(), k = keepalive(0), o = msg_origin();
    (void) state;

    decode_ok(d, &s, &f);
    assert_int_equal(f.msg.type, 'S');
    assert_int_equal(f.msg.xid, 900);
    assert_true(f.msg.first_segment);
    assert_true(pgo_decoder_in_stream(d));

    /* the first block of a transaction with a replication origin: Origin, no xid */
    decode_ok(d, &o, &f);
    assert_int_equal(f.msg.type, 'O');
    assert_false(f.msg.has_xid);
    assert_string_equal(f.msg.origin_name, "upstream_a");
    decode_ok(d, &sr, &f);
    assert_true(f.msg.has_xid);
    assert_int_equal(f.msg.xid, 901);
    assert_string_equal(f.msg.relname, "orders");
    decode_ok(d, &si, &f);
    assert_true(f.msg.has_xid);
    assert_int_equal(f.msg.xid, 901);
    assert_int_equal(f.msg.relid, 16384);
    assert_value(&f.msg.new_tuple.values[0], 't', "42");
    decode_ok(d, &k, &f); /* keepalives may arrive inside a block */
    assert_true(pgo_decoder_in_stream(d));

    /* an Insert without its xid inside a block is misread, and fails */
    decode_fails(d, &i, "Insert message at 0/16B3F00");
    assert_true(pgo_decoder_in_stream(d)); /* a failed decode changes nothing */
    decode_fails(d, &b, "pgoutput: Begin message at 0/16B3F00 inside a Stream Start..Stop block");
    decode_fails(d, &s, "Stream Start message at 0/16B3F00 inside");
    decode_fails(d, &c, "Stream Commit message at 0/16B3F00 inside");

    decode_ok(d, &e, &f);
    assert_int_equal(f.msg.type, 'E');
    assert_false(pgo_decoder_in_stream(d));
    decode_fails(d, &e, "Stream Stop message at 0/16B3F00 outside");
    /* outside a block the xid field is absent: a streamed Insert is misread, and fails */
    decode_fails(d, &si, "pgoutput: bad Insert message at 0/16B3F00: unknown tuple marker 0x00 at offset 5");
    decode_ok(d, &i, &f);
    assert_false(f.msg.has_xid);

    decode_ok(d, &c, &f);
    assert_int_equal(f.msg.type, 'c');
    assert_int_equal(f.msg.xid, 900);
    assert_int_equal(f.msg.commit_lsn, 0x3000);
    assert_int_equal(f.msg.end_lsn, 0x3050);
    assert_int_equal(f.msg.commit_time_us, UNIX_TIME);
    decode_ok(d, &a, &f);
    assert_int_equal(f.msg.type, 'A');
    assert_int_equal(f.msg.xid, 900);
    assert_int_equal(f.msg.subxid, 901);

    s.b[25 + 5] = 0;
    decode_ok(d, &s, &f);
    assert_false(f.msg.first_segment);
    pgo_decoder_reset(d); /* after a reconnect */
    assert_false(pgo_decoder_in_stream(d));
    decode_ok(d, &i, &f);
    pgo_decoder_free(d);
}

static void
test_two_phase_and_unknown_types(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    const char *two_phase = "bPKrp";
    PgoFrame f;
    Err err;
    P empty = {.n = 0}, frame = {.n = 0};
    (void) state;

    for (const char *t = two_phase; *t; t++)
    {
        P p = xlog(*t);
        put64(&p, 0);
        decode_fails(d, &p, "message at 0/16B3F00 is not supported");
        assert_false(decode(d, &p, &f, &err));
        assert_string_not_equal(err.hint, "");
    }
    {
        P p = xlog('P');
        decode_fails(d, &p, "pgoutput: two-phase Prepare message at 0/16B3F00 is not supported");
        p = xlog('Z');
        decode_fails(d, &p, "pgoutput: unknown message type 'Z' at 0/16B3F00");
        p = xlog(0);
        decode_fails(d, &p, "pgoutput: unknown message type 0x00 at 0/16B3F00");
        p = xlog('B');
        p.n = 25;
        decode_fails(d, &p, "pgoutput: truncated pgoutput message at 0/16B3F00 (needs 1 bytes at offset 0, has 0)");
    }
    decode_fails(d, &empty, "pgoutput: truncated replication frame (needs 1 bytes at offset 0, has 0)");
    put8(&frame, 'x');
    decode_fails(d, &frame, "pgoutput: unknown replication frame type 'x' (expected 'w' or 'k')");
    pgo_decoder_free(d);
}

static void
test_keepalive(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P k = keepalive(1);
    (void) state;

    decode_ok(d, &k, &f);
    assert_int_equal(f.kind, 'k');
    assert_int_equal(f.wal_end, UINT64_C(0x16B374D848));
    assert_int_equal(f.send_time_us, UNIX_TIME);
    assert_true(f.reply_requested);
    k = keepalive(0);
    decode_ok(d, &k, &f);
    assert_false(f.reply_requested);
    put8(&k, 0);
    decode_fails(d, &k, "pgoutput: 1 trailing bytes after a primary keepalive (18 bytes)");
    k.n = 17;
    decode_fails(d, &k, "pgoutput: truncated primary keepalive (needs 1 bytes at offset 17, has 0)");
    pgo_decoder_free(d);
}

static void
test_timestamps_saturate(void **state)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    P k = {.n = 0};
    (void) state;

    put8(&k, 'k');
    put64(&k, 0);
    put64(&k, (uint64_t) INT64_MAX); /* 'infinity' */
    put8(&k, 0);
    decode_ok(d, &k, &f);
    assert_int_equal(f.send_time_us, INT64_MAX);
    pgo_decoder_free(d);
}

typedef struct Sample
{
    const char *name;
    P (*build)(void);
    bool in_stream;
} Sample;

static const Sample samples[] = {
    {"begin", msg_begin, false},
    {"commit", msg_commit, false},
    {"origin", msg_origin, false},
    {"relation", msg_relation, false},
    {"type", msg_type, false},
    {"insert", msg_insert, false},
    {"update K", msg_update_k, false},
    {"update N", msg_update_n, false},
    {"delete O", msg_delete_o, false},
    {"truncate", msg_truncate, false},
    {"message", msg_message, false},
    {"stream start", msg_stream_start, false},
    {"stream stop", msg_stream_stop, true},
    {"stream commit", msg_stream_commit, false},
    {"stream abort", msg_stream_abort, false},
    {"stream insert", msg_stream_insert, true},
    {"stream relation", msg_stream_relation, true},
    {"origin in a stream block", msg_origin, true},
};

static P
keepalive_sample(void)
{
    return keepalive(1);
}

static void
check_every_prefix_and_one_byte_more(const char *name, P full, bool in_stream)
{
    PgoDecoder *d = pgo_decoder_new();
    PgoFrame f;
    Err err;

    if (in_stream)
        enter_stream(d);
    for (size_t len = 0; len < full.n; len++)
    {
        /* a copy of exactly len bytes, so that ASan sees any read past it */
        char *copy = malloc(len ? len : 1);
        memcpy(copy, full.b, len);
        err_clear(&err);
        if (pgo_decode(d, copy, len, &f, &err))
            fail_msg("%s cut to %zu of %zu bytes was accepted", name, len, full.n);
        assert_int_equal(err.code, EC_FORMAT);
        if (strncmp(err.msg, "pgoutput: ", 10) != 0)
            fail_msg("%s cut to %zu: \"%s\"", name, len, err.msg);
        assert_int_equal(pgo_decoder_in_stream(d), in_stream);
        free(copy);
    }
    put8(&full, 0);
    decode_fails(d, &full, "trailing bytes after");
    assert_int_equal(pgo_decoder_in_stream(d), in_stream);
    full.n--;
    decode_ok(d, &full, &f);
    pgo_decoder_free(d);
}

static void
test_every_truncation_fails_cleanly(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        check_every_prefix_and_one_byte_more(samples[i].name, samples[i].build(),
                                             samples[i].in_stream);
    check_every_prefix_and_one_byte_more("keepalive", keepalive_sample(), false);
}

static void
test_status_update_bytes(void **state)
{
    uint8_t out[PGO_STATUS_UPDATE_SIZE];
    const uint8_t want[PGO_STATUS_UPDATE_SIZE] = {
        'r',
        0x00, 0x00, 0x00, 0x16, 0xB3, 0x74, 0xD8, 0x48, /* write */
        0x00, 0x00, 0x00, 0x00, 0x01, 0x6B, 0x3F, 0x00, /* flush */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* apply */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x0F, 0x42, 0x40, /* 1 s after 2000-01-01 */
        1,
    };
    (void) state;

    pgo_status_update(out, UINT64_C(0x16B374D848), FRAME_LSN, 0, UNIX_TIME, true);
    assert_memory_equal(out, want, sizeof want);
    pgo_status_update(out, 0, 0, 0, PGO_EPOCH_OFFSET_US - 1, false);
    for (int i = 25; i < 33; i++)
        assert_int_equal(out[i], 0xFF); /* -1 µs */
    assert_int_equal(out[33], 0);
}

static void
test_lsn_text(void **state)
{
    char text[PGO_LSN_TEXT_SIZE];
    uint64_t lsn = 1;
    const char *bad[] = {"", "/", "1/", "/1", "123456789/0", "0/123456789", "1/2x",
                         "1//2", "g/1", " 1/2", "1/2 ", "12"};
    (void) state;

    pgo_lsn_format(UINT64_C(0x16B374D848), text);
    assert_string_equal(text, "16/B374D848");
    pgo_lsn_format(0, text);
    assert_string_equal(text, "0/0");
    pgo_lsn_format(UINT64_MAX, text);
    assert_string_equal(text, "FFFFFFFF/FFFFFFFF");
    assert_true(pgo_lsn_parse("16/b374d848", &lsn));
    assert_int_equal(lsn, UINT64_C(0x16B374D848));
    assert_true(pgo_lsn_parse("FFFFFFFF/FFFFFFFF", &lsn));
    assert_int_equal(lsn, UINT64_MAX);
    assert_true(pgo_lsn_parse("0/0", &lsn));
    assert_int_equal(lsn, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (pgo_lsn_parse(bad[i], &lsn))
            fail_msg("\"%s\" was accepted", bad[i]);
    assert_false(pgo_lsn_parse(NULL, &lsn));
}

/* ---- the source (source_pgoutput.c), fed frames through cfg.recv ---- */

typedef struct Feed
{
    P frames[16];
    size_t n, next;
    int idle_calls;          /* recv with nothing left: the source waits for more */
} Feed;

static void
feed_txn(Feed *f, uint64_t commit, const char *id, const char *note)
{
    P *b = &f->frames[f->n++], *i = &f->frames[f->n++], *c = &f->frames[f->n++];

    *b = xlog_at('B', commit - 0x10);
    put64(b, commit);
    put64(b, (uint64_t) PG_TIME);
    put32(b, 731);
    *i = xlog_at('I', commit - 0x8);
    put32(i, 16390);
    put8(i, 'N');
    put16(i, 2);
    putval(i, 't', id);
    putval(i, 't', note);
    *c = xlog_at('C', commit);
    put8(c, 0);
    put64(c, commit);
    put64(c, commit + 0x8);
    put64(c, (uint64_t) PG_TIME);
}

static bool
feed_recv(void *ctx, int timeout_ms, char **buf, int *len, Err *err)
{
    Feed *f = ctx;
    P *p;

    (void) timeout_ms;
    if (f->next == f->n)
    {
        /* The test's frames are all read: the source must have ended. */
        if (++f->idle_calls > 100)
            return err_set(err, EC_INTERNAL, "the source kept waiting after its last frame");
        *buf = NULL;
        *len = 0;
        return true;
    }
    p = &f->frames[f->next++];
    *buf = malloc(p->n);
    assert_non_null(*buf);
    memcpy(*buf, p->b, p->n);
    *len = (int) p->n;
    return true;
}

typedef struct Hook
{
    int calls;
    uint64_t to;             /* where its first call moves the stop (0: leaves it) */
    bool repeat;             /* cfg.caught_up_repeat */
} Hook;

static bool
hook_caught_up(void *ctx, uint64_t *stop_lsn, Err *err)
{
    Hook *h = ctx;

    (void) err;
    h->calls++;
    if (h->calls == 1 && h->to > *stop_lsn)
        *stop_lsn = h->to;
    return true;
}

/* Reads the source to its end: the ids of the inserts handed out, in order
 * ("1,2"), each boundary committed as the owner would. */
static void
read_all(Feed *f, Hook *h, char *ids, size_t size)
{
    static const char *const cols[] = {"id", "note"};
    PgoSourceConfig cfg;
    Source *src = NULL;
    Err err = {0};

    memset(&cfg, 0, sizeof cfg);
    cfg.recv = feed_recv;
    cfg.recv_ctx = f;
    cfg.schema = "public";
    cfg.table = "t";
    cfg.columns = cols;
    cfg.ncolumns = 2;
    cfg.resume_lsn = 0x20;
    cfg.stop_lsn = 0x100;
    cfg.stop_before = true;
    cfg.group_rows = 1;
    cfg.group_ms = 1000;
    cfg.on_caught_up = h ? hook_caught_up : NULL;
    cfg.caught_up_repeat = h && h->repeat;
    cfg.ctx = h;
    ids[0] = '\0';
    assert_true(source_pgoutput_open(&cfg, &src, &err));
    for (;;)
    {
        Record rec;
        bool eof = false;
        SourcePosition pos;

        assert_true(source_next(src, &rec, &eof, &err));
        if (eof)
            break;
        if (rec.op == REC_INSERT)
        {
            assert_int_equal(rec.nfields, 2);
            (void) snprintf(ids + strlen(ids), size - strlen(ids), "%s%.*s", ids[0] ? "," : "",
                            (int) rec.fields[0].len, rec.fields[0].data);
        }
        else if (rec.op == REC_BOUNDARY)
        {
            src->ops->position(src, &pos);
            source_pgoutput_committed(src, pos.lsn);
        }
    }
    source_close(src);
}

static void
feed_init(Feed *f)
{
    P *r, *k;

    memset(f, 0, sizeof *f);
    r = &f->frames[f->n++];
    *r = xlog_at('R', 0x30);
    put32(r, 16390);
    putstr(r, "public");
    putstr(r, "t");
    put8(r, 'd');
    put16(r, 2);
    put8(r, 1);
    putstr(r, "id");
    put32(r, 23);
    put32(r, UINT32_MAX);
    put8(r, 0);
    putstr(r, "note");
    put32(r, 25);
    put32(r, UINT32_MAX);
    feed_txn(f, 0x50, "1", "a");   /* before the stop (0x100) */
    feed_txn(f, 0x150, "2", "b");  /* commits past it */
    feed_txn(f, 0x250, "3", "c");
    k = &f->frames[f->n++];
    put8(k, 'k');
    put64(k, 0x2000);              /* the server's end */
    put64(k, (uint64_t) PG_TIME);
    put8(k, 0);
}

/* stop_before: a transaction committing at or past the stop is not handed
 * out, and the source ends at its begin. */
static void
test_source_stops_before_a_later_commit(void **state)
{
    Feed f;
    char ids[64];

    (void) state;
    feed_init(&f);
    read_all(&f, NULL, ids, sizeof ids);
    assert_string_equal(ids, "1");
}

/* on_caught_up at the stop, its first call moving it to `to` (0: not
 * moving it), called `calls` times in all: the ids handed out are want. */
static void
hook_case(uint64_t to, bool repeat, int calls, const char *want)
{
    Feed f;
    Hook h = {0, to, repeat};
    char ids[64];

    feed_init(&f);
    read_all(&f, &h, ids, sizeof ids);
    assert_int_equal(h.calls, calls);
    assert_string_equal(ids, want);
}

/* ... unless on_caught_up moves the stop past its commit: then it is handed
 * out whole, from its begin (which arrived before the hook was called). */
static void
test_source_caught_up_hook_releases_the_held_begin(void **state)
{
    (void) state;
    hook_case(0x1000, false, 1, "1,2,3");
}

/* A hook that leaves the stop where it is: the source still ends there,
 * without reading the held transaction's changes. */
static void
test_source_caught_up_hook_keeping_the_stop(void **state)
{
    (void) state;
    hook_case(0, false, 1, "1");
}

/* caught_up_repeat: called again at the stop it moved to; that call leaves
 * it there, so the source ends there, the transaction past it not handed
 * out (without repeat the source reads on past the moved stop and ends once
 * the server's position is past it: the same records, one call). */
static void
test_source_caught_up_hook_again_at_each_stop(void **state)
{
    (void) state;
    hook_case(0x200, true, 2, "1,2");
    hook_case(0x200, false, 1, "1,2");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_commit_origin),
        cmocka_unit_test(test_relation_and_type),
        cmocka_unit_test(test_too_many_columns_is_an_error),
        cmocka_unit_test(test_insert_values_of_every_kind),
        cmocka_unit_test(test_update_forms),
        cmocka_unit_test(test_update_error_names_lsn_type_and_offset),
        cmocka_unit_test(test_delete_and_truncate),
        cmocka_unit_test(test_logical_message),
        cmocka_unit_test(test_stream_block_and_its_xid_fields),
        cmocka_unit_test(test_two_phase_and_unknown_types),
        cmocka_unit_test(test_keepalive),
        cmocka_unit_test(test_timestamps_saturate),
        cmocka_unit_test(test_every_truncation_fails_cleanly),
        cmocka_unit_test(test_status_update_bytes),
        cmocka_unit_test(test_lsn_text),
        cmocka_unit_test(test_source_stops_before_a_later_commit),
        cmocka_unit_test(test_source_caught_up_hook_releases_the_held_begin),
        cmocka_unit_test(test_source_caught_up_hook_keeping_the_stop),
        cmocka_unit_test(test_source_caught_up_hook_again_at_each_stop),
    };
    return cmocka_run_group_tests_name("pgoutput", tests, NULL, NULL);
}
