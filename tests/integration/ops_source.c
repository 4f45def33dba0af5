/*
 * Test helper: a Source that emits row operations from a tiny script, driven
 * through the real pipeline (open, setup, attach, run, close) into a target.
 *
 *   ops_source TABLE SCRIPT [BATCH_ROWS]     (connection from the PG* environment)
 *
 * The source's columns are ref, created_at, v; the reference is "{ref}" and
 * the time column created_at.  One record per line of SCRIPT:
 *
 *   I,ref,time,v        insert
 *   U,ref,time,v        update; time or v "u": unchanged (not sent)
 *   M,old,ref,time,v    update whose key changed from old to ref
 *   D,ref               delete (time and v NULL, as a pgoutput 'K' tuple)
 *   T                   truncate
 *   B                   boundary: end the batch now
 *
 * A value "~N" is N bytes 'x'; "NULL" is NULL.  Every reject is printed as
 * "reject LINE: REASON", then the statistics as name=value lines, then the
 * import's summary of them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/import_report.h"
#include "v7fill/log.h"
#include "v7fill/pg.h"
#include "v7fill/pipeline.h"

#define MAXF 4

typedef struct OpsSource
{
    Source base;
    FILE *f;
    uint64_t line;
    char *text;  /* the line read */
    size_t text_cap;
    char *big[MAXF];
    Field fields[3];
    Field old[3];
} OpsSource;

static const char *const columns[] = {"ref", "created_at", "v"};

static void
set_value(OpsSource *s, Field *f, int slot, char *v)
{
    memset(f, 0, sizeof *f);
    if (strcmp(v, "u") == 0)
        f->unchanged = true, f->is_null = true;
    else if (strcmp(v, "NULL") == 0)
        f->is_null = true;
    else if (v[0] == '~')
    {
        size_t n = strtoul(v + 1, NULL, 10);

        free(s->big[slot]);
        s->big[slot] = malloc(n + 1);
        memset(s->big[slot], 'x', n);
        s->big[slot][n] = '\0';
        f->data = s->big[slot];
        f->len = n;
    }
    else
    {
        f->data = v;
        f->len = strlen(v);
    }
}

static bool
ops_next(Source *src, Record *rec, bool *eof, Err *err)
{
    OpsSource *s = (OpsSource *) src;
    char *tok[6] = {0};
    size_t ntok = 0;
    ssize_t got;

    (void) err;
    got = getline(&s->text, &s->text_cap, s->f);
    if (got < 0)
    {
        *eof = true;
        return true;
    }
    s->line++;
    if (got > 0 && s->text[got - 1] == '\n')
        s->text[--got] = '\0';
    rec->line = s->line;
    rec->raw = s->text;
    rec->raw_len = (size_t) got;
    for (char *p = s->text, *save = NULL; ntok < 6 && (tok[ntok] = strtok_r(p, ",", &save));
         p = NULL)
        ntok++;
    if (ntok == 0)
        return ops_next(src, rec, eof, err);
    rec->nfields = 3;
    rec->fields = s->fields;
    rec->error = NULL;
    rec->copy_plain = false;
    char nul[] = "NULL";
    switch (tok[0][0])
    {
        case 'I':
        case 'U':
            rec->op = tok[0][0] == 'I' ? REC_INSERT : REC_UPDATE;
            set_value(s, &s->fields[0], 0, tok[1]);
            set_value(s, &s->fields[1], 1, tok[2]);
            set_value(s, &s->fields[2], 2, tok[3]);
            break;
        case 'M':
            rec->op = REC_UPDATE;
            set_value(s, &s->old[0], 3, tok[1]);
            set_value(s, &s->old[1], 3, nul);
            set_value(s, &s->old[2], 3, nul);
            rec->old_fields = s->old;
            set_value(s, &s->fields[0], 0, tok[2]);
            set_value(s, &s->fields[1], 1, tok[3]);
            set_value(s, &s->fields[2], 2, tok[4]);
            break;
        case 'D':
            rec->op = REC_DELETE;
            set_value(s, &s->fields[0], 0, tok[1]);
            set_value(s, &s->fields[1], 1, nul);
            set_value(s, &s->fields[2], 2, nul);
            break;
        case 'T':
            rec->op = REC_TRUNCATE;
            break;
        case 'B':
            rec->op = REC_BOUNDARY;
            break;
        default:
            fprintf(stderr, "line %" PRIu64 ": unknown operation %s\n", s->line, tok[0]);
            exit(70);
    }
    return true;
}

