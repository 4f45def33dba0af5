/*
 * The waves a batch's row operations are applied in (sink_waves.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/sink_waves.h"
#include "v7fill/source.h"

#define MAXROWS 64

typedef struct Rows
{
    BatchRow r[MAXROWS];
    size_t n;
} Rows;

static void
key(uint8_t out[REF_HASH_LEN], unsigned k)
{
    memset(out, 0, REF_HASH_LEN);
    out[0] = (uint8_t) (k >> 8);
    out[1] = (uint8_t) k;
    out[15] = 0x5a;
}

static BatchRow *
add(Rows *rs, uint8_t op, unsigned k)
{
    BatchRow *r = &rs->r[rs->n++];

    memset(r, 0, sizeof *r);
    r->op = op;
    r->outcome = ROW_PENDING;
    key(r->hash, k);
    return r;
}

static BatchRow *
add_move(Rows *rs, unsigned from, unsigned to)
{
    BatchRow *r = add(rs, REC_UPDATE, to);

    r->has_old = true;
    key(r->old_hash, from);
    return r;
}

/* The wave (1-based) of row i, 0 when it takes no part. */
static size_t
wave_of(const Waves *w, size_t i)
{
    for (size_t v = 0; v < w->nwaves; v++)
        for (size_t j = w->start[v]; j < w->start[v + 1]; j++)
            if (w->order[j] == i)
                return v + 1;
    return 0;
}

static void
test_distinct_rows_are_one_wave_in_reading_order(void **state)
{
    Rows rs = {0};
    Waves w;

    (void) state;
    waves_init(&w);
    add(&rs, REC_INSERT, 1);
    add(&rs, REC_UPDATE, 2);
    add(&rs, REC_DELETE, 3);
    add(&rs, REC_INSERT, 4);
    add(&rs, REC_UPDATE, 5);
    assert_int_equal(1, waves_compute(&w, rs.r, 0, rs.n));
    assert_int_equal(5, w.nrows);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(i, w.order[i]);
    waves_free(&w);
}

static void
test_a_reference_touched_again_goes_one_wave_later(void **state)
{
    Rows rs = {0};
    Waves w;

    (void) state;
    waves_init(&w);
    add(&rs, REC_INSERT, 7);  /* 0: wave 1 */
    add(&rs, REC_UPDATE, 8);  /* 1: wave 1 */
    add(&rs, REC_UPDATE, 7);  /* 2: wave 2 */
    add(&rs, REC_DELETE, 7);  /* 3: wave 3 */
    add(&rs, REC_INSERT, 9);  /* 4: wave 1 */
    add(&rs, REC_INSERT, 7);  /* 5: wave 4 */
    add(&rs, REC_DELETE, 8);  /* 6: wave 2 */
    assert_int_equal(4, waves_compute(&w, rs.r, 0, rs.n));
    assert_int_equal(1, wave_of(&w, 0));
    assert_int_equal(1, wave_of(&w, 1));
    assert_int_equal(2, wave_of(&w, 2));
    assert_int_equal(3, wave_of(&w, 3));
    assert_int_equal(1, wave_of(&w, 4));
    assert_int_equal(4, wave_of(&w, 5));
    assert_int_equal(2, wave_of(&w, 6));
    /* Reading order within a wave, waves one after the other. */
    assert_int_equal(0, w.order[0]);
    assert_int_equal(1, w.order[1]);
    assert_int_equal(4, w.order[2]);
    assert_int_equal(2, w.order[3]);
    assert_int_equal(6, w.order[4]);
    assert_int_equal(3, w.order[5]);
    assert_int_equal(5, w.order[6]);
    assert_int_equal(7, w.start[4]);
    waves_free(&w);
}

static void
test_a_key_change_orders_both_references(void **state)
{
    Rows rs = {0};
    Waves w;

    (void) state;
    waves_init(&w);
    add(&rs, REC_UPDATE, 1);   /* 0: wave 1 */
    add_move(&rs, 1, 2);       /* 1: after row 0 (its old key): wave 2 */
    add(&rs, REC_INSERT, 1);   /* 2: the old key again: wave 3 */
    add(&rs, REC_UPDATE, 2);   /* 3: the new key: wave 3 */
    add(&rs, REC_DELETE, 3);   /* 4: wave 1 */
    add_move(&rs, 3, 4);       /* 5: wave 2 */
    assert_int_equal(3, waves_compute(&w, rs.r, 0, rs.n));
    assert_int_equal(1, wave_of(&w, 0));
    assert_int_equal(2, wave_of(&w, 1));
    assert_int_equal(3, wave_of(&w, 2));
    assert_int_equal(3, wave_of(&w, 3));
    assert_int_equal(1, wave_of(&w, 4));
    assert_int_equal(2, wave_of(&w, 5));
    waves_free(&w);
}

