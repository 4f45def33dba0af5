/*
 * Rejects file writer (CSV, RFC 4180 quoting).
 */
#include "v7fill/rejects.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "v7fill/mem.h"

struct Rejects
{
    char *path;
    const char *what; /* "rejects file", "late-rows file": for messages */
    int fd;
    char file_id[48]; /* "dev:ino" of the file open (rejects_file_id) */
    Buf buf;         /* pending bytes, written on sync or when large */
    uint64_t size;   /* bytes in the file plus pending */
    uint64_t synced; /* bytes known to be written whole */
    bool dirty;      /* written or cut since the last fsync */
};

static const char header[] = "source,line,reason,sqlstate,record\n";

/*
 * rejects_flush writes the pending bytes.  On failure (disk full) the file is
 * cut back to its last whole row and the pending rows are dropped: the batch
 * that produced them fails and will write them again.
 */
static bool
rejects_flush(Rejects *r, Err *err)
{
    size_t off = 0;

    if (r->buf.len > 0)
        r->dirty = true;
    while (off < r->buf.len)
    {
        ssize_t n = write(r->fd, r->buf.data + off, r->buf.len - off);
        if (n < 0)
        {
            if (errno == EINTR)
                continue;
            err_errno(err, EC_IO, "could not write %s \"%s\"", r->what, r->path);
            if (ftruncate(r->fd, (off_t) r->synced) != 0)
                err_detail(err, "The file could not be cut back to its last whole row either.");
            buf_reset(&r->buf);
            r->size = r->synced;
            return false;
        }
        off += (size_t) n;
    }
    buf_reset(&r->buf);
    r->synced = r->size;
    return true;
}

bool
rejects_open(const char *path, Rejects **out, Err *err)
{
    return rejects_open_csv(path, header, "rejects file", out, err);
}

bool
rejects_open_csv(const char *path, const char *first_line, const char *what, Rejects **out,
                 Err *err)
{
    Rejects *r = xcalloc(1, sizeof *r);
    struct stat st;

    buf_init(&r->buf);
    r->fd = -1;
    r->what = what;
    if (path == NULL)
    {
        *out = r;
        return true;
    }
    r->path = xstrdup(path);
    /* Read too: a resume checks what was appended after its checkpoint. */
    r->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (r->fd < 0)
    {
        err_errno(err, EC_IO, "could not open %s \"%s\"", what, path);
        rejects_close(r);
        return false;
    }
    if (fstat(r->fd, &st) != 0)
    {
        err_errno(err, EC_IO, "could not stat %s \"%s\"", what, path);
        rejects_close(r);
        return false;
    }
    (void) snprintf(r->file_id, sizeof r->file_id, "%llu:%llu", (unsigned long long) st.st_dev,
                    (unsigned long long) st.st_ino);
    r->size = (uint64_t) st.st_size;
    r->synced = r->size;
    r->dirty = true; /* what an earlier run left is made durable by the first sync */
    if (r->size == 0)
    {
        buf_puts(&r->buf, first_line);
        r->size = strlen(first_line);
        if (!rejects_sync(r, err))
        {
            rejects_close(r);
            return false;
        }
    }
    *out = r;
    return true;
}

static void
csv_quote(Buf *b, const char *s, size_t len)
{
    buf_putc(b, '"');
    for (size_t i = 0; i < len; i++)
    {
        if (s[i] == '"')
            buf_putc(b, '"');
        buf_putc(b, s[i]);
    }
    buf_putc(b, '"');
}

