/*
 * CSV source: libcsv for the grammar, our own framing around it.
 *
 * libcsv defines what is read.  A record on one line without escape mode
 * (nearly every record of a dump) is split by fast_record instead, which
 * gives exactly what libcsv would and hands the line to libcsv at anything
 * else: a quoted field going on to the next line, a stray quote, a byte
 * after a closing quote.  libcsv's per-byte state machine and callbacks
 * were a quarter of the client's CPU.  The fuzz target and a unit test read
 * every input both ways (CsvOptions.libcsv_only) and compare.
 *
 * libcsv reports fields and row ends but no positions, so the input is fed
 * to it one physical line at a time; after each line we know whether a row
 * ended, which gives each record its raw bytes, its first line number and a
 * resume offset that always falls on a record boundary.  Decompressed input
 * lands in one window buffer that is compacted only up to the start of the
 * record in progress, so Record.raw points into the window without a copy
 * and memory stays bounded by the longest record.
 *
 * Rules beyond the header:
 *
 * - Lines end in "\n", "\r\n" or a lone "\r": libcsv ends a row on either
 *   byte, so a lone CR that ends a record counts as a line (CR-only files
 *   number their records); inside a quoted field only LF and CRLF count, as
 *   grep -n and sed -n count.  Record.raw includes the terminator.
 * - libcsv in strict mode; spaces are data (no trimming).  An unquoted empty
 *   field is NULL, a quoted one ("") the empty string; an unquoted field
 *   equal to null_string is NULL, a quoted one is text.
 * - Blank lines between records are skipped (and counted), except when the
 *   input has exactly one column: there a blank line is a row holding one
 *   NULL, as in PostgreSQL's COPY.
 * - A strict-mode parse error (a quote inside an unquoted field, anything
 *   but a delimiter/newline after a closing quote) rejects the record: it is
 *   returned with Record.error, its raw bytes running to the end of the line
 *   where the error is, and parsing starts afresh on the next line.  Only an
 *   unterminated quote at end of input is fatal.
 * - A record's fields are checked in order: field count, then per field a
 *   NUL byte (PostgreSQL text cannot hold one) or invalid UTF-8 (overlongs,
 *   surrogates and code points past U+10FFFF are invalid).  Field numbers in
 *   messages are 1-based, byte offsets within the field 0-based.
 * - An escape character other than the quote works as PostgreSQL's ESCAPE:
 *   inside quotes, ESC QUOTE is a quote and ESC ESC an escape; elsewhere it
 *   is an ordinary byte.  A pre-pass rewrites it to doubled quotes for libcsv
 *   (a doubled quote still means a quote there, too).
 * - An empty input (or only a BOM and blank lines) is an error when a header
 *   is expected, and zero records with zero columns otherwise.
 * - Compression is decided by the zstd magic number (or a skippable frame)
 *   alone; a ".zst" file without it is an error rather than read as text.
 * - Identity: "realpath|size|sha256 of the first 64 KiB (hex)"; the path
 *   keeps its tail if it would not fit.  Input that is not a regular file
 *   (stdin, a pipe, /dev/fd/N) is "stdin": it names no content, so no
 *   checkpoint of a file can match it.
 * - seek() skips bytes, it does not re-parse: a plain file seeks, zstd and
 *   stdin are decompressed/read and discarded.  The byte before the target
 *   must end a line (else EC_CONFIG), and line/record counts are taken from
 *   the checkpoint.  Going back re-reads a regular file from its start.
 */
#include "v7fill/source_csv.h"

#include <csv.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <xxhash.h>
#include <zstd.h>

#include "v7fill/mem.h"

#define CSV_DEFAULT_MAX_RECORD ((size_t) 256 << 20)
#define CSV_WINDOW_INITIAL     ((size_t) 1 << 20)
#define CSV_MIN_READ           ((size_t) 64 << 10)
#define CSV_IDENTITY_PREFIX    ((size_t) 64 << 10)
/* Fields stored per record while the expected count is unknown (header or
 * first record): far above PostgreSQL's 1600 columns, low enough that a line
 * of a hundred million commas cannot make us allocate gigabytes of Field. */
#define CSV_MAX_COLUMNS        100000

/* Quote state of the pre-pass that rewrites escape-style quotes (escape mode)
 * and of the scan that tells quoted fields apart (--null check). */
typedef enum QuoteState
{
    QS_FIELD_START = 0,
    QS_UNQUOTED,
    QS_QUOTED,
    QS_AFTER_QUOTE,
} QuoteState;

typedef struct CsvSource
{
    Source base; /* first, so Source * and CsvSource * convert */

    /* what is read */
    char *path;    /* as given; "-" for stdin */
    char *display; /* for messages: the path, or "stdin" */
    char *short_name;
    char identity[256];
    int fd;
    bool is_stdin;
    CsvReadFn reader;   /* non-NULL: bytes come from reader(reader_ctx, ...), not fd */
    void *reader_ctx;
    bool regular;       /* a regular file: seekable, size known */
    uint64_t file_size; /* 0 if unknown */

    /* options (null_string owned) */
    bool header;
    unsigned char delim;
    unsigned char quote;
    unsigned char escape; /* 0 unless escape mode (escape differs from quote) */
    char *null_string;    /* NULL or "" = only unquoted empty fields are NULL */
    size_t null_len;
    bool check_utf8;
    size_t max_record;

    /* raw input */
    bool zstd;
    ZSTD_DCtx *dctx;
    unsigned char *zin;
    size_t zin_cap;
    ZSTD_inBuffer zbuf;
    size_t zret;       /* last ZSTD_decompressStream result: 0 = at a frame boundary */
    bool verify_pending; /* a zstd file not yet checked end to end (see zstd_verify) */
    unsigned char prefetch[4]; /* bytes read from a pipe to tell zstd apart */
    size_t nprefetch;
    bool spooled;      /* fd is an unlinked temporary copy of stdin's zstd bytes */
    bool raw_eof;      /* read() returned 0 */
    bool in_eof;       /* no more decompressed bytes will come */
    uint64_t raw_read; /* bytes consumed from fd (progress) */

    /* content fingerprint (regular files, which can be resumed): hst holds
     * the hash of the stream's bytes [0, hash_off); the bytes from hash_off on
     * are still in the window (fill and skip_to hash what they drop) */
    bool hashing;
    XXH3_state_t *hst;
    uint64_t hash_off;

    /* decompressed window */
    char *win;
    size_t win_cap;
    size_t win_len;
    size_t scan;       /* bytes before this were fed to the parser */
    size_t rec_start;  /* start of the record in progress (or of the next one) */
    uint64_t win_base; /* stream offset of win[0] */
    /* Where the next CR is, so that a line needs one memchr (for LF), not two:
     * the stream's bytes in [cr_from, cr_to) were searched, and cr_next is
     * the offset of the first CR among them (UINT64_MAX: none).  Stream
     * offsets, so they stay true when the window moves. */
    uint64_t cr_from;
    uint64_t cr_to;
    uint64_t cr_next;

    /* parser */
    struct csv_parser csv;
    bool csv_ready;
    bool no_fast;           /* every line through libcsv (CsvOptions.libcsv_only) */
    const char *const *repeat_ok; /* header names that may repeat (CsvOptions) */
    size_t nrepeat_ok;
    size_t csv_blk;         /* the block size last given to libcsv */
    bool csv_builtin_space; /* libcsv's own space test is set (else csv_no_space) */
    QuoteState qstate; /* escape mode pre-pass state, persists across lines */
    Buf tbuf;          /* escape mode: the line as libcsv sees it; fast_record: a
                          quoted field with its doubled quotes undone */
    bool row_done;
    size_t nseen;       /* fields reported for the current record */
    size_t field_limit; /* fields stored; the rest are only counted */
    size_t ncand;       /* fields equal to null_string, quotedness unknown */
    Field *fields;
    size_t fcap;
    char *fbuf;
    size_t fbuf_len;
    size_t fbuf_cap;
    uint8_t *quoted; /* per-field flags, filled only when needed */
    size_t quoted_cap;

    uint64_t line_no;  /* lines fed so far */
    uint64_t rec_line; /* first line of the record in progress */

    /* end of the record just read (not yet necessarily returned) */
    uint64_t end_off;
    uint64_t end_line;

    /* position after the last record handed out */
    uint64_t pos_off;
    uint64_t pos_line;
    uint64_t pos_records;
    uint64_t data_off; /* position after the header (and BOM) */
    uint64_t data_line;

    /* columns */
    char **columns;
    char *colnames;
    size_t ncolumns;
    size_t expected; /* fields per record; 0 until known */
    bool unnamed_last; /* the header ends in a delimiter: its last column is "cN" */

    /* no-header mode reads the first record at open to name the columns */
    bool pending;
    Record pending_rec;
    uint64_t pending_end_off;
    uint64_t pending_end_line;

    char recerr[256];
    bool failed;
    Err fail;
} CsvSource;

static const SourceOps csv_ops;

void
csv_options_default(CsvOptions *o)
{
    o->header = true;
    o->delimiter = ',';
    o->quote = '"';
    o->escape = 0;
    o->null_string = NULL;
    o->check_utf8 = true;
    o->max_record_bytes = CSV_DEFAULT_MAX_RECORD;
    o->libcsv_only = false;
    o->repeat_ok = NULL;
    o->nrepeat_ok = 0;
}