static const char *const *
ops_columns(Source *src, size_t *n)
{
    (void) src;
    *n = 3;
    return columns;
}

static void
ops_position(Source *src, SourcePosition *pos)
{
    OpsSource *s = (OpsSource *) src;

    memset(pos, 0, sizeof *pos);
    pos->line = s->line;
    pos->records = s->line;
}

static bool
ops_seek(Source *src, const SourcePosition *pos, Err *err)
{
    (void) src;
    (void) pos;
    return err_set(err, EC_INTERNAL, "not seekable");
}

static bool
ops_resume(Source *src, const SourcePosition *pos, bool *same, Err *err)
{
    (void) src;
    (void) pos;
    (void) err;
    *same = false;
    return true;
}

static void
ops_progress(Source *src, uint64_t *done, uint64_t *total)
{
    OpsSource *s = (OpsSource *) src;
    *done = s->line;
    *total = 0;
}

static const char *
ops_name(Source *src)
{
    (void) src;
    return "ops";
}

static void
ops_close(Source *src)
{
    (void) src;
}

static const SourceOps ops = {ops_next,     ops_columns, ops_position, ops_seek,
                              ops_resume,   ops_progress, ops_name,     ops_close};

static void
hook_origin(void *ctx, uint64_t origin, char *out, size_t size)
{
    (void) ctx;
    (void) snprintf(out, size, "ops:%" PRIu64, origin);
}

static void
hook_where(void *ctx, const SourcePosition *pos, char *out, size_t size)
{
    (void) ctx;
    (void) snprintf(out, size, "line %" PRIu64, pos->line);
}

static bool
hook_reject(void *ctx, uint64_t origin, const char *reason, const char *sqlstate, const char *raw,
            size_t raw_len, Err *err)
{
    (void) ctx;
    (void) raw;
    (void) raw_len;
    (void) err;
    printf("reject %" PRIu64 ": %s%s%s\n", origin, reason, sqlstate[0] ? " SQLSTATE " : "",
           sqlstate);
    return true;
}

int
main(int argc, char **argv)
{
    PipelineOptions o;
    PipelineInputs inputs = {"op script", 1, 1, false, 0, 0, 0};
    PipelineHooks hooks = {0};
    ImportStats st;
    OpsSource s = {0};
    PgConn *c = NULL;
    Pipeline *p = NULL;
    Err err = {0};
    bool ok;

    if (argc < 3)
    {
        fprintf(stderr, "usage: ops_source TABLE SCRIPT [BATCH_ROWS]\n");
        return 2;
    }
    s.base.ops = &ops;
    s.f = fopen(argv[2], "r");
    if (!s.f)
    {
        perror(argv[2]);
        return 1;
    }
    pipeline_options_default(&o);
    o.table = argv[1];
    o.time_column = "created_at";
    o.source_ref = "{ref}";
    if (argc > 3)
        o.batch_rows = strtoul(argv[3], NULL, 10);
    hooks.origin = hook_origin;
    hooks.where = hook_where;
    hooks.reject = hook_reject;
    ok = pg_connect(NULL, &c, &err) && pipeline_open(c, &o, &inputs, &st, &p, &err) &&
         pipeline_setup(p, &err) && pipeline_attach(p, &s.base, false, &hooks, &err) &&
         pipeline_run(p, &err);
    if (p)
        ok = pipeline_close(p, ok, &err) && ok;
    if (!ok)
        log_err(&err);
    printf("read=%" PRIu64 "\ninserted=%" PRIu64 "\nduplicates=%" PRIu64 "\nrejected=%" PRIu64
           "\nexpired=%" PRIu64 "\nupdated=%" PRIu64 "\ndeleted=%" PRIu64 "\nmissing=%" PRIu64
           "\nmissing_deletes=%" PRIu64 "\ntime_changed=%" PRIu64 "\ntruncates=%" PRIu64
           "\nbatches=%" PRIu64 "\nbalanced=%d\n",
           st.read, st.inserted, st.duplicates, st.rejected, st.expired, st.updated, st.deleted,
           st.missing, st.missing_deletes, st.time_changed, st.truncates, st.batches,
           import_stats_balanced(&st));
    import_report_print(stdout, &st, false);
    pipeline_free(p);
    import_stats_free(&st);
    pg_close(c);
    fclose(s.f);
    free(s.text);
    for (int i = 0; i < MAXF; i++)
        free(s.big[i]);
    return ok ? 0 : err.code;
}
