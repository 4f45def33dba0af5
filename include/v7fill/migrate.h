/*
 * `v7fill migrate`: an integer-keyed table (and the child tables that
 * reference it) onto a UUIDv7-keyed, RANGE (id)-partitioned table, online,
 * with a way back.  The phases, each rerunnable and resumable after kill -9:
 *
 *   setup     describe the source table, create the target (<into>: the
 *             source's columns, the key kept as legacy_id, id uuid PRIMARY
 *             KEY, PARTITION BY RANGE (id)), the typed map <into>_id_map
 *             (legacy_id <key type> PRIMARY KEY, id uuid NOT NULL UNIQUE),
 *             the publication and slot on the source, the state row
 *   copy      the stream's copy and capture (stream.h) keyed through the map
 *             (PipelineOptions.key_map_column): no gap, no overlap
 *   children  expand: <fk>_uuid filled from the map in short batches, kept
 *             current, orphans reported, FK added NOT VALID then VALIDATEd;
 *             migrate: each child its own migration (migrate_childtable.h)
 *   verify    counts, a hash of every non-key column row by row through the
 *             map, child keys, join pairs (migrate_verify.h)
 *   switch    a final LSN under a short lock, applied, tables renamed
 *   reverse   after the switch the legacy table is kept current from the new
 *
 * Everything a later `migrate --into X --status|--verify|--switch|--reverse`
 * needs is stored in the target's v7fill.migration row (migrate_state.h);
 * the source's connection string is stored without its password.
 */
#ifndef V7FILL_MIGRATE_H
#define V7FILL_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "v7fill/err.h"
#include "v7fill/pg.h"
#include "v7fill/mem.h"
#include "v7fill/pipeline.h"
#include "v7fill/stream.h"
#include "v7fill/stream_admin.h"

typedef enum MigrateChildMode
{
    MIGRATE_CHILD_EXPAND = 0, /* <fk>_uuid added to the existing child */
    MIGRATE_CHILD_MIGRATE,    /* the child becomes its own UUIDv7 table */
} MigrateChildMode;

typedef struct MigrateChild
{
    char schema[64];
    char table[64];
    char fk_column[64];       /* its column holding the parent's legacy key */
    /* --child-mode migrate (migrate_childtable.h): */
    char time_column[64];     /* its time column ('S.T(FK):COL'; "": the parent's) */
    char into_table[64];      /* its target, in the parent's into schema ("": <table>_v7) */
} MigrateChild;

/* The phases in the order they are reached (stored as their names). */
typedef enum MigratePhase
{
    MIGRATE_PHASE_NEW = 0,    /* "new": nothing created yet */
    MIGRATE_PHASE_COPY,       /* "copy": target, map, slot made; initial copy running */
    MIGRATE_PHASE_FOLLOW,     /* "follow": copied; changes applied from the slot */
    MIGRATE_PHASE_SWITCHED,   /* "switched": names swapped; the new table is live */
    MIGRATE_PHASE_REVERSE,    /* "reverse": the legacy table kept current from the new */
} MigratePhase;

const char *migrate_phase_name(MigratePhase p);
bool migrate_phase_parse(const char *name, MigratePhase *out);

/* One migration, as stored in v7fill.migration (keyed by into). */
typedef struct MigrateSpec
{
    char source_conninfo[1024]; /* without password; "" = the target's database */
    char from_schema[64];
    char from_table[64];
    char key[64];               /* the source's integer primary key column */
    char key_type[32];          /* smallint | integer | bigint (format_type) */
    char time_column[64];
    char into_schema[64];
    char into_table[64];
    char map_table[64];         /* <into>_id_map, in into_schema */
    char publication[64];       /* on the source: v7fill_<into> (truncated, unique) */
    char slot[64];              /* on the source: the same name */
    MigrateChild *children;
    size_t nchildren;
    MigrateChildMode child_mode;
    MigratePhase phase;
    uint64_t switch_lsn;        /* the source LSN the switch applied up to (0: not yet) */
    char legacy_table[64];      /* after the switch: <from>_legacy */
    char window_tz[64];         /* --window-tz of the first run: its windows' zone ("": UTC) */
} MigrateSpec;

