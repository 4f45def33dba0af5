/*
 * Source references: the default encoding and templates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "v7fill/mem.h"
#include "v7fill/source_csv.h"
#include "v7fill/srcref.h"

static Field
text(const char *s)
{
    Field f = {s, strlen(s), false};
    return f;
}

static Field
null_field(void)
{
    Field f = {NULL, 0, true};
    return f;
}

static void
assert_buf(const Buf *b, const char *want, size_t len)
{
    assert_int_equal(b->len, len);
    assert_memory_equal(b->data, want, len);
}

static void
test_default_reference_has_the_documented_format(void **state)
{
    Field f[] = {text("abc"), text(""), null_field(), text("x,y")};
    Buf b;
    (void) state;

    buf_init(&b);
    srcref_default(f, 4, &b);
    assert_string_equal(b.data, "3:abc,0:,N,3:x,y,");
    buf_free(&b);
}

static void
append_piece(void *ctx, const char *data, size_t len)
{
    buf_append(ctx, data, len);
}

/* The pieces a long record's reference is hashed in make the same text. */
static void
test_default_reference_in_pieces_is_the_same_text(void **state)
{
    Field f[] = {text("abc"), text(""), null_field(), text("x,y"), text("0123456789")};
    Buf whole;
    Buf pieces;
    (void) state;

    buf_init(&whole);
    buf_init(&pieces);
    for (size_t n = 0; n <= 5; n++)
    {
        srcref_default(f, n, &whole);
        buf_reset(&pieces);
        srcref_default_each(f, n, append_piece, &pieces);
        assert_int_equal(pieces.len, whole.len);
        assert_memory_equal(pieces.data, whole.data, whole.len);
    }
    buf_free(&whole);
    buf_free(&pieces);
}

