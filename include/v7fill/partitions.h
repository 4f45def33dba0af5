/*
 * Windows (day/week/month/quarter/year) and lock-light creation of the
 * partitions they need: standalone table LIKE the parent, CHECK equal to the
 * bounds, ATTACH PARTITION (SHARE UPDATE EXCLUSIVE on the parent), DROP the
 * CHECK.  Serialised between v7fill processes by an advisory lock per parent;
 * the catalog is re-read after taking it.
 */
#ifndef V7FILL_PARTITIONS_H
#define V7FILL_PARTITIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/catalog.h"
#include "v7fill/err.h"
#include "v7fill/mem.h"
#include "v7fill/pg.h"

typedef enum Granularity
{
    GRAN_AUTO = 0, /* inferred from existing partitions, else month */
    GRAN_DAY,
    GRAN_WEEK,     /* ISO weeks, Monday */
    GRAN_MONTH,
    GRAN_QUARTER,
    GRAN_YEAR,
} Granularity;

V7FILL_MUST_CHECK bool granularity_parse(const char *text, Granularity *out, Err *err);
const char *granularity_name(Granularity g);

/* The window [*lower, *upper) of granularity g holding `us` (UTC). */
void window_of(Granularity g, int64_t us, int64_t *lower, int64_t *upper);

typedef struct EnsureOptions
{
    Granularity granularity;   /* GRAN_AUTO: inferred */
    bool dry_run;              /* only collect the DDL in `ddl_out` */
    bool move_from_default;    /* move DEFAULT-partition rows of new windows */
    int lock_timeout_ms;       /* per attempt (default 5000) */
    int lock_retries;          /* attempts after a lock timeout (default 5) */
    Buf *ddl_out;              /* optional: every statement run (or planned), ";\n" separated */
} EnsureOptions;

typedef struct EnsureResult
{
    int created;
    int skipped;     /* windows already fully covered */
    int gaps_filled; /* windows only partly covered, of which the gaps were created */
    int issues;      /* problems reported (e.g. DEFAULT rows without --move-from-default) */
} EnsureResult;

void ensure_options_default(EnsureOptions *o);

/* Make sure every window intersecting [from_us, to_us) exists.  Runs its own
 * transactions: call with no transaction open.  Refreshes t's partition list. */
V7FILL_MUST_CHECK bool partitions_ensure_range(PgConn *c, TargetTable *t, int64_t from_us,
                                               int64_t to_us, const EnsureOptions *opts,
                                               EnsureResult *res, Err *err);

/* Make sure the windows holding each of `times` exist (any order, duplicates
 * fine); cheap when they are all covered already (no round trip). */
V7FILL_MUST_CHECK bool partitions_ensure_times(PgConn *c, TargetTable *t, const int64_t *times,
                                               size_t n, const EnsureOptions *opts,
                                               EnsureResult *res, Err *err);

#endif /* V7FILL_PARTITIONS_H */
