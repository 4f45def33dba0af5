/*
 * libFuzzer target for the CSV source.  The first input byte picks options
 * (header, delimiter, escape, NULL string, a small record limit), the rest
 * is the file.  Beyond "no crash", it checks what resume depends on:
 *
 * - reading the same bytes zstd-compressed gives the same records;
 * - seeking a fresh source to the position after record k and reading on
 *   gives the same record k+1, line and raw bytes included;
 * - consecutive records' raw bytes are exactly the bytes between positions;
 * - every line through libcsv (CsvOptions.libcsv_only) gives the same
 *   records, errors and positions as the fast path for one-line records.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "v7fill/mem.h"
#include "v7fill/source_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_RECORDS 4096

typedef struct Seen
{
    uint64_t line;
    uint64_t end_off;
    uint64_t end_line;
    size_t raw_len;
    uint64_t digest; /* of raw + fields + error, to compare runs */
} Seen;

static uint64_t
mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

static uint64_t
record_digest(const Record *rec)
{
    uint64_t h = mix(UINT64_C(0xcbf29ce484222325), rec->raw, rec->raw_len);

    h = mix(h, &rec->line, sizeof rec->line);
    for (size_t i = 0; i < rec->nfields; i++)
    {
        const Field *f = &rec->fields[i];

        h = mix(h, &f->is_null, 1);
        if (!f->is_null)
        {
            h = mix(h, &f->len, sizeof f->len);
            h = mix(h, f->data, f->len);
            if (f->data[f->len] != '\0')
                abort(); /* fields are NUL-terminated */
            if (rec->copy_plain &&
                (memchr(f->data, '\\', f->len) || memchr(f->data, '\t', f->len) ||
                 memchr(f->data, '\r', f->len) || memchr(f->data, '\n', f->len)))
                abort(); /* copy_plain: nothing in any field needs a COPY escape */
        }
    }
    if (rec->error)
        h = mix(h, rec->error, strlen(rec->error));
    return h;
}

/* A path naming the bytes: a memfd, through /proc. */
static int
make_file(const void *p, size_t n, char *path, size_t pathsz)
{
    int fd = memfd_create("fuzz.csv", MFD_CLOEXEC);

    if (fd < 0)
        abort();
    if (n > 0 && write(fd, p, n) != (ssize_t) n)
        abort();
    snprintf(path, pathsz, "/proc/self/fd/%d", fd);
    return fd;
}

/* Read everything; returns the count of records, -1 on open failure, and
 * sets *fatal when reading stopped on an error. */
static int
read_all(const char *path, const CsvOptions *o, Seen *seen, bool *fatal, SourcePosition *first)
{
    Source *s = NULL;
    Err err = {0};
    int n = 0;
    uint64_t prev_off;
    SourcePosition pos;

    *fatal = false;
    if (!source_csv_open(path, o, &s, &err))
        return -1;
    s->ops->position(s, &pos);
    *first = pos;
    prev_off = pos.offset;
    while (n < FUZZ_MAX_RECORDS)
    {
        Record rec;
        bool eof;
        size_t ncols;

        if (!source_next(s, &rec, &eof, &err))
        {
            *fatal = true;
            break;
        }
        if (eof)
            break;
        s->ops->columns(s, &ncols);
        if (rec.error == NULL && rec.nfields != ncols)
            abort(); /* a valid record has one field per column */
        s->ops->position(s, &pos);
        if (pos.offset - prev_off < rec.raw_len)
            abort(); /* raw bytes lie between two positions */
        prev_off = pos.offset;
        seen[n].line = rec.line;
        seen[n].end_off = pos.offset;
        seen[n].end_line = pos.line;
        seen[n].raw_len = rec.raw_len;
        seen[n].digest = record_digest(&rec);
        n++;
    }
    source_close(s);
    return n;
}

static void
check_resume(const char *path, const CsvOptions *o, const Seen *seen, int n,
             const SourcePosition *first, size_t k)
{
    Source *s = NULL;
    Err err = {0};
    SourcePosition at = *first;
    Record rec;
    bool eof;

    if (k >= (size_t) n)
        return;
    if (k > 0)
    {
        at.offset = seen[k - 1].end_off;
        at.line = seen[k - 1].end_line;
        at.records = k;
    }
    if (!source_csv_open(path, o, &s, &err))
        abort(); /* it opened a moment ago */
    if (!s->ops->seek(s, &at, &err))
        abort();
    if (!source_next(s, &rec, &eof, &err) || eof)
        abort();
    if (rec.line != seen[k].line || record_digest(&rec) != seen[k].digest)
        abort();
    source_close(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Seen seen[FUZZ_MAX_RECORDS];
    static Seen zseen[FUZZ_MAX_RECORDS];
    static Seen lseen[FUZZ_MAX_RECORDS];
    CsvOptions o;
    uint8_t sel;
    char path[64];
    char zpath[64];
    int fd;
    int n;
    SourcePosition first;
    bool fatal;

    if (size < 1)
        return 0;
    sel = data[0];
    data++;
    size--;
    csv_options_default(&o);
    o.header = (sel & 1) == 0;
    o.delimiter = (sel & 2) ? ';' : ',';
    if (sel & 4)
        o.escape = '\\';
    if (sel & 8)
        o.null_string = "\\N";
    if (sel & 16)
        o.max_record_bytes = 64 + (sel >> 5) * 16;
    if (sel & 32)
        o.check_utf8 = false;

    fd = make_file(data, size, path, sizeof path);
    n = read_all(path, &o, seen, &fatal, &first);
    if (n > 0)
    {
        check_resume(path, &o, seen, n, &first, 0);
        check_resume(path, &o, seen, n, &first, (size_t) n / 2);
        check_resume(path, &o, seen, n, &first, (size_t) n - 1);
    }

    /* The same bytes with libcsv parsing every line. */
    {
        CsvOptions lo = o;
        int ln;
        bool lfatal;
        SourcePosition lfirst;

        lo.libcsv_only = true;
        ln = read_all(path, &lo, lseen, &lfatal, &lfirst);
        if (ln != n || lfatal != fatal)
            abort();
        for (int i = 0; i < n; i++)
            if (lseen[i].digest != seen[i].digest || lseen[i].end_off != seen[i].end_off ||
                lseen[i].end_line != seen[i].end_line)
                abort();
    }

    /* The same bytes compressed (unless they already start like a zstd
     * frame or skippable frame, which the plain run decompressed). */
    if (size < 4 || (memcmp(data, "\x28\xb5\x2f\xfd", 4) != 0 &&
                     !((data[0] & 0xf0) == 0x50 && memcmp(data + 1, "\x2a\x4d\x18", 3) == 0)))
    {
        size_t bound = ZSTD_compressBound(size);
        void *z = xmalloc(bound);
        size_t zn = ZSTD_compress(z, bound, data, size, 1);
        int zfd;
        int zn_records;
        bool zfatal;
        SourcePosition zfirst;

        if (ZSTD_isError(zn))
            abort();
        zfd = make_file(z, zn, zpath, sizeof zpath);
        zn_records = read_all(zpath, &o, zseen, &zfatal, &zfirst);
        if (zn_records != n || zfatal != fatal)
            abort();
        for (int i = 0; i < n; i++)
            if (zseen[i].digest != seen[i].digest || zseen[i].end_off != seen[i].end_off)
                abort();
        if (n > 0)
            check_resume(zpath, &o, zseen, n, &zfirst, (size_t) n / 2);
        close(zfd);
        free(z);
    }
    close(fd);
    return 0;
}
