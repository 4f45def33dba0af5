/*
 * The way back of a migration with migrate-mode children, in rounds: the
 * parent's way back up to one stop position, then each child's up to the
 * same one (migrate_childreverse.h).
 */
#include "v7fill/migrate_childreverse.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/mem.h"
#include "v7fill/migrate_childtable.h"
#include "v7fill/migrate_state.h"
#include "v7fill/pgoutput.h"

static void
stats_add(ReverseStats *sum, const ReverseStats *one)
{
    sum->transactions += one->transactions;
    sum->inserted += one->inserted;
    sum->updated += one->updated;
    sum->deleted += one->deleted;
    sum->missing += one->missing;
}

/* Each child's own migration, switched with its parent; and the table
 * keeping the parent's deleted map rows for them (made by the switch, or
 * here for a migration switched by an earlier version). */
static bool
load_children(PgConn *db, const MigrateSpec *spec, MigrateSpec *kids, Err *err)
{
    if (!migrate_reverse_kept_setup(db, err))
        return false;
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        bool found = false;

        if (!migrate_state_get(db, spec->into_schema, spec->children[i].into_table, &kids[i],
                               &found, err))
            return false;
        if (!found)
            return err_set(err, EC_CONFIG, "child %s.%s: no migration into %s.%s",
                           spec->children[i].schema, spec->children[i].table, spec->into_schema,
                           spec->children[i].into_table);
        if (kids[i].legacy_table[0] == '\0')
            migrate_legacy_name(kids[i].from_table, kids[i].legacy_table);
    }
    return true;
}

/* One round: the parent up to stop, then each child up to stop.  *all: every
 * table reached stop (not interrupted).  The parent's whole round comes
 * first, so a parent row inserted and deleted within it is gone from its map
 * before a child row naming it arrives: the parent's way back keeps those map
 * rows (v7fill.migrate_reverse_kept), and they go once every child reached
 * stop.  An interrupted round keeps them for the next one, which starts each
 * child where it stopped. */
static bool
round_once(PgConn *db, PgConn *legacy, const MigrateSpec *spec, const MigrateSpec *kids,
           uint64_t stop, ReverseIds *ids, ReverseStats *st, bool *all, Err *err)
{
    ReverseStats one;

    memset(&one, 0, sizeof one);
    *all = false;
    if (!migrate_reverse_apply(db, legacy, spec, NULL, stop, false, &one, err))
    {
        err_prefix(err, "the way back into %s.%s", spec->from_schema, spec->legacy_table);
        return false;
    }
    stats_add(st, &one);
    if (!one.caught_up)
        return true; /* interrupted: no child goes past the parent */
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        ReverseParentRef ref = {spec->into_schema, spec->map_table, spec->children[i].fk_column};

        memset(&one, 0, sizeof one);
        one.ids = ids ? &ids[i] : NULL;
        if (!migrate_reverse_apply(db, legacy, &kids[i], &ref, stop, false, &one, err))
        {
            err_prefix(err, "the way back into %s.%s", kids[i].from_schema,
                       kids[i].legacy_table);
            return false;
        }
        stats_add(st, &one);
        if (one.inserted + one.updated + one.deleted > 0)
            log_info("child %s.%s: %" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64
                     " deleted, %" PRIu64 " missing in %s.%s",
                     kids[i].from_schema, kids[i].from_table, one.inserted, one.updated,
                     one.deleted, one.missing, kids[i].from_schema, kids[i].legacy_table);
        if (!one.caught_up)
            return true;
    }
    if (!migrate_reverse_kept_clear(db, spec, err))
        return false;
    *all = true;
    return true;
}

bool
migrate_childreverse_upto(PgConn *apply, PgConn *legacy, const MigrateSpec *spec,
                          uint64_t stop, ReverseIds *ids, ReverseStats *st, Err *err)
{
    MigrateSpec *kids = xcalloc(spec->nchildren ? spec->nchildren : 1, sizeof *kids);
    bool all = false;
    bool ok = load_children(apply, spec, kids, err) &&
              round_once(apply, legacy, spec, kids, stop, ids, st, &all, err);

    st->caught_up = ok && all;
    if (st->caught_up)
        st->applied_lsn = stop;
    for (size_t i = 0; i < spec->nchildren; i++)
        migrate_spec_free(&kids[i]);
    free(kids);
    return ok;
}

bool
migrate_childreverse(PgConn *db, PgConn *legacy, const MigrateSpec *spec, bool follow,
                     ReverseStats *st, Err *err)
{
    MigrateSpec *kids = xcalloc(spec->nchildren ? spec->nchildren : 1, sizeof *kids);
    bool ok = load_children(db, spec, kids, err);
    bool all = false;
    char at[PGO_LSN_TEXT_SIZE];

    while (ok)
    {
        uint64_t stop = 0;

        ok = pg_flush_wal(db, &stop, err) &&
             round_once(db, legacy, spec, kids, stop, NULL, st, &all, err);
        if (ok && all)
        {
            st->applied_lsn = stop;
            st->caught_up = true;
        }
        if (!ok || !all || !follow || interrupt_signal() != 0)
            break;
        (void) usleep(MIGRATE_FOLLOW_ROUND_MS * 1000);
        if (interrupt_signal() != 0)
            break;
    }
    /* Stored also after an interrupted run: the phase each child reached. */
    for (size_t i = 0; i < spec->nchildren; i++)
    {
        Err e2 = {0};

        if (kids[i].phase >= MIGRATE_PHASE_SWITCHED && kids[i].phase != MIGRATE_PHASE_REVERSE)
        {
            kids[i].phase = MIGRATE_PHASE_REVERSE;
            if (!migrate_state_put(db, &kids[i], ok ? err : &e2))
                ok = false;
        }
        migrate_spec_free(&kids[i]);
    }
    free(kids);
    if (ok)
    {
        pgo_lsn_format(st->applied_lsn, at);
        log_info("%s.%s and its %zu child table(s) are current in their legacy tables up to %s: "
                 "%" PRIu64 " inserted, %" PRIu64 " updated, %" PRIu64 " deleted, %" PRIu64
                 " missing",
                 spec->from_schema, spec->legacy_table, spec->nchildren, at, st->inserted,
                 st->updated, st->deleted, st->missing);
    }
    return ok;
}
