/*
 * The inputs an import may resume, told without reading them.  A regular
 * file's identity is its canonical path, its size and a digest of its first
 * bytes (source_csv.h): an input whose size and path match no identity of a
 * target's unfinished checkpoints cannot be theirs, and need not be opened
 * and hashed to know it.  Identities of another form (standard input's, an
 * earlier version's) match no input.
 */
#ifndef V7FILL_RESUME_INDEX_H
#define V7FILL_RESUME_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ResumeIndex ResumeIndex;

/* An index of `n` identities; it takes them over (each string and the array,
 * which may be NULL when n is 0). */
ResumeIndex *resume_index_new(char **identities, size_t n);
void resume_index_free(ResumeIndex *ix);

/* May the regular file `path` of `size` bytes have one of the identities?
 * Its canonical path is only looked up when one has that size.  True is not
 * an answer yet: the file's own identity decides (resume_index_has). */
bool resume_index_may_match(const ResumeIndex *ix, const char *path, uint64_t size);
/* Is `identity` one of them? */
bool resume_index_has(const ResumeIndex *ix, const char *identity);

#endif /* V7FILL_RESUME_INDEX_H */
