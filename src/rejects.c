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
    int fd;
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
            err_errno(err, EC_IO, "could not write rejects file \"%s\"", r->path);
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
    return rejects_open_csv(path, header, out, err);
}

bool
rejects_open_csv(const char *path, const char *first_line, Rejects **out, Err *err)
{
    Rejects *r = xcalloc(1, sizeof *r);
    struct stat st;

    buf_init(&r->buf);
    r->fd = -1;
    if (path == NULL)
    {
        *out = r;
        return true;
    }
    r->path = xstrdup(path);
    r->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (r->fd < 0)
    {
        err_errno(err, EC_IO, "could not open rejects file \"%s\"", path);
        rejects_close(r);
        return false;
    }
    if (fstat(r->fd, &st) != 0)
    {
        err_errno(err, EC_IO, "could not stat rejects file \"%s\"", path);
        rejects_close(r);
        return false;
    }
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
        return err_errno(err, EC_IO, "could not fsync rejects file \"%s\"", r->path);
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
                       "rejects file \"%s\" is shorter (%llu bytes) than the checkpoint "
                       "recorded (%llu bytes)",
                       r->path, (unsigned long long) r->size, (unsigned long long) size);
    if (ftruncate(r->fd, (off_t) size) != 0)
        return err_errno(err, EC_IO, "could not truncate rejects file \"%s\"", r->path);
    r->size = size;
    r->synced = size;
    r->dirty = true;
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
