/*
 * The file import: a list of CSV/zstd files, each one Source handed to the
 * pipeline, with per-file checkpoints, --skip-finished, the rejects and
 * late-rows files and the closing ANALYZE and VACUUM.  The batches are the
 * pipeline's: this file plugs in the hooks that store a file's checkpoint in
 * each batch's transaction and write its rejects and late rows.
 */
#include "v7fill/import.h"

#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "v7fill/import_report.h"
#include "v7fill/interrupt.h"
#include "v7fill/load_analyze.h"
#include "v7fill/log.h"
#include "v7fill/monotime.h"
#include "v7fill/rejects.h"
#include "v7fill/resume_index.h"
#include "v7fill/run_history.h"
#include "v7fill/state.h"

/* What the start of the run found in the rejects and late-rows files past the
 * checkpoint of an input it may resume, and cut (importer_cut_outputs); the
 * resume of that input says so. */
typedef struct OutputsCut
{
    char identity[256]; /* the input's ("": its resume has taken it) */
    RejectsResume rejects;
    RejectsResume late;
} OutputsCut;

typedef struct Importer
{
    PgConn *conn;
    const ImportOptions *o;
    ImportStats *st;
    Pipeline *pl;
    const TargetTable *target;
    const char *target_q;
    const char *lookup_q;
    Rejects *rejects;
    Rejects *late;     /* late-rows output (expired and near-cutoff rows) */
    PipelineHooks hooks;
    PipelineInputs inputs;
    /* per file */
    Source *src;
    const char *src_name;
    char identity[256];
    bool use_checkpoint;
    char *options_text; /* the options that decide rows and ids (importer_options_text) */
    Checkpoint cp;      /* committed state of the current file */
    Checkpoint next;    /* as of the batch being committed (writer thread) */
    uint64_t rejects_before; /* the outputs' lengths when the batch began */
    uint64_t late_before;
    size_t files_done;   /* files this run read to their end */
    bool checkpoints;    /* v7fill.checkpoint can be read (plan creates nothing) */
    size_t files_empty;       /* 0-byte files passed over (several files, with a header) */
    char first_empty[256];    /* the first of them, printable */
    PgConn *side;             /* the run rows recorded while importing (reading thread) */
    size_t recorded;          /* run rows written so far */
    size_t record_failures;   /* periodic run rows that could not be written */
    double record_retry_at;   /* then not before this (pipeline_elapsed) */
    RunRowPending pending;    /* a run row whose answer was lost (run_history.h) */
    PipelineSegment resumed;  /* counts in st that earlier runs accounted for */
    OutputsCut *cuts;         /* decided before any input was read */
    size_t ncuts;
} Importer;

void
import_options_default(ImportOptions *o)
{
    memset(o, 0, sizeof *o);
    pipeline_options_default(&o->common);
    csv_options_default(&o->csv);
    o->record_every_s = 60;
}

/* Where the rejects and late-rows files stand, for the checkpoint: a resume
 * cuts back to there only the file it names, and only the rows past it that
 * are the input's own (rejects_resume). */
static void
importer_note_outputs(const Importer *im, Checkpoint *cp)
{
    bool late = rejects_file_id(im->late)[0] != '\0';

    cp->rejects_size = rejects_size(im->rejects);
    (void) snprintf(cp->rejects_path, sizeof cp->rejects_path, "%s", rejects_path(im->rejects));
    (void) snprintf(cp->rejects_file, sizeof cp->rejects_file, "%s",
                    rejects_file_id(im->rejects));
    cp->late_size = rejects_size(im->late);
    (void) snprintf(cp->late_path, sizeof cp->late_path, "%s", late ? rejects_path(im->late) : "");
    (void) snprintf(cp->late_file, sizeof cp->late_file, "%s", rejects_file_id(im->late));
}

/* ---- files --------------------------------------------------------------- */

/* plan --skip-finished: can the checkpoints be read (plan creates nothing, so
 * v7fill's schema may not exist yet)? */
static bool
importer_checkpoints_exist(Importer *im, bool *out, Err *err)
{
    PGresult *res;

    if (!pg_query(im->conn, "SELECT to_regclass('v7fill.checkpoint') IS NOT NULL", 0, NULL, &res,
                  err))
        return false;
    *out = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return true;
}

/* The total size of the input, for an ETA across files: known when every file
 * is a regular file (zstd files count compressed bytes, as their progress does). */
static void
importer_size_files(Importer *im)
{
    im->inputs.all_known = true;
    im->inputs.all_bytes = 0;
    for (size_t f = 0; f < im->o->nfiles && im->inputs.all_known; f++)
    {
        struct stat st;

        if (strcmp(im->o->files[f], "-") == 0 || stat(im->o->files[f], &st) != 0 ||
            !S_ISREG(st.st_mode))
            im->inputs.all_known = false;
        else
            im->inputs.all_bytes += (uint64_t) st.st_size;
    }
}