/* Every byte is data: libcsv would otherwise trim spaces and tabs around
 * unquoted fields, and PostgreSQL keeps them. */
static int
csv_no_space(unsigned char c)
{
    (void) c;
    return 0;
}

/* Is the space or tab at p[i] at a field edge? */
static inline bool
space_at_edge(const CsvSource *s, const unsigned char *p, size_t n, size_t i)
{
    unsigned char d = s->delim;
    unsigned char q = s->quote;

    if (i == 0 || i + 1 == n)
        return true;
    return p[i - 1] == d || p[i - 1] == q || p[i + 1] == d || p[i + 1] == q ||
           p[i + 1] == '\n' || p[i + 1] == '\r';
}

/* Does the word of eight bytes at p[at] hold a space or tab at a field edge?
 * A zero byte in w ^ ' ' or w ^ '\t' marks one; the marks are visited one by
 * one (a mark can be false next to a real one, so each is checked). */
static inline bool
word_has_edge_space(const CsvSource *s, const unsigned char *p, size_t n, size_t at)
{
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t highs = UINT64_C(0x8080808080808080);
    uint64_t w;
    uint64_t sp;
    uint64_t tb;
    uint64_t m;

    memcpy(&w, p + at, 8);
    w = le64toh(w); /* byte k of the text is byte k of w */
    sp = w ^ (ones * ' ');
    tb = w ^ (ones * '\t');
    m = (((sp - ones) & ~sp) | ((tb - ones) & ~tb)) & highs;
    while (m != 0)
    {
        size_t j = at + (size_t) (__builtin_ctzll(m) >> 3);

        if ((p[j] == ' ' || p[j] == '\t') && space_at_edge(s, p, n, j))
            return true;
        m &= m - 1;
    }
    return false;
}

/*
 * Can this line be fed with libcsv's own space test (no function call per
 * byte: the parse runs ~40% faster)?  That test trims spaces and tabs at the
 * edges of fields, so only when none sits at an edge: at the start or end of
 * the line or next to a delimiter or quote byte (quoted or not: a false alarm
 * only costs speed; next to a quote, so that malformed input is refused at the
 * same byte either way).  Never with a space or tab as delimiter or quote,
 * which the built-in test would take for spaces.
 */
static bool
edges_have_no_space(const CsvSource *s, const unsigned char *p, size_t n)
{
    size_t i = 0;

    if (s->delim == ' ' || s->delim == '\t' || s->quote == ' ' || s->quote == '\t')
        return false;
    for (; i + 8 <= n; i += 8)
        if (word_has_edge_space(s, p, n, i))
            return false;
    if (i < n && n >= 8)
        return !word_has_edge_space(s, p, n, n - 8); /* the rest, overlapping */
    for (; i < n; i++)
        if ((p[i] == ' ' || p[i] == '\t') && space_at_edge(s, p, n, i))
            return false;
    return true;
}

static bool
csv_fail(CsvSource *s, const Err *err)
{
    s->failed = true;
    s->fail = *err;
    return false;
}

/* ---------------------------------------------------------------- input */

static bool
read_fd(CsvSource *s, void *dst, size_t cap, size_t *got, Err *err)
{
    ssize_t n;

    if (s->reader)
    {
        if (!s->reader(s->reader_ctx, dst, cap, got, err))
            return false;
        s->raw_read += *got;
        if (*got == 0)
            s->raw_eof = true;
        return true;
    }
    do
        n = read(s->fd, dst, cap);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return err_errno(err, EC_IO, "could not read \"%s\"", s->display);
    *got = (size_t) n;
    s->raw_read += (uint64_t) n;
    if (n == 0)
        s->raw_eof = true;
    return true;
}

/* Decompress into the window's free tail until some bytes arrive or the
 * compressed input ends. */
static bool
fill_zstd(CsvSource *s, Err *err)
{
    ZSTD_outBuffer out = {s->win + s->win_len, s->win_cap - s->win_len, 0};

    for (;;)
    {
        size_t ret;
        size_t in_before;

        if (s->zbuf.pos == s->zbuf.size && !s->raw_eof)
        {
            size_t got;

            if (!read_fd(s, s->zin, s->zin_cap, &got, err))
                return false;
            s->zbuf.src = s->zin;
            s->zbuf.size = got;
            s->zbuf.pos = 0;
        }
        in_before = s->zbuf.pos;
        ret = ZSTD_decompressStream(s->dctx, &out, &s->zbuf);
        if (ZSTD_isError(ret))
            return err_set(err, EC_FORMAT, "corrupt zstd data in %s: %s", s->display,
                           ZSTD_getErrorName(ret));
        /* A call that neither consumed nor produced says nothing about the
         * frame (after a complete frame it asks for the next header). */
        if (out.pos > 0 || s->zbuf.pos > in_before)
            s->zret = ret;
        if (out.pos > 0)
            break;
        if (s->raw_eof && s->zbuf.pos == s->zbuf.size)
        {
            /* Nothing left to read and the decoder produced nothing: a
             * nonzero hint means it still wanted the rest of a frame. */
            if (s->zret != 0)
                return err_set(err, EC_FORMAT, "unexpected end of compressed data in %s",
                               s->display);
            s->in_eof = true;
            break;
        }
    }
    s->win_len += out.pos;
    return true;
}

/* Add the stream's bytes up to `upto` (in the window) to the content hash. */
static void
hash_to(CsvSource *s, uint64_t upto)
{
    if (!s->hashing || upto <= s->hash_off)
        return;
    (void) XXH3_64bits_update(s->hst, s->win + (s->hash_off - s->win_base),
                              (size_t) (upto - s->hash_off));
    s->hash_off = upto;
}

/* Make room and append more decompressed bytes to the window (or set
 * in_eof).  Bytes from rec_start on are kept: they are the record in
 * progress, which Record.raw will point to. */
static bool
fill(CsvSource *s, Err *err)
{
    if (s->in_eof)
        return true;
    if (s->win_cap - s->win_len < CSV_MIN_READ && s->rec_start > 0)
    {
        hash_to(s, s->win_base + s->rec_start);
        memmove(s->win, s->win + s->rec_start, s->win_len - s->rec_start);
        s->win_base += s->rec_start;
        s->win_len -= s->rec_start;
        s->scan -= s->rec_start;
        s->rec_start = 0;
    }
    if (s->win_cap - s->win_len < CSV_MIN_READ)
    {
        s->win_cap *= 2;
        s->win = xrealloc(s->win, s->win_cap);
    }
    if (s->zstd)
        return fill_zstd(s, err);
    else
    {
        size_t got;

        if (!read_fd(s, s->win + s->win_len, s->win_cap - s->win_len, &got, err))
            return false;
        s->win_len += got;
        if (got == 0)
            s->in_eof = true;
        return true;
    }
}

static uint64_t
record_line_for_message(const CsvSource *s)
{
    return s->scan > s->rec_start ? s->rec_line : s->line_no + 1;
}

/* Find the next physical line at s->scan: *len = its length including the
 * terminator, 0 at end of input.  The last line may lack a terminator. */
static bool
next_line(CsvSource *s, size_t *len, Err *err)
{
    for (;;)
    {
        const char *p = s->win + s->scan;
        size_t avail = s->win_len - s->scan;
        const char *lf = memchr(p, '\n', avail);
        size_t body = lf ? (size_t) (lf - p) : avail;
        uint64_t at = s->win_base + s->scan;
        const char *cr = NULL;

        if (s->cr_from > at || (s->cr_next == UINT64_MAX ? s->cr_to < at + body : s->cr_next < at))
        {
            /* Search the rest of the window once; CR-free files then cost
             * nothing more per line until the window is refilled. */
            const char *c = memchr(p, '\r', avail);

            s->cr_from = at;
            s->cr_to = at + avail;
            s->cr_next = c ? at + (uint64_t) (c - p) : UINT64_MAX;
        }
        if (s->cr_next != UINT64_MAX && s->cr_next < at + body)
            cr = p + (s->cr_next - at);

        if (cr != NULL && (size_t) (cr - p) + 1 < body)
        {
            *len = (size_t) (cr - p) + 1; /* lone CR, followed by data */
        }
        else if (lf != NULL)
        {
            *len = body + 1; /* LF or CRLF */
        }
        else if (cr != NULL && s->in_eof)
        {
            *len = avail; /* lone CR as the very last byte */
        }
        else if (s->in_eof)
        {
            *len = avail; /* final line without terminator, or nothing */
            return true;
        }
        else
        {
            /* No complete line yet (or a CR at the end whose LF may follow). */
            if (s->win_len - s->rec_start > s->max_record)
                return err_set(err, EC_FORMAT,
                               "%s:%" PRIu64 ": record is longer than the maximum of %zu bytes",
                               s->display, record_line_for_message(s), s->max_record);
            if (!fill(s, err))
                return false;
            continue;
        }
        if (s->scan + *len - s->rec_start > s->max_record)
            return err_set(err, EC_FORMAT,
                           "%s:%" PRIu64 ": record is longer than the maximum of %zu bytes",
                           s->display, record_line_for_message(s), s->max_record);
        return true;
    }
}

