/*
 * Unit tests for the pure parts of migrate: the publication/slot name made
 * from --into (a slot's alphabet, at most 63 bytes, distinct for distinct
 * tables), the phase names and their parse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "v7fill/migrate.h"

static void
slot_alphabet(const char *name)
{
    assert_true(strlen(name) > 0 && strlen(name) <= 63);
    for (const char *p = name; *p; p++)
        assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_');
}

static void
test_plain_name_kept(void **state)
{
    char out[64];

    (void) state;
    migrate_object_name("public", "orders_v7", out);
    assert_string_equal(out, "v7fill_orders_v7");
}

static void
test_odd_names_hashed(void **state)
{
    char a[64], b[64], c[64];

    (void) state;
    migrate_object_name("public", "Orders V7", a);
    migrate_object_name("public", "orders v7", b);
    migrate_object_name("other", "Orders V7", c);
    slot_alphabet(a);
    slot_alphabet(b);
    slot_alphabet(c);
    assert_memory_equal(a, "v7fill_orders_v7_", 17);
    assert_string_not_equal(a, b);
    assert_string_not_equal(a, c);
}

static void
test_long_names_fit(void **state)
{
    char a[64], b[64];
    const char *t1 = "a_table_name_that_is_exactly_sixty_three_bytes_long_in_total_x1";
    const char *t2 = "a_table_name_that_is_exactly_sixty_three_bytes_long_in_total_x2";

    (void) state;
    assert_int_equal(strlen(t1), 63);
    migrate_object_name("public", t1, a);
    migrate_object_name("public", t2, b);
    slot_alphabet(a);
    slot_alphabet(b);
    assert_string_not_equal(a, b);
}

static void
test_legacy_name_cut_on_characters(void **state)
{
    char out[64];
    /* 55 ASCII bytes, then "é" (2 bytes): byte 56 is the second byte of "é" */
    const char *t = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabc\xc3\xa9xyz";

    (void) state;
    assert_int_equal(migrate_name_cut("orders", 56), 6);
    assert_int_equal(migrate_name_cut(t, 56), 55);
    assert_int_equal(migrate_name_cut(t, 57), 57);
    migrate_legacy_name(t, out);
    assert_string_equal(out, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabc_legacy");
    migrate_legacy_name("orders", out);
    assert_string_equal(out, "orders_legacy");
    /* a 4-byte character across the cut */
    assert_int_equal(migrate_name_cut("ab\xf0\x9f\x98\x80", 4), 2);
}

static void
test_phases_round_trip(void **state)
{
    MigratePhase p;

    (void) state;
    for (int i = MIGRATE_PHASE_NEW; i <= MIGRATE_PHASE_REVERSE; i++)
    {
        assert_true(migrate_phase_parse(migrate_phase_name((MigratePhase) i), &p));
        assert_int_equal(p, i);
    }
    assert_string_equal(migrate_phase_name(MIGRATE_PHASE_FOLLOW), "follow");
    assert_false(migrate_phase_parse("copying", &p));
    assert_string_equal(migrate_phase_name((MigratePhase) 42), "unknown");
}

/* The tables a migration reads: as named before the switch; after it the legacy
 * table and the UUIDv7 table under the source's name (one database) or its own (two). */
static void
test_live_names(void **state)
{
    MigrateSpec s;
    MigrateLiveNames n;

    (void) state;
    memset(&s, 0, sizeof s);
    strcpy(s.from_schema, "app");
    strcpy(s.from_table, "orders");
    strcpy(s.into_schema, "new");
    strcpy(s.into_table, "orders_v7");
    s.phase = MIGRATE_PHASE_FOLLOW;
    migrate_live_names(&s, &n);
    assert_string_equal(n.src_schema, "app");
    assert_string_equal(n.src_table, "orders");
    assert_string_equal(n.new_schema, "new");
    assert_string_equal(n.new_table, "orders_v7");

    s.phase = MIGRATE_PHASE_SWITCHED;
    strcpy(s.legacy_table, "orders_legacy");
    migrate_live_names(&s, &n);
    assert_string_equal(n.src_schema, "app");
    assert_string_equal(n.src_table, "orders_legacy");
    assert_string_equal(n.new_schema, "app");
    assert_string_equal(n.new_table, "orders");

    s.phase = MIGRATE_PHASE_REVERSE;
    strcpy(s.source_conninfo, "host=legacy dbname=shop");
    migrate_live_names(&s, &n);
    assert_string_equal(n.src_table, "orders_legacy");
    assert_string_equal(n.new_schema, "new");
    assert_string_equal(n.new_table, "orders_v7");

    /* Switched back: phase follow again, no legacy table. */
    s.phase = MIGRATE_PHASE_FOLLOW;
    s.legacy_table[0] = '\0';
    s.source_conninfo[0] = '\0';
    migrate_live_names(&s, &n);
    assert_string_equal(n.src_table, "orders");
    assert_string_equal(n.new_table, "orders_v7");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_name_kept),
        cmocka_unit_test(test_odd_names_hashed),
        cmocka_unit_test(test_long_names_fit),
        cmocka_unit_test(test_legacy_name_cut_on_characters),
        cmocka_unit_test(test_phases_round_trip),
        cmocka_unit_test(test_live_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
