/*
 * Unit tests for resume_index.c: which inputs may have an unfinished
 * checkpoint's identity, told from their size and path, and the identity
 * format of source_csv.c it reads.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "v7fill/mem.h"
#include "v7fill/resume_index.h"
#include "v7fill/source_csv.h"

static char tmpdir[] = "/tmp/v7fill-resume-index-XXXXXX";

static int
setup(void **state)
{
    (void) state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int
teardown(void **state)
{
    char *cmd = xasprintf("rm -rf '%s'", tmpdir);
    int rc = system(cmd);

    (void) state;
    free(cmd);
    return rc == 0 ? 0 : -1;
}

/* Write `text` to `path` (taken over and returned). */
static char *
write_file(char *path, const char *text)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    return path;
}

/* The identity source_csv gives the file (what a checkpoint stores). */
static char *
identity_of(const char *path)
{
    Source *s = NULL;
    SourcePosition pos;
    Err err = {0};

    assert_true(source_csv_open(path, NULL, &s, &err));
    s->ops->position(s, &pos);
    source_close(s);
    return xstrdup(pos.identity);
}

static ResumeIndex *
index_of(const char *const *identities, size_t n)
{
    char **ids = xcalloc(n ? n : 1, sizeof *ids);

    for (size_t i = 0; i < n; i++)
        ids[i] = xstrdup(identities[i]);
    return resume_index_new(ids, n);
}

static void
test_split_reads_path_and_size_from_the_right(void **state)
{
    size_t len = 0;
    uint64_t size = 0;
    (void) state;

    assert_true(source_csv_identity_split("/d/a|b.csv|4|09af", &len, &size));
    assert_int_equal(len, strlen("/d/a|b.csv"));
    assert_int_equal(size, 4);
    assert_true(source_csv_identity_split("/d/7|18446744073709551615|", &len, &size));
    assert_int_equal(len, 4);
    assert_true(size == UINT64_MAX);
    /* standard input's, another form, an overflowing size */
    assert_false(source_csv_identity_split("stdin", &len, &size));
    assert_false(source_csv_identity_split("stdin:0011223344556677", &len, &size));
    assert_false(source_csv_identity_split("4|09af", &len, &size));
    assert_false(source_csv_identity_split("/a||09af", &len, &size));
    assert_false(source_csv_identity_split("/a|4|09AF", &len, &size));
    assert_false(source_csv_identity_split("/a|4x|09af", &len, &size));
    assert_false(source_csv_identity_split("/a|18446744073709551616|09af", &len, &size));
}

/* The file a checkpoint names may match, by a relative path or through a
 * symbolic link; another size, another file of that size do not. */
static void
test_matches_by_size_and_canonical_path(void **state)
{
    char *a = write_file(xasprintf("%s/a.csv", tmpdir), "x\n1\n");
    char *b = write_file(xasprintf("%s/b.csv", tmpdir), "x\n2\n");
    char *link = xasprintf("%s/link.csv", tmpdir);
    char *ida = identity_of(a);
    char *idb = identity_of(b);
    const char *ids[] = {"stdin", ida, "an earlier version's"};
    ResumeIndex *ix = index_of(ids, 3);
    char *rel = xasprintf("../%s/a.csv", strrchr(tmpdir, '/') + 1);
    char cwd[PATH_MAX];
    char *other;
    (void) state;

    assert_int_equal(symlink(a, link), 0);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);
    assert_true(resume_index_may_match(ix, a, 4));
    assert_true(resume_index_may_match(ix, "a.csv", 4));
    assert_true(resume_index_may_match(ix, "./a.csv", 4));
    assert_true(resume_index_may_match(ix, rel, 4));
    assert_true(resume_index_may_match(ix, "link.csv", 4));
    assert_false(resume_index_may_match(ix, "a.csv", 5));
    assert_false(resume_index_may_match(ix, "b.csv", 4));
    assert_false(resume_index_may_match(ix, "missing.csv", 4));
    assert_int_equal(chdir(cwd), 0);
    assert_true(resume_index_has(ix, ida));
    assert_false(resume_index_has(ix, idb));
    assert_false(resume_index_has(ix, "stdin"));
    /* the same path and size, other first bytes: a candidate, not the identity */
    other = xstrdup(ida);
    other[strlen(other) - 1] = other[strlen(other) - 1] == '0' ? '1' : '0';
    assert_false(resume_index_has(ix, other));
    resume_index_free(ix);
    free(other);
    free(ida);
    free(idb);
    free(link);
    free(rel);
    free(a);
    free(b);
}

/* A path too long for the identity keeps its tail there: still a match. */
static void
test_a_long_path_matches_by_its_tail(void **state)
{
    Buf dir;
    char *path;
    char *id;
    char *twin;
    ResumeIndex *ix;
    (void) state;

    buf_init(&dir);
    buf_puts(&dir, tmpdir);
    for (int i = 0; i < 6; i++)
    {
        buf_printf(&dir, "/%s%d", "a-directory-name-of-forty-bytes-or-so-", i);
        assert_int_equal(mkdir(dir.data, 0700), 0);
    }
    path = write_file(xasprintf("%s/long.csv", dir.data), "x\n1\n");
    id = identity_of(path);
    assert_true(strstr(id, tmpdir) == NULL); /* the head was cut */
    ix = index_of((const char *const *) &id, 1);
    assert_true(resume_index_may_match(ix, path, 4));
    assert_true(resume_index_has(ix, id));
    /* another file of that size beside it: its tail differs */
    twin = write_file(xasprintf("%s/long2.csv", dir.data), "x\n2\n");
    assert_false(resume_index_may_match(ix, twin, 4));
    resume_index_free(ix);
    free(twin);
    free(id);
    free(path);
    buf_free(&dir);
}

static void
test_an_empty_index_matches_nothing(void **state)
{
    ResumeIndex *ix = resume_index_new(NULL, 0);
    (void) state;

    assert_false(resume_index_may_match(ix, "/etc/hostname", 0));
    assert_false(resume_index_has(ix, "/a|0|"));
    resume_index_free(ix);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_reads_path_and_size_from_the_right),
        cmocka_unit_test(test_matches_by_size_and_canonical_path),
        cmocka_unit_test(test_a_long_path_matches_by_its_tail),
        cmocka_unit_test(test_an_empty_index_matches_nothing),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