static void
test_default_reference_tells_null_from_empty_string(void **state)
{
    Field with_null[] = {text("1"), null_field()};
    Field with_empty[] = {text("1"), text("")};
    Buf a;
    Buf b;
    (void) state;

    buf_init(&a);
    buf_init(&b);
    srcref_default(with_null, 2, &a);
    srcref_default(with_empty, 2, &b);
    assert_false(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    /* and a text "N" is not a NULL either */
    with_empty[1] = text("N");
    srcref_default(with_empty, 2, &b);
    assert_false(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    buf_free(&a);
    buf_free(&b);
}

static void
test_default_reference_keeps_field_boundaries(void **state)
{
    Field left[] = {text("a"), text("bc")};
    Field right[] = {text("ab"), text("c")};
    Field one[] = {text("a,bc")};
    /* a value that looks like an encoded field cannot fake a boundary */
    Field fake[] = {text("1:a,2:bc")};
    Buf a;
    Buf b;
    Buf c;
    Buf d;
    (void) state;

    buf_init(&a);
    buf_init(&b);
    buf_init(&c);
    buf_init(&d);
    srcref_default(left, 2, &a);
    srcref_default(right, 2, &b);
    srcref_default(one, 1, &c);
    srcref_default(fake, 1, &d);
    assert_string_equal(a.data, "1:a,2:bc,");
    assert_string_equal(b.data, "2:ab,1:c,");
    assert_string_equal(c.data, "4:a,bc,");
    assert_string_equal(d.data, "8:1:a,2:bc,");
    assert_string_not_equal(a.data, b.data);
    assert_string_not_equal(a.data, d.data);
    buf_free(&a);
    buf_free(&b);
    buf_free(&c);
    buf_free(&d);
}

static void
test_default_reference_of_no_fields_is_empty(void **state)
{
    Buf b;
    (void) state;

    buf_init(&b);
    buf_puts(&b, "left over");
    srcref_default(NULL, 0, &b);
    assert_int_equal(b.len, 0);
    buf_free(&b);
}

/* The same row written four ways reads to the same reference. */
static void
test_default_reference_ignores_line_endings_and_quoting(void **state)
{
    const char *variants[] = {"a,b,c\n1,x y,\n", "a,b,c\r\n1,x y,\r\n",
                              "a,b,c\n\"1\",\"x y\",\n", "a,b,c\r\n1,\"x y\","};
    char dir[] = "/tmp/v7fill-srcref-XXXXXX";
    Buf first;
    Buf b;
    (void) state;

    assert_non_null(mkdtemp(dir));
    buf_init(&first);
    buf_init(&b);
    for (size_t i = 0; i < 4; i++)
    {
        char *path = xasprintf("%s/v%zu.csv", dir, i);
        FILE *f = fopen(path, "wb");
        Source *s = NULL;
        Err err = {0};
        Record rec;
        bool eof;

        assert_non_null(f);
        fputs(variants[i], f);
        fclose(f);
        assert_true(source_csv_open(path, NULL, &s, &err));
        assert_true(source_next(s, &rec, &eof, &err));
        assert_false(eof);
        srcref_default(rec.fields, rec.nfields, i == 0 ? &first : &b);
        if (i > 0)
            assert_string_equal(b.data, first.data);
        source_close(s);
        unlink(path);
        free(path);
    }
    assert_string_equal(first.data, "1:1,3:x y,N,");
    rmdir(dir);
    buf_free(&first);
    buf_free(&b);
}

static const char *const columns[] = {"id", "region", "note"};

static SrcrefTemplate *
compile_ok(const char *tmpl)
{
    SrcrefTemplate *t = NULL;
    Err err = {0};

    if (!srcref_template_compile(tmpl, columns, 3, &t, &err))
        fail_msg("compile %s: %s", tmpl, err.msg);
    return t;
}

static void
test_template_renders_literal_text_and_columns(void **state)
{
    Field f[] = {text("42"), text("eu"), text("n")};
    SrcrefTemplate *t = compile_ok("legacy.orders:{region}/{id}");
    Buf b;
    (void) state;

    buf_init(&b);
    srcref_build(t, f, 3, &b);
    assert_string_equal(b.data, "legacy.orders:eu/42");
    srcref_template_free(t);

    t = compile_ok("{id}"); /* a placeholder alone */
    srcref_build(t, f, 3, &b);
    assert_string_equal(b.data, "42");
    srcref_template_free(t);

    buf_free(&b);
}

static void
test_template_double_braces_are_literal_braces(void **state)
{
    Field f[] = {text("42"), text("eu"), text("n")};
    SrcrefTemplate *t = compile_ok("{{{id}}}:{{x}}");
    Buf b;
    (void) state;

    buf_init(&b);
    srcref_build(t, f, 3, &b);
    assert_string_equal(b.data, "{42}:{x}");
    srcref_template_free(t);
    buf_free(&b);
}

static void
test_template_null_marker_cannot_collide_with_a_text_value(void **state)
{
    SrcrefTemplate *t = compile_ok("k:{note}");
    Field f[] = {text("1"), text("eu"), null_field()};
    Buf null_ref;
    Buf b;
    const char *texts[] = {"\\N", "", "N", "\\", "\\\\N"};
    (void) state;

    buf_init(&null_ref);
    buf_init(&b);
    srcref_build(t, f, 3, &null_ref);
    assert_string_equal(null_ref.data, "k:\\N");
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
    {
        f[2] = text(texts[i]);
        srcref_build(t, f, 3, &b);
        assert_string_not_equal(b.data, null_ref.data);
    }
    f[2] = text("c:\\dir\\N");
    srcref_build(t, f, 3, &b);
    assert_string_equal(b.data, "k:c:\\\\dir\\\\N"); /* backslashes doubled */
    srcref_template_free(t);
    buf_free(&null_ref);
    buf_free(&b);
}

static void
test_template_column_missing_from_a_short_record_renders_as_null(void **state)
{
    SrcrefTemplate *t = compile_ok("{id}-{note}");
    Field f[] = {text("7")};
    Buf b;
    (void) state;

    buf_init(&b);
    srcref_build(t, f, 1, &b);
    assert_string_equal(b.data, "7-\\N");
    srcref_template_free(t);
    buf_free(&b);
}

static void
assert_template_error(const char *tmpl, ErrCode code, const char *part)
{
    SrcrefTemplate *t = (SrcrefTemplate *) 1;
    Err err = {0};

    assert_false(srcref_template_compile(tmpl, columns, 3, &t, &err));
    assert_null(t);
    assert_int_equal(err.code, code);
    if (strstr(err.msg, tmpl) == NULL)
        fail_msg("message does not quote the template: %s", err.msg);
    if (strstr(err.msg, part) == NULL)
        fail_msg("message lacks \"%s\": %s", part, err.msg);
}

static void
test_template_errors_quote_the_template(void **state)
{
    (void) state;
    assert_template_error("orders:{customer}", EC_CONFIG, "names column \"customer\"");
    assert_template_error("orders:{ID}", EC_CONFIG, "names column \"ID\""); /* case matters */
    assert_template_error("orders:{id", EC_USAGE, "unclosed '{' at position 8");
    assert_template_error("orders:{id{x}}", EC_USAGE, "unclosed '{'");
    assert_template_error("orders:{}", EC_USAGE, "empty column name at position 8");
    assert_template_error("orders:id}", EC_USAGE, "single '}' at position 10");
    /* a constant would make every row a duplicate of the first */
    assert_template_error("orders:{{id}}", EC_USAGE, "names no column");
    assert_template_error("", EC_USAGE, "names no column");
}

static void
test_build_reuses_the_buffer_without_leftovers(void **state)
{
    SrcrefTemplate *t = compile_ok("{note}");
    Field longer[] = {text("1"), text("2"), text("a long value")};
    Field shorter[] = {text("1"), text("2"), text("x")};
    Buf b;
    (void) state;

    buf_init(&b);
    shorter[2] = text("");
    srcref_build(t, shorter, 3, &b); /* empty, yet a usable NUL-terminated buffer */
    assert_non_null(b.data);
    assert_buf(&b, "", 0);
    srcref_build(t, longer, 3, &b);
    shorter[2] = text("x");
    srcref_build(t, shorter, 3, &b);
    assert_buf(&b, "x", 1);
    srcref_template_free(t);
    srcref_template_free(NULL);
    buf_free(&b);
}

static bool
order_of(const char *ref, uint64_t *v)
{
    return srcref_order(ref, strlen(ref), v);
}

static void
test_order_is_the_integer_the_reference_ends_in(void **state)
{
    uint64_t v = 99;
    (void) state;

    assert_true(order_of("legacy.orders:42", &v));
    assert_int_equal(v, 42);
    assert_true(order_of("x:007", &v));
    assert_int_equal(v, 7);
    assert_true(order_of("5", &v));
    assert_int_equal(v, 5);
    assert_true(order_of("t:281474976710655", &v)); /* 2^48 - 1, 15 digits */
    assert_int_equal(v, UINT64_C(281474976710655));
    assert_true(order_of("a1:2:3", &v)); /* only the digits at the end */
    assert_int_equal(v, 3);

    /* anything else gives no order: the key is the hash alone */
    const char *none[] = {"t:281474976710656", "t:999999999999999", "t:0000000000000001",
                          "orders:12a", "orders:", "", "3:abc,0:,N,", "x:\\N", "x:5 "};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
    {
        v = 99;
        if (order_of(none[i], &v))
            fail_msg("\"%s\" gave order %llu", none[i], (unsigned long long) v);
    }
    /* the ints of the default reference never count: it ends in ',' */
    Field f[] = {text("17"), text("42")};
    Buf b;
    buf_init(&b);
    srcref_default(f, 2, &b);
    assert_false(srcref_order(b.data, b.len, &v));
    buf_free(&b);
}

static void
test_key_is_the_order_then_hash_bytes_or_the_hash_alone(void **state)
{
    uint8_t mac[32];
    uint8_t key[16];
    const uint8_t order[6] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab};
    (void) state;

    for (int i = 0; i < 32; i++)
        mac[i] = (uint8_t) (0xc0 + i);
    assert_true(srcref_key("r:1250999896491", 15, mac, true, key)); /* 0x0123456789ab */
    assert_memory_equal(key, order, 6);
    assert_memory_equal(key + 6, mac, 10);
    assert_false(srcref_key("r:1250999896491", 15, mac, false, key)); /* a hashed lookup */
    assert_memory_equal(key, mac, 16);
    assert_false(srcref_key("r:x", 3, mac, true, key));
    assert_memory_equal(key, mac, 16);

    /* ordered keys sort as their integers do, and the hash tells equal ones apart */
    uint8_t k1[16];
    uint8_t k2[16];
    srcref_key("a:255", 5, mac, true, k1);
    srcref_key("a:256", 5, mac, true, k2);
    assert_true(memcmp(k1, k2, 16) < 0);
    srcref_key("b:0", 3, mac, true, k1);
    mac[0] = 0;
    srcref_key("b:0", 3, mac, true, k2);
    assert_true(memcmp(k1, k2, 16) != 0);
}

/* The report shows a default reference as the record's values, in CSV. */
static void
test_default_reference_reads_back_as_csv_values(void **state)
{
    Field f[] = {text("2025-01-01"), text("1019"), text(""), null_field(), text("a,\"b\"\nc")};
    Buf b;
    char out[128];
    char small[8];
    (void) state;

    buf_init(&b);
    srcref_default(f, 5, &b);
    assert_true(srcref_default_csv(b.data, b.len, out, sizeof out));
    assert_string_equal(out, "2025-01-01,1019,\"\",,\"a,\"\"b\"\"\nc\"");
    srcref_default(f, 2, &b);
    assert_true(srcref_default_csv(b.data, b.len, out, sizeof out));
    assert_string_equal(out, "2025-01-01,1019");
    /* A prefix (the pipeline keeps one of long references) says it is cut,
     * with the values up to the cut. */
    assert_false(srcref_default_csv(b.data, 18, out, sizeof out));
    assert_string_equal(out, "2025-01-01,10");
    assert_false(srcref_default_csv(b.data, 15, out, sizeof out));
    assert_string_equal(out, "2025-01-01,");
    /* An output too small is cut too, NUL-terminated. */
    assert_false(srcref_default_csv(b.data, b.len, small, sizeof small));
    assert_string_equal(small, "2025-01");
    /* Not the default encoding (a template's text). */
    assert_false(srcref_default_csv("legacy.orders:12", 16, out, sizeof out));
    assert_true(srcref_default_csv("", 0, out, sizeof out));
    assert_string_equal(out, "");
    buf_free(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_reference_has_the_documented_format),
        cmocka_unit_test(test_default_reference_in_pieces_is_the_same_text),
        cmocka_unit_test(test_default_reference_tells_null_from_empty_string),
        cmocka_unit_test(test_default_reference_keeps_field_boundaries),
        cmocka_unit_test(test_default_reference_of_no_fields_is_empty),
        cmocka_unit_test(test_default_reference_reads_back_as_csv_values),
        cmocka_unit_test(test_default_reference_ignores_line_endings_and_quoting),
        cmocka_unit_test(test_template_renders_literal_text_and_columns),
        cmocka_unit_test(test_template_double_braces_are_literal_braces),
        cmocka_unit_test(test_template_null_marker_cannot_collide_with_a_text_value),
        cmocka_unit_test(test_template_column_missing_from_a_short_record_renders_as_null),
        cmocka_unit_test(test_template_errors_quote_the_template),
        cmocka_unit_test(test_build_reuses_the_buffer_without_leftovers),
        cmocka_unit_test(test_order_is_the_integer_the_reference_ends_in),
        cmocka_unit_test(test_key_is_the_order_then_hash_bytes_or_the_hash_alone),
    };
    return cmocka_run_group_tests_name("srcref", tests, NULL, NULL);
}
