/*
 * The identities of unfinished checkpoints, by the size and path they name
 * (resume_index.h): sorted by size, so that an input of a size none has is
 * answered without a system call.
 */
#include "v7fill/resume_index.h"

#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/source_csv.h"

typedef struct ResumeEntry
{
    char *identity;
    size_t path_len; /* its leading path (source_csv_identity_split) */
    uint64_t size;
} ResumeEntry;

struct ResumeIndex
{
    ResumeEntry *e;
    size_t n;
};

static int
entry_cmp(const void *a, const void *b)
{
    const ResumeEntry *x = a;
    const ResumeEntry *y = b;

    return (x->size > y->size) - (x->size < y->size);
}

ResumeIndex *
resume_index_new(char **identities, size_t n)
{
    ResumeIndex *ix = xcalloc(1, sizeof *ix);

    ix->e = xcalloc(n ? n : 1, sizeof *ix->e);
    for (size_t i = 0; i < n; i++)
    {
        ResumeEntry *e = &ix->e[ix->n];

        if (source_csv_identity_split(identities[i], &e->path_len, &e->size))
        {
            e->identity = identities[i];
            ix->n++;
        }
        else
            free(identities[i]);
    }
    free(identities);
    qsort(ix->e, ix->n, sizeof *ix->e, entry_cmp);
    return ix;
}

void
resume_index_free(ResumeIndex *ix)
{
    if (ix == NULL)
        return;
    for (size_t i = 0; i < ix->n; i++)
        free(ix->e[i].identity);
    free(ix->e);
    free(ix);
}

/* The first entry of `size` or more. */
static size_t
index_lower(const ResumeIndex *ix, uint64_t size)
{
    size_t lo = 0;
    size_t hi = ix->n;

    while (lo < hi)
    {
        size_t mid = lo + (hi - lo) / 2;

        if (ix->e[mid].size < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool
resume_index_may_match(const ResumeIndex *ix, const char *path, uint64_t size)
{
    size_t i = index_lower(ix, size);
    bool may = false;
    char *canon;
    size_t clen;

    if (i == ix->n || ix->e[i].size != size)
        return false;
    canon = source_csv_identity_path(path);
    clen = strlen(canon);
    /* The identity names the whole path, or its tail when it was too long. */
    for (; i < ix->n && ix->e[i].size == size && !may; i++)
        may = ix->e[i].path_len <= clen &&
              memcmp(canon + clen - ix->e[i].path_len, ix->e[i].identity, ix->e[i].path_len) ==
                  0;
    free(canon);
    return may;
}

bool
resume_index_has(const ResumeIndex *ix, const char *identity)
{
    size_t path_len;
    uint64_t size;

    if (!source_csv_identity_split(identity, &path_len, &size))
        return false;
    for (size_t i = index_lower(ix, size); i < ix->n && ix->e[i].size == size; i++)
        if (strcmp(ix->e[i].identity, identity) == 0)
            return true;
    return false;
}