void migrate_spec_free(MigrateSpec *s);

/* Where the migration's two tables are now.  Before the switch: the source
 * table and the target as named.  After it (phase switched or reverse): the
 * legacy table <from_schema>.<legacy_table> on the source's side, and the
 * UUIDv7 table, which in one database has taken the source table's name and
 * in two keeps its own. */
typedef struct MigrateLiveNames
{
    char src_schema[64];
    char src_table[64];
    char new_schema[64];
    char new_table[64];
} MigrateLiveNames;

void migrate_live_names(const MigrateSpec *s, MigrateLiveNames *n);

typedef struct MigrateOptions
{
    PipelineOptions common;     /* batch sizes, progress, lock timeout, reconnects */
    const char *target_conninfo; /* -d: where <into> lives */
    const char *source_conninfo; /* --source (NULL: the target's database) */
    const char *from;            /* SCHEMA.TABLE */
    const char *key;
    const char *time_column;
    const char *into;            /* [SCHEMA.]TABLE (the source's schema when unqualified) */
    MigrateChild *children;
    size_t nchildren;
    MigrateChildMode child_mode;
    bool follow;                 /* keep applying until stopped (else: stop once caught up) */
    bool verify;                 /* verify after the run */
    bool dry_run;                /* print the DDL and the plan; change nothing */
    bool full_fill;              /* expand-mode children: a full fill pass on every run */
    int lock_timeout_ms;         /* switch and child fill (default 1000) */
    int switch_attempts;         /* the switch's lock, retried (default 10) */
} MigrateOptions;

void migrate_options_default(MigrateOptions *o);

/* What a run did (migrate_run), for the CLI to print. */
typedef struct MigrateResult
{
    MigrateSpec spec;          /* as stored after the run */
    bool target_created;       /* this run created <into> */
    bool publication_created;  /* ... and the publication on the source */
    bool copied;               /* the initial copy is finished (phase follow) */
    StreamStats copy;          /* the stream's run up to caught up */
    StreamStats follow;        /* --follow: the run after it (until interrupted) */
    uint64_t rejected;         /* rows of this migration in v7fill.stream_quarantine */
    Buf rejects;               /* one line per reason: count, reason, first row */
    Buf notes;                 /* what the target's DDL could not keep, one a line */
    Buf plan;                  /* --dry-run: the DDL and the plan, nothing done */
    struct ChildStats *children; /* per spec.children (expand mode): the fill's counts */
    size_t nchildren;
} MigrateResult;

void migrate_result_free(MigrateResult *r);

/* <prefix><into>: lowercase [a-z0-9_] (a slot's alphabet), at most 63 bytes
 * (longer names end in a hash of schema.table, so they stay unique). */
void migrate_object_name(const char *into_schema, const char *into_table, char out[64]);

/* How many bytes of name, at most max, end on a UTF-8 character's boundary:
 * a name cut to fit an identifier stays valid text. */
int migrate_name_cut(const char *name, int max);

/* <table>_legacy: the name the switch gives the table it retires (the table's
 * name cut to 56 bytes first, so it stays an identifier of 63). */
void migrate_legacy_name(const char *table, char out[64]);

/* The setup (idempotent: the target, the publication, the state row; each
 * expand-mode child's <fk>_uuid and its trigger), then the copy and capture
 * (stream_run) until caught up (phase follow), each child filled from the map
 * and its foreign key added (same database), then with o->follow the changes
 * until interrupted.  o->dry_run: r->plan holds the DDL and the plan; nothing
 * is created anywhere.  Children given before are taken from the stored spec
 * when o->nchildren is 0. */
V7FILL_MUST_CHECK bool migrate_run(PgConn *target, const MigrateOptions *o, MigrateResult *r,
                                   Err *err);

/* The migration into `into` ([SCHEMA.]TABLE; unqualified: the one migration
 * of that table name) from v7fill.migration; EC_CONFIG when there is none. */