bool
rejects_write(Rejects *r, const char *source, uint64_t line, const char *reason,
              const char *sqlstate, const char *raw, size_t raw_len, Err *err)
{
    size_t before = r->buf.len;

    if (r->fd < 0)
        return true;
    /* The raw record keeps its bytes but not its final line terminator. */
    while (raw_len > 0 && (raw[raw_len - 1] == '\n' || raw[raw_len - 1] == '\r'))
        raw_len--;
    csv_quote(&r->buf, source, strlen(source));
    buf_printf(&r->buf, ",%llu,", (unsigned long long) line);
    csv_quote(&r->buf, reason, strlen(reason));
    buf_putc(&r->buf, ',');
    if (sqlstate && sqlstate[0])
        buf_puts(&r->buf, sqlstate);
    buf_putc(&r->buf, ',');
    csv_quote(&r->buf, raw ? raw : "", raw ? raw_len : 0);
    buf_putc(&r->buf, '\n');
    r->size += r->buf.len - before;
    if (r->buf.len >= (1u << 20))
        return rejects_flush(r, err);
    return true;
}

bool
rejects_write_row(Rejects *r, const char *const *fields, size_t n, Err *err)
{
    size_t before = r->buf.len;

    if (r->fd < 0)
        return true;
    for (size_t i = 0; i < n; i++)
    {
        if (i)
            buf_putc(&r->buf, ',');
        csv_quote(&r->buf, fields[i] ? fields[i] : "", fields[i] ? strlen(fields[i]) : 0);
    }
    buf_putc(&r->buf, '\n');
    r->size += r->buf.len - before;
    if (r->buf.len >= (1u << 20))
        return rejects_flush(r, err);
    return true;
}

bool
rejects_sync(Rejects *r, Err *err)
{
    if (r->fd < 0)
        return true;
    if (!rejects_flush(r, err))
        return false;
    if (!r->dirty)
        return true; /* a batch without rejects: nothing to make durable */
    if (fsync(r->fd) != 0)
        return err_errno(err, EC_IO, "could not fsync %s \"%s\"", r->what, r->path);
    r->dirty = false;
    return true;
}

uint64_t
rejects_size(const Rejects *r)
{
    return r->size;
}

bool
rejects_truncate(Rejects *r, uint64_t size, Err *err)
{
    if (r->fd < 0)
        return true;
    /* Pending rows belong to the batch being undone. */
    buf_reset(&r->buf);
    r->size = r->synced;
    if (!rejects_flush(r, err))
        return false;
    if (size > r->size)
        return err_set(err, EC_IO,
                       "%s \"%s\" is shorter (%llu bytes) than the checkpoint "
                       "recorded (%llu bytes)",
                       r->what, r->path, (unsigned long long) r->size, (unsigned long long) size);
    if (ftruncate(r->fd, (off_t) size) != 0)
        return err_errno(err, EC_IO, "could not truncate %s \"%s\"", r->what, r->path);
    r->size = size;
    r->synced = size;
    r->dirty = true;
    return true;
}

const char *
rejects_file_id(const Rejects *r)
{
    return r->file_id;
}

/* Reading the rows past a checkpoint: the first two fields of each (source,
 * line), which every output of this module starts with. */
typedef struct TailScan
{
    const char *source;
    uint64_t after_line;
    int field;        /* index of the field being read */
    bool quoted;      /* inside a quoted field */
    bool quote_seen;  /* a quote inside a quoted field: doubled, or the end */
    bool any;         /* the field has had a byte */
    Buf text;         /* field 0's text */
    uint64_t line;    /* field 1's value */
    bool digits;      /* field 1 has had a digit */
    bool own;         /* every complete row so far is the source's, after the line */
    bool row_checked; /* the row in progress has passed both checks */
} TailScan;

static void
tail_end_field(TailScan *t)
{
    if (t->field == 0)
        t->own = t->own && t->any && t->text.len == strlen(t->source) &&
                 memcmp(t->text.data, t->source, t->text.len) == 0;
    else if (t->field == 1)
    {
        t->own = t->own && t->digits && t->line > t->after_line;
        t->row_checked = t->own;
    }
    t->field++;
    t->any = false;
    t->line = 0;
    t->digits = false;
    buf_reset(&t->text);
}

/* A byte of field 0 or 1's content, quoted or not: the rejects file writes
 * the line bare, the late-rows file (rejects_write_row) quotes it. */