/* The options that decide which rows go in and their ids, one "--option=value"
 * a line: a checkpoint resumes only an import with the same. */
static char *
importer_options_text(const ImportOptions *o)
{
    Buf b;
    char *text;
    const char chars[3] = {o->csv.delimiter, o->csv.quote, o->csv.escape};
    static const char *const names[3] = {"--delimiter", "--quote", "--escape"};

    buf_init(&b);
    buf_printf(&b, "--header=%s\n", o->csv.header ? "yes" : "no");
    for (int i = 0; i < 3; i++)
    {
        unsigned char ch = (unsigned char) chars[i];

        if (ch > ' ' && ch < 0x7f)
            buf_printf(&b, "%s=%c\n", names[i], ch);
        else
            buf_printf(&b, "%s=\\x%02x\n", names[i], ch);
    }
    buf_printf(&b, "--null=%s\n", o->csv.null_string ? o->csv.null_string : "");
    buf_printf(&b, "--time-column=%s\n", o->common.time_column ? o->common.time_column : "");
    buf_printf(&b, "--time-format=%s\n", o->common.time_format ? o->common.time_format : "iso");
    buf_printf(&b, "--input-timezone=%s\n", o->common.input_tz ? o->common.input_tz : "UTC");
    buf_printf(&b, "--id-column=%s\n", o->common.id_column ? o->common.id_column : "");
    buf_puts(&b, "--map=");
    for (size_t i = 0; i < o->common.nmaps; i++)
        buf_printf(&b, "%s%s=%s", i ? " " : "", o->common.maps[i].from, o->common.maps[i].to);
    buf_puts(&b, "\n--ignore-column=");
    for (size_t i = 0; i < o->common.nignore; i++)
        buf_printf(&b, "%s%s", i ? " " : "", o->common.ignore[i]);
    buf_printf(&b, "\n--source-ref=%s\n", o->common.source_ref ? o->common.source_ref : "");
    buf_printf(&b, "--lookup-table=%s\n", o->common.lookup_table ? o->common.lookup_table : "");
    if (o->common.key_map_column) /* only when given: checkpoints made before still match */
        buf_printf(&b, "--key-map=%s\n", o->common.key_map_column);
    buf_printf(&b, "--window-tz=%s\n", o->common.window_tz ? o->common.window_tz : "UTC");
    buf_printf(&b, "--max-future=%" PRId64 "us\n", o->common.max_future_us);
    buf_printf(&b, "--retention=%s\n", o->common.retention ? o->common.retention : "");
    buf_printf(&b, "--keep-expired=%s\n", o->common.keep_expired ? "yes" : "no");
    text = xstrndup(b.data, b.len);
    buf_free(&b);
    return text;
}

/* The first option in which `now` differs from `was` (both as made by
 * importer_options_text), as "--option (was "...", now "...")"; "" if none. */
static void
importer_option_changed(const char *was, const char *now, char *out, size_t size)
{
    out[0] = '\0';
    while (*was || *now)
    {
        size_t lw = strcspn(was, "\n");
        size_t ln = strcspn(now, "\n");
        size_t kw = strcspn(was, "=");
        size_t kn = strcspn(now, "=");

        if (lw != ln || memcmp(was, now, lw) != 0)
        {
            if (kw < lw && kn < ln && kw == kn && memcmp(was, now, kw) == 0)
                (void) snprintf(out, size, "%.*s (was \"%.*s\", now \"%.*s\")", (int) kw, was,
                                (int) (lw - kw - 1), was + kw + 1, (int) (ln - kn - 1),
                                now + kn + 1);
            else
                (void) snprintf(out, size, "the options");
            return;
        }
        was += lw + (was[lw] == '\n');
        now += ln + (now[ln] == '\n');
    }
}

/* The rows input `identity` (named `source`) wrote past its checkpoint `cp`
 * in the rejects file, or the late-rows file when `late`, and did not commit:
 * cut back only those (rejects_resume); *how says what was found. */
static bool
importer_output_cut(Importer *im, Rejects *r, const char *identity, const char *source,
                    const Checkpoint *cp, bool late, RejectsResume *how, Err *err)
{
    const char *path = late ? cp->late_path : cp->rejects_path;
    const char *file_id = late ? cp->late_file : cp->rejects_file;
    uint64_t size = late ? cp->late_size : cp->rejects_size;
    uint64_t others = 0;

    *how = REJECTS_KEPT;
    /* The late-rows file the checkpoint names; earlier versions named none but
     * recorded a length when there was one. */
    if (late && !cp->late_path[0] && (cp->has_options || cp->late_size == 0))
        return true;
    /* The source column names the input by its basename, which two inputs can
     * share (d1/events.csv, d2/events.csv): whether another input committed
     * rows past this checkpoint is told by the checkpoints, kept per input. */
    if (file_id[0] && !state_checkpoint_others_size(im->conn, im->target->schema,
                                                    im->target->name, identity, file_id,
                                                    &others, err))
        return false;
    return rejects_resume(r, path, file_id, size, others, source, cp->line, how, err);
}