/* --------------------------------------------------------------- fields */

static void
fields_reserve(CsvSource *s, size_t n)
{
    size_t cap;

    if (n <= s->fcap)
        return;
    cap = s->fcap ? s->fcap : 16;
    while (cap < n)
        cap *= 2;
    s->fields = xrealloc(s->fields, cap * sizeof *s->fields);
    s->fcap = cap;
}

/* Grow fbuf; the fields stored so far move with it. */
static void __attribute__((noinline))
fbuf_grow(CsvSource *s, size_t need)
{
    size_t cap = s->fbuf_cap ? s->fbuf_cap : 4096;
    char *old = s->fbuf;
    size_t stored = s->nseen - 1 < s->field_limit ? s->nseen - 1 : s->field_limit;

    while (cap - s->fbuf_len < need)
        cap *= 2;
    s->fbuf = xrealloc(s->fbuf, cap);
    s->fbuf_cap = cap;
    for (size_t i = 0; i < stored; i++)
        if (!s->fields[i].is_null)
            s->fields[i].data = s->fbuf + (s->fields[i].data - old);
}

static inline __attribute__((always_inline)) void
store_field(CsvSource *s, const void *data, size_t len)
{
    size_t k = s->nseen++;
    Field *f;

    if (k >= s->field_limit)
        return;
    if (k >= s->fcap)
        fields_reserve(s, k + 1);
    f = &s->fields[k];
    if (data == NULL)
    {
        f->is_null = true;
        f->len = 0;
        f->data = NULL;
        return;
    }
    if (s->fbuf_cap - s->fbuf_len < len + 1)
        fbuf_grow(s, len + 1);
    f->data = s->fbuf + s->fbuf_len;
    f->len = len;
    f->is_null = false;
    mem_copy(s->fbuf + s->fbuf_len, data, len);
    s->fbuf[s->fbuf_len + len] = '\0';
    s->fbuf_len += len + 1;
    if (s->null_len == len && len > 0 && memcmp(data, s->null_string, len) == 0)
        s->ncand++;
}

static void
on_field(void *data, size_t len, void *user)
{
    store_field(user, data, len);
}

static void
on_row(int c, void *user)
{
    CsvSource *s = user;

    (void) c;
    s->row_done = true;
}

static void
record_reset(CsvSource *s)
{
    s->nseen = 0;
    s->ncand = 0;
    s->fbuf_len = 0;
    s->row_done = false;
}

/* Drop whatever libcsv holds, e.g. after a strict-mode error.  csv_fini
 * resets the state; without STRICT_FINI it cannot refuse to. */
static void
parser_reset(CsvSource *s)
{
    unsigned char opts = (unsigned char) csv_get_opts(&s->csv);

    csv_set_opts(&s->csv, (unsigned char) (opts & ~CSV_STRICT_FINI));
    csv_fini(&s->csv, NULL, NULL, NULL);
    csv_set_opts(&s->csv, opts);
    s->qstate = QS_FIELD_START;
    record_reset(s);
}

static inline bool
is_eol(unsigned char c)
{
    return c == '\r' || c == '\n';
}

/* Escape mode: rewrite ESC QUOTE as QUOTE QUOTE and ESC ESC as ESC inside
 * quoted fields, the only escapes PostgreSQL's CSV ESCAPE knows, so libcsv
 * sees RFC 4180 quoting.  An escape before any other byte, or outside
 * quotes, is literal.  The quote state carries over lines (embedded
 * newlines); a line always ends in its terminator, so the byte after an
 * escape is always in the same line.
 *
 * With out == NULL nothing is written and the return value is the index in
 * `in` of the byte that produced output offset `stop` (to name the column
 * of a parse error); otherwise it returns the output length. */
static size_t
escape_rewrite(const CsvSource *s, QuoteState *state, const unsigned char *in, size_t n,
               char *out, size_t stop)
{
    QuoteState st = *state;
    unsigned char q = s->quote;
    unsigned char e = s->escape;
    unsigned char d = s->delim;
    size_t o = 0;

    for (size_t i = 0; i < n; i++)
    {
        unsigned char c = in[i];
        size_t from = i;

        switch (st)
        {
            case QS_FIELD_START:
                if (c == q)
                    st = QS_QUOTED;
                else if (c != d && !is_eol(c))
                    st = QS_UNQUOTED;
                break;
            case QS_UNQUOTED:
                if (c == d || is_eol(c))
                    st = QS_FIELD_START;
                break;
            case QS_QUOTED:
                if (c == e && i + 1 < n && (in[i + 1] == q || in[i + 1] == e))
                {
                    if (in[i + 1] == q)
                    {
                        if (out != NULL)
                            out[o] = (char) q; /* the quote itself follows below */
                        else if (o == stop)
                            return from;
                        o++;
                    }
                    i++;
                    c = in[i];
                }
                else if (c == q)
                    st = QS_AFTER_QUOTE;
                break;
            case QS_AFTER_QUOTE:
                if (c == q)
                    st = QS_QUOTED;
                else if (c == d || is_eol(c))
                    st = QS_FIELD_START;
                else
                    st = QS_UNQUOTED; /* libcsv reports this as an error */
                break;
        }
        if (out != NULL)
            out[o] = (char) c;
        else if (o == stop)
            return from;
        o++;
    }
    *state = st;
    return out != NULL ? o : n;
}

/* Which fields of a complete record were quoted: only needed to tell an
 * unquoted null_string (NULL) from a quoted one (text). */
static void
scan_quoted(CsvSource *s, const unsigned char *raw, size_t n, size_t nfields)
{
    QuoteState st = QS_FIELD_START;
    size_t k = 0;

    if (s->quoted_cap < nfields)
    {
        s->quoted = xrealloc(s->quoted, nfields);
        s->quoted_cap = nfields;
    }
    memset(s->quoted, 0, nfields);
    for (size_t i = 0; i < n && k < nfields; i++)
    {
        unsigned char c = raw[i];

        switch (st)
        {
            case QS_FIELD_START:
                if (c == s->quote)
                {
                    s->quoted[k] = 1;
                    st = QS_QUOTED;
                }
                else if (c == s->delim)
                    k++;
                else if (!is_eol(c))
                    st = QS_UNQUOTED;
                break;
            case QS_UNQUOTED:
                if (c == s->delim)
                {
                    k++;
                    st = QS_FIELD_START;
                }
                break;
            case QS_QUOTED:
                if (s->escape && c == s->escape && i + 1 < n &&
                    (raw[i + 1] == s->quote || raw[i + 1] == s->escape))
                    i++;
                else if (c == s->quote)
                    st = QS_AFTER_QUOTE;
                break;
            case QS_AFTER_QUOTE:
                if (c == s->quote)
                    st = QS_QUOTED;
                else if (c == s->delim)
                {
                    k++;
                    st = QS_FIELD_START;
                }
                break;
        }
    }
}

/* ---------------------------------------------------------------- UTF-8 */

/* Offset of the first NUL byte or (when utf8) the first byte of an invalid
 * UTF-8 sequence; n if none.  Eight ASCII bytes at a time, since nearly all
 * CSV data is ASCII. */
