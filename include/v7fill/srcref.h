/*
 * Source reference: a stable byte string naming a row in its origin.  v7fill
 * hashes it with a keyed HMAC to mint the id's random bits and to find rows
 * it already imported, so the same row must always give the same bytes and
 * two different rows must not.
 *
 * Two ways to make one:
 *
 * - A template (--source-ref), e.g. "legacy.orders:{id}": literal text with
 *   {column} placeholders; "{{" and "}}" stand for literal braces.  A value is
 *   copied as it is, except that a backslash is doubled; a NULL renders as
 *   \N (backslash, capital N).  So a NULL never renders like any text value
 *   ("\N" as text renders as \\N), and values that hold no backslash - ids,
 *   codes - appear verbatim.  Adjacent placeholders ("{a}{b}") are as
 *   ambiguous as the user made them: give the template a separator.
 *
 * - The default, without a template: every field of the row, in order, as
 *   <length in decimal> ':' <bytes> ',' and a NULL as "N,".  For example
 *   ("abc", "", NULL) → 3:abc,0:,N,  Being length-prefixed, no value can
 *   shift a field boundary ("a","bc" → 1:a,2:bc, versus "ab","c" →
 *   2:ab,1:c,), and it is built from parsed values, not the raw line, so the
 *   row written with CRLF or LF, quoted or not, gives the same bytes.
 *
 * Both are valid UTF-8 when the values are, and contain no NUL byte unless a
 * value does, so the text can be stored in a PostgreSQL text column.
 */
#ifndef V7FILL_SRCREF_H
#define V7FILL_SRCREF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/source.h"

typedef struct SrcrefTemplate SrcrefTemplate;

/* Compile `tmpl` against the source's column names (matched exactly, case
 * included).  Errors quote the template: EC_USAGE for its syntax (unclosed
 * or stray brace, empty name, '{' inside a name) and for a template without
 * any placeholder (every row would get the same reference), EC_CONFIG for a
 * name that is not a column of the input. */
V7FILL_MUST_CHECK bool srcref_template_compile(const char *tmpl, const char *const *columns,
                                               size_t ncolumns, SrcrefTemplate **out, Err *err);

/* Does the template read column `column` (an index into the compile's columns)? */
bool srcref_template_uses(const SrcrefTemplate *t, size_t column);

/* Render the template for one record into `out` (reset first).  A column
 * past nfields renders as NULL. */
void srcref_build(const SrcrefTemplate *t, const Field *fields, size_t nfields, Buf *out);

/* The default reference (see above) into `out` (reset first). */
void srcref_default(const Field *fields, size_t nfields, Buf *out);
/* The same text in pieces, in order, for a record too long to copy whole
 * (fn may see data of length 0). */
typedef void (*SrcrefPieceFn)(void *ctx, const char *data, size_t len);
void srcref_default_each(const Field *fields, size_t nfields, SrcrefPieceFn fn, void *ctx);

void srcref_template_free(SrcrefTemplate *t);

/* The values of a default reference as one CSV record, for a person to read
 * ("2025-01-01,1019" instead of "10:2025-01-01,4:1019,"): a value holding a
 * comma, a quote, CR or LF is quoted (quotes doubled), an empty value is "",
 * a NULL is nothing.  At most `size` - 1 bytes go to `out` (NUL-terminated).
 * Returns false when `ref` is not a whole default reference (cut short: the
 * values before the cut, the last one partial, are written) or `out` was too
 * small; true when every value was written. */
bool srcref_default_values(const char *ref, size_t len, char *out, size_t size);

/*
 * The lookup key: 16 bytes that stand for the reference in the lookup table
 * (<table>_source_ref), a function of the reference's bytes alone.
 *
 * When the reference ends in an integer - 1 to 15 decimal digits, below 2^48,
 * as "legacy.orders:{id}" does for a serial key - the key is that integer (6
 * bytes, big-endian) followed by 10 bytes of the reference's keyed hash:
 * references are kept in the lookup's index in the integer's order, so a
 * history read in key order (which a dump of a serial-keyed table nearly
 * always is) adds its entries at the right edge of the index instead of all
 * over it.  Two references ending in the same integer still differ in 80
 * bits of hash.  Otherwise (the default reference ends in ',', a template may
 * end in text) the key is the first 16 bytes of the hash, as in lookups made
 * before ordered keys.
 *
 * srcref_order reads that integer (false when there is none); srcref_key
 * builds the key from the reference and its HMAC-SHA-256, ordered only when
 * `may_order` (lookups made by earlier versions hold hash-only keys).
 */
#define SRCREF_ORDER_LIMIT (UINT64_C(1) << 48)
#define SRCREF_ORDER_DIGITS 15

bool srcref_order(const char *ref, size_t len, uint64_t *v);
/* Returns whether the key came out ordered. */
bool srcref_key(const char *ref, size_t len, const uint8_t mac[32], bool may_order,
                uint8_t key[16]);

#endif /* V7FILL_SRCREF_H */