static void
tail_content(TailScan *t, char c)
{
    if (t->field == 0)
        buf_putc(&t->text, c);
    else if (c >= '0' && c <= '9' && t->line < UINT64_MAX / 10)
    {
        t->line = t->line * 10 + (uint64_t) (c - '0');
        t->digits = true;
    }
    else
        t->own = false; /* not a row this module wrote */
}

static void
tail_byte(TailScan *t, char c)
{
    if (t->quoted && t->quote_seen)
    {
        t->quote_seen = false;
        if (c == '"')
        {
            if (t->field < 2)
                tail_content(t, c);
            return;
        }
        t->quoted = false; /* the closing quote: c follows the field */
    }
    else if (t->quoted)
    {
        if (c == '"')
            t->quote_seen = true;
        else if (t->field < 2)
            tail_content(t, c);
        return;
    }
    if (c == ',' || c == '\n')
    {
        if (t->field < 2)
            tail_end_field(t);
        t->any = false;
        if (c == '\n')
        {
            t->own = t->own && t->row_checked;
            t->field = 0;
            t->row_checked = false;
        }
        return;
    }
    if (c == '"' && !t->any)
        t->quoted = true;
    else if (t->field == 1)
        tail_content(t, c);
    else if (t->field == 0)
        t->own = false; /* this module quotes the source */
    t->any = true;
}

bool
rejects_tail_is_own(Rejects *r, uint64_t size, const char *source, uint64_t after_line, bool *own,
                    Err *err)
{
    TailScan t = {0};
    char chunk[1 << 16];
    uint64_t at = size;

    t.source = source;
    t.after_line = after_line;
    t.own = true;
    buf_init(&t.text);
    if (!rejects_flush(r, err))
    {
        buf_free(&t.text);
        return false;
    }
    while (at < r->size && t.own)
    {
        size_t want = r->size - at < sizeof chunk ? (size_t) (r->size - at) : sizeof chunk;
        ssize_t n = pread(r->fd, chunk, want, (off_t) at);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
        {
            buf_free(&t.text);
            return err_errno(err, EC_IO, "could not read %s \"%s\"", r->what, r->path);
        }
        for (ssize_t i = 0; i < n && t.own; i++)
            tail_byte(&t, chunk[i]);
        at += (uint64_t) n;
    }
    /* A last row cut short (killed mid-write) is the source's when what
     * there is of it fits: its source field so far a prefix of `source`. */
    if (t.field == 0 && t.any)
        t.own = t.own && t.text.len <= strlen(source) &&
                memcmp(t.text.data, source, t.text.len) == 0;
    buf_free(&t.text);
    *own = t.own;
    return true;
}

bool
rejects_resume(Rejects *r, const char *path, const char *file_id, uint64_t size,
               uint64_t others_upto, const char *source, uint64_t after_line,
               RejectsResume *out, Err *err)
{
    bool own = false;

    *out = REJECTS_KEPT;
    if (r->fd < 0)
        return true;
    /* Written by earlier versions: no file identity, perhaps not even a path. */
    if ((file_id && file_id[0]) ? strcmp(file_id, r->file_id) != 0
                                : (path && path[0] && strcmp(path, r->path) != 0))
    {
        *out = REJECTS_OTHER_FILE;
        return true;
    }
    if (!rejects_flush(r, err))
        return false;
    if (r->size < size)
        *out = REJECTS_SHORTER;
    else if (r->size > size)
    {
        if (others_upto <= size && !rejects_tail_is_own(r, size, source, after_line, &own, err))
            return false;
        *out = own ? REJECTS_CUT : REJECTS_FOREIGN;
        if (own && !rejects_truncate(r, size, err))
            return false;
    }
    return true;
}

const char *
rejects_path(const Rejects *r)
{
    return r->path ? r->path : "(none)";
}

void
rejects_close(Rejects *r)
{
    if (r == NULL)
        return;
    if (r->fd >= 0)
    {
        Err ignored;
        if (!rejects_sync(r, &ignored))
            fprintf(stderr, "v7fill: %s\n", ignored.msg);
        close(r->fd);
    }
    buf_free(&r->buf);
    free(r->path);
    free(r);
}