static void
test_a_given_id_is_a_key_apart_from_references(void **state)
{
    Rows rs = {0};
    Waves w;
    BatchRow *r;

    (void) state;
    waves_init(&w);
    r = add(&rs, REC_INSERT, 1);
    r->id_given = true;
    memset(r->id.b, 0x11, sizeof r->id.b);
    r = add(&rs, REC_INSERT, 2); /* another reference, the same id: after it */
    r->id_given = true;
    memset(r->id.b, 0x11, sizeof r->id.b);
    r = add(&rs, REC_INSERT, 3); /* an id equal to row 0's hash bytes: not the same key */
    r->id_given = true;
    key(r->id.b, 1);
    r = add(&rs, REC_INSERT, 4); /* the same id, minted (not given): no key */
    memset(r->id.b, 0x11, sizeof r->id.b);
    assert_int_equal(2, waves_compute(&w, rs.r, 0, rs.n));
    assert_int_equal(1, wave_of(&w, 0));
    assert_int_equal(2, wave_of(&w, 1));
    assert_int_equal(1, wave_of(&w, 2));
    assert_int_equal(1, wave_of(&w, 3));
    waves_free(&w);
}

static void
test_decided_rows_and_rows_outside_the_range_take_no_part(void **state)
{
    Rows rs = {0};
    Waves w;
    BatchRow *r;

    (void) state;
    waves_init(&w);
    add(&rs, REC_UPDATE, 5);            /* 0: outside the range */
    add(&rs, REC_INSERT, 1);            /* 1: wave 1 */
    r = add(&rs, REC_INSERT, 1);        /* 2: a repeat waiting behind row 1 */
    r->outcome = ROW_DUPLICATE;
    r->repeat = true;
    r = add(&rs, REC_UPDATE, 1);        /* 3: rejected before the sink */
    r->outcome = ROW_REJECTED;
    add(&rs, REC_DELETE, 5);            /* 4: wave 1 (row 0 is not in the range) */
    add(&rs, REC_DELETE, 1);            /* 5: wave 2 */
    assert_int_equal(2, waves_compute(&w, rs.r, 1, rs.n));
    assert_int_equal(3, w.nrows);
    assert_int_equal(1, wave_of(&w, 1));
    assert_int_equal(0, wave_of(&w, 0));
    assert_int_equal(0, wave_of(&w, 2));
    assert_int_equal(0, wave_of(&w, 3));
    assert_int_equal(1, wave_of(&w, 4));
    assert_int_equal(2, wave_of(&w, 5));
    /* An empty range, then the same storage again. */
    assert_int_equal(0, waves_compute(&w, rs.r, 3, 3));
    assert_int_equal(0, w.nrows);
    assert_int_equal(2, waves_compute(&w, rs.r, 1, rs.n));
    waves_free(&w);
}

static void
test_one_row_updated_many_times_is_as_many_waves(void **state)
{
    Rows rs = {0};
    Waves w;

    (void) state;
    waves_init(&w);
    for (unsigned i = 0; i < MAXROWS / 2; i++)
    {
        add(&rs, REC_UPDATE, 42);
        add(&rs, REC_UPDATE, 100 + i);
    }
    assert_int_equal(MAXROWS / 2, waves_compute(&w, rs.r, 0, rs.n));
    assert_int_equal(MAXROWS / 2 + 1, w.start[1]); /* every other row, and the first 42 */
    for (size_t v = 1; v < MAXROWS / 2; v++)
        assert_int_equal(1, w.start[v + 1] - w.start[v]);
    waves_free(&w);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_rows_are_one_wave_in_reading_order),
        cmocka_unit_test(test_a_reference_touched_again_goes_one_wave_later),
        cmocka_unit_test(test_a_key_change_orders_both_references),
        cmocka_unit_test(test_a_given_id_is_a_key_apart_from_references),
        cmocka_unit_test(test_decided_rows_and_rows_outside_the_range_take_no_part),
        cmocka_unit_test(test_one_row_updated_many_times_is_as_many_waves),
    };
    return cmocka_run_group_tests_name("sink_waves", tests, NULL, NULL);
}