static size_t
text_check(const unsigned char *p, size_t n, bool utf8, bool *is_nul)
{
    size_t i = 0;

    *is_nul = false;
    if (!utf8)
    {
        const unsigned char *z = memchr(p, 0, n);

        if (z == NULL)
            return n;
        *is_nul = true;
        return (size_t) (z - p);
    }
    while (i < n)
    {
        unsigned char c;
        size_t need;
        unsigned char lo = 0x80;
        unsigned char hi = 0xbf;

        if (n - i >= 8)
        {
            uint64_t w;

            memcpy(&w, p + i, 8);
            if (((w | ((w - UINT64_C(0x0101010101010101)) & ~w)) & UINT64_C(0x8080808080808080)) ==
                0)
            {
                i += 8;
                continue;
            }
        }
        c = p[i];
        if (c < 0x80)
        {
            if (c == 0)
            {
                *is_nul = true;
                return i;
            }
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            need = 1;
        else if (c >= 0xe0 && c <= 0xef)
        {
            need = 2;
            if (c == 0xe0)
                lo = 0xa0; /* overlong */
            else if (c == 0xed)
                hi = 0x9f; /* UTF-16 surrogates */
        }
        else if (c >= 0xf0 && c <= 0xf4)
        {
            need = 3;
            if (c == 0xf0)
                lo = 0x90; /* overlong */
            else if (c == 0xf4)
                hi = 0x8f; /* past U+10FFFF */
        }
        else
            return i;
        if (n - i <= need)
            return i;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (size_t k = 2; k <= need; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return i;
        i += need + 1;
    }
    return n;
}

/* One pass over a record's raw bytes, sixteen at a time, for two facts that
 * then hold for every field (each field's bytes are among the record's):
 * *ascii, no byte is NUL or >= 0x80 (no UTF-8 or NUL check per field);
 * *plain, none is a backslash, tab, CR or LF (no COPY escaping per field).
 * The record's line terminator is not part of n. */
typedef unsigned char V16 __attribute__((vector_size(16)));

static void
raw_scan(const unsigned char *p, size_t n, bool *ascii, bool *plain)
{
    const uint64_t highs = UINT64_C(0x8080808080808080);
    size_t i = 0;
    V16 vbad = {0};
    V16 vesc = {0};

    /* Sixteen bytes at a time (GCC/clang vector extensions: SSE2 or NEON
     * where there is one, plain code where not), the rest as the last sixteen
     * bytes again; a byte is not plain ASCII when b - 1 >= 0x7f (NUL wraps
     * around, 0x80.. stays high).  Records under sixteen bytes byte by byte. */
    if (n >= 16)
    {
        for (;; i += 16)
        {
            V16 v;

            if (i + 16 > n)
                i = n - 16; /* overlapping what was seen */
            memcpy(&v, p + i, 16);
            vbad |= (V16) (v - 1 >= 0x7f);
            vesc |= (V16) ((v == '\\') | (v - '\t' <= 1) | (v == '\r'));
            if (i + 16 == n)
                break;
        }
        i = n;
    }
    {
        uint64_t h[2];
        uint64_t e[2];

        memcpy(h, &vbad, 16);
        memcpy(e, &vesc, 16);
        *ascii = ((h[0] | h[1]) & highs) == 0;
        *plain = ((e[0] | e[1]) & highs) == 0;
    }
    for (; i < n; i++)
    {
        unsigned char c = p[i];

        if (c == 0 || c >= 0x80)
            *ascii = false;
        if (c == '\\' || c == '\t' || c == '\r' || c == '\n')
            *plain = false;
    }
}

/* -------------------------------------------------------------- records */

/* Feed one line to libcsv.  Returns false only for fatal errors; a strict
 * parse error sets *bad with the message in s->recerr. */
static bool
feed_line(CsvSource *s, const char *line, size_t len, bool *bad, Err *err)
{
    const char *p = line;
    size_t n = len;
    size_t done;
    QuoteState before = s->qstate;
    size_t blk = csv_get_buffer_size(&s->csv);
    bool builtin;

    *bad = false;
    if (s->escape)
    {
        buf_reset(&s->tbuf);
        buf_reserve(&s->tbuf, len);
        s->tbuf.len = escape_rewrite(s, &s->qstate, (const unsigned char *) line, len,
                                     s->tbuf.data, 0);
        s->tbuf.data[s->tbuf.len] = '\0';
        p = s->tbuf.data;
        n = s->tbuf.len;
    }
    /* libcsv grows its field buffer by a fixed block; make the block at least
     * the buffer's size and the line's length so growth is geometric. */
    if (blk < n + 1)
        blk = n + 1;
    if (blk < 4096)
        blk = 4096;
    if (blk != s->csv_blk)
    {
        csv_set_blk_size(&s->csv, blk);
        s->csv_blk = blk;
    }
    builtin = edges_have_no_space(s, (const unsigned char *) p, n);
    if (builtin != s->csv_builtin_space)
    {
        csv_set_space_func(&s->csv, builtin ? NULL : csv_no_space);
        s->csv_builtin_space = builtin;
    }
    done = csv_parse(&s->csv, p, n, on_field, on_row, s);
    if (done == n)
        return true;
    if (csv_error(&s->csv) != CSV_EPARSE)
        return err_set(err, EC_INTERNAL, "%s:%" PRIu64 ": csv parser: %s", s->display,
                       s->line_no + 1, csv_strerror(csv_error(&s->csv)));
    {
        /* libcsv stops at the offending byte: a quote inside an unquoted
         * field, or anything but a delimiter, newline or quote right after
         * a closing quote (our space function makes spaces data too). */
        unsigned char c = (unsigned char) p[done];
        size_t at = s->escape ? escape_rewrite(s, &before, (const unsigned char *) line, len,
                                               NULL, done)
                              : done;

        snprintf(s->recerr, sizeof s->recerr, "%s at line %" PRIu64 ", byte %zu",
                 c == s->quote ? "quote character inside an unquoted field"
                               : "unexpected character after a closing quote",
                 s->line_no + 1, at + 1);
    }
    *bad = true;
    return true;
}

/* Bytes before the first `a` or `b` in p[0..n), eight at a time: a byte
 * equal to the wanted one is a zero byte of the XOR, and the lowest flagged
 * byte is exact (borrows only run upwards, little-endian). */
static inline size_t
span_to_either(const char *p, size_t n, char a, char b)
{
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t highs = UINT64_C(0x8080808080808080);
    const uint64_t ma = ones * (unsigned char) a;
    const uint64_t mb = ones * (unsigned char) b;
    size_t i = 0;

    for (; i + 8 <= n; i += 8)
    {
        uint64_t x;
        uint64_t xa;
        uint64_t xb;
        uint64_t hit;

        memcpy(&x, p + i, 8);
        x = le64toh(x);
        xa = x ^ ma;
        xb = x ^ mb;
        hit = ((xa - ones) & ~xa & highs) | ((xb - ones) & ~xb & highs);
        if (hit != 0)
            return i + (size_t) (__builtin_ctzll(hit) >> 3);
    }
    for (; i < n; i++)
        if (p[i] == a || p[i] == b)
            return i;
    return n;
}

/* The common record without libcsv: one line, not escape mode, no parse
 * error.  Fields go through on_field exactly as libcsv would report them
 * (CSV_EMPTY_IS_NULL: an unquoted empty field is NULL; every byte is data).
 * Returns false, having stored nothing, for anything else: a quoted field
 * going on to the next line, a quote inside an unquoted field, a byte after
 * a closing quote.  libcsv then parses the line, reporting the error or
 * carrying the record over.  The fuzz target reads every input both ways. */
static bool
fast_record(CsvSource *s, const char *line, size_t len)
{
    const char *p = line;
    const char *end = line + len;
    const char d = (char) s->delim;
    const char q = (char) s->quote;

    if (end > p && end[-1] == '\n')
        end--;
    if (end > p && end[-1] == '\r')
        end--;
    for (;;)
    {
        if (p < end && *p == q)
        {
            const char *start = ++p;
            const char *c;

            buf_reset(&s->tbuf);
            for (;;)
            {
                c = memchr(p, q, (size_t) (end - p));
                if (c == NULL)
                    goto fallback;
                if (c + 1 < end && c[1] == q)
                {
                    buf_append(&s->tbuf, start, (size_t) (c + 1 - start));
                    p = start = c + 2;
                    continue;
                }
                break;
            }
            if (c + 1 < end && c[1] != d)
                goto fallback;
            if (s->tbuf.len > 0)
            {
                buf_append(&s->tbuf, start, (size_t) (c - start));
                store_field(s, s->tbuf.data, s->tbuf.len);
            }
            else
                store_field(s, start, (size_t) (c - start));
            p = c + 1;
        }
        else
        {
            const char *c = p + span_to_either(p, (size_t) (end - p), d, q);

            if (c < end && *c == q)
                goto fallback;
            store_field(s, c == p ? NULL : p, (size_t) (c - p));
            p = c;
        }
        if (p == end)
            break;
        p++; /* the delimiter */
    }
    s->row_done = true;
    return true;
fallback:
    record_reset(s);
    return false;
}

/* Read the next record into s->fields / s->recerr, without the per-record
 * checks.  rec->error is set for a strict-mode parse error. */
static bool
read_record(CsvSource *s, Record *rec, bool *eof, Err *err)
{
    bool bad = false;

    *eof = false;
    record_reset(s);
    s->recerr[0] = '\0';
    for (;;)
    {
        size_t len = 0;
        const char *line;
        bool in_progress;

        if (!next_line(s, &len, err))
            return false;
        if (len == 0)
        {
            if (s->scan == s->rec_start)
            {
                *eof = true;
                return true;
            }
            if (csv_fini(&s->csv, on_field, on_row, s) != 0)
                return err_set(err, EC_FORMAT,
                               "%s:%" PRIu64 ": unterminated quoted field: the record starting "
                               "at this line has no closing quote before end of file",
                               s->display, s->rec_line);
            break;
        }
        line = s->win + s->scan;
        in_progress = s->scan > s->rec_start;
        if (!in_progress && len <= 2 && is_eol((unsigned char) line[0]) &&
            is_eol((unsigned char) line[len - 1]))
        {
            /* A blank line between records.  libcsv skips it; with a single
             * column it is a NULL value, as in PostgreSQL's COPY. */
            s->scan += len;
            s->line_no++;
            if (s->expected == 1)
            {
                s->rec_line = s->line_no;
                on_field(NULL, 0, s);
                break;
            }
            s->rec_start = s->scan;
            continue;
        }
        if (!in_progress)
        {
            s->rec_line = s->line_no + 1;
            if (!s->escape && !s->no_fast && fast_record(s, line, len))
            {
                s->scan += len;
                s->line_no++;
                break;
            }
        }
        if (!feed_line(s, line, len, &bad, err))
            return false;
        s->scan += len;
        /* A lone CR inside a quoted field is data, not a line end: line
         * numbers follow grep -n and sed -n.  One that ends the record
         * (CR-only line ends) still counts. */
        if (line[len - 1] != '\r' || s->row_done || bad)
            s->line_no++;
        if (bad)
        {
            parser_reset(s);
            break;
        }
        if (s->row_done)
            break;
    }
    rec->raw = s->win + s->rec_start;
    rec->raw_len = s->scan - s->rec_start;
    rec->line = s->rec_line;
    rec->error = bad ? s->recerr : NULL;
    rec->copy_plain = false;
    rec->nfields = bad ? 0 : (s->nseen < s->field_limit ? s->nseen : s->field_limit);
    rec->fields = s->fields;
    s->end_off = s->win_base + s->scan;
    s->end_line = s->line_no;
    s->rec_start = s->scan;
    return true;
}

/* Per-record rules for data records: --null, field count, NUL, UTF-8. */
static void
check_record(CsvSource *s, Record *rec)
{
    if (rec->error != NULL)
        return;
    if (s->ncand > 0)
    {
        bool maybe_quoted = true;

        if (!s->escape)
        {
            /* Unescaped, a quoted field equal to null_string appears in the
             * raw bytes as quote + null_string + quote; usually it does not,
             * and then every match was unquoted. */
            maybe_quoted = false;
            for (const char *r = rec->raw, *end = rec->raw + rec->raw_len; r < end;)
            {
                const char *q = memchr(r, s->quote, (size_t) (end - r));

                if (q == NULL || (size_t) (end - q) < s->null_len + 2)
                    break;
                if (memcmp(q + 1, s->null_string, s->null_len) == 0 &&
                    (unsigned char) q[s->null_len + 1] == s->quote)
                {
                    maybe_quoted = true;
                    break;
                }
                r = q + 1;
            }
        }
        if (maybe_quoted)
            scan_quoted(s, (const unsigned char *) rec->raw, rec->raw_len, rec->nfields);
        for (size_t i = 0; i < rec->nfields; i++)
        {
            Field *f = &s->fields[i];

            if (!f->is_null && f->len == s->null_len &&
                memcmp(f->data, s->null_string, s->null_len) == 0 &&
                !(maybe_quoted && s->quoted[i]))
            {
                f->is_null = true;
                f->data = NULL;
                f->len = 0;
            }
        }
    }
    if (s->expected != 0 && s->nseen != s->expected)
    {
        snprintf(s->recerr, sizeof s->recerr, "expected %zu fields, found %zu", s->expected,
                 s->nseen);
        rec->error = s->recerr;
        return;
    }
    {
        size_t n = rec->raw_len;
        bool ascii;

        /* without the line terminator (LF, CRLF or CR) */
        if (n > 0 && rec->raw[n - 1] == '\n')
            n--;
        if (n > 0 && rec->raw[n - 1] == '\r')
            n--;
        raw_scan((const unsigned char *) rec->raw, n, &ascii, &rec->copy_plain);
        if (ascii)
            return;
    }
    for (size_t i = 0; i < rec->nfields; i++)
    {
        const Field *f = &s->fields[i];
        bool is_nul;
        size_t at;

        if (f->is_null)
            continue;
        at = text_check((const unsigned char *) f->data, f->len, s->check_utf8, &is_nul);
        if (at == f->len)
            continue;
        snprintf(s->recerr, sizeof s->recerr, "%s in field %zu (byte offset %zu)",
                 is_nul ? "NUL byte" : "invalid UTF-8", i + 1, at);
        rec->error = s->recerr;
        return;
    }
}

/* ---------------------------------------------------------------- header */

typedef struct NameRef
{
    const char *name;
    size_t index;
} NameRef;

static int
nameref_cmp(const void *a, const void *b)
{
    const NameRef *x = a;
    const NameRef *y = b;
    int c = strcmp(x->name, y->name);

    if (c != 0)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Names live in one allocation, pointed into by the NULL-terminated array. */
static void
columns_set(CsvSource *s, const Field *fields, size_t n, bool generated)
{
    size_t bytes = 0;
    char *names;

    for (size_t i = 0; i < n; i++)
        bytes += generated || fields[i].is_null ? 24 : fields[i].len + 1;
    s->columns = xmalloc((n + 1) * sizeof *s->columns);
    names = xmalloc(bytes ? bytes : 1);
    s->colnames = names;
    for (size_t i = 0; i < n; i++)
    {
        s->columns[i] = names;
        if (generated || fields[i].is_null) /* no header, or its unnamed last column */
            names += snprintf(names, 24, "c%zu", i + 1) + 1;
        else
        {
            memcpy(names, fields[i].data, fields[i].len);
            names[fields[i].len] = '\0';
            names += fields[i].len + 1;
        }
    }
    s->columns[n] = NULL;
    s->ncolumns = n;
}

static bool
repeat_allowed(const CsvSource *s, const char *name)
{
    for (size_t i = 0; i < s->nrepeat_ok; i++)
        if (strcmp(s->repeat_ok[i], name) == 0)
            return true;
    return false;
}

static bool
header_check(CsvSource *s, const Record *rec, Err *err)
{
    NameRef *refs;
    char unnamed[24];
    bool ok = true;

    if (rec->error != NULL)
        return err_set(err, EC_FORMAT, "%s:%" PRIu64 ": malformed header: %s", s->display,
                       rec->line, rec->error);
    if (s->nseen > CSV_MAX_COLUMNS)
        return err_set(err, EC_FORMAT, "%s:%" PRIu64 ": header has more than %d columns",
                       s->display, rec->line, CSV_MAX_COLUMNS);
    /* A header ending in a delimiter ("a,b,c,", common in exports) names its
     * last column cN, as without a header; the pipeline rejects rows with a
     * value there unless the column is ignored or mapped. */
    s->unnamed_last = rec->nfields > 1 && rec->fields[rec->nfields - 1].is_null;
    for (size_t i = 0; i < rec->nfields - (s->unnamed_last ? 1 : 0); i++)
    {
        const Field *f = &rec->fields[i];
        bool is_nul;

        if (f->is_null || f->len == 0)
            return err_set(err, EC_FORMAT,
                           "%s:%" PRIu64 ": empty column name in header (column %zu)",
                           s->display, rec->line, i + 1);
        if (text_check((const unsigned char *) f->data, f->len, true, &is_nul) != f->len)
            return err_set(err, EC_FORMAT,
                           "%s:%" PRIu64 ": column name %zu in header is not valid UTF-8 text",
                           s->display, rec->line, i + 1);
    }
    /* Sorted copy: a header of many columns must not cost quadratic time.
     * The unnamed last column takes part under its name cN. */
    refs = xmalloc((rec->nfields ? rec->nfields : 1) * sizeof *refs);
    for (size_t i = 0; i < rec->nfields; i++)
    {
        refs[i].name = rec->fields[i].data;
        refs[i].index = i;
    }
    if (s->unnamed_last)
    {
        (void) snprintf(unnamed, sizeof unnamed, "c%zu", rec->nfields);
        refs[rec->nfields - 1].name = unnamed;
    }
    qsort(refs, rec->nfields, sizeof *refs, nameref_cmp);
    for (size_t i = 1; i < rec->nfields; i++)
        if (strcmp(refs[i - 1].name, refs[i].name) == 0 && !repeat_allowed(s, refs[i].name))
        {
            char shown[256];
            ok = err_set(err, EC_FORMAT,
                         "%s:%" PRIu64 ": duplicate column name \"%s\" in header (columns %zu "
                         "and %zu)",
                         s->display, rec->line, err_printable(refs[i].name, shown, sizeof shown),
                         refs[i - 1].index + 1, refs[i].index + 1);
            err_hint(err, "--ignore-column %s skips every copy of it (unless it is the time "
                          "column, the id column or named in --source-ref).",
                     shown);
            break;
        }
    free(refs);
    return ok;
}

/* ------------------------------------------------------------- open/seek */

static void
window_reset(CsvSource *s)
{
    s->win_len = 0;
    s->scan = 0;
    s->rec_start = 0;
    s->win_base = 0;
    s->cr_from = s->cr_to = 0;
    s->cr_next = UINT64_MAX;
    s->in_eof = false;
    s->raw_eof = false;
    s->raw_read = 0;
    s->zbuf.src = s->zin;
    s->zbuf.size = 0;
    s->zbuf.pos = 0;
    s->zret = 0;
    s->line_no = 0;
    s->pending = false;
    s->hash_off = 0;
    if (s->hashing)
        (void) XXH3_64bits_reset(s->hst);
}

static bool
is_zstd_magic(const unsigned char *b, size_t n)
{
    if (n < 4)
        return false;
    if (b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
        return true;
    /* skippable frame 0x184D2A50..5F, which zstd may put first */
    return (b[0] & 0xf0) == 0x50 && b[1] == 0x2a && b[2] == 0x4d && b[3] == 0x18;
}

static bool
has_zst_suffix(const char *path)
{
    size_t n = strlen(path);

    return n > 4 && strcmp(path + n - 4, ".zst") == 0;
}

/* From the start of the input: detect zstd, skip a BOM, read the header (or
 * the first record, for the column count).  `first`: set columns; else (a
 * rewind) only re-read them. */
static bool
begin(CsvSource *s, bool first, Err *err)
{
    unsigned char peek[4];
    size_t npeek = 0;
    Record rec;
    bool eof;

    window_reset(s);
    parser_reset(s);
    /* Bytes a pipe already gave up at open come first. */
    memcpy(peek, s->prefetch, s->nprefetch);
    npeek = s->nprefetch;
    s->raw_read = s->nprefetch;
    s->nprefetch = 0;
    /* Peek at the first four bytes; a pipe may hand them over piecemeal. */
    while (npeek < sizeof peek && !s->raw_eof)
    {
        size_t got;

        if (!read_fd(s, peek + npeek, sizeof peek - npeek, &got, err))
            return false;
        npeek += got;
    }
    s->zstd = s->reader == NULL && is_zstd_magic(peek, npeek);
    if (!s->zstd && !s->is_stdin && s->reader == NULL && has_zst_suffix(s->path))
        return err_set(err, EC_FORMAT, "%s is not zstd-compressed (no zstd magic number)",
                       s->display);
    if (s->zstd)
    {
        if (s->dctx == NULL)
        {
            s->dctx = ZSTD_createDCtx();
            if (s->dctx == NULL)
                return err_set(err, EC_INTERNAL, "could not create a zstd decompression context");
            s->zin_cap = ZSTD_DStreamInSize();
            s->zin = xmalloc(s->zin_cap);
        }
        else
            (void) ZSTD_DCtx_reset(s->dctx, ZSTD_reset_session_only);
        memcpy(s->zin, peek, npeek);
        s->zbuf.src = s->zin;
        s->zbuf.size = npeek;
        s->zbuf.pos = 0;
    }
    else
    {
        memcpy(s->win, peek, npeek);
        s->win_len = npeek;
        if (s->raw_eof)
            s->in_eof = true;
    }
    while (s->win_len < 3 && !s->in_eof)
        if (!fill(s, err))
            return false;
    if (s->win_len >= 3 && memcmp(s->win, "\xef\xbb\xbf", 3) == 0)
        s->scan = s->rec_start = 3;

    s->expected = 0;
    s->field_limit = CSV_MAX_COLUMNS + 1;
    if (!read_record(s, &rec, &eof, err))
        return false;
    if (s->header)
    {
        if (eof)
            return err_set(err, EC_FORMAT, "%s is empty: expected a header line", s->display);
        if (first)
        {
            if (!header_check(s, &rec, err))
                return false;
            columns_set(s, rec.fields, rec.nfields, false);
        }
        s->data_off = s->end_off;
        s->data_line = s->end_line;
    }
    else
    {
        s->data_off = eof ? s->win_base + s->rec_start : s->end_off - rec.raw_len;
        s->data_line = eof ? s->line_no : rec.line - 1;
        if (!eof)
        {
            if (rec.error != NULL)
                return err_set(err, EC_FORMAT,
                               "%s:%" PRIu64 ": cannot count the columns: the first record is "
                               "malformed: %s",
                               s->display, rec.line, rec.error);
            if (s->nseen > CSV_MAX_COLUMNS)
                return err_set(err, EC_FORMAT,
                               "%s:%" PRIu64 ": first record has more than %d fields",
                               s->display, rec.line, CSV_MAX_COLUMNS);
            s->pending = true;
            s->pending_rec = rec;
            s->pending_end_off = s->end_off;
            s->pending_end_line = s->end_line;
        }
        if (first)
            columns_set(s, NULL, eof ? 0 : rec.nfields, true);
        /* Blank lines before the first record were skipped: data starts at
         * the record itself. */
    }
    s->expected = s->ncolumns;
    s->field_limit = s->expected ? s->expected : CSV_MAX_COLUMNS + 1;
    if (s->pending)
        check_record(s, &s->pending_rec);
    s->pos_off = s->data_off;
    s->pos_line = s->data_line;
    s->pos_records = 0;
    return true;
}

/* ------------------------------------------------------- zstd verification */

/*
 * Nothing decoded from input that fails its integrity check may be handed
 * on: the zstd CLI writes one frame per file, so a checksum error at the end
 * of a frame would come after most of its rows were committed.  So a zstd
 * input is decompressed once before its first record is returned, its
 * output discarded and every frame's checksum checked.  A regular file is
 * read with pread (the reading offset stays put); standard input is copied
 * to an unlinked temporary file while it is checked, then read from there.
 * Frames written without a checksum (zstd --no-check) can only be checked
 * for structure.
 */
typedef struct ZstdCheck
{
    ZSTD_DCtx *dctx; /* its own: the reader's may be mid-frame (the header was read) */
    void *in;
    size_t in_cap;
    void *out;
    size_t out_cap;
    size_t last; /* last result: 0 = at a frame boundary */
} ZstdCheck;

static bool
zstd_check_begin(ZstdCheck *c, Err *err)
{
    memset(c, 0, sizeof *c);
    c->dctx = ZSTD_createDCtx();
    if (c->dctx == NULL)
        return err_set(err, EC_INTERNAL, "could not create a zstd decompression context");
    c->in_cap = ZSTD_DStreamInSize();
    c->in = xmalloc(c->in_cap);
    c->out_cap = ZSTD_DStreamOutSize();
    c->out = xmalloc(c->out_cap);
    return true;
}

/* Decompress n compressed bytes, keeping nothing. */
static bool
zstd_check_feed(const CsvSource *s, ZstdCheck *c, const void *data, size_t n, Err *err)
{
    ZSTD_inBuffer in = {data, n, 0};

    while (in.pos < in.size)
    {
        ZSTD_outBuffer out = {c->out, c->out_cap, 0};
        size_t ret = ZSTD_decompressStream(c->dctx, &out, &in);

        if (ZSTD_isError(ret))
        {
            err_set(err, EC_FORMAT, "corrupt zstd data in %s: %s", s->display,
                    ZSTD_getErrorName(ret));
            err_detail(err, "Found by the check of the whole input before its first row: "
                            "nothing from it was imported.");
            return false;
        }
        c->last = ret;
    }
    return true;
}

static bool
zstd_check_end(const CsvSource *s, ZstdCheck *c, bool ok, Err *err)
{
    ZSTD_freeDCtx(c->dctx);
    free(c->in);
    free(c->out);
    if (ok && c->last != 0)
    {
        err_set(err, EC_FORMAT, "unexpected end of compressed data in %s", s->display);
        err_detail(err, "Found by the check of the whole input before its first row: "
                        "nothing from it was imported.");
        return false;
    }
    return ok;
}

/* A regular zstd file, end to end. */
static bool
zstd_verify_file(CsvSource *s, Err *err)
{
    ZstdCheck c;
    uint64_t off = 0;
    bool ok = true;

    s->verify_pending = false;
    if (!zstd_check_begin(&c, err))
        return false;
    for (;;)
    {
        /* Fed as the reader feeds it (the four bytes it peeks at, then
         * whole buffers): libzstd's verdict on some malformed frames
         * depends on how the bytes arrive. */
        ssize_t n = pread(s->fd, c.in, off == 0 ? 4 : c.in_cap, (off_t) off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
        {
            ok = err_errno(err, EC_IO, "could not read \"%s\"", s->display);
            break;
        }
        if (n == 0)
            break;
        off += (uint64_t) n;
        if (!zstd_check_feed(s, &c, c.in, (size_t) n, err))
        {
            ok = false;
            break;
        }
    }
    return zstd_check_end(s, &c, ok, err);
}

static bool
write_all(int fd, const void *data, size_t n)
{
    const char *p = data;

    while (n > 0)
    {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t) w;
    }
    return true;
}

/* Input that cannot be read twice: if it is zstd, copy it to an unlinked
 * temporary file (in $TMPDIR, else /tmp) while checking it, and read that.
 * Otherwise the bytes peeked at stay in prefetch for begin(). */
static bool
zstd_spool_pipe(CsvSource *s, Err *err)
{
    const char *dir = getenv("TMPDIR");
    char *tmpl;
    int tfd;
    ZstdCheck c;
    bool ok = true;

    while (s->nprefetch < sizeof s->prefetch && !s->raw_eof)
    {
        size_t got;

        if (!read_fd(s, s->prefetch + s->nprefetch, sizeof s->prefetch - s->nprefetch, &got,
                     err))
            return false;
        s->nprefetch += got;
    }
    if (!is_zstd_magic(s->prefetch, s->nprefetch))
        return true;
    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    tmpl = xmalloc(strlen(dir) + 32);
    sprintf(tmpl, "%s/v7fill-stdin-XXXXXX", dir);
    tfd = mkstemp(tmpl);
    if (tfd < 0)
    {
        err_errno(err, EC_IO, "could not create a temporary file in \"%s\" to check %s", dir,
                  s->display);
        free(tmpl);
        return false;
    }
    (void) unlink(tmpl);
    if (!zstd_check_begin(&c, err))
    {
        close(tfd);
        free(tmpl);
        return false;
    }
    ok = zstd_check_feed(s, &c, s->prefetch, s->nprefetch, err);
    if (ok && !write_all(tfd, s->prefetch, s->nprefetch))
        ok = err_errno(err, EC_IO, "could not write the temporary copy of %s in \"%s\"",
                       s->display, dir);
    while (ok && !s->raw_eof)
    {
        size_t got;

        if (!read_fd(s, c.in, c.in_cap, &got, err))
            ok = false;
        else if (!zstd_check_feed(s, &c, c.in, got, err))
            ok = false;
        else if (!write_all(tfd, c.in, got))
            ok = err_errno(err, EC_IO, "could not write the temporary copy of %s in \"%s\"",
                           s->display, dir);
    }
    free(tmpl);
    ok = zstd_check_end(s, &c, ok, err);
    if (ok && lseek(tfd, 0, SEEK_SET) < 0)
        ok = err_errno(err, EC_IO, "could not seek in the temporary copy of %s", s->display);
    if (!ok)
    {
        close(tfd);
        return false;
    }
    /* From here the copy is the input; progress counts it from the start. */
    if (!s->is_stdin)
        close(s->fd); /* a named pipe */
    s->fd = tfd;
    s->spooled = true;
    s->nprefetch = 0;
    s->raw_eof = false;
    s->file_size = s->raw_read;
    s->raw_read = 0;
    return true;
}

static bool
zstd_verify_setup(CsvSource *s, Err *err)
{
    unsigned char head[4];
    ssize_t n;

    if (!s->regular)
        return zstd_spool_pipe(s, err);
    do
        n = pread(s->fd, head, sizeof head, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return err_errno(err, EC_IO, "could not read \"%s\"", s->display);
    /* Checked before the first record is handed on (not here, so that a
     * file --skip-finished passes over is not decompressed). */
    s->verify_pending = is_zstd_magic(head, (size_t) n);
    return true;
}

char *
source_csv_identity_path(const char *path)
{
    /* The canonical path, so a resume from another working directory still
     * matches. */
    char *real = realpath(path, NULL);

    return real ? real : xstrdup(path);
}

bool
source_csv_identity_split(const char *identity, size_t *path_len, uint64_t *size)
{
    const char *hash = strrchr(identity, '|');
    const char *digits;
    uint64_t n = 0;

    if (hash == NULL || strspn(hash + 1, "0123456789abcdef") != strlen(hash + 1))
        return false;
    digits = hash;
    while (digits > identity && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    if (digits == hash || digits == identity || digits[-1] != '|' || hash - digits > 20)
        return false;
    for (const char *d = digits; d < hash; d++)
    {
        if (n > (UINT64_MAX - (uint64_t) (*d - '0')) / 10)
            return false;
        n = n * 10 + (uint64_t) (*d - '0');
    }
    *path_len = (size_t) (digits - 1 - identity);
    *size = n;
    return true;
}

static void
make_identity(CsvSource *s)
{
    unsigned char *buf;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    char *real;
    const char *p;
    size_t got = 0;
    size_t want;
    size_t room;
    EVP_MD_CTX *ctx;

    if (!s->regular)
    {
        /* stdin, a pipe, /dev/fd/N: nothing to fingerprint, and the same
         * name may carry other bytes next time, so it must never match a
         * checkpoint of a file.  "stdin" is what callers treat as such. */
        snprintf(s->identity, sizeof s->identity, "stdin");
        return;
    }
    /* pread: the fd's offset stays where reading starts. */
    want = s->file_size < CSV_IDENTITY_PREFIX ? (size_t) s->file_size : CSV_IDENTITY_PREFIX;
    buf = xmalloc(want + 1);
    while (got < want)
    {
        ssize_t n = pread(s->fd, buf + got, want - got, (off_t) got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, buf, got) != 1 || EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        mdlen = 0;
    EVP_MD_CTX_free(ctx);
    free(buf);
    for (unsigned int i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[2 * mdlen] = '\0';

    /* A path too long for the field keeps its tail. */
    real = source_csv_identity_path(s->path);
    p = real;
    room = sizeof s->identity - 1 - strlen(hex) - 2 - 20;
    if (strlen(p) > room)
        p += strlen(p) - room;
    snprintf(s->identity, sizeof s->identity, "%s|%" PRIu64 "|%s", p, s->file_size, hex);
    free(real);
}

bool
csv_options_check(const CsvOptions *o, Err *err)
{
    unsigned char d = (unsigned char) o->delimiter;
    unsigned char q = (unsigned char) o->quote;
    unsigned char e = (unsigned char) o->escape;

    if (d == 0 || is_eol(d))
        return err_set(err, EC_USAGE,
                       "CSV delimiter must be a single byte other than NUL, CR or LF");
    if (q == 0 || is_eol(q))
        return err_set(err, EC_USAGE, "CSV quote must be a single byte other than NUL, CR or LF");
    if (d == q)
        return err_set(err, EC_USAGE, "CSV delimiter and quote must differ");
    if (e != 0 && e != q && (e == d || is_eol(e)))
        return err_set(err, EC_USAGE, "CSV escape must differ from the delimiter, CR and LF");
    if (o->null_string != NULL &&
        (strchr(o->null_string, (char) d) || strchr(o->null_string, (char) q) ||
         strpbrk(o->null_string, "\r\n")))
        return err_set(err, EC_USAGE,
                       "the NULL string must not contain the delimiter, the quote, CR or LF");
    return true;
}

/* A source with its options and parser set, reading nothing yet. */
static CsvSource *
csv_new(const char *path, const CsvOptions *opts, Err *err)
{
    CsvOptions defaults;
    CsvSource *s;
    const char *slash;

    if (opts == NULL)
    {
        csv_options_default(&defaults);
        opts = &defaults;
    }
    if (!csv_options_check(opts, err))
        return NULL;

    s = xcalloc(1, sizeof *s);
    s->base.ops = &csv_ops;
    s->fd = -1;
    s->path = xstrdup(path);
    s->is_stdin = strcmp(path, "-") == 0;
    {
        /* The name every message and the rejects file use: a path is untrusted text. */
        char shown[256];
        s->display = xstrdup(s->is_stdin ? "stdin" : err_printable(path, shown, sizeof shown));
    }
    slash = strrchr(s->display, '/');
    s->short_name = xstrdup(slash && slash[1] ? slash + 1 : s->display);
    s->header = opts->header;
    s->delim = (unsigned char) opts->delimiter;
    s->quote = (unsigned char) opts->quote;
    s->escape = (opts->escape != 0 && opts->escape != opts->quote) ? (unsigned char) opts->escape
                                                                    : 0;
    if (opts->null_string != NULL && opts->null_string[0] != '\0')
    {
        s->null_string = xstrdup(opts->null_string);
        s->null_len = strlen(s->null_string);
    }
    s->check_utf8 = opts->check_utf8;
    s->no_fast = opts->libcsv_only;
    s->repeat_ok = opts->repeat_ok;
    s->nrepeat_ok = opts->nrepeat_ok;
    s->max_record = opts->max_record_bytes ? opts->max_record_bytes : CSV_DEFAULT_MAX_RECORD;
    buf_init(&s->tbuf);

    if (csv_init(&s->csv, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL | CSV_EMPTY_IS_NULL) != 0)
    {
        csv_ops.close(&s->base);
        err_set(err, EC_INTERNAL, "could not initialise the CSV parser");
        return NULL;
    }
    s->csv_ready = true;
    csv_set_space_func(&s->csv, csv_no_space);
    csv_set_delim(&s->csv, s->delim);
    csv_set_quote(&s->csv, s->quote);
    return s;
}

bool
source_csv_open_reader(const char *name, CsvReadFn read, void *ctx, const CsvOptions *opts,
                       Source **out, Err *err)
{
    CsvSource *s;

    *out = NULL;
    s = csv_new(name, opts, err);
    if (s == NULL)
        return false;
    s->reader = read;
    s->reader_ctx = ctx;
    free(s->short_name);
    s->short_name = xstrdup(s->display);
    (void) snprintf(s->identity, sizeof s->identity, "%s", s->display);
    s->win_cap = CSV_WINDOW_INITIAL;
    s->win = xmalloc(s->win_cap);
    if (!begin(s, true, err))
    {
        csv_ops.close(&s->base);
        return false;
    }
    *out = &s->base;
    return true;
}

bool
source_csv_open(const char *path, const CsvOptions *opts, Source **out, Err *err)
{
    CsvSource *s;
    struct stat st;

    *out = NULL;
    s = csv_new(path, opts, err);
    if (s == NULL)
        return false;
    if (s->is_stdin)
        s->fd = STDIN_FILENO;
    else
    {
        s->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (s->fd < 0)
        {
            err_errno(err, EC_IO, "could not open \"%s\"", path);
            csv_ops.close(&s->base);
            return false;
        }
    }
    if (fstat(s->fd, &st) == 0)
    {
        if (S_ISDIR(st.st_mode))
        {
            err_set(err, EC_IO, "could not read \"%s\": is a directory", s->display);
            csv_ops.close(&s->base);
            return false;
        }
        if (S_ISREG(st.st_mode))
        {
            s->regular = !s->is_stdin;
            s->file_size = (uint64_t) st.st_size;
#ifdef POSIX_FADV_SEQUENTIAL
            if (s->regular)
                (void) posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
        }
    }
    /* A small file gets a small window (it grows if a zstd file inflates). */
    s->win_cap = CSV_WINDOW_INITIAL;
    if (s->regular && s->file_size < CSV_WINDOW_INITIAL / 2)
        s->win_cap = 2 * CSV_MIN_READ;
    s->win = xmalloc(s->win_cap);
    if (s->regular)
    {
        s->hst = XXH3_createState();
        if (s->hst == NULL)
        {
            csv_ops.close(&s->base);
            return err_set(err, EC_INTERNAL, "could not create an XXH3 state");
        }
        s->hashing = true;
    }
    make_identity(s);
    if (!zstd_verify_setup(s, err) || !begin(s, true, err))
    {
        csv_ops.close(&s->base);
        return false;
    }
    *out = &s->base;
    return true;
}

static bool
csv_next(Source *src, Record *rec, bool *eof, Err *err)
{
    CsvSource *s = (CsvSource *) src;

    *eof = false;
    if (s->failed)
    {
        *err = s->fail;
        return false;
    }
    if (s->verify_pending && !zstd_verify_file(s, err))
        return csv_fail(s, err);
    if (s->pending)
    {
        s->pending = false;
        *rec = s->pending_rec;
        s->pos_off = s->pending_end_off;
        s->pos_line = s->pending_end_line;
        s->pos_records++;
        return true;
    }
    if (!read_record(s, rec, eof, err))
        return csv_fail(s, err);
    if (*eof)
        return true;
    check_record(s, rec);
    s->pos_off = s->end_off;
    s->pos_line = s->end_line;
    s->pos_records++;
    return true;
}

static const char *const *
csv_columns(Source *src, size_t *ncolumns)
{
    CsvSource *s = (CsvSource *) src;

    *ncolumns = s->ncolumns;
    return (const char *const *) s->columns;
}

static void
csv_position(Source *src, SourcePosition *pos)
{
    CsvSource *s = (CsvSource *) src;

    memset(pos, 0, sizeof *pos);
    memcpy(pos->identity, s->identity, sizeof pos->identity);
    pos->offset = s->pos_off;
    pos->line = s->pos_line;
    pos->records = s->pos_records;
    if (s->hashing)
    {
        hash_to(s, s->pos_off);
        pos->content_len = s->hash_off;
        pos->content_hash = XXH3_64bits_digest(s->hst);
    }
}

/* Discard input up to `target`, which must follow a record that ended with
 * a line terminator (or be the end of the input).  Plain files seek; zstd
 * and stdin decompress or read and throw away. */
static bool
skip_to(CsvSource *s, uint64_t target, Err *err)
{
    uint64_t want = target - 1; /* the terminator of the record before */
    unsigned char c;

    parser_reset(s);
    s->pending = false;
    while (want >= s->win_base + s->win_len)
    {
        hash_to(s, s->win_base + s->win_len);
        s->win_base += s->win_len;
        s->win_len = s->scan = s->rec_start = 0;
        if (s->in_eof)
            return err_set(err, EC_CONFIG, "checkpoint offset %" PRIu64 " is past the end of %s",
                           target, s->display);
        /* Hashing reads what it skips: the hash covers every byte before. */
        if (s->regular && !s->zstd && !s->hashing)
        {
            if (lseek(s->fd, (off_t) want, SEEK_SET) < 0)
                return err_errno(err, EC_IO, "could not seek in \"%s\"", s->display);
            s->win_base = want;
            s->raw_read = want;
        }
        if (!fill(s, err))
            return false;
    }
    s->scan = (size_t) (want - s->win_base);
    c = (unsigned char) s->win[s->scan++];
    s->rec_start = s->scan;
    if (c != '\n')
    {
        /* After a CR the record ends there only if no LF follows; after
         * anything else (a final record without terminator) only the end of
         * the input is a boundary. */
        while (s->scan == s->win_len && !s->in_eof)
            if (!fill(s, err))
                return false;
        if (s->scan < s->win_len && (c != '\r' || s->win[s->scan] == '\n'))
            return err_set(err, EC_CONFIG,
                           "checkpoint offset %" PRIu64 " is not at a record boundary of %s",
                           target, s->display);
    }
    return true;
}

/* Back before the first record of a regular file. */
static bool
rewind_input(CsvSource *s, Err *err)
{
    if (lseek(s->fd, 0, SEEK_SET) < 0)
        return err_errno(err, EC_IO, "could not seek in \"%s\"", s->display);
    return begin(s, false, err);
}

/* Where a seek to `pos` ends: the position after its record. */
static void
seek_done(CsvSource *s, const SourcePosition *pos, bool skipped)
{
    if (skipped || !s->pending)
        s->line_no = pos->line;
    s->pos_off = pos->offset;
    s->pos_line = pos->line;
    s->pos_records = pos->records;
}

static bool
csv_seek(Source *src, const SourcePosition *pos, Err *err)
{
    CsvSource *s = (CsvSource *) src;
    bool skipped = false;

    if (s->failed)
    {
        *err = s->fail;
        return false;
    }
    if (s->verify_pending && !zstd_verify_file(s, err))
        return csv_fail(s, err);
    if (strncmp(pos->identity, s->identity, sizeof s->identity) != 0)
    {
        err_set(err, EC_CONFIG, "checkpoint belongs to a different file");
        err_detail(err, "The checkpoint is for \"%.400s\", the input is \"%.400s\".",
                   pos->identity, s->identity);
        return false;
    }
    if (pos->offset < s->data_off)
        return err_set(err, EC_CONFIG,
                       "checkpoint offset %" PRIu64 " is before the first record of %s",
                       pos->offset, s->display);
    if (pos->offset < s->pos_off)
    {
        if (!s->regular)
            return err_set(err, EC_CONFIG, "cannot go back to offset %" PRIu64 " in %s",
                           pos->offset, s->display);
        if (!rewind_input(s, err))
            return csv_fail(s, err);
    }
    if (pos->offset != s->pos_off)
    {
        /* Whatever goes wrong from here leaves the input half skipped. */
        if (!skip_to(s, pos->offset, err))
            return csv_fail(s, err);
        skipped = true;
    }
    seek_done(s, pos, skipped);
    return true;
}

/* Hash the input on to `upto`: false in *same if it ends before. */
static bool
hash_ahead(CsvSource *s, uint64_t upto, bool *same, Err *err)
{
    while (s->hash_off < upto)
    {
        uint64_t end = s->win_base + s->win_len;

        if (end > s->hash_off)
            hash_to(s, end < upto ? end : upto);
        else if (s->in_eof)
        {
            *same = false;
            return true;
        }
        else if (!fill(s, err))
            return false;
    }
    return true;
}

static bool
csv_resume(Source *src, const SourcePosition *pos, bool *same, Err *err)
{
    CsvSource *s = (CsvSource *) src;
    bool skipped = false;

    *same = true;
    if (!s->hashing || pos->content_len == 0 || s->failed ||
        strncmp(pos->identity, s->identity, sizeof s->identity) != 0)
        return csv_seek(src, pos, err); /* nothing to compare (or its error) */
    if (pos->offset < s->data_off || pos->offset > pos->content_len)
        *same = false;
    else if (pos->offset < s->pos_off && !rewind_input(s, err))
        return csv_fail(s, err);
    if (*same && pos->offset != s->pos_off)
    {
        Err skip_err;

        /* Not a record boundary, or past the end: other bytes than before. */
        if (!skip_to(s, pos->offset, &skip_err))
        {
            if (skip_err.code != EC_CONFIG)
            {
                *err = skip_err;
                return csv_fail(s, err);
            }
            *same = false;
        }
        skipped = true;
    }
    if (*same && !hash_ahead(s, pos->content_len, same, err))
        return csv_fail(s, err);
    if (*same && XXH3_64bits_digest(s->hst) == pos->content_hash)
    {
        seek_done(s, pos, skipped);
        return true;
    }
    *same = false;
    if (!rewind_input(s, err))
        return csv_fail(s, err);
    return true;
}

static void
csv_progress(Source *src, uint64_t *done, uint64_t *total)
{
    CsvSource *s = (CsvSource *) src;

    *done = s->raw_read;
    *total = s->file_size;
}

static const char *
csv_name(Source *src)
{
    return ((CsvSource *) src)->short_name;
}

static void
csv_close(Source *src)
{
    CsvSource *s = (CsvSource *) src;

    if (s->fd >= 0 && (!s->is_stdin || s->spooled))
        close(s->fd);
    if (s->csv_ready)
        csv_free(&s->csv);
    ZSTD_freeDCtx(s->dctx);
    XXH3_freeState(s->hst);
    free(s->colnames);
    free(s->columns);
    free(s->zin);
    free(s->win);
    buf_free(&s->tbuf);
    free(s->fields);
    free(s->fbuf);
    free(s->quoted);
    free(s->null_string);
    free(s->path);
    free(s->display);
    free(s->short_name);
    free(s);
}

bool
source_csv_unnamed_last(const Source *src)
{
    return ((const CsvSource *) src)->unnamed_last;
}

static const SourceOps csv_ops = {
    .next = csv_next,
    .columns = csv_columns,
    .position = csv_position,
    .seek = csv_seek,
    .resume = csv_resume,
    .progress = csv_progress,
    .name = csv_name,
    .close = csv_close,
};