/* The resume of the current file: what importer_output_cut found in an output
 * the checkpoint recorded as `path`, when it is more than that file's own rows. */
static void
importer_output_warn(const Importer *im, const Rejects *r, RejectsResume how, const char *path,
                     const char *what)
{
    if (how == REJECTS_OTHER_FILE && path[0] && strcmp(path, rejects_path(r)) != 0)
        log_warn("%s: the earlier run of this file wrote to the %s \"%s\", this one goes on in "
                 "\"%s\": nothing cut",
                 im->src_name, what, path, rejects_path(r));
    else if (how == REJECTS_OTHER_FILE)
        log_warn("%s: the %s \"%s\" is a new file, not the one the earlier run of this file "
                 "wrote to (moved or deleted since?): going on in the new one; the rows the "
                 "earlier run wrote are not in it",
                 im->src_name, what, rejects_path(r));
    else if (how == REJECTS_SHORTER)
        log_warn("%s: the %s \"%s\" is shorter than when the earlier run of this file stopped: "
                 "appending to it, nothing cut",
                 im->src_name, what, rejects_path(r));
    else if (how == REJECTS_FOREIGN)
        log_warn("%s: the %s \"%s\" has rows another import appended after this file's last "
                 "commit: kept, nothing cut (rows for lines after %" PRIu64
                 " may be in it twice)",
                 im->src_name, what, rejects_path(r), im->cp.line);
}

/* Before any input is read, the rows every input this run may resume wrote
 * past its checkpoint and did not commit are cut from the rejects and
 * late-rows files, each decided against the files as they are now.  Once this
 * run appends (a finished file read again, an earlier input of the command),
 * the rows past a later input's checkpoint are no longer its own alone: they
 * would stay, and be written again when it resumes.  Inputs that resume are
 * regular files, and only one whose size and path an unfinished checkpoint
 * names is opened here (its identity hashes its first bytes); a file that
 * cannot be opened here says why at its turn. */
static bool
importer_cut_outputs(Importer *im, Err *err)
{
    char **ids = NULL;
    size_t nids = 0;
    size_t opened = 0;
    double began = monotime_s();
    ResumeIndex *ix;
    bool ok = true;
    Checkpoint cp;

    if (!im->checkpoints || im->o->common.plan)
        return true;
    if (!state_checkpoint_unfinished(im->conn, im->target->schema, im->target->name,
                                     im->target->oid, &ids, &nids, err))
        return false;
    if (nids == 0)
        return true;
    ix = resume_index_new(ids, nids);
    im->cuts = xcalloc(im->o->nfiles, sizeof *im->cuts);
    for (size_t f = 0; f < im->o->nfiles && ok; f++)
    {
        const char *path = im->o->files[f];
        OutputsCut *cut = &im->cuts[im->ncuts];
        struct stat sb;
        Source *src = NULL;
        SourcePosition pos;
        Err ignored = {0};
        bool known = false;

        if (strcmp(path, "-") == 0 || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) ||
            !resume_index_may_match(ix, path, (uint64_t) sb.st_size) ||
            !source_csv_open(path, &im->o->csv, &src, &ignored))
            continue;
        opened++;
        src->ops->position(src, &pos);
        for (size_t i = 0; i < im->ncuts && !known; i++)
            known = strcmp(im->cuts[i].identity, pos.identity) == 0;
        if (!known && resume_index_has(ix, pos.identity))
            ok = state_checkpoint_get(im->conn, im->target->schema, im->target->name,
                                      im->target->oid, pos.identity, &cp, err);
        else
            cp.found = false;
        if (ok && cp.found && !cp.finished)
        {
            const char *name = src->ops->name(src);

            ok = importer_output_cut(im, im->rejects, pos.identity, name, &cp, false,
                                     &cut->rejects, err) &&
                 importer_output_cut(im, im->late, pos.identity, name, &cp, true, &cut->late,
                                     err);
            (void) snprintf(cut->identity, sizeof cut->identity, "%s", pos.identity);
            im->ncuts++;
        }
        source_close(src);
    }
    resume_index_free(ix);
    if (ok)
        log_debug("%zu unfinished checkpoint(s): %zu of the %zu inputs opened before any was "
                  "read, %zu to resume (%.3f s)",
                  nids, opened, im->o->nfiles, im->ncuts, monotime_s() - began);
    return ok;
}

/* The options and the --source-ref template of this run, for the checkpoint. */
static void
importer_note_options(Importer *im)
{
    im->cp.has_options = true;
    (void) snprintf(im->cp.options, sizeof im->cp.options, "%s", im->options_text);
    im->cp.has_source_ref = true;
    (void) snprintf(im->cp.source_ref, sizeof im->cp.source_ref, "%s",
                    im->o->common.source_ref ? im->o->common.source_ref : "");
}

