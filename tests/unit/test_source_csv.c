/*
 * CSV source: quoting, line endings, NULLs, record errors, zstd, stdin,
 * resume positions.  Fixtures are written into a fresh temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>
#include <zstd.h>

#include "v7fill/mem.h"
#include "v7fill/source_csv.h"

static char tmpdir[64];

static int
setup_dir(void **state)
{
    (void) state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/v7fill-csv-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int
remove_dir(void **state)
{
    char cmd[128];

    (void) state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ fixtures */

static char *
fixture(const char *name, const void *data, size_t len)
{
    char *path = xasprintf("%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static char *
fixture_str(const char *name, const char *text)
{
    return fixture(name, text, strlen(text));
}

/* The data compressed as `frames` consecutive zstd frames. */
static char *
fixture_zstd(const char *name, const void *data, size_t len, int frames)
{
    Buf out;
    size_t per = (len + (size_t) frames - 1) / (size_t) frames;
    char *path;

    buf_init(&out);
    for (size_t off = 0; off < len || (len == 0 && out.len == 0); off += per)
    {
        size_t n = len - off < per ? len - off : per;
        size_t bound = ZSTD_compressBound(n);
        size_t got;

        buf_reserve(&out, bound);
        got = ZSTD_compress(out.data + out.len, bound, (const char *) data + off, n, 3);
        assert_false(ZSTD_isError(got));
        out.len += got;
        if (len == 0)
            break;
    }
    path = fixture(name, out.data, out.len);
    buf_free(&out);
    return path;
}

static CsvOptions
opts_default(void)
{
    CsvOptions o;

    csv_options_default(&o);
    return o;
}

static Source *
open_ok(const char *path, const CsvOptions *o)
{
    Source *s = NULL;
    Err err = {0};

    if (!source_csv_open(path, o, &s, &err))
        fail_msg("open %s: %s", path, err.msg);
    return s;
}

static void
next_ok(Source *s, Record *rec)
{
    Err err = {0};
    bool eof = true;

    if (!source_next(s, rec, &eof, &err))
        fail_msg("next: %s", err.msg);
    assert_false(eof);
}

static void
assert_eof(Source *s)
{
    Err err = {0};
    Record rec;
    bool eof = false;

    if (!source_next(s, &rec, &eof, &err))
        fail_msg("next: %s", err.msg);
    assert_true(eof);
}

static void
assert_text(const Record *rec, size_t i, const char *want)
{
    assert_true(i < rec->nfields);
    assert_false(rec->fields[i].is_null);
    assert_int_equal(rec->fields[i].len, strlen(want));
    assert_memory_equal(rec->fields[i].data, want, strlen(want));
}

static void
assert_sql_null(const Record *rec, size_t i)
{
    assert_true(i < rec->nfields);
    assert_true(rec->fields[i].is_null);
    assert_null(rec->fields[i].data);
}

static void
assert_raw(const Record *rec, const char *want)
{
    assert_int_equal(rec->raw_len, strlen(want));
    assert_memory_equal(rec->raw, want, strlen(want));
}

static SourcePosition
position(Source *s)
{
    SourcePosition p;

    s->ops->position(s, &p);
    return p;
}

/* Every record of a file as one comparable string: line, fields, error. */
static void
dump_all(const char *path, const CsvOptions *o, Buf *out)
{
    Source *s = open_ok(path, o);
    Err err = {0};

    buf_reset(out);
    for (;;)
    {
        Record rec;
        bool eof;

        if (!source_next(s, &rec, &eof, &err))
            fail_msg("next: %s", err.msg);
        if (eof)
            break;
        buf_printf(out, "%llu:", (unsigned long long) rec.line);
        for (size_t i = 0; i < rec.nfields; i++)
        {
            /* A record said to need no COPY escaping holds no byte that does. */
            if (rec.copy_plain && !rec.fields[i].is_null)
                for (size_t j = 0; j < rec.fields[i].len; j++)
                    assert_null(strchr("\\\t\r\n", rec.fields[i].data[j]));
            if (rec.fields[i].is_null)
                buf_puts(out, "<NULL>");
            else
                buf_append(out, rec.fields[i].data, rec.fields[i].len);
            buf_putc(out, '|');
        }
        if (rec.error)
            buf_printf(out, "!%s", rec.error);
        buf_putc(out, '\n');
    }
    source_close(s);
}

/* ------------------------------------------------------------- quoting */

static void
test_quoted_fields_keep_delimiters_and_doubled_quotes(void **state)
{
    char *path = fixture_str("q.csv", "id,note\n1,\"a,b\"\n2,\"she said \"\"hi\"\"\"\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_int_equal(rec.nfields, 2);
    assert_text(&rec, 0, "1");
    assert_text(&rec, 1, "a,b");
    assert_null(rec.error);
    next_ok(s, &rec);
    assert_text(&rec, 1, "she said \"hi\"");
    assert_eof(s);
    source_close(s);
    free(path);
}

static void
test_embedded_newline_keeps_raw_bytes_and_line_numbers(void **state)
{
    char *path = fixture_str("nl.csv", "id,note\n1,\"two\nlines\"\n2,after\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    SourcePosition p;
    (void) state;

    next_ok(s, &rec);
    assert_text(&rec, 1, "two\nlines");
    assert_raw(&rec, "1,\"two\nlines\"\n");
    assert_int_equal(rec.line, 2);
    p = position(s);
    assert_int_equal(p.line, 3);
    assert_int_equal(p.records, 1);
    assert_int_equal(p.offset, strlen("id,note\n1,\"two\nlines\"\n"));

    next_ok(s, &rec);
    assert_int_equal(rec.line, 4); /* the line after the two the first record took */
    assert_raw(&rec, "2,after\n");
    assert_eof(s);
    source_close(s);
    free(path);
}

static void
test_crlf_lf_and_mixed_line_endings_give_the_same_records(void **state)
{
    CsvOptions o = opts_default();
    char *lf = fixture_str("lf.csv", "a,b\n1,x\n2,\"y\nz\"\n3,\n");
    char *crlf = fixture_str("crlf.csv", "a,b\r\n1,x\r\n2,\"y\nz\"\r\n3,\r\n");
    char *mixed = fixture_str("mixed.csv", "a,b\r\n1,x\n2,\"y\nz\"\r\n3,\n");
    Buf want;
    Buf got;
    Source *s;
    Record rec;
    (void) state;

    buf_init(&want);
    buf_init(&got);
    dump_all(lf, &o, &want);
    assert_string_equal(want.data, "2:1|x|\n3:2|y\nz|\n5:3|<NULL>|\n");
    dump_all(crlf, &o, &got);
    assert_string_equal(got.data, want.data);
    dump_all(mixed, &o, &got);
    assert_string_equal(got.data, want.data);

    /* The CRLF stays in the raw bytes, and no empty record follows it. */
    s = open_ok(crlf, &o);
    next_ok(s, &rec);
    assert_raw(&rec, "1,x\r\n");
    source_close(s);
    buf_free(&want);
    buf_free(&got);
    free(lf);
    free(crlf);
    free(mixed);
}

static void
test_lone_cr_ends_a_line_as_libcsv_ends_a_row(void **state)
{
    char *path = fixture_str("cr.csv", "a,b\r1,\"x\ry\"\r2,z\r");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_text(&rec, 1, "x\ry");
    assert_int_equal(rec.line, 2);
    assert_raw(&rec, "1,\"x\ry\"\r");
    next_ok(s, &rec);
    assert_int_equal(rec.line, 3); /* the CR inside the quotes is data, not a line */
    assert_text(&rec, 1, "z");
    assert_eof(s);
    source_close(s);
    free(path);
}

/* Line numbers are those of grep -n and sed -n: inside a quoted field LF and
 * CRLF end a line, a lone CR does not (issue 16 #12). */
static void
test_lone_cr_inside_quotes_is_not_a_line(void **state)
{
    char *path = fixture_str("crq.csv", "a,b\n1,\"x\ry\"\n2,\"p\r\nq\rr\"\nbad,3\n");
    Buf got;
    (void) state;

    buf_init(&got);
    dump_all(path, NULL, &got);
    assert_string_equal(got.data, "2:1|x\ry|\n3:2|p\r\nq\rr|\n5:bad|3|\n");
    buf_free(&got);
    free(path);
}

static void
test_bom_at_file_start_is_skipped_before_the_header(void **state)
{
    char *path = fixture_str("bom.csv", "\xef\xbb\xbfid,name\n1,\xef\xbb\xbfx\n");
    Source *s = open_ok(path, NULL);
    size_t n;
    const char *const *cols = s->ops->columns(s, &n);
    Record rec;
    (void) state;

    assert_int_equal(n, 2);
    assert_string_equal(cols[0], "id");
    next_ok(s, &rec);
    assert_text(&rec, 1, "\xef\xbb\xbfx"); /* only the file's first bytes are a BOM */
    source_close(s);
    free(path);
}

static void
test_final_line_without_terminator_is_a_record(void **state)
{
    char *path = fixture_str("noeol.csv", "a,b\n1,2\n3,\"4\"");
    Source *s = open_ok(path, NULL);
    Record rec;
    SourcePosition p;
    (void) state;

    next_ok(s, &rec);
    next_ok(s, &rec);
    assert_text(&rec, 0, "3");
    assert_text(&rec, 1, "4");
    assert_raw(&rec, "3,\"4\"");
    p = position(s);
    assert_int_equal(p.offset, strlen("a,b\n1,2\n3,\"4\""));
    assert_int_equal(p.line, 3);
    assert_eof(s);
    source_close(s);
    free(path);
}

/* ---------------------------------------------------------------- NULL */

static void
test_unquoted_empty_is_null_and_quoted_empty_is_text(void **state)
{
    char *path = fixture_str("empty.csv", "a,b,c\n,\"\",\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_int_equal(rec.nfields, 3);
    assert_sql_null(&rec, 0);
    assert_text(&rec, 1, "");
    assert_non_null(rec.fields[1].data);
    assert_sql_null(&rec, 2);
    source_close(s);
    free(path);
}

static void
test_null_string_applies_only_to_unquoted_fields(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("nullstr.csv", "a,b,c\n\\N,\"\\N\",x\\N\n\"\\N\",\\N,\n");
    Source *s;
    Record rec;
    (void) state;

    o.null_string = "\\N";
    s = open_ok(path, &o);
    next_ok(s, &rec);
    assert_sql_null(&rec, 0);
    assert_text(&rec, 1, "\\N");
    assert_text(&rec, 2, "x\\N");
    next_ok(s, &rec);
    assert_text(&rec, 0, "\\N");
    assert_sql_null(&rec, 1);
    assert_sql_null(&rec, 2);
    source_close(s);
    free(path);
}

static void
test_spaces_around_fields_are_kept(void **state)
{
    char *path = fixture_str("sp.csv", "a,b\n  x , \ty\t\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_text(&rec, 0, "  x ");
    assert_text(&rec, 1, " \ty\t");
    source_close(s);
    free(path);
}

/* Random records written as CSV (unquoted where allowed, spaces and tabs at
 * field edges included, quoted at random otherwise) read back exactly: the
 * reader switches libcsv's space handling per line, and no line may lose a
 * space it should keep. */
static void
test_random_records_round_trip(void **state)
{
    static const char alphabet[] = "ab  \t\t,\"\nxy";
    enum { ROWS = 3000, COLS = 4 };
    uint32_t x = 2463534242u;
    Buf csv;
    Buf want;
    Buf got;
    char *path;
    (void) state;

    buf_init(&csv);
    buf_init(&want);
    buf_init(&got);
    buf_puts(&csv, "c1,c2,c3,c4\n");
    for (int r = 0; r < ROWS; r++)
    {
        size_t line = 1;

        for (size_t i = 0; i < csv.len; i++)
            line += csv.data[i] == '\n';
        buf_printf(&want, "%zu:", line);
        for (int c = 0; c < COLS; c++)
        {
            char field[16];
            size_t len;
            bool special = false;

            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            len = x % 7;
            for (size_t i = 0; i < len; i++)
            {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                /* mostly plain and spaces; now and then a delimiter, quote or newline */
                field[i] = alphabet[(x >> 8) % (r % 3 == 0 ? sizeof alphabet - 1 : 6)];
                special |= field[i] == ',' || field[i] == '"' || field[i] == '\n';
            }
            if (c > 0)
                buf_putc(&csv, ',');
            if (special || (len > 0 && (x >> 20) % 2 == 0))
            {
                buf_putc(&csv, '"');
                for (size_t i = 0; i < len; i++)
                {
                    if (field[i] == '"')
                        buf_putc(&csv, '"');
                    buf_putc(&csv, field[i]);
                }
                buf_putc(&csv, '"');
            }
            else
                buf_append(&csv, field, len);
            if (len == 0)
                buf_puts(&want, "<NULL>");
            else
                buf_append(&want, field, len);
            buf_putc(&want, '|');
        }
        buf_putc(&csv, '\n');
        buf_putc(&want, '\n');
    }
    path = fixture("roundtrip.csv", csv.data, csv.len);
    dump_all(path, NULL, &got);
    assert_int_equal(got.len, want.len);
    assert_memory_equal(got.data, want.data, want.len);
    {
        CsvOptions lo = opts_default();

        lo.libcsv_only = true; /* the same through libcsv alone */
        dump_all(path, &lo, &got);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.data, want.data, want.len);
    }
    free(path);
    buf_free(&csv);
    buf_free(&want);
    buf_free(&got);
}

/* One-line records skip libcsv; each shape that the shortcut must hand
 * back to libcsv (a stray quote, a byte after a closing quote, a quoted
 * field going on to the next line) and each it keeps gives the same records,
 * errors and line numbers both ways, with either delimiter and --null. */
static void
test_records_read_without_libcsv_match_libcsv(void **state)
{
    static const char *const inputs[] = {
        "a,b,c\n\"x\",\"\",\n,,\n\"\"\"\",\"a\"\"b\"\"\",c\n",
        "a,b,c\r\nq,\"r\r\n\",s\r\n1,2,3\r\n",
        "a,b,c\nx,y\"z,w\n\"p\"q,r,s\n\"m\" ,n,o\n1,2,3\n",
        "a,b,c\n\"multi\nline\",2,3\n\"open,4,5\n6\",7,8\n",
        "a,b,c\n\\N,\"\\N\",\\N\n x , y ,z \n1,2,3",
        "a,b,c\n1,2\n1,2,3,4\n\"a\"\"\",b,\"\"\"\"\r1,2,3\r",
        "a;b;c\n1;\"2;3\";4\n\"\";;\n",
        "a,b,c\n\"x\ry\",2,3\r\"p\rq\"\r\n,\"\r\",\n1,2,3\n",
        "a,b,c\n\"unterminated,1,2\n",
    };
    Buf fast;
    Buf slow;
    (void) state;

    buf_init(&fast);
    buf_init(&slow);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        for (int variant = 0; variant < 2; variant++)
        {
            char name[32];
            char *path;
            CsvOptions o = opts_default();
            CsvOptions lo;
            Source *s;
            Err err = {0};
            bool eof = false;
            bool ok_fast = true;
            bool ok_slow = true;
            Record rec;

            snprintf(name, sizeof name, "fast%zu.csv", i);
            path = fixture_str(name, inputs[i]);
            if (strchr(inputs[i], ';') != NULL)
                o.delimiter = ';';
            if (variant == 1)
                o.null_string = "\\N";
            lo = o;
            lo.libcsv_only = true;
            /* the last input ends in an unterminated quote: fatal both ways */
            if (i + 1 == sizeof inputs / sizeof inputs[0])
            {
                s = open_ok(path, &o);
                while ((ok_fast = source_next(s, &rec, &eof, &err)) && !eof)
                    ;
                source_close(s);
                s = open_ok(path, &lo);
                while ((ok_slow = source_next(s, &rec, &eof, &err)) && !eof)
                    ;
                source_close(s);
                assert_false(ok_fast);
                assert_false(ok_slow);
                free(path);
                continue;
            }
            dump_all(path, &o, &fast);
            dump_all(path, &lo, &slow);
            if (fast.len != slow.len || memcmp(fast.data, slow.data, fast.len) != 0)
                fail_msg("input %zu/%d:\nfast path:\n%s\nlibcsv:\n%s", i, variant, fast.data,
                         slow.data);
            free(path);
        }
    buf_free(&fast);
    buf_free(&slow);
}

/* copy_plain: set when no field holds a byte COPY text escapes, so the
 * pipeline copies fields as they are; the line terminator does not count. */
static void
test_copy_plain_tells_records_without_escapes(void **state)
{
    static const struct
    {
        const char *line;
        bool plain;
    } cases[] = {
        {"1,plain text,\"quoted, with \"\"quotes\"\"\"\n", true},
        {"2,a longer line of plain text past eight bytes,x\r\n", true},
        {"3,last line without terminator,x", true},
        {"4,back\\slash,x\n", false},
        {"5,\"tab\there\",x\n", false},
        {"6,\"new\nline\",x\n", false},
        {"7,\"carriage\rreturn\",x\n", false},
        {"8,x,a tab in the last eight bytes\t\n", false},
    };
    (void) state;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
        char text[256];
        char *path;
        Source *s;
        Record rec;

        snprintf(text, sizeof text, "id,a,b\n%s", cases[i].line);
        path = fixture_str("plain.csv", text);
        s = open_ok(path, NULL);
        next_ok(s, &rec);
        assert_null(rec.error);
        if (rec.copy_plain != cases[i].plain)
            fail_msg("case %zu: copy_plain is %d", i + 1, (int) rec.copy_plain);
        source_close(s);
        free(path);
    }
}

static void
test_blank_lines_are_skipped_but_counted(void **state)
{
    char *path = fixture_str("blank.csv", "a,b\n\n1,2\n\r\n\n3,4\n\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_int_equal(rec.line, 3);
    assert_raw(&rec, "1,2\n");
    next_ok(s, &rec);
    assert_int_equal(rec.line, 6);
    assert_eof(s);
    assert_int_equal(position(s).records, 2);
    source_close(s);
    free(path);
}

static void
test_blank_line_in_a_single_column_file_is_a_null_row(void **state)
{
    char *path = fixture_str("one.csv", "v\n1\n\n2\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_text(&rec, 0, "1");
    next_ok(s, &rec);
    assert_int_equal(rec.nfields, 1);
    assert_sql_null(&rec, 0);
    assert_int_equal(rec.line, 3);
    assert_null(rec.error);
    next_ok(s, &rec);
    assert_text(&rec, 0, "2");
    assert_eof(s);
    source_close(s);
    free(path);
}

/* -------------------------------------------------------- record errors */

static void
test_wrong_field_count_is_a_record_error_and_reading_continues(void **state)
{
    char *path = fixture_str("count.csv", "a,b,c\n1,2\n1,2,3,4\n5,6,7\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_string_equal(rec.error, "expected 3 fields, found 2");
    assert_raw(&rec, "1,2\n");
    next_ok(s, &rec);
    assert_string_equal(rec.error, "expected 3 fields, found 4");
    next_ok(s, &rec);
    assert_null(rec.error);
    assert_text(&rec, 2, "7");
    assert_int_equal(position(s).records, 3);
    source_close(s);
    free(path);
}

static void
test_invalid_utf8_is_a_record_error_naming_field_and_offset(void **state)
{
    /* overlong '/', a surrogate, a truncated sequence, then a valid row */
    char *path = fixture_str("utf8.csv", "a,b\nok,ab\xc0\xaf\n\xed\xa0\x80,x\nx,\"\xe2\x82\"\n"
                                         "\xc3\xa9t\xc3\xa9,\xf0\x9f\x98\x80\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_string_equal(rec.error, "invalid UTF-8 in field 2 (byte offset 2)");
    next_ok(s, &rec);
    assert_string_equal(rec.error, "invalid UTF-8 in field 1 (byte offset 0)");
    next_ok(s, &rec);
    assert_string_equal(rec.error, "invalid UTF-8 in field 2 (byte offset 0)");
    next_ok(s, &rec);
    assert_null(rec.error);
    assert_text(&rec, 0, "\xc3\xa9t\xc3\xa9");
    source_close(s);
    free(path);
}

static void
test_nul_byte_is_a_record_error_even_without_utf8_checks(void **state)
{
    static const char data[] = "a,b\n1,x\0y\n2,\xe9t\xe9\n";
    CsvOptions o = opts_default();
    char *path = fixture("nul.csv", data, sizeof data - 1);
    Source *s;
    Record rec;
    (void) state;

    o.check_utf8 = false;
    s = open_ok(path, &o);
    next_ok(s, &rec);
    assert_string_equal(rec.error, "NUL byte in field 2 (byte offset 1)");
    next_ok(s, &rec);
    assert_null(rec.error); /* Latin-1 passes when UTF-8 checks are off */
    source_close(s);
    free(path);
}

static void
test_stray_quote_rejects_one_record_and_reading_resumes_at_next_line(void **state)
{
    char *path = fixture_str("stray.csv", "a,b\n1,ab\"c\n\"x\"y,2\n3,ok\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    (void) state;

    next_ok(s, &rec);
    assert_string_equal(rec.error, "quote character inside an unquoted field at line 2, byte 5");
    assert_raw(&rec, "1,ab\"c\n");
    next_ok(s, &rec);
    assert_string_equal(rec.error, "unexpected character after a closing quote at line 3, byte 4");
    next_ok(s, &rec);
    assert_null(rec.error);
    assert_int_equal(rec.line, 4);
    assert_text(&rec, 1, "ok");
    assert_eof(s);
    source_close(s);
    free(path);
}

static void
test_unterminated_quote_at_eof_is_fatal_and_names_the_starting_line(void **state)
{
    char *path = fixture_str("unterm.csv", "a,b\n1,2\n3,\"never\nclosed\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    Err err = {0};
    bool eof = false;
    (void) state;

    next_ok(s, &rec);
    assert_false(source_next(s, &rec, &eof, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "unterm.csv:3: unterminated quoted field"));
    /* the failure sticks */
    memset(&err, 0, sizeof err);
    assert_false(source_next(s, &rec, &eof, &err));
    assert_int_equal(err.code, EC_FORMAT);
    source_close(s);
    free(path);
}

static void
test_record_longer_than_the_maximum_is_fatal_naming_its_line(void **state)
{
    CsvOptions o = opts_default();
    Buf data;
    char *path;
    Source *s;
    Record rec;
    Err err = {0};
    bool eof;
    (void) state;

    buf_init(&data);
    buf_puts(&data, "a,b\n1,2\n3,\"");
    for (int i = 0; i < 5000; i++)
        buf_puts(&data, "x\n");
    buf_puts(&data, "\"\n");
    path = fixture("long.csv", data.data, data.len);
    o.max_record_bytes = 4096;
    s = open_ok(path, &o);
    next_ok(s, &rec);
    assert_false(source_next(s, &rec, &eof, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "long.csv:3: record is longer than the maximum of 4096 bytes"));
    source_close(s);

    o.max_record_bytes = 20000; /* the same record fits under a higher limit */
    s = open_ok(path, &o);
    next_ok(s, &rec);
    next_ok(s, &rec);
    assert_int_equal(rec.fields[1].len, 10000);
    assert_eof(s);
    source_close(s);
    buf_free(&data);
    free(path);
}

static void
test_records_larger_than_the_read_window_are_whole(void **state)
{
    Buf data;
    char *path;
    Source *s;
    Record rec;
    size_t big = (size_t) 3 << 20;
    (void) state;

    buf_init(&data);
    buf_puts(&data, "a,b\n1,");
    buf_reserve(&data, big);
    memset(data.data + data.len, 'y', big);
    data.len += big;
    buf_puts(&data, "\n2,\"");
    for (size_t i = 0; i < big / 2; i++)
        buf_append(&data, "z\n", 2);
    buf_puts(&data, "\"\n3,end\n");
    path = fixture("huge.csv", data.data, data.len);
    s = open_ok(path, NULL);
    next_ok(s, &rec);
    assert_int_equal(rec.fields[1].len, big);
    assert_text(&rec, 0, "1"); /* stored before the field buffer grew for field 2 */
    next_ok(s, &rec);
    assert_int_equal(rec.fields[1].len, big);
    assert_text(&rec, 0, "2");
    assert_int_equal(rec.fields[1].data[0], 'z');
    assert_int_equal(rec.line, 3);
    next_ok(s, &rec);
    assert_int_equal(rec.line, 3 + big / 2 + 1);
    assert_text(&rec, 1, "end");
    assert_eof(s);
    source_close(s);
    buf_free(&data);
    free(path);
}

/* --------------------------------------------------------------- header */

static void
test_header_only_file_has_zero_records(void **state)
{
    char *path = fixture_str("ho.csv", "id,name\n");
    Source *s = open_ok(path, NULL);
    size_t n;
    (void) state;

    s->ops->columns(s, &n);
    assert_int_equal(n, 2);
    assert_eof(s);
    assert_int_equal(position(s).records, 0);
    source_close(s);
    free(path);
}

static void
test_empty_file_is_an_error_with_header_and_has_zero_records_without(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("empty0.csv", "");
    Source *s = NULL;
    Err err = {0};
    size_t n = 99;
    (void) state;

    assert_false(source_csv_open(path, &o, &s, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "empty0.csv is empty"));
    assert_null(s);

    o.header = false;
    s = open_ok(path, &o);
    s->ops->columns(s, &n);
    assert_int_equal(n, 0);
    assert_eof(s);
    source_close(s);
    free(path);
}

static void
test_duplicate_or_empty_header_names_are_errors(void **state)
{
    const char *bad[] = {"id,name,id\n", "id,,name\n", "id,\"\"\n"};
    const char *want[] = {"duplicate column name \"id\" in header (columns 1 and 3)",
                          "empty column name in header (column 2)",
                          "empty column name in header (column 2)"};
    (void) state;

    for (size_t i = 0; i < 3; i++)
    {
        char *path = fixture_str("hdr.csv", bad[i]);
        Source *s = NULL;
        Err err = {0};

        assert_false(source_csv_open(path, NULL, &s, &err));
        assert_int_equal(err.code, EC_FORMAT);
        assert_non_null(strstr(err.msg, "hdr.csv:1: "));
        assert_non_null(strstr(err.msg, want[i]));
        free(path);
    }
}

/* "a,b," (exports often end every line in a delimiter): the last column,
 * unnamed, is c3; a header whose real name is c3 then has a duplicate. */
static void
test_header_ending_in_a_delimiter_names_its_last_column_cn(void **state)
{
    char *path = fixture_str("trail.csv", "a,b,\n1,2,\n");
    char *dup = fixture_str("traildup.csv", "a,c3,\n1,2,\n");
    Source *s = open_ok(path, NULL);
    Err err = {0};
    size_t n = 0;
    const char *const *names = s->ops->columns(s, &n);
    Record rec;
    (void) state;

    assert_int_equal(n, 3);
    assert_string_equal(names[2], "c3");
    assert_true(source_csv_unnamed_last(s));
    next_ok(s, &rec);
    assert_null(rec.error);
    assert_sql_null(&rec, 2);
    source_close(s);
    assert_false(source_csv_open(dup, NULL, &s, &err));
    assert_non_null(strstr(err.msg, "duplicate column name \"c3\""));
    free(path);
    free(dup);
}

static void
test_without_header_columns_are_c1_to_cn_and_the_first_line_is_data(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("nohdr.csv", "1,2,3\n4,5\n");
    Source *s;
    const char *const *cols;
    size_t n;
    Record rec;
    SourcePosition p;
    (void) state;

    o.header = false;
    s = open_ok(path, &o);
    cols = s->ops->columns(s, &n);
    assert_int_equal(n, 3);
    assert_string_equal(cols[0], "c1");
    assert_string_equal(cols[2], "c3");
    p = position(s);
    assert_int_equal(p.offset, 0);
    assert_int_equal(p.records, 0);
    next_ok(s, &rec);
    assert_int_equal(rec.line, 1);
    assert_text(&rec, 2, "3");
    next_ok(s, &rec);
    assert_string_equal(rec.error, "expected 3 fields, found 2");
    assert_eof(s);
    source_close(s);
    free(path);
}

/* ---------------------------------------------------------------- zstd */

static const char sample[] = "id,note,n\n"
                             "1,\"a,b\",\n"
                             "2,\"multi\r\nline\",\"\"\n"
                             "3,x,\\N\r\n"
                             "4,\"q\"\"q\",y\n"
                             "5,short\n"
                             "6,bad\xff,z";

static void
test_zstd_input_gives_identical_records_to_plain_input(void **state)
{
    CsvOptions o = opts_default();
    char *plain = fixture("s.csv", sample, sizeof sample - 1);
    char *zst = fixture_zstd("s.csv.zst", sample, sizeof sample - 1, 1);
    char *nosuffix = fixture_zstd("s-compressed.csv", sample, sizeof sample - 1, 1);
    Buf a;
    Buf b;
    (void) state;

    o.null_string = "\\N";
    buf_init(&a);
    buf_init(&b);
    dump_all(plain, &o, &a);
    dump_all(zst, &o, &b);
    assert_string_equal(a.data, b.data);
    dump_all(nosuffix, &o, &b); /* detected by its magic number */
    assert_string_equal(a.data, b.data);
    buf_free(&a);
    buf_free(&b);
    free(plain);
    free(zst);
    free(nosuffix);
}

static void
test_concatenated_zstd_frames_read_as_one_stream(void **state)
{
    CsvOptions o = opts_default();
    char *plain = fixture("c.csv", sample, sizeof sample - 1);
    char *zst = fixture_zstd("c.csv.zst", sample, sizeof sample - 1, 5);
    Buf a;
    Buf b;
    (void) state;

    buf_init(&a);
    buf_init(&b);
    dump_all(plain, &o, &a);
    dump_all(zst, &o, &b);
    assert_string_equal(a.data, b.data);
    buf_free(&a);
    buf_free(&b);
    free(plain);
    free(zst);
}

/* Read a source to the end; returns false with err on a fatal error. */
static bool
drain(Source *s, Err *err)
{
    for (;;)
    {
        Record rec;
        bool eof;

        if (!source_next(s, &rec, &eof, err))
            return false;
        if (eof)
            return true;
    }
}

static void
test_truncated_zstd_is_an_error_naming_the_file(void **state)
{
    Buf data;
    char *full;
    char *cut;
    FILE *f;
    long size;
    char *bytes;
    Source *s = NULL;
    Err err = {0};
    (void) state;

    buf_init(&data);
    buf_puts(&data, "a,b\n");
    for (int i = 0; i < 20000; i++)
        buf_printf(&data, "%d,value %d\n", i, i * 7);
    full = fixture_zstd("t.csv.zst", data.data, data.len, 1);
    f = fopen(full, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    bytes = xmalloc((size_t) size);
    assert_int_equal(fread(bytes, 1, (size_t) size, f), (size_t) size);
    fclose(f);
    cut = fixture("cut.csv.zst", bytes, (size_t) size - 10);

    if (source_csv_open(cut, NULL, &s, &err))
    {
        assert_false(drain(s, &err));
        source_close(s);
    }
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "unexpected end of compressed data in "));
    assert_non_null(strstr(err.msg, "cut.csv.zst"));
    buf_free(&data);
    free(bytes);
    free(full);
    free(cut);
}

static void
test_corrupt_zstd_data_reports_zstds_error(void **state)
{
    char *zst = fixture_zstd("g.csv.zst", sample, sizeof sample - 1, 1);
    FILE *f = fopen(zst, "ab");
    Source *s = NULL;
    Err err = {0};
    (void) state;

    fputs("this is not a zstd frame", f);
    fclose(f);
    if (source_csv_open(zst, NULL, &s, &err))
    {
        assert_false(drain(s, &err));
        source_close(s);
    }
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "corrupt zstd data in "));
    assert_non_null(strstr(err.msg, "Unknown frame descriptor"));
    free(zst);
}

/* A checksum error at the end of the only frame: no record is handed on
 * before it (issue 16 #6), from a file and from a pipe. */
static void
test_corrupt_zstd_frame_hands_on_no_record(void **state)
{
    Buf data;
    Buf z;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t got;
    char *path;
    int fds[2];
    char fdpath[64];
    (void) state;

    buf_init(&data);
    buf_init(&z);
    buf_puts(&data, "a,b\n");
    for (int i = 0; i < 20000; i++)
        buf_printf(&data, "%d,value %d\n", i, i * 7);
    buf_reserve(&z, ZSTD_compressBound(data.len));
    assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)));
    got = ZSTD_compress2(cctx, z.data, ZSTD_compressBound(data.len), data.data, data.len);
    assert_false(ZSTD_isError(got));
    z.data[got - 2] ^= 0x55; /* in the checksum: every byte decodes, the check fails */
    path = fixture("ck.csv.zst", z.data, got);
    for (int from_pipe = 0; from_pipe < 2; from_pipe++)
    {
        Source *s = NULL;
        Err err = {0};
        Record rec;
        bool eof = false;
        const char *name = path;

        if (from_pipe)
        {
            assert_int_equal(pipe(fds), 0);
            if (fork() == 0)
            {
                close(fds[0]);
                _exit(write(fds[1], z.data, got) == (ssize_t) got ? 0 : 1);
            }
            close(fds[1]);
            snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", fds[0]);
            name = fdpath;
        }
        if (source_csv_open(name, NULL, &s, &err))
        {
            assert_false(source_next(s, &rec, &eof, &err));
            source_close(s);
        }
        if (from_pipe)
        {
            close(fds[0]);
            wait(NULL);
        }
        assert_int_equal(err.code, EC_FORMAT);
        assert_non_null(strstr(err.msg, "checksum"));
    }
    ZSTD_freeCCtx(cctx);
    buf_free(&data);
    buf_free(&z);
    free(path);
}

static void
test_zst_suffix_without_zstd_data_is_an_error(void **state)
{
    char *path = fixture_str("fake.csv.zst", "a,b\n1,2\n");
    Source *s = NULL;
    Err err = {0};
    (void) state;

    assert_false(source_csv_open(path, NULL, &s, &err));
    assert_int_equal(err.code, EC_FORMAT);
    assert_non_null(strstr(err.msg, "fake.csv.zst is not zstd-compressed"));
    free(path);
}

/* ---------------------------------------------------------------- stdin */

/* Run `fn` with stdin redirected from `path`. */
static void
with_stdin(const char *path, void (*fn)(void))
{
    int saved = dup(STDIN_FILENO);
    FILE *f = fopen(path, "rb");

    assert_non_null(f);
    assert_true(dup2(fileno(f), STDIN_FILENO) >= 0);
    fclose(f);
    fn();
    assert_true(dup2(saved, STDIN_FILENO) >= 0);
    close(saved);
}

static Buf stdin_result;

static void
dump_stdin(void)
{
    CsvOptions o = opts_default();

    dump_all("-", &o, &stdin_result);
}

static void
test_stdin_reads_plain_and_zstd_input(void **state)
{
    CsvOptions o = opts_default();
    char *plain = fixture("in.csv", sample, sizeof sample - 1);
    char *zst = fixture_zstd("in.csv.zst", sample, sizeof sample - 1, 2);
    Buf want;
    (void) state;

    buf_init(&want);
    buf_init(&stdin_result);
    dump_all(plain, &o, &want);
    with_stdin(plain, dump_stdin);
    assert_string_equal(stdin_result.data, want.data);
    with_stdin(zst, dump_stdin);
    assert_string_equal(stdin_result.data, want.data);
    buf_free(&want);
    buf_free(&stdin_result);
    free(plain);
    free(zst);
}

/* A pipe that delivers the input a few bytes at a time, so lines, CRLF
 * pairs and zstd blocks arrive split across reads. */
static void
test_stdin_pipe_in_small_pieces_gives_the_same_records(void **state)
{
    CsvOptions o = opts_default();
    Buf data;
    Buf want;
    char *plain;
    int fds[2];
    pid_t pid;
    int saved;
    int status;
    (void) state;

    buf_init(&data);
    buf_puts(&data, "a,b\r\n");
    for (int i = 0; i < 3000; i++)
        buf_printf(&data, i % 3 ? "%d,\"x\r\ny%d\"\r\n" : "%d,plain%d\n", i, i);
    plain = fixture("pipe.csv", data.data, data.len);
    buf_init(&want);
    buf_init(&stdin_result);
    dump_all(plain, &o, &want);

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
    {
        close(fds[0]);
        for (size_t off = 0, step = 1; off < data.len; off += step, step = step % 13 + 1)
        {
            size_t n = data.len - off < step ? data.len - off : step;

            if (write(fds[1], data.data + off, n) != (ssize_t) n)
                _exit(1);
            if (off % 97 == 0)
                usleep(50);
        }
        _exit(0);
    }
    close(fds[1]);
    saved = dup(STDIN_FILENO);
    dup2(fds[0], STDIN_FILENO);
    close(fds[0]);
    dump_stdin();
    dup2(saved, STDIN_FILENO);
    close(saved);
    waitpid(pid, &status, 0);
    assert_int_equal(status, 0);
    assert_string_equal(stdin_result.data, want.data);

    buf_free(&data);
    buf_free(&want);
    buf_free(&stdin_result);
    free(plain);
}

/* ---------------------------------------------------------------- resume */

/* Read n records, keep the position, reopen, seek, and check that the
 * next record is exactly record n+1 with its line number. */
static void
assert_resume_after(const char *path, const CsvOptions *o, int n)
{
    Source *s = open_ok(path, o);
    Source *t;
    SourcePosition p;
    Record rec;
    Record again;
    Err err = {0};
    char *want_raw;
    uint64_t want_line;

    for (int i = 0; i < n; i++)
        next_ok(s, &rec);
    p = position(s);
    assert_int_equal(p.records, (uint64_t) n);
    next_ok(s, &rec);
    want_raw = xstrndup(rec.raw, rec.raw_len);
    want_line = rec.line;

    t = open_ok(path, o);
    if (!t->ops->seek(t, &p, &err))
        fail_msg("seek: %s", err.msg);
    next_ok(t, &again);
    assert_int_equal(again.line, want_line);
    assert_raw(&again, want_raw);
    assert_int_equal(position(t).records, (uint64_t) n + 1);
    assert_int_equal(position(t).offset, position(s).offset);
    assert_int_equal(position(t).line, position(s).line);
    source_close(s);
    source_close(t);
    free(want_raw);
}

static Buf resume_data;

static void
make_resume_data(void)
{
    buf_init(&resume_data);
    buf_puts(&resume_data, "\xef\xbb\xbfid,text\n");
    for (int i = 1; i <= 40000; i++)
    {
        if (i % 1000 == 0)
            buf_printf(&resume_data, "%d,\"two\r\nlines\"\r\n", i);
        else if (i % 7 == 0)
            buf_printf(&resume_data, "%d,row %d\n\n", i, i);
        else
            buf_printf(&resume_data, "%d,row %d\n", i, i);
    }
}

static void
test_seek_after_n_records_resumes_at_the_next_record_in_plain_files(void **state)
{
    char *path;
    (void) state;

    make_resume_data();
    path = fixture("r.csv", resume_data.data, resume_data.len);
    assert_resume_after(path, NULL, 0);
    assert_resume_after(path, NULL, 1);
    assert_resume_after(path, NULL, 6);    /* before a blank line */
    assert_resume_after(path, NULL, 999);  /* before a multi-line record */
    assert_resume_after(path, NULL, 1000); /* after one */
    assert_resume_after(path, NULL, 39999);
    buf_free(&resume_data);
    free(path);
}

static void
test_seek_after_n_records_resumes_at_the_next_record_in_zstd_files(void **state)
{
    char *path;
    (void) state;

    make_resume_data();
    path = fixture_zstd("r.csv.zst", resume_data.data, resume_data.len, 3);
    assert_resume_after(path, NULL, 0);
    assert_resume_after(path, NULL, 999);
    assert_resume_after(path, NULL, 25000);
    assert_resume_after(path, NULL, 39999);
    buf_free(&resume_data);
    free(path);
}

/* The position's content hash is that of the input's first content_len bytes
 * (decompressed), also after a resume; a resume over other bytes says so and
 * starts from the first record. */
static void
assert_content_resume(const char *path, int n, int m)
{
    Source *s = open_ok(path, NULL);
    Source *t = open_ok(path, NULL);
    SourcePosition p;
    SourcePosition q;
    Record rec;
    bool same = false;
    Err err = {0};

    for (int i = 0; i < n; i++)
        next_ok(s, &rec);
    p = position(s);
    assert_true(p.content_len >= p.offset && p.content_len <= resume_data.len);
    assert_true(p.content_hash == XXH3_64bits(resume_data.data, p.content_len));
    if (!t->ops->resume(t, &p, &same, &err))
        fail_msg("resume: %s", err.msg);
    assert_true(same);
    assert_int_equal(position(t).records, (uint64_t) n);
    for (int i = 0; i < m; i++)
        next_ok(t, &rec);
    q = position(t);
    assert_true(q.content_len >= q.offset);
    assert_true(q.content_hash == XXH3_64bits(resume_data.data, q.content_len));
    source_close(s);
    source_close(t);
}

static void
test_resume_checks_the_content(void **state)
{
    char *path;
    char *zpath;
    Source *s;
    Source *t;
    SourcePosition p;
    Record rec;
    bool same = true;
    Err err = {0};
    (void) state;

    make_resume_data();
    path = fixture("h.csv", resume_data.data, resume_data.len);
    zpath = fixture_zstd("h.csv.zst", resume_data.data, resume_data.len, 2);
    assert_resume_after(path, NULL, 0); /* (also reads the fixture once) */
    assert_content_resume(path, 6, 1);  /* before a blank line */
    assert_content_resume(path, 30000, 5000);
    assert_content_resume(zpath, 30000, 9999);

    /* one byte changed beyond the first 64 KiB and before the position */
    s = open_ok(path, NULL);
    for (int i = 0; i < 30000; i++)
        next_ok(s, &rec);
    p = position(s);
    source_close(s);
    resume_data.data[200000] = resume_data.data[200000] == 'r' ? 'R' : 'r';
    free(fixture("h.csv", resume_data.data, resume_data.len));
    t = open_ok(path, NULL);
    if (!t->ops->resume(t, &p, &same, &err))
        fail_msg("resume: %s", err.msg);
    assert_false(same);
    next_ok(t, &rec); /* back at the first record */
    assert_int_equal(rec.line, 2);
    assert_text(&rec, 0, "1");
    source_close(t);
    buf_free(&resume_data);
    free(path);
    free(zpath);
}

static void
test_seek_without_header_keeps_counting_lines(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("rn.csv", "1,a\n2,\"b\nc\"\n3,d\n4,e\n");
    (void) state;

    o.header = false;
    assert_resume_after(path, &o, 0);
    assert_resume_after(path, &o, 2);
    assert_resume_after(path, &o, 3);
    free(path);
}

static void
test_seek_at_the_end_gives_end_of_input(void **state)
{
    char *path = fixture_str("end.csv", "a\n1\n2");
    Source *s = open_ok(path, NULL);
    Source *t;
    Record rec;
    SourcePosition p;
    Err err = {0};
    (void) state;

    next_ok(s, &rec);
    next_ok(s, &rec);
    p = position(s);
    t = open_ok(path, NULL);
    assert_true(t->ops->seek(t, &p, &err));
    assert_eof(t);
    source_close(s);
    source_close(t);
    free(path);
}

static void
test_seek_backwards_rereads_a_regular_file(void **state)
{
    char *path = fixture_str("back.csv", "a\n1\n2\n3\n");
    Source *s = open_ok(path, NULL);
    Record rec;
    SourcePosition p;
    Err err = {0};
    (void) state;

    next_ok(s, &rec);
    p = position(s);
    next_ok(s, &rec);
    next_ok(s, &rec);
    assert_true(s->ops->seek(s, &p, &err));
    next_ok(s, &rec);
    assert_text(&rec, 0, "2");
    assert_int_equal(rec.line, 3);
    source_close(s);
    free(path);
}

static void
test_seek_with_a_checkpoint_of_another_file_is_refused(void **state)
{
    char *a = fixture_str("one.csv", "x\n1\n2\n");
    char *b = fixture_str("two.csv", "x\n1\n3\n"); /* same size, other bytes */
    Source *s = open_ok(a, NULL);
    Source *t = open_ok(b, NULL);
    Record rec;
    SourcePosition p;
    Err err = {0};
    (void) state;

    next_ok(s, &rec);
    p = position(s);
    assert_false(t->ops->seek(t, &p, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_string_equal(err.msg, "checkpoint belongs to a different file");
    next_ok(t, &rec); /* the refused seek left it untouched */
    assert_text(&rec, 0, "1");
    source_close(s);
    source_close(t);
    free(a);
    free(b);
}

static void
test_seek_into_the_middle_of_a_record_is_refused(void **state)
{
    char *path = fixture_str("mid.csv", "a,b\n1,2\n3,4\n");
    Source *s = open_ok(path, NULL);
    SourcePosition p = position(s);
    Err err = {0};
    (void) state;

    p.offset += 2;
    assert_false(s->ops->seek(s, &p, &err));
    assert_int_equal(err.code, EC_CONFIG);
    assert_non_null(strstr(err.msg, "not at a record boundary"));
    source_close(s);
    free(path);
}

static SourcePosition stdin_pos;
static char stdin_next_raw[64];

static void
seek_stdin(void)
{
    Source *s = open_ok("-", NULL);
    Err err = {0};
    Record rec;

    assert_string_equal(position(s).identity, "stdin");
    if (!s->ops->seek(s, &stdin_pos, &err))
        fail_msg("seek: %s", err.msg);
    next_ok(s, &rec);
    snprintf(stdin_next_raw, sizeof stdin_next_raw, "%.*s@%llu", (int) rec.raw_len, rec.raw,
             (unsigned long long) rec.line);
    source_close(s);
}

static void
test_seek_on_stdin_skips_forward(void **state)
{
    char *path;
    char *zst;
    Source *s;
    Record rec;
    char want[64];
    (void) state;

    make_resume_data();
    path = fixture("sr.csv", resume_data.data, resume_data.len);
    zst = fixture_zstd("sr.csv.zst", resume_data.data, resume_data.len, 1);
    s = open_ok(path, NULL);
    for (int i = 0; i < 30000; i++)
        next_ok(s, &rec);
    stdin_pos = position(s);
    snprintf(stdin_pos.identity, sizeof stdin_pos.identity, "stdin");
    next_ok(s, &rec);
    snprintf(want, sizeof want, "%.*s@%llu", (int) rec.raw_len, rec.raw,
             (unsigned long long) rec.line);
    assert_string_equal(want, "30001,row 30001\n@34313");
    source_close(s);

    with_stdin(path, seek_stdin);
    assert_string_equal(stdin_next_raw, want);
    stdin_next_raw[0] = '\0';
    with_stdin(zst, seek_stdin);
    assert_string_equal(stdin_next_raw, want);
    buf_free(&resume_data);
    free(path);
    free(zst);
}

/* ------------------------------------------------------------- options */

static void
test_escape_character_unescapes_quotes_inside_quoted_fields(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("esc.csv", "a,b\n\"x\\\"y\",\"p\\\\q\"\n\"\\N\",\\N\n"
                                        "\"multi\\\"\nline\",c:\\dir\n\"z\"w,1\n5,ok\n");
    Source *s;
    Record rec;
    (void) state;

    o.escape = '\\';
    o.null_string = "\\N";
    s = open_ok(path, &o);
    next_ok(s, &rec);
    assert_text(&rec, 0, "x\"y");
    assert_text(&rec, 1, "p\\q");
    next_ok(s, &rec);
    assert_text(&rec, 0, "\\N"); /* quoted: text */
    assert_sql_null(&rec, 1);
    next_ok(s, &rec);
    assert_text(&rec, 0, "multi\"\nline");
    assert_text(&rec, 1, "c:\\dir"); /* outside quotes an escape is literal */
    next_ok(s, &rec);
    assert_string_equal(rec.error, "unexpected character after a closing quote at line 6, byte 4");
    next_ok(s, &rec);
    assert_int_equal(rec.line, 7);
    assert_null(rec.error);
    source_close(s);
    free(path);
}

static void
test_other_delimiter_and_quote_characters_work(void **state)
{
    CsvOptions o = opts_default();
    char *path = fixture_str("semi.csv", "a;b\n'x;y';'it''s'\n");
    Source *s;
    Record rec;
    (void) state;

    o.delimiter = ';';
    o.quote = '\'';
    s = open_ok(path, &o);
    next_ok(s, &rec);
    assert_text(&rec, 0, "x;y");
    assert_text(&rec, 1, "it's");
    source_close(s);
    free(path);
}

static void
test_conflicting_options_are_usage_errors(void **state)
{
    char *path = fixture_str("opt.csv", "a\n");
    CsvOptions o;
    Source *s = NULL;
    Err err = {0};
    (void) state;

    o = opts_default();
    o.quote = ',';
    assert_false(source_csv_open(path, &o, &s, &err));
    assert_int_equal(err.code, EC_USAGE);
    o = opts_default();
    o.delimiter = '\n';
    assert_false(source_csv_open(path, &o, &s, &err));
    assert_int_equal(err.code, EC_USAGE);
    o = opts_default();
    o.null_string = "a,b";
    assert_false(source_csv_open(path, &o, &s, &err));
    assert_int_equal(err.code, EC_USAGE);
    o = opts_default();
    o.escape = ',';
    assert_false(source_csv_open(path, &o, &s, &err));
    assert_int_equal(err.code, EC_USAGE);
    assert_null(s);
    free(path);
}

/* ----------------------------------------------------- identity, progress */

static void
test_identity_names_path_size_and_a_fingerprint(void **state)
{
    char *path = fixture_str("ident.csv", "a\n1\n");
    char *real = realpath(path, NULL);
    Source *s = open_ok(path, NULL);
    SourcePosition p = position(s);
    char want[512];
    (void) state;

    /* path | size | sha256 of the first 64 KiB (here: all of "a\n1\n") */
    snprintf(want, sizeof want, "%s|4|%s", real,
             "309b0e45a73d3fc5325e2b6ed0a01ef8b9cde6b05a5633c1f893f970d52bfddc");
    assert_string_equal(p.identity, want);
    assert_string_equal(s->ops->name(s), "ident.csv");
    source_close(s);
    free(real);
    free(path);
}

/* A pipe named by a path (as with <(zstdcat ...)) carries other bytes each
 * run: it must not get an identity a checkpoint could match. */
static void
test_a_pipe_given_by_path_is_never_fingerprinted(void **state)
{
    int fds[2];
    char path[64];
    Source *s;
    Record rec;
    uint64_t done;
    uint64_t total;
    (void) state;

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "a\n1\n", 4), 4);
    close(fds[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    s = open_ok(path, NULL);
    assert_string_equal(position(s).identity, "stdin");
    next_ok(s, &rec);
    assert_text(&rec, 0, "1");
    s->ops->progress(s, &done, &total);
    assert_int_equal(done, 4);
    assert_int_equal(total, 0); /* unknown */
    source_close(s);
    close(fds[0]);
}

static void
test_progress_counts_bytes_read_against_the_file_size(void **state)
{
    char *path;
    Source *s;
    uint64_t done;
    uint64_t total;
    (void) state;

    make_resume_data();
    path = fixture_zstd("p.csv.zst", resume_data.data, resume_data.len, 1);
    s = open_ok(path, NULL);
    assert_true(drain(s, &(Err){0}));
    s->ops->progress(s, &done, &total);
    assert_true(total > 0);
    assert_true(total < resume_data.len); /* compressed bytes, not decompressed */
    assert_int_equal(done, total);
    source_close(s);
    buf_free(&resume_data);
    free(path);
}

static void
test_missing_file_is_an_io_error_naming_it(void **state)
{
    Source *s = NULL;
    Err err = {0};
    (void) state;

    assert_false(source_csv_open("/nonexistent/dir/x.csv", NULL, &s, &err));
    assert_int_equal(err.code, EC_IO);
    assert_non_null(strstr(err.msg, "\"/nonexistent/dir/x.csv\""));
}

/* Raw bytes of consecutive records tile the input exactly and each position
 * is the offset just past its record. */
static void
test_raw_bytes_and_positions_tile_the_input(void **state)
{
    const char *text = "a,b\n1,\"x\ny\"\r\n2,z\r3,\n4,\"\"";
    char *path = fixture_str("tile.csv", text);
    Source *s = open_ok(path, NULL);
    uint64_t off = position(s).offset;
    Buf cat;
    (void) state;

    buf_init(&cat);
    assert_int_equal(off, 4);
    for (;;)
    {
        Record rec;
        bool eof;
        Err err = {0};

        assert_true(source_next(s, &rec, &eof, &err));
        if (eof)
            break;
        buf_append(&cat, rec.raw, rec.raw_len);
        off += rec.raw_len;
        assert_int_equal(position(s).offset, off);
    }
    assert_string_equal(cat.data, text + 4);
    buf_free(&cat);
    source_close(s);
    free(path);
}

/* ------------------------------------------------------- reader (COPY OUT) */

typedef struct MemReader
{
    const char *data;
    size_t len;
    size_t off;
    size_t step;   /* at most this many bytes per call */
    size_t fail_at; /* fail once off reaches this (0: never) */
} MemReader;

static bool
mem_read(void *ctx, void *dst, size_t cap, size_t *got, Err *err)
{
    MemReader *m = ctx;
    size_t n = m->len - m->off;

    if (m->fail_at && m->off >= m->fail_at)
        return err_set(err, EC_PG_CONNECT, "initial copy failed: server closed the connection");
    if (n > m->step)
        n = m->step;
    if (n > cap)
        n = cap;
    memcpy(dst, m->data + m->off, n);
    m->off += n;
    *got = n;
    return true;
}

/* COPY ... (FORMAT csv, HEADER true) output handed over a byte at a time:
 * the same records as from a file, NULL apart from "", named as given. */
static void
test_reader_reads_copy_csv_in_any_pieces(void **state)
{
    static const char copy[] = "id,note,\"odd \"\"name\"\"\"\n"
                               "1,\"a,b\",x\n"
                               "2,,\"\"\n"
                               "3,\"two\nlines\",\"\"\"q\"\"\"\n";
    (void) state;
    for (size_t step = 1; step <= sizeof copy; step += 7)
    {
        MemReader m = {copy, sizeof copy - 1, 0, step, 0};
        Source *src = NULL;
        Err err = {0};
        Record rec;
        bool eof = false;
        size_t ncols;
        const char *const *cols;

        assert_true(source_csv_open_reader("public.orders (snapshot)", mem_read, &m, NULL, &src,
                                           &err));
        assert_string_equal(src->ops->name(src), "public.orders (snapshot)");
        cols = src->ops->columns(src, &ncols);
        assert_int_equal(ncols, 3);
        assert_string_equal(cols[2], "odd \"name\"");
        assert_true(source_next(src, &rec, &eof, &err));
        assert_false(eof);
        assert_null(rec.error);
        assert_int_equal(rec.fields[1].len, 3);
        assert_memory_equal(rec.fields[1].data, "a,b", 3);
        assert_true(source_next(src, &rec, &eof, &err));
        assert_true(rec.fields[1].is_null);
        assert_false(rec.fields[2].is_null);
        assert_int_equal(rec.fields[2].len, 0);
        assert_true(source_next(src, &rec, &eof, &err));
        assert_memory_equal(rec.fields[1].data, "two\nlines", 9);
        assert_memory_equal(rec.fields[2].data, "\"q\"", 3);
        assert_int_equal(rec.line, 4);
        assert_true(source_next(src, &rec, &eof, &err));
        assert_true(eof);
        source_close(src);
    }
}

/* A read failure midway is the source's error, with the reader's message. */
static void
test_reader_failure_is_the_sources_error(void **state)
{
    static const char copy[] = "id\n1\n2\n3\n";
    MemReader m = {copy, sizeof copy - 1, 0, 2, 5};
    Source *src = NULL;
    Err err = {0};
    Record rec;
    bool eof = false;
    bool ok = true;

    (void) state;
    assert_true(source_csv_open_reader("t (snapshot)", mem_read, &m, NULL, &src, &err));
    while (ok && !eof)
        ok = source_next(src, &rec, &eof, &err);
    assert_false(ok);
    assert_int_equal(err.code, EC_PG_CONNECT);
    assert_non_null(strstr(err.msg, "server closed the connection"));
    source_close(src);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quoted_fields_keep_delimiters_and_doubled_quotes),
        cmocka_unit_test(test_embedded_newline_keeps_raw_bytes_and_line_numbers),
        cmocka_unit_test(test_crlf_lf_and_mixed_line_endings_give_the_same_records),
        cmocka_unit_test(test_lone_cr_ends_a_line_as_libcsv_ends_a_row),
        cmocka_unit_test(test_lone_cr_inside_quotes_is_not_a_line),
        cmocka_unit_test(test_bom_at_file_start_is_skipped_before_the_header),
        cmocka_unit_test(test_final_line_without_terminator_is_a_record),
        cmocka_unit_test(test_unquoted_empty_is_null_and_quoted_empty_is_text),
        cmocka_unit_test(test_null_string_applies_only_to_unquoted_fields),
        cmocka_unit_test(test_spaces_around_fields_are_kept),
        cmocka_unit_test(test_random_records_round_trip),
        cmocka_unit_test(test_records_read_without_libcsv_match_libcsv),
        cmocka_unit_test(test_copy_plain_tells_records_without_escapes),
        cmocka_unit_test(test_blank_lines_are_skipped_but_counted),
        cmocka_unit_test(test_blank_line_in_a_single_column_file_is_a_null_row),
        cmocka_unit_test(test_wrong_field_count_is_a_record_error_and_reading_continues),
        cmocka_unit_test(test_invalid_utf8_is_a_record_error_naming_field_and_offset),
        cmocka_unit_test(test_nul_byte_is_a_record_error_even_without_utf8_checks),
        cmocka_unit_test(test_stray_quote_rejects_one_record_and_reading_resumes_at_next_line),
        cmocka_unit_test(test_unterminated_quote_at_eof_is_fatal_and_names_the_starting_line),
        cmocka_unit_test(test_record_longer_than_the_maximum_is_fatal_naming_its_line),
        cmocka_unit_test(test_records_larger_than_the_read_window_are_whole),
        cmocka_unit_test(test_header_only_file_has_zero_records),
        cmocka_unit_test(test_empty_file_is_an_error_with_header_and_has_zero_records_without),
        cmocka_unit_test(test_duplicate_or_empty_header_names_are_errors),
        cmocka_unit_test(test_header_ending_in_a_delimiter_names_its_last_column_cn),
        cmocka_unit_test(test_without_header_columns_are_c1_to_cn_and_the_first_line_is_data),
        cmocka_unit_test(test_zstd_input_gives_identical_records_to_plain_input),
        cmocka_unit_test(test_concatenated_zstd_frames_read_as_one_stream),
        cmocka_unit_test(test_truncated_zstd_is_an_error_naming_the_file),
        cmocka_unit_test(test_corrupt_zstd_data_reports_zstds_error),
        cmocka_unit_test(test_corrupt_zstd_frame_hands_on_no_record),
        cmocka_unit_test(test_zst_suffix_without_zstd_data_is_an_error),
        cmocka_unit_test(test_stdin_reads_plain_and_zstd_input),
        cmocka_unit_test(test_stdin_pipe_in_small_pieces_gives_the_same_records),
        cmocka_unit_test(test_seek_after_n_records_resumes_at_the_next_record_in_plain_files),
        cmocka_unit_test(test_seek_after_n_records_resumes_at_the_next_record_in_zstd_files),
        cmocka_unit_test(test_resume_checks_the_content),
        cmocka_unit_test(test_seek_without_header_keeps_counting_lines),
        cmocka_unit_test(test_seek_at_the_end_gives_end_of_input),
        cmocka_unit_test(test_seek_backwards_rereads_a_regular_file),
        cmocka_unit_test(test_seek_with_a_checkpoint_of_another_file_is_refused),
        cmocka_unit_test(test_seek_into_the_middle_of_a_record_is_refused),
        cmocka_unit_test(test_seek_on_stdin_skips_forward),
        cmocka_unit_test(test_escape_character_unescapes_quotes_inside_quoted_fields),
        cmocka_unit_test(test_other_delimiter_and_quote_characters_work),
        cmocka_unit_test(test_conflicting_options_are_usage_errors),
        cmocka_unit_test(test_identity_names_path_size_and_a_fingerprint),
        cmocka_unit_test(test_a_pipe_given_by_path_is_never_fingerprinted),
        cmocka_unit_test(test_progress_counts_bytes_read_against_the_file_size),
        cmocka_unit_test(test_missing_file_is_an_io_error_naming_it),
        cmocka_unit_test(test_raw_bytes_and_positions_tile_the_input),
        cmocka_unit_test(test_reader_reads_copy_csv_in_any_pieces),
        cmocka_unit_test(test_reader_failure_is_the_sources_error),
    };
    return cmocka_run_group_tests_name("source_csv", tests, setup_dir, remove_dir);
}