V7FILL_MUST_CHECK bool migrate_find(PgConn *target, const char *into, MigrateSpec *out,
                                    Err *err);

/* The source's conninfo of a stored migration: override (--source), else the
 * stored one, else (stored "": the target's database) target_conninfo. */
const char *migrate_source_conninfo(const MigrateSpec *spec, const char *override,
                                    const char *target_conninfo);

struct VerifyReport;
struct SwitchStats;
struct ReverseStats;

/* The counts of a later run (a second catch-up, a child's) added to an
 * earlier one's, for the summary: every row count, the elapsed time summed,
 * the last applied position. */
void migrate_stream_stats_add(StreamStats *a, const StreamStats *b);

/* --verify: migrate_verify (migrate_verify.h) on the source and the target
 * (one connection when they are one database). */
V7FILL_MUST_CHECK bool migrate_verify_spec(PgConn *target, const char *target_conninfo,
                                           const MigrateSpec *spec, const char *source_conninfo,
                                           struct VerifyReport *out, Err *err);
/* --verify after a run that stopped once caught up, while the application writes: verify;
 * while it finds a mismatch, one more catch-up (the stream) and verify again, `rounds`
 * verifies at most (3 for the CLI); only keys that differed in every round are a mismatch
 * (verify_report_settle); with migrate-mode children, per table (the parent's keys, each
 * child's own, then each child's links to its parent re-read after all captures caught up):
 * the parent settling never excuses a child's mismatch.  *done: the rounds run. */
V7FILL_MUST_CHECK bool migrate_verify_settled(PgConn *target, const char *target_conninfo,
                                              const MigrateSpec *spec, const MigrateOptions *o,
                                              int rounds, struct VerifyReport *out, int *done,
                                              Err *err);
/* --switch: migrate_switch (migrate_switch.h) with the capture caught up by
 * the stream on its own connection; the spec stored after it. */
V7FILL_MUST_CHECK bool migrate_switch_spec(PgConn *target, const char *target_conninfo,
                                           MigrateSpec *spec, const MigrateOptions *o,
                                           struct SwitchStats *st, Err *err);
/* --reverse [--follow]: migrate_reverse (with two databases, into the
 * source: source_conninfo, else the stored one); the spec stored after it. */
V7FILL_MUST_CHECK bool migrate_reverse_spec(PgConn *target, const char *target_conninfo,
                                            MigrateSpec *spec, const char *source_conninfo,
                                            bool follow, struct ReverseStats *st, Err *err);

/* --status: the way back of one table (migrate_reverse_status). */
typedef struct ReverseStatus
{
    bool found;                  /* a row in v7fill.migrate_reverse */
    char slot[64];
    uint64_t applied_lsn;        /* end_lsn: committed in the legacy table up to here */
    uint64_t applied;            /* rows applied so far */
    int64_t lag_bytes;           /* the server's WAL position less applied_lsn */
    bool slot_exists;
} ReverseStatus;

typedef struct MigrateStatus
{
    MigrateSpec spec;
    StreamStatus stream;       /* the slot, its position and lag (stream_admin_status) */
    bool stream_ok;            /* else stream_error */
    char stream_error[512];
    int64_t source_rows;       /* -1: the source was not reached */
    int64_t target_rows;
    int64_t map_rows;          /* rows of the lookup (the map) */
    char map_table[64];        /* the lookup counted */
    uint64_t rejected;         /* in the stream's quarantine */
    ReverseStatus reverse;     /* after the switch: the way back (reverse.found) */
} MigrateStatus;

/* --status: where the migration into `into` stands.  source_conninfo
 * overrides the stored one (NULL: stored; a stored "" is the target's
 * database: target_conninfo, the -d given, NULL for the libpq environment). */
V7FILL_MUST_CHECK bool migrate_status(PgConn *target, const char *target_conninfo,
                                      const char *into, const char *source_conninfo,
                                      MigrateStatus *out, Err *err);

#endif /* V7FILL_MIGRATE_H */