/* A file imported before with another --source-ref: every row would go in a
 * second time under new references.  Refused, unless --new-source-ref, when
 * it is the same input (the bytes the checkpoint hashed; the source is then
 * past them) -- other bytes are another input (the source is back at its
 * start).  Checkpoints of earlier versions recorded no template. */
static bool
importer_check_source_ref(Importer *im, const SourcePosition *start, Err *err)
{
    const char *now = im->o->common.source_ref ? im->o->common.source_ref : "";
    const char *was = im->cp.source_ref;
    SourcePosition at = *start;
    bool same = false;
    char upto[48] = "";

    if (!im->cp.has_source_ref || im->cp.records == 0 || strcmp(was, now) == 0 ||
        im->o->new_source_ref)
        return true;
    at.offset = im->cp.offset;
    at.line = im->cp.line;
    at.records = im->cp.records;
    at.content_len = im->cp.content_len;
    at.content_hash = im->cp.content_hash;
    if (!im->src->ops->resume(im->src, &at, &same, err))
        return false;
    if (!same)
        return true;
    if (!im->cp.finished)
        (void) snprintf(upto, sizeof upto, " up to line %" PRIu64, im->cp.line);
    err_set(err, EC_CONFIG,
            "%s was imported into %s.%s%s with %s%s%s; with %s%s%s every row would be inserted "
            "again under new references",
            im->src_name, im->target->schema, im->target->name, upto,
            was[0] ? "--source-ref '" : "", was[0] ? was : "the default source reference",
            was[0] ? "'" : "", now[0] ? "--source-ref '" : "",
            now[0] ? now : "the default source reference", now[0] ? "'" : "");
    err_hint(err, "Give the file the --source-ref it was imported with, or add --new-source-ref "
                  "to import it again under the new references.");
    return false;
}

/* Go on from the checkpoint of the current file (the source is there). */
static bool
importer_resume_file(Importer *im, Err *err)
{
    RejectsResume rejects = REJECTS_KEPT;
    RejectsResume late = REJECTS_KEPT;
    OutputsCut *cut = NULL;

    for (size_t i = 0; i < im->ncuts && cut == NULL; i++)
        if (strcmp(im->cuts[i].identity, im->identity) == 0)
            cut = &im->cuts[i];
    if (cut)
    {
        rejects = cut->rejects;
        late = cut->late;
        cut->identity[0] = '\0';
    }
    /* A checkpoint the start of the run did not see (another process's). */
    else if (!importer_output_cut(im, im->rejects, im->identity, im->src_name, &im->cp, false,
                                  &rejects, err) ||
             !importer_output_cut(im, im->late, im->identity, im->src_name, &im->cp, true, &late,
                                  err))
        return false;
    importer_output_warn(im, im->rejects, rejects, im->cp.rejects_path, "rejects file");
    importer_output_warn(im, im->late, late, im->cp.late_path, "late-rows file");
    if (im->cp.records > 0)
    {
        log_info("%s: resuming after line %" PRIu64 " (%" PRIu64 " rows already accounted for)",
                 im->src_name, im->cp.line, im->cp.read);
        im->st->files_resumed++;
    }
    im->st->read += im->cp.read;
    im->st->read_resumed += im->cp.read;
    im->st->inserted += im->cp.inserted;
    im->st->duplicates += im->cp.duplicates;
    im->st->rejected += im->cp.rejected;
    im->st->expired += im->cp.expired;
    {
        /* Earlier runs recorded those rows in v7fill.run: this run's rows leave them out. */
        PipelineSegment earlier = {.read = im->cp.read,
                                   .inserted = im->cp.inserted,
                                   .duplicates = im->cp.duplicates,
                                   .rejected = im->cp.rejected};
        pipeline_segment_exclude(im->pl, &earlier);
        im->resumed.read += earlier.read;
        im->resumed.inserted += earlier.inserted;
        im->resumed.duplicates += earlier.duplicates;
        im->resumed.rejected += earlier.rejected;
    }
    /* From here on the checkpoint is this run's, with its options. */
    importer_note_options(im);
    return true;
}

