/*
 * The rejects writer: the CSV it writes (quoting, the record's own line
 * terminator dropped), what rejects_sync makes durable and when it calls
 * fsync (once per sync that has something new; never for a batch without
 * rejects), and truncation on resume.  fsync is counted through the linker's
 * --wrap (see the Makefile).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "v7fill/rejects.h"

int __real_fsync(int fd);
int __wrap_fsync(int fd);

static int fsyncs;

int
__wrap_fsync(int fd)
{
    fsyncs++;
    return __real_fsync(fd);
}

static char *
temp_path(void)
{
    char *p = strdup("/tmp/v7fill-test-rejects.XXXXXX");
    int fd = mkstemp(p);

    assert_true(fd >= 0);
    close(fd);
    unlink(p); /* rejects_open creates it */
    return p;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s = calloc(1, 1 << 16);
    size_t n;

    assert_non_null(f);
    n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void
test_csv_rows(void **state)
{
    char *path = temp_path();
    Rejects *r = NULL;
    Err err;
    char *text;
    const char raw[] = "1,\"a \"\"b\"\"\",x\r\ny\r\n";

    (void) state;
    assert_true(rejects_open(path, &r, &err));
    assert_true(rejects_write(r, "in.csv", 7, "bad, \"very\" bad", "22P02", raw, strlen(raw),
                              &err));
    assert_true(rejects_write(r, "in.csv", 9, "clock ahead", NULL, "z", 1, &err));
    assert_true(rejects_sync(r, &err));
    text = slurp(path);
    assert_string_equal(text, "source,line,reason,sqlstate,record\n"
                              "\"in.csv\",7,\"bad, \"\"very\"\" bad\",22P02,"
                              "\"1,\"\"a \"\"\"\"b\"\"\"\"\"\",x\r\ny\"\n"
                              "\"in.csv\",9,\"clock ahead\",,\"z\"\n");
    assert_int_equal(rejects_size(r), strlen(text));
    free(text);
    rejects_close(r);
    unlink(path);
    free(path);
}

static void
test_fsync_only_when_new(void **state)
{
    char *path = temp_path();
    Rejects *r = NULL;
    Err err;

    (void) state;
    fsyncs = 0;
    assert_true(rejects_open(path, &r, &err));
    assert_int_equal(fsyncs, 1); /* the header */
    /* batches without rejects: nothing to make durable */
    for (int i = 0; i < 5; i++)
        assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 1);
    assert_true(rejects_write(r, "f", 1, "why", NULL, "x", 1, &err));
    assert_int_equal(fsyncs, 1); /* written on sync, not before */
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 2);
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 2);
    /* a cut is a change too */
    assert_true(rejects_truncate(r, 35, &err));
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 3);
    rejects_close(r);
    assert_int_equal(fsyncs, 3);

    /* reopening a file an earlier run left: its first sync makes that durable */
    assert_true(rejects_open(path, &r, &err));
    assert_int_equal(fsyncs, 3);
    assert_int_equal(rejects_size(r), 35);
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 4);
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 4);
    rejects_close(r);
    unlink(path);
    free(path);
}

static void
test_large_flush_still_synced(void **state)
{
    char *path = temp_path();
    Rejects *r = NULL;
    Err err;
    char *big = malloc(300000);

    (void) state;
    memset(big, 'q', 300000);
    assert_true(rejects_open(path, &r, &err));
    fsyncs = 0;
    /* more than the 1 MiB buffer: written before the sync, which must still fsync */
    for (int i = 0; i < 5; i++)
        assert_true(rejects_write(r, "f", (uint64_t) i + 2, "long", NULL, big, 300000, &err));
    assert_true(rejects_sync(r, &err));
    assert_int_equal(fsyncs, 1);
    rejects_close(r);
    free(big);
    unlink(path);
    free(path);
}

static void
test_truncate_resume(void **state)
{
    char *path = temp_path();
    Rejects *r = NULL;
    Err err;
    uint64_t committed;
    char *text;

    (void) state;
    assert_true(rejects_open(path, &r, &err));
    assert_true(rejects_write(r, "f", 2, "one", NULL, "a", 1, &err));
    assert_true(rejects_sync(r, &err));
    committed = rejects_size(r);
    assert_true(rejects_write(r, "f", 3, "two", NULL, "b", 1, &err));
    assert_true(rejects_sync(r, &err)); /* the batch then failed to commit */
    rejects_close(r);

    assert_true(rejects_open(path, &r, &err));
    assert_true(rejects_truncate(r, committed, &err));
    assert_int_equal(rejects_size(r), committed);
    assert_false(rejects_truncate(r, committed + 1, &err));
    assert_non_null(strstr(err.msg, "shorter"));
    rejects_close(r);
    text = slurp(path);
    assert_string_equal(text, "source,line,reason,sqlstate,record\n\"f\",2,\"one\",,\"a\"\n");
    free(text);
    unlink(path);
    free(path);
}

/* A resume cuts back only rows of its own input after its checkpoint's line,
 * in the file the checkpoint recorded. */