static bool
importer_open_file(Importer *im, const char *path, bool *skipped, Err *err)
{
    SourcePosition pos;
    bool is_stdin;

    if (!source_csv_open(path, &im->o->csv, &im->src, err))
        return false;
    im->src_name = im->src->ops->name(im->src);
    im->src->ops->position(im->src, &pos);
    memset(&im->cp, 0, sizeof im->cp);
    im->use_checkpoint = !im->o->common.plan;
    is_stdin = strncmp(pos.identity, "stdin", 5) == 0;
    if (is_stdin)
    {
        /* stdin cannot be resumed; a per-run identity still tells after a lost
         * connection whether a batch committed. */
        uint8_t rnd[8];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return err_set(err, EC_INTERNAL, "OpenSSL RAND_bytes failed");
        (void) snprintf(im->identity, sizeof im->identity, "stdin:%02x%02x%02x%02x%02x%02x%02x%02x",
                        rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    }
    else
    {
        (void) snprintf(im->identity, sizeof im->identity, "%s", pos.identity);
        if (im->checkpoints &&
            !state_checkpoint_get(im->conn, im->target->schema, im->target->name, im->target->oid,
                                  im->identity, &im->cp, err))
            return false;
        if (im->cp.stale)
            log_warn("%s: its checkpoint was written for an earlier table named %s.%s (dropped "
                     "or renamed since): reading it from the start",
                     im->src_name, im->target->schema, im->target->name);
        /* Before the columns are mapped: a skipped file costs one query. */
        if (im->o->skip_finished && im->cp.found && im->cp.finished)
        {
            *skipped = true;
            return true;
        }
    }
    if (!pipeline_attach(im->pl, im->src, source_csv_unnamed_last(im->src), &im->hooks, err))
        return false;
    if (is_stdin || !im->use_checkpoint)
    {
        memset(&im->cp, 0, sizeof im->cp); /* plan read it only to skip */
        return true;
    }
    if (im->cp.found && !importer_check_source_ref(im, &pos, err))
        return false;
    if (im->cp.found && !im->cp.finished)
    {
        SourcePosition at = pos;
        bool same = true;
        char changed[1024] = "";

        at.offset = im->cp.offset;
        at.line = im->cp.line;
        at.records = im->cp.records;
        at.content_len = im->cp.content_len;
        at.content_hash = im->cp.content_hash;
        /* Only the same import resumes: the same options (checkpoints of
         * earlier versions recorded none) and the same bytes before the
         * position.  Any other reads the file again; dedup keeps it exact. */
        if (im->cp.has_options)
            importer_option_changed(im->cp.options, im->options_text, changed, sizeof changed);
        if (changed[0])
        {
            log_warn("%s: %s changed since the earlier run stopped at line %" PRIu64
                     ": reading it from the start",
                     im->src_name, changed, im->cp.line);
            same = false;
        }
        else if (im->cp.records > 0 && !im->src->ops->resume(im->src, &at, &same, err))
            return false;
        else if (!same)
            log_warn("%s: its content changed since the earlier run stopped at line %" PRIu64
                     " (other bytes before it): reading it from the start",
                     im->src_name, im->cp.line);
        if (same)
            return importer_resume_file(im, err);
    }
    /* Starting this file afresh: record where the rejects and late-rows files
     * stand now, so that a crash before the first commit can cut them back. */
    memset(&im->cp, 0, sizeof im->cp);
    im->cp.offset = pos.offset;
    im->cp.line = pos.line;
    im->cp.content_len = pos.content_len;
    im->cp.content_hash = pos.content_hash;
    importer_note_outputs(im, &im->cp);
    importer_note_options(im);
    return state_checkpoint_put(im->conn, im->target->schema, im->target->name, im->target->oid,
                                im->identity, im->src_name, &im->cp, err);
}

/* ---- the hooks: what a batch's transaction does for a file ---------------- */

static void
hook_origin(void *ctx, uint64_t origin, char *out, size_t size)
{
    const Importer *im = ctx;
    (void) snprintf(out, size, "%s:%" PRIu64, im->src_name, origin);
}

static void
hook_where(void *ctx, const SourcePosition *pos, char *out, size_t size)
{
    (void) ctx;
    (void) snprintf(out, size, "line %" PRIu64, pos->line);
}

static bool
hook_reject(void *ctx, uint64_t origin, const char *reason, const char *sqlstate,
            const char *raw, size_t raw_len, Err *err)
{
    Importer *im = ctx;
    return rejects_write(im->rejects, im->src_name, origin, reason, sqlstate, raw, raw_len, err);
}

static bool
hook_late(void *ctx, const LateRow *row, Err *err)
{
    Importer *im = ctx;
    char line[24];
    const char *fields[8];

    (void) snprintf(line, sizeof line, "%" PRIu64, row->origin);
    fields[0] = im->src_name;
    fields[1] = line;
    fields[2] = row->delay_class;
    fields[3] = row->id;
    fields[4] = row->event_time;
    fields[5] = row->delay;
    fields[6] = row->time_left;
    fields[7] = row->source_ref;
    return rejects_write_row(im->late, fields, 8, err);
}

static bool
hook_outputs_sync(void *ctx, Err *err)
{
    Importer *im = ctx;
    return rejects_sync(im->rejects, err) && rejects_sync(im->late, err);
}

static void
hook_outputs_mark(void *ctx)
{
    Importer *im = ctx;

    im->rejects_before = rejects_size(im->rejects);
    im->late_before = rejects_size(im->late);
}

static bool
hook_outputs_rewind(void *ctx, Err *err)
{
    Importer *im = ctx;

    return rejects_truncate(im->rejects, im->rejects_before, err) &&
           rejects_truncate(im->late, im->late_before, err);
}

/* The file's checkpoint as of this batch, in its transaction. */
static bool
hook_save_position(void *ctx, PgConn *c, const SourcePosition *pos, const BatchCounts *t,
                   bool finished, Err *err)
{
    Importer *im = ctx;

    im->next = im->cp;
    im->next.offset = pos->offset;
    im->next.line = pos->line;
    im->next.records = pos->records;
    im->next.read += t->read;
    im->next.inserted += t->inserted;
    im->next.duplicates += t->duplicates;
    im->next.rejected += t->rejected;
    im->next.expired += t->expired;
    im->next.content_len = pos->content_len;
    im->next.content_hash = pos->content_hash;
    importer_note_outputs(im, &im->next);
    im->next.finished = finished;
    return !im->use_checkpoint ||
           state_checkpoint_put(c, im->target->schema, im->target->name, im->target->oid,
                                im->identity, im->src_name, &im->next, err);
}

/* After a reconnect: the checkpoint says whether the batch committed. */
static bool
hook_check_commit(void *ctx, PgConn *c, const SourcePosition *pos, bool finished,
                  CommitCheck *out, BatchCounts *counts, Err *err)
{
    Importer *im = ctx;
    Checkpoint now;

    if (!state_checkpoint_get(c, im->target->schema, im->target->name, im->target->oid,
                              im->identity, &now, err))
        return false;
    /* The file's last batch may be empty (its end found after a full
     * batch): at the same position as the one before, only finished tells
     * whether it landed. */
    if (now.found && now.records == pos->records && now.offset == pos->offset &&
        now.finished == finished)
    {
        counts->read = now.read - im->cp.read;
        counts->inserted = now.inserted - im->cp.inserted;
        counts->duplicates = now.duplicates - im->cp.duplicates;
        counts->rejected = now.rejected - im->cp.rejected;
        counts->expired = now.expired - im->cp.expired;
        im->cp = now;
        im->next = now;
        *out = COMMIT_DONE;
        return true;
    }
    /* Nothing of this run committed, and no checkpoint written before its
     * first batch (standard input writes none): the batch did not land. */
    if (!now.found && !im->cp.found && im->cp.records == 0 && im->cp.offset == 0)
    {
        *out = COMMIT_NOT_DONE;
        return true;
    }
    if (!now.found || now.records != im->cp.records || now.offset != im->cp.offset)
    {
        /* Neither this batch nor the last one the server acknowledged: it
         * lost commits (synchronous_commit = off, or a failover to an
         * asynchronous standby).  What it kept is consistent; resuming from
         * its checkpoint is the only way to lose nothing. */
        err_set(err, EC_PG_CONNECT,
                "the server lost transactions it had acknowledged: its checkpoint "
                "for %s is at line %" PRIu64 ", v7fill had committed up to line %" PRIu64,
                im->src_name, now.found ? now.line : 0, im->cp.line);
        err_detail(err, "This happens with synchronous_commit = off or after a failover "
                        "to an asynchronous standby.  The batches the server kept are "
                        "consistent.");
        err_hint(err, "Run the same command again: it resumes from what the server "
                      "kept and inserts the lost batches.");
        *out = COMMIT_LOST;
        return true;
    }
    *out = COMMIT_NOT_DONE;
    return true;
}

static void
hook_after_commit(void *ctx, const SourcePosition *pos)
{
    Importer *im = ctx;

    (void) pos;
    im->cp = im->next;
}

/* The rows imported since the last run row as a run row of their own in
 * v7fill.run (command "import"), so that `v7fill report` counts them as the
 * import goes: a run killed after hours loses only the figures of the rows
 * committed since its last row (its rerun resumes after them).  A run's rows
 * add up to what this run did, never what a resumed file's earlier runs did.
 * A periodic row ("importing") carries the tracker document; the last one
 * (final) the run's report, whose delay member covers that row's rows only.
 * A periodic row that cannot be written is carried by the next one.  False
 * with err when it could not be written. */
static bool
importer_record(Importer *im, PgConn *c, const char *status, bool final, Err *err)
{
    PipelineSegment seg;
    const TargetTable *t = im->target;
    ImportStats *st = im->st;
    char *json;
    char key[33];
    bool ok;

    /* an earlier row whose answer was lost: dropped if it landed, else carried */
    if (!run_row_settle(&im->pending, im->pl, c, t, final, err) && !final)
        return false;
    if (!pipeline_take_segment(im->pl, &seg))
    {
        if (!final)
            return true;
        /* Not expected outside a plan (no tracker): the run as a whole when
         * no row recorded a part of it, else no figures rather than twice. */
        seg.elapsed_s = st->elapsed_s;
        seg.delay_json = NULL;
        if (im->recorded == 0)
        {
            seg.read = st->read - im->resumed.read;
            seg.inserted = st->inserted - im->resumed.inserted;
            seg.duplicates = st->duplicates - im->resumed.duplicates;
            seg.rejected = st->rejected - im->resumed.rejected;
            seg.partitions_created = st->partitions_created;
            seg.delay_json = st->delay_json ? xstrdup(st->delay_json) : NULL;
        }
    }
    if (!final && seg.read == 0)
    {
        /* nothing to record yet: kept for the next row (partitions created, seconds) */
        pipeline_return_segment(im->pl, &seg);
        return true;
    }
    if (final)
    {
        char *whole = st->delay_json;

        st->delay_json = seg.delay_json;
        json = import_report_json(st, false);
        st->delay_json = whole;
    }
    else
        json = xstrdup(seg.delay_json);
    ok = state_run_record(c, t->schema, t->name, t->oid, "import", status, seg.elapsed_s, seg.read,
                          seg.inserted, seg.duplicates, seg.rejected, seg.partitions_created, json,
                          run_row_key(key) ? key : NULL, true, err);
    free(json);
    if (ok)
        im->recorded++;
    if (!ok && !final)
        run_row_failed(&im->pending, im->pl, c, key, &seg);
    free(seg.delay_json);
    return ok;
}

/* The reading thread between batches: a run row every --record-every seconds,
 * on a connection of its own (the writers hold the others).  One that cannot
 * be written is tried again a period later, the rows carried over. */
static void
hook_between_batches(void *ctx)
{
    Importer *im = ctx;
    Err e = {0};

    if (im->o->record_every_s <= 0 ||
        pipeline_segment_age(im->pl) < (double) im->o->record_every_s ||
        pipeline_elapsed(im->pl) < im->record_retry_at)
        return;
    if ((im->side == NULL && !pg_connect_again(im->conn, &im->side, &e)) ||
        (pg_is_broken(im->side) && !pg_reconnect(im->side, &e)) ||
        !importer_record(im, im->side, "importing", false, &e))
    {
        im->record_retry_at = pipeline_elapsed(im->pl) + im->o->record_every_s;
        log_at(im->record_failures++ == 0 ? LOG_LEVEL_WARN : LOG_LEVEL_DEBUG,
               "could not record the rows imported so far in v7fill.run (tried again every "
               "%d s and when the import ends; a kill before then leaves them out of v7fill "
               "report): %s",
               im->o->record_every_s, e.msg);
    }
}

static bool
importer_file(Importer *im, const char *path, Err *err)
{
    bool ok;
    bool skipped = false;
    struct stat sb;
    uint64_t done0;
    uint64_t total;

    if (im->o->nfiles > 1 && im->o->csv.header && strcmp(path, "-") != 0 &&
        stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
    {
        /* No header and no rows: nothing to lose, so the other files go on;
         * the run still ends with exit status 4 naming it (import_run). */
        char shown[256];
        err_printable(path, shown, sizeof shown);
        log_warn("%s is empty (0 bytes, no header line): passed over, the other files are "
                 "imported",
                 shown);
        if (im->files_empty++ == 0)
            memcpy(im->first_empty, shown, sizeof shown);
        return true;
    }
    if (!importer_open_file(im, path, &skipped, err))
        return false;
    im->st->files++;
    im->inputs.current = im->st->files;
    if (skipped)
    {
        uint64_t done;

        log_info("%s: skipped: an earlier run imported all of it (--skip-finished)",
                 im->src_name);
        im->st->files_skipped++;
        im->src->ops->progress(im->src, &done, &total);
        im->inputs.done_bytes += total;
        source_close(im->src);
        im->src = NULL;
        return true;
    }
    im->src->ops->progress(im->src, &done0, &total);
    ok = pipeline_run(im->pl, err);
    {
        uint64_t done;

        im->src->ops->progress(im->src, &done, &total);
        im->inputs.done_bytes += total;
        im->inputs.run_bytes += done - done0;
        if (ok)
            im->files_done++;
    }
    if (ok && im->use_checkpoint && strncmp(im->identity, "stdin:", 6) == 0)
    {
        /* Standard input cannot be resumed: its checkpoint served only to
         * tell whether a batch committed after a lost connection. */
        Err e = {0};

        if (!state_checkpoint_delete(im->conn, im->target->schema, im->target->name,
                                     im->identity, &e))
            log_warn("%s: its checkpoint %s stays in v7fill.checkpoint: %s", im->src_name,
                     im->identity, e.msg);
    }
    source_close(im->src);
    im->src = NULL;
    return ok;
}

static void
importer_free(Importer *im)
{
    rejects_close(im->rejects);
    rejects_close(im->late);
    free(im->options_text);
    free(im->cuts);
    source_close(im->src);
    run_row_pending_free(&im->pending);
    pipeline_free(im->pl);
    pg_close(im->side);
}

/* The rejects file and, when there is a retention, the late-rows file (plan:
 * neither is written). */
static bool
importer_open_outputs(Importer *im, Err *err)
{
    const ImportOptions *o = im->o;
    ImportStats *st = im->st;
    char *path;
    bool ok;

    if (o->common.plan)
        return rejects_open(NULL, &im->rejects, err) && rejects_open(NULL, &im->late, err);
    path = o->rejects_path ? xstrdup(o->rejects_path)
                           : xasprintf("%s.rejects.csv", im->target->name);
    (void) snprintf(st->rejects_path, sizeof st->rejects_path, "%s", path);
    ok = rejects_open(path, &im->rejects, err);
    free(path);
    if (!ok)
        return false;
    /* Rows can only be late when there is a retention to be late for. */
    path = st->retention_us == 0 ? NULL
           : o->late_path       ? xstrdup(o->late_path)
                                : xasprintf("%s.late.csv", im->target->name);
    if (path)
        (void) snprintf(st->late_path, sizeof st->late_path, "%s", path);
    ok = rejects_open_csv(path, "source,line,class,id,event_time,delay,time_left,source_ref\n",
                          "late-rows file", &im->late, err);
    free(path);
    return ok;
}

static void
importer_hooks(Importer *im)
{
    PipelineHooks *h = &im->hooks;

    memset(h, 0, sizeof *h);
    h->ctx = im;
    h->origin = hook_origin;
    h->where = hook_where;
    h->reject = hook_reject;
    h->late = hook_late;
    h->outputs_sync = hook_outputs_sync;
    h->outputs_mark = hook_outputs_mark;
    h->outputs_rewind = hook_outputs_rewind;
    h->save_position = hook_save_position;
    h->check_commit = hook_check_commit;
    h->after_commit = hook_after_commit;
    if (!im->o->common.plan)
        h->between_batches = hook_between_batches;
    h->rejects_where = rejects_path(im->rejects);
    h->rejects_hint = "Fix the input or the options, or raise --max-rejects, then run the command "
                      "again: it resumes, or reads the file from the start if its content or an "
                      "option that decides its rows changed.";
}

bool
import_run(PgConn *c, const ImportOptions *o, ImportStats *st, Err *err)
{
    Importer im;
    bool ok = false;

    memset(&im, 0, sizeof im);
    im.conn = c;
    im.o = o;
    im.st = st;
    im.inputs.noun = "file";
    im.inputs.count = o->nfiles;
    if (!pipeline_open(c, &o->common, &im.inputs, st, &im.pl, err))
        goto out;
    im.target = pipeline_target(im.pl);
    im.target_q = pipeline_target_q(im.pl);
    im.lookup_q = pipeline_lookup_q(im.pl);
    if (!importer_open_outputs(&im, err) || !pipeline_setup(im.pl, err))
        goto out;
    importer_hooks(&im);
    im.checkpoints = !o->common.plan;
    im.options_text = importer_options_text(o);
    if (o->common.plan && o->skip_finished && !importer_checkpoints_exist(&im, &im.checkpoints, err))
        goto out;
    if (!importer_cut_outputs(&im, err))
        goto out;
    importer_size_files(&im);
    for (size_t f = 0; f < o->nfiles; f++)
        if (!importer_file(&im, o->files[f], err))
            goto out;
    if (!pipeline_finish(im.pl, err))
        goto out;
    if (!o->common.plan && o->common.analyze && st->inserted > 0 && interrupt_signal() != 0)
        log_warn("interrupted: the closing ANALYZE and VACUUM skipped; every row is imported "
                 "(ANALYZE %s gives the parent its statistics)",
                 im.target_q);
    else if (!o->common.plan && o->common.analyze && st->inserted > 0 &&
             !load_analyze(im.pl, im.conn, "every row is imported", "--no-analyze",
                           &st->closing_s, err))
        goto out;
    ok = true;
out:
    if (im.pl)
        ok = pipeline_close(im.pl, ok, err);
    if (!ok && !o->common.plan && !o->skip_finished && im.files_done > 0 && o->nfiles > 1)
        log_info("%zu of the %zu files were imported completely before this stopped; a rerun "
                 "with --skip-finished does not read them again",
                 im.files_done, o->nfiles);
    if (!o->common.plan && im.target && !pg_is_broken(c))
    {
        /* Run history: the run's last row, also for failed runs (status = the error). */
        Err rerr = {0};
        bool setup_done = ok || err->code != EC_PG_CONNECT;

        if (setup_done && !importer_record(&im, c, ok ? "done" : err->msg, true, &rerr))
            log_debug("could not record the run in v7fill.run: %s", rerr.msg);
    }
    if (ok && im.files_empty > 0)
    {
        err_set(err, EC_FORMAT, "%s is empty: expected a header line", im.first_empty);
        err_detail(err, "%zu of the %zu files %s empty (0 bytes) and passed over; the others "
                        "were imported.",
                   im.files_empty, o->nfiles, im.files_empty == 1 ? "was" : "were");
        ok = false;
    }
    importer_free(&im);
    return ok;
}