static void
test_resume_cuts_only_its_own_rows(void **state)
{
    char *path = temp_path();
    char id[48];
    Rejects *r = NULL;
    RejectsResume how;
    Err err;
    uint64_t committed;
    char *text;

    (void) state;
    assert_true(rejects_open(path, &r, &err));
    assert_true(rejects_write(r, "a.csv", 2, "one", NULL, "x", 1, &err));
    assert_true(rejects_sync(r, &err));
    committed = rejects_size(r);
    (void) snprintf(id, sizeof id, "%s", rejects_file_id(r));
    assert_true(id[0] != '\0');
    /* uncommitted rows of a.csv after line 10, one with quotes, commas, a newline */
    assert_true(rejects_write(r, "a.csv", 11, "two", "22P02", "b,\"c\"\nd", 8, &err));
    assert_true(rejects_write(r, "a.csv", 12, "three", NULL, "e", 1, &err));
    assert_true(rejects_sync(r, &err));
    rejects_close(r);

    assert_true(rejects_open(path, &r, &err));
    /* another input's checkpoint records the file longer: rows it committed
     * under the same name (another directory's a.csv), not cut */
    assert_true(rejects_resume(r, path, id, committed, committed + 1, "a.csv", 10, &how, &err));
    assert_int_equal(how, REJECTS_FOREIGN);
    assert_true(rejects_resume(r, path, id, committed, 0, "a.csv", 10, &how, &err));
    assert_int_equal(how, REJECTS_CUT);
    assert_int_equal(rejects_size(r), committed);
    /* another input's row follows: kept */
    assert_true(rejects_write(r, "b.csv", 40, "other", NULL, "f", 1, &err));
    assert_true(rejects_sync(r, &err));
    assert_true(rejects_resume(r, path, id, committed, 0, "a.csv", 10, &how, &err));
    assert_int_equal(how, REJECTS_FOREIGN);
    /* a row of the same input at or before the checkpoint's line: not its own */
    assert_true(rejects_resume(r, path, id, committed, 0, "b.csv", 40, &how, &err));
    assert_int_equal(how, REJECTS_FOREIGN);
    /* another file, by identity; by path when none was recorded */
    assert_true(rejects_resume(r, path, "1:2", committed, 0, "b.csv", 1, &how, &err));
    assert_int_equal(how, REJECTS_OTHER_FILE);
    assert_true(rejects_resume(r, "elsewhere.csv", "", committed, 0, "b.csv", 1, &how, &err));
    assert_int_equal(how, REJECTS_OTHER_FILE);
    /* a last row of the input cut short (killed mid-write): cut with the rest */
    {
        uint64_t before = rejects_size(r);
        const char partial[] = "\"a.c";
        int fd = open(path, O_WRONLY | O_APPEND);

        assert_true(rejects_write(r, "a.csv", 50, "own", NULL, "g", 1, &err));
        assert_true(rejects_sync(r, &err));
        assert_true(fd >= 0);
        assert_int_equal(write(fd, partial, sizeof partial - 1), (ssize_t) sizeof partial - 1);
        close(fd);
        rejects_close(r);
        assert_true(rejects_open(path, &r, &err));
        assert_true(rejects_resume(r, path, id, before, 0, "a.csv", 40, &how, &err));
        assert_int_equal(how, REJECTS_CUT);
        assert_int_equal(rejects_size(r), before);
    }
    /* shorter than recorded: nothing cut */
    assert_true(rejects_resume(r, path, id, rejects_size(r) + 100, 0, "b.csv", 1, &how, &err));
    assert_int_equal(how, REJECTS_SHORTER);
    rejects_close(r);
    text = slurp(path);
    assert_string_equal(text, "source,line,reason,sqlstate,record\n\"a.csv\",2,\"one\",,\"x\"\n"
                              "\"b.csv\",40,\"other\",,\"f\"\n");
    free(text);
    unlink(path);
    free(path);
}

/* The late-rows file quotes every field, the line too: its own rows past the
 * checkpoint are cut all the same, another input's kept. */
static void
test_resume_reads_a_quoted_line(void **state)
{
    const char *own[] = {"a.csv", "11", "expired", "x,\"y\""};
    const char *other[] = {"b.csv", "11", "expired", "z"};
    char *path = temp_path();
    Rejects *r = NULL;
    RejectsResume how;
    const char *id;
    uint64_t committed;
    Err err;

    (void) state;
    assert_true(rejects_open_csv(path, "source,line,class,id\n", "late-rows file", &r, &err));
    committed = rejects_size(r);
    id = rejects_file_id(r);
    assert_true(rejects_write_row(r, own, 4, &err));
    assert_true(rejects_sync(r, &err));
    assert_true(rejects_resume(r, path, id, committed, 0, "a.csv", 10, &how, &err));
    assert_int_equal(how, REJECTS_CUT);
    assert_int_equal(rejects_size(r), committed);
    assert_true(rejects_write_row(r, other, 4, &err));
    assert_true(rejects_sync(r, &err));
    assert_true(rejects_resume(r, path, id, committed, 0, "a.csv", 10, &how, &err));
    assert_int_equal(how, REJECTS_FOREIGN);
    /* at or before the checkpoint's line: not cut */
    assert_true(rejects_resume(r, path, id, committed, 0, "b.csv", 11, &how, &err));
    assert_int_equal(how, REJECTS_FOREIGN);
    rejects_close(r);
    unlink(path);
    free(path);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_rows),
        cmocka_unit_test(test_fsync_only_when_new),
        cmocka_unit_test(test_large_flush_still_synced),
        cmocka_unit_test(test_truncate_resume),
        cmocka_unit_test(test_resume_cuts_only_its_own_rows),
        cmocka_unit_test(test_resume_reads_a_quoted_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
