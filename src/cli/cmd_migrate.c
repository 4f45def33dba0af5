/*
 * v7fill migrate: option parsing over migrate_run and migrate_status, and
 * what they print.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/migrate.h"
#include "v7fill/migrate_child.h"
#include "v7fill/migrate_switch.h"
#include "v7fill/migrate_verify.h"
#include "v7fill/partitions.h"
#include "v7fill/pgoutput.h"

enum
{
    OPT_SOURCE = 256,
    OPT_FROM,
    OPT_KEY,
    OPT_TIME_COLUMN,
    OPT_INTO,
    OPT_CHILD,
    OPT_CHILD_MODE,
    OPT_FOLLOW,
    OPT_VERIFY,
    OPT_DRY_RUN,
    OPT_FULL_FILL,
    OPT_STATUS,
    OPT_JSON,
    OPT_SWITCH,
    OPT_REVERSE,
    OPT_LOCK_TIMEOUT,
    OPT_SWITCH_ATTEMPTS,
    OPT_WINDOW_TZ,
};

static void
migrate_usage(FILE *out)
{
    fputs("Usage: v7fill [-d TARGET_CONNINFO] migrate --from SCHEMA.TABLE --key COL\n"
          "                --time-column COL --into [SCHEMA.]TABLE [--source CONNINFO]\n"
          "                [--child 'SCHEMA.TABLE(COL)[:TIMECOL]']...\n"
          "                [--child-mode expand|migrate] [--full-fill] [--no-analyze]\n"
          "                [--window-tz TZ] [--follow] [--verify] [--dry-run]\n"
          "       v7fill [-d TARGET_CONNINFO] migrate --into [SCHEMA.]TABLE\n"
          "                --status [--json] | --verify | --switch | --reverse [--follow]\n"
          "\n"
          "Move a table keyed by an integer (serial, bigint) onto a table partitioned on a\n"
          "UUIDv7 id minted from its time column, online: the target is created (the old\n"
          "key kept as legacy_id), the table copied under a replication slot's snapshot and\n"
          "the changes made meanwhile applied from the slot, keyed through the map\n"
          "<into>_id_map (legacy_id -> id), which v7fill never drops.\n"
          "\n"
          "  --source CONNINFO      the source database (default: the target's, -d)\n"
          "  --from SCHEMA.TABLE    the table to migrate\n"
          "  --key COL              its single-column integer PRIMARY KEY\n"
          "  --time-column COL      timestamptz, timestamp or date: each id carries it (to the\n"
          "                         ms); rows with a NULL or pre-1970 time are rejected, kept\n"
          "                         in v7fill.stream_quarantine with the reason\n"
          "  --into [SCHEMA.]TABLE  the target (default schema: the source's); created when\n"
          "                         missing, else its columns are checked\n"
          "  --child 'SCHEMA.TABLE(COL)'  a table whose COL references the key (repeatable)\n"
          "  --child-mode expand    COL_uuid added to the child, kept current (triggers on\n"
          "                         the child and the map in the same database; between\n"
          "                         two, passes, and a trigger that sets it NULL when\n"
          "                         COL changes), filled from the map in short\n"
          "                         batches, then a foreign key to the target added\n"
          "                         NOT VALID and validated\n"
          "  --child-mode migrate   each child becomes its own UUIDv7 table <child>_v7\n"
          "                         (minted from :TIMECOL, else the child's column named\n"
          "                         as --time-column; its integer key kept as legacy_id),\n"
          "                         with its own map, publication and slot; COL keeps the\n"
          "                         legacy key and COL_uuid is set from the parent's map.\n"
          "                         --switch renames the children with the parent;\n"
          "                         --reverse keeps their legacy tables current too\n"
          "                         (docs/migrating-children.md)\n"
          "  --full-fill            expand mode: read every child row this run; without it\n"
          "                         a rerun whose child was filled and its foreign key\n"
          "                         validated reads only the rows whose COL_uuid is NULL\n"
          "                         (full_pass=no on the child line)\n"
          "  --no-analyze           after each table's copy, do not ANALYZE the UUIDv7\n"
          "                         table (and its partitions) nor VACUUM its map\n"
          "  --follow               keep applying changes until SIGINT/SIGTERM (default:\n"
          "                         stop once caught up); expand-mode children in another\n"
          "                         database: their rows still without COL_uuid filled by\n"
          "                         a pass every few seconds meanwhile\n"
          "  --batch-rows N         rows per batch of the copy (default 10000)\n"
          "  --jobs N               writer connections for the copy and the changes (default\n"
          "                         1); batches commit in source order\n"
          "  --window-tz TZ         new windows (of the target and of migrate-mode children)\n"
          "                         start at local midnight of TZ, as `v7fill partitions\n"
          "                         --window-tz` makes them (default UTC); stored: later\n"
          "                         runs and forms use the first run's zone\n"
          "  --dry-run              print the DDL, the publication and slot, the rows, their\n"
          "                         time range and the rows that would be rejected; change\n"
          "                         nothing\n"
          "  --status               phase, slot position and lag, the windows' zone, rows in\n"
          "                         the source, target and map, rejected rows, the way\n"
          "                         back's position and lag, then each migrate-mode child's\n"
          "                         (--json: a JSON object, \"way_back\" and \"children\")\n"
          "  --verify               compare source and target row by row through the map\n"
          "                         (after the run, or alone): a verdict table, exit 1 on a\n"
          "                         mismatch naming the first rows that differ; after a run\n"
          "                         that stopped caught up, rows that differ are re-checked\n"
          "                         after one more catch-up (at most 3 rounds)\n"
          "  --switch               swap the tables' names once caught up and verified\n"
          "  --lock-timeout MS      how long the switch's lock (each attempt; switching\n"
          "                         back too), the child fill's writes and its foreign\n"
          "                         key's steps wait for a lock (default 1000)\n"
          "  --switch-attempts N    the switch's lock, tried this many times, with a growing\n"
          "                         pause between (default 10)\n"
          "  --reverse [--follow]   after the switch, keep the legacy table current from the\n"
          "                         new one (until caught up, or until SIGINT/SIGTERM), and\n"
          "                         migrate-mode children after their parent; --switch in\n"
          "                         phase reverse switches back (those children with it);\n"
          "                         written with session_replication_role = replica (no\n"
          "                         trigger or foreign key acts on the legacy tables): needs\n"
          "                         a superuser or GRANT SET ON PARAMETER, else refused when\n"
          "                         a legacy child's key is NO ACTION/RESTRICT; between two\n"
          "                         databases written into the source's legacy table\n"
          "\n"
          "The migration is stored in the target's v7fill.migration (the source's connection\n"
          "string without its password): later forms need only --into.  Every step is\n"
          "idempotent: rerun the same command after a failure or kill.  See docs/migrating.md.\n",
          out);
}

/* 'SCHEMA.TABLE(COL)[:TIMECOL]' */
static bool
parse_child(const char *value, MigrateChild *c, Err *err)
{
    const char *open = strchr(value, '(');
    const char *close = strrchr(value, ')');
    const char *dot = strchr(value, '.');
    size_t tl;

    memset(c, 0, sizeof *c);
    if (close && close[1] == ':' && close[2] != '\0' && strlen(close + 2) <= 63)
        (void) snprintf(c->time_column, sizeof c->time_column, "%s", close + 2);
    if (!open || !close || (close[1] != '\0' && c->time_column[0] == '\0') || close <= open + 1 || !dot || dot > open ||
        dot == value || dot + 1 == open || (size_t) (dot - value) > 63 ||
        (size_t) (open - dot - 1) > 63 || (size_t) (close - open - 1) > 63)
    {
        cli_usage_error(err, "migrate", "--child takes 'SCHEMA.TABLE(COLUMN)[:TIMECOLUMN]', got \"%s\"",
                        value);
        return false;
    }
    tl = (size_t) (open - dot - 1);
    (void) snprintf(c->schema, sizeof c->schema, "%.*s", (int) (dot - value), value);
    (void) snprintf(c->table, sizeof c->table, "%.*s", (int) tl, dot + 1);
    (void) snprintf(c->fk_column, sizeof c->fk_column, "%.*s", (int) (close - open - 1),
                    open + 1);
    return true;
}

static void
print_block(const char *title, const Buf *b)
{
    if (b->len == 0)
        return;
    printf("%s\n", title);
    for (const char *p = b->data; *p;)
    {
        const char *nl = strchr(p, '\n');

        printf("  %.*s\n", (int) (nl ? nl - p : (long) strlen(p)), p);
        p = nl ? nl + 1 : p + strlen(p);
    }
}

static void
print_run(const char *what, const StreamStats *st)
{
    const ImportStats *r = &st->rows;
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(st->applied_lsn, at);
    printf("migrate %s: read=%" PRIu64 " (copy %" PRIu64 ") inserted=%" PRIu64 " updated=%" PRIu64
           " deleted=%" PRIu64 " duplicates=%" PRIu64 " rejected=%" PRIu64
           " transactions=%" PRIu64 " position=%s elapsed=%.1fs rate=%.0f rows/s\n",
           what, r->read, st->copied, r->inserted, r->updated, r->deleted, r->duplicates,
           r->rejected + r->expired, st->transactions, at, r->elapsed_s,
           import_stats_rate(r));
    if (r->closing_s > 0)
        printf("  of elapsed, %.1fs the ANALYZE and VACUUM after the copy\n", r->closing_s);
}

static void
print_result(const MigrateResult *r)
{
    const MigrateSpec *s = &r->spec;

    printf("migrate %s.%s -> %s.%s (map %s, slot %s): phase %s\n", s->from_schema, s->from_table,
           s->into_schema, s->into_table, s->map_table, s->slot, migrate_phase_name(s->phase));
    if (r->target_created)
        printf("  created the target %s.%s\n", s->into_schema, s->into_table);
    if (r->publication_created)
        printf("  created the publication %s on the source\n", s->publication);
    print_block("  not kept as on the source:", &r->notes);
    print_run("copy+capture", &r->copy);
    if (r->follow.rows.elapsed_s > 0 || r->follow.rows.read > 0)
        print_run("follow", &r->follow);
    printf("rejected: %" PRIu64 " rows (v7fill.stream_quarantine WHERE slot = '%s')\n",
           r->rejected, s->slot);
    print_block("  count  reason  (first row)", &r->rejects);
    for (size_t i = 0; i < r->nchildren; i++)
    {
        const ChildStats *c = &r->children[i];
        const MigrateChild *ch = &s->children[i];

        if (s->child_mode == MIGRATE_CHILD_MIGRATE)
        {
            printf("child %s.%s(%s) -> %s.%s: rows=%" PRIu64 " null_keys=%" PRIu64
                   " orphans=%" PRIu64 "%s%s%s foreign_key=%s\n",
                   ch->schema, ch->table, ch->fk_column, s->into_schema, ch->into_table, c->rows,
                   c->null_keys, c->orphans, c->orphan_examples[0] ? " (keys " : "",
                   c->orphan_examples, c->orphan_examples[0] ? ")" : "",
                   c->fk_added ? "added" : "none");
            continue;
        }
        printf("child %s.%s(%s): rows=%" PRIu64 " filled=%" PRIu64 " null_keys=%" PRIu64
               " orphans=%" PRIu64 "%s%s%s passes=%" PRIu64 " full_pass=%s longest_write=%" PRId64
               "ms foreign_key=%s\n",
               ch->schema, ch->table, ch->fk_column, c->rows, c->filled, c->null_keys,
               c->orphans, c->orphan_examples[0] ? " (keys " : "", c->orphan_examples,
               c->orphan_examples[0] ? ")" : "", c->passes, c->full_pass ? "yes" : "no",
               c->longest_wait_ms,
               c->fk_validated ? "validated" : c->fk_added ? "added NOT VALID" : "none");
    }
}

/* --verify: the verdict table; exit 1 on a mismatch (the table names the rows). */
static int
run_verify(PgConn *conn, const char *conninfo, const MigrateSpec *spec, const char *source,
           Err *err)
{
    VerifyReport rep;
    int status;

    if (!migrate_verify_spec(conn, conninfo, spec, source, &rep, err))
    {
        verify_report_free(&rep);
        return 1;
    }
    verify_report_print(stdout, &rep);
    status = rep.ok ? 0 : 1;
    verify_report_free(&rep);
    return status;
}

/* --verify after a run that stopped once caught up: settled over at most 3 rounds. */
static int
run_verify_settled(PgConn *conn, const char *conninfo, const MigrateSpec *spec,
                   const MigrateOptions *o, Err *err)
{
    VerifyReport rep;
    int rounds = 0, status;

    if (!migrate_verify_settled(conn, conninfo, spec, o, 3, &rep, &rounds, err))
    {
        verify_report_free(&rep);
        return 1;
    }
    printf("verify after the run: %d round(s) (a mismatch is re-checked after one more "
           "catch-up, at most 3 rounds)\n",
           rounds);
    verify_report_print(stdout, &rep);
    status = rep.ok ? 0 : 1;
    verify_report_free(&rep);
    return status;
}

/* The way back of one table (after the switch), else null. */
static json_t *
way_back_json(const MigrateStatus *m)
{
    const MigrateSpec *s = &m->spec;
    json_t *o;
    char at[PGO_LSN_TEXT_SIZE];

    if (!m->reverse.found)
        return json_null();
    o = json_object();
    pgo_lsn_format(m->reverse.applied_lsn, at);
    json_object_set_new(o, "legacy_table", json_sprintf("%s.%s", s->from_schema, s->legacy_table));
    json_object_set_new(o, "applied_lsn", json_string(at));
    json_object_set_new(o, "lag_bytes", json_integer((json_int_t) m->reverse.lag_bytes));
    json_object_set_new(o, "rows_applied", json_integer((json_int_t) m->reverse.applied));
    json_object_set_new(o, "slot", json_string(m->reverse.slot));
    json_object_set_new(o, "slot_exists", json_boolean(m->reverse.slot_exists));
    return o;
}

static json_t *
status_object(const MigrateStatus *m)
{
    const MigrateSpec *s = &m->spec;
    const StreamStatus *st = &m->stream;
    MigrateLiveNames live;
    json_t *o = json_object();
    char at[PGO_LSN_TEXT_SIZE];

    json_object_set_new(o, "into", json_sprintf("%s.%s", s->into_schema, s->into_table));
    json_object_set_new(o, "from", json_sprintf("%s.%s", s->from_schema, s->from_table));
    json_object_set_new(o, "key", json_string(s->key));
    json_object_set_new(o, "time_column", json_string(s->time_column));
    json_object_set_new(o, "phase", json_string(migrate_phase_name(s->phase)));
    json_object_set_new(o, "source", json_string(s->source_conninfo));
    json_object_set_new(o, "slot", json_string(s->slot));
    json_object_set_new(o, "publication", json_string(s->publication));
    json_object_set_new(o, "map_table", json_string(m->map_table));
    json_object_set_new(o, "window_tz", json_string(s->window_tz[0] ? s->window_tz : "UTC"));
    if (m->stream_ok && st->state.found)
    {
        pgo_lsn_format(st->state.end_lsn, at);
        json_object_set_new(o, "stored_position", json_string(at));
    }
    else
        json_object_set_new(o, "stored_position", json_null());
    if (m->stream_ok && st->source_ok && st->slot.exists)
    {
        pgo_lsn_format(st->slot.confirmed_lsn, at);
        json_object_set_new(o, "confirmed_lsn", json_string(at));
        json_object_set_new(o, "lag_bytes", json_integer((json_int_t) st->lag_bytes));
        json_object_set_new(o, "lag_seconds", json_real(st->lag_s));
        json_object_set_new(o, "slot_active", json_boolean(st->slot.active));
    }
    json_object_set_new(o, "stream_error", m->stream_ok ? json_null() : json_string(m->stream_error));
    migrate_live_names(s, &live);
    json_object_set_new(o, "source_table",
                        json_sprintf("%s.%s", live.src_schema, live.src_table));
    json_object_set_new(o, "target_table",
                        json_sprintf("%s.%s", live.new_schema, live.new_table));
    json_object_set_new(o, "source_rows",
                        m->source_rows >= 0 ? json_integer(m->source_rows) : json_null());
    json_object_set_new(o, "target_rows",
                        m->target_rows >= 0 ? json_integer(m->target_rows) : json_null());
    json_object_set_new(o, "map_rows", m->map_rows >= 0 ? json_integer(m->map_rows) : json_null());
    json_object_set_new(o, "rejected", json_integer((json_int_t) m->rejected));
    json_object_set_new(o, "way_back", way_back_json(m));
    return o;
}

static void
print_json(json_t *o)
{
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

    printf("%s\n", text ? text : "null");
    free(text);
}

static void
print_count(const char *label, int64_t n, const char *schema, const char *table)
{
    if (n >= 0)
        printf("  %-18s %" PRId64 " (%s.%s)\n", label, n, schema, table);
    else
        printf("  %-18s (not reached: %s.%s)\n", label, schema, table);
}

static void
status_text(const MigrateStatus *m)
{
    const MigrateSpec *s = &m->spec;
    const StreamStatus *st = &m->stream;
    MigrateLiveNames live;
    char at[PGO_LSN_TEXT_SIZE];

    printf("migration %s.%s -> %s.%s\n", s->from_schema, s->from_table, s->into_schema,
           s->into_table);
    printf("  %-18s %s\n", "phase", migrate_phase_name(s->phase));
    printf("  %-18s %s (key %s %s, time column %s)\n", "source",
           s->source_conninfo[0] ? s->source_conninfo : "the target's database", s->key,
           s->key_type, s->time_column);
    printf("  %-18s %s (publication %s)\n", "slot", s->slot, s->publication);
    printf("  %-18s start at midnight in %s\n", "windows", s->window_tz[0] ? s->window_tz : "UTC");
    if (!m->stream_ok)
        printf("  %-18s %s\n", "capture", m->stream_error);
    else
    {
        if (st->state.found)
        {
            pgo_lsn_format(st->state.end_lsn, at);
            printf("  %-18s %s (stream phase %s, last commit %s)\n", "applied up to", at,
                   st->state.phase, st->updated_at);
        }
        if (!st->source_ok)
            printf("  %-18s not reached: %s\n", "source", st->source_error);
        else if (!st->slot.exists)
            printf("  %-18s does not exist on the source\n", "slot state");
        else
        {
            pgo_lsn_format(st->slot.confirmed_lsn, at);
            printf("  %-18s %s, confirmed %s, lag %" PRIu64 " bytes, %.1f s\n", "slot state",
                   st->slot.active ? "active" : "inactive", at, st->lag_bytes, st->lag_s);
        }
    }
    migrate_live_names(s, &live);
    print_count("rows in source", m->source_rows, live.src_schema, live.src_table);
    print_count("rows in target", m->target_rows, live.new_schema, live.new_table);
    printf("  %-18s ", "rows in map");
    if (m->map_rows >= 0)
        printf("%" PRId64 " (%s)\n", m->map_rows, m->map_table);
    else
        printf("(none)\n");
    printf("  %-18s %" PRIu64 " (v7fill.stream_quarantine WHERE slot = '%s')\n", "rejected",
           m->rejected, s->slot);
    if (m->reverse.found)
    {
        pgo_lsn_format(m->reverse.applied_lsn, at);
        printf("  %-18s %s.%s up to %s, lag %" PRId64 " bytes, %" PRIu64 " rows applied "
               "(slot %s%s)\n",
               "way back", s->from_schema, s->legacy_table, at, m->reverse.lag_bytes,
               m->reverse.applied, m->reverse.slot,
               m->reverse.slot_exists ? "" : ", which does not exist");
    }
}

static int
migrate_later(PgConn *conn, const char *conninfo, int action, const MigrateOptions *o,
              bool json, Err *err)
{
    MigrateStatus m;
    MigrateSpec spec;
    int status = 1;
    const char *into = o->into, *source = o->source_conninfo;
    json_t *out = NULL, *kids = NULL;

    if (action != OPT_STATUS)
    {
        if (!migrate_find(conn, into, &spec, err))
            return 1;
        if (action == OPT_VERIFY)
            status = run_verify(conn, conninfo, &spec, source, err);
        else if (action == OPT_SWITCH)
        {
            SwitchStats st;

            if (migrate_switch_spec(conn, conninfo, &spec, o, &st, err))
            {
                printf("migrate --switch: %s%s; phase %s, legacy table %s, %d attempt(s), "
                       "lock held %" PRId64 " ms\n",
                       st.already ? "already switched" : "switched",
                       st.back ? " back" : "", migrate_phase_name(spec.phase),
                       spec.legacy_table[0] ? spec.legacy_table : "-", st.attempts,
                       st.lock_held_ms);
                status = 0;
            }
        }
        else
        {
            ReverseStats st;
            char at[PGO_LSN_TEXT_SIZE];

            if (migrate_reverse_spec(conn, conninfo, &spec, source, o->follow, &st, err))
                status = 0;
            pgo_lsn_format(st.applied_lsn, at);
            printf("migrate --reverse: transactions=%" PRIu64 " inserted=%" PRIu64
                   " updated=%" PRIu64 " deleted=%" PRIu64 " missing=%" PRIu64
                   " position=%s phase %s\n",
                   st.transactions, st.inserted, st.updated, st.deleted, st.missing, at,
                   migrate_phase_name(spec.phase));
            if (st.keys_given > 0)
                printf("  keys_given=%" PRIu64 ": rows inserted with legacy_id NULL, given the "
                       "next value of its sequence in the legacy table and the map\n",
                       st.keys_given);
        }
        migrate_spec_free(&spec);
        return status;
    }
    if (!migrate_status(conn, conninfo, into, source, &m, err))
        return 1;
    if (json)
        out = status_object(&m);
    else
        status_text(&m);
    /* Migrate-mode children: each its own migration (phase, position, lag,
     * way back); in the JSON, "children": one object each. */
    if (json && m.spec.child_mode == MIGRATE_CHILD_MIGRATE && m.spec.nchildren > 0)
    {
        kids = json_array();
        json_object_set_new(out, "children", kids);
    }
    for (size_t i = 0; m.spec.child_mode == MIGRATE_CHILD_MIGRATE && i < m.spec.nchildren; i++)
    {
        const MigrateChild *ch = &m.spec.children[i];
        char cinto[160];
        MigrateStatus cm;
        json_t *co = NULL;

        (void) snprintf(cinto, sizeof cinto, "%s.%s", m.spec.into_schema, ch->into_table);
        if (!json)
            printf("child %s.%s(%s) -> %s:\n", ch->schema, ch->table, ch->fk_column, cinto);
        if (!migrate_status(conn, conninfo, cinto, source, &cm, err))
        {
            if (json)
            {
                co = json_object();
                json_object_set_new(co, "into", json_string(cinto));
                json_object_set_new(co, "error", json_string(err->msg));
            }
            else
                printf("  (%s)\n", err->msg);
            err_clear(err);
        }
        else
        {
            if (json)
                co = status_object(&cm);
            else
                status_text(&cm);
            migrate_spec_free(&cm.spec);
        }
        if (co)
        {
            json_object_set_new(co, "child", json_sprintf("%s.%s", ch->schema, ch->table));
            json_object_set_new(co, "fk_column", json_string(ch->fk_column));
            json_array_append_new(kids, co);
        }
    }
    if (json)
    {
        print_json(out);
        json_decref(out);
    }
    migrate_spec_free(&m.spec);
    return 0;
}

int
cmd_migrate(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"source", required_argument, NULL, OPT_SOURCE},
        {"from", required_argument, NULL, OPT_FROM},
        {"key", required_argument, NULL, OPT_KEY},
        {"time-column", required_argument, NULL, OPT_TIME_COLUMN},
        {"into", required_argument, NULL, OPT_INTO},
        {"child", required_argument, NULL, OPT_CHILD},
        {"child-mode", required_argument, NULL, OPT_CHILD_MODE},
        {"follow", no_argument, NULL, OPT_FOLLOW},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"full-fill", no_argument, NULL, OPT_FULL_FILL},
        {"no-analyze", no_argument, NULL, CLI_OPT_NO_ANALYZE},
        {"status", no_argument, NULL, OPT_STATUS},
        {"json", no_argument, NULL, OPT_JSON},
        {"switch", no_argument, NULL, OPT_SWITCH},
        {"reverse", no_argument, NULL, OPT_REVERSE},
        {"batch-rows", required_argument, NULL, CLI_OPT_BATCH_ROWS},
        {"jobs", required_argument, NULL, CLI_OPT_JOBS},
        {"lock-timeout", required_argument, NULL, OPT_LOCK_TIMEOUT},
        {"switch-attempts", required_argument, NULL, OPT_SWITCH_ATTEMPTS},
        {"window-tz", required_argument, NULL, OPT_WINDOW_TZ},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    MigrateOptions o;
    MigrateResult r;
    MigrateChild *children = NULL;
    PgConn *conn = NULL;
    int status = 0;
    int c;
    long n;
    int action = 0; /* 0 run, OPT_STATUS, OPT_SWITCH, OPT_REVERSE, OPT_VERIFY alone */
    bool json = false, run_done = false, attempts_given = false;

    migrate_options_default(&o);
    memset(&r, 0, sizeof r);
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        int shared = cli_pipeline_option("migrate", c, optarg, &o.common, err);

        if (shared < 0)
        {
            status = 2;
            goto out;
        }
        if (shared > 0)
            continue;
        switch (c)
        {
            case OPT_SOURCE:
                o.source_conninfo = optarg;
                break;
            case OPT_FROM:
                o.from = optarg;
                break;
            case OPT_KEY:
                o.key = optarg;
                break;
            case OPT_TIME_COLUMN:
                o.time_column = optarg;
                break;
            case OPT_INTO:
                o.into = optarg;
                break;
            case OPT_CHILD:
                children = xrealloc(children, (o.nchildren + 1) * sizeof *children);
                if (!parse_child(optarg, &children[o.nchildren], err))
                {
                    status = 2;
                    goto out;
                }
                o.nchildren++;
                break;
            case OPT_CHILD_MODE:
                if (strcmp(optarg, "expand") == 0)
                    o.child_mode = MIGRATE_CHILD_EXPAND;
                else if (strcmp(optarg, "migrate") == 0)
                    o.child_mode = MIGRATE_CHILD_MIGRATE;
                else
                {
                    status = cli_usage_error(err, "migrate",
                                             "--child-mode: \"%s\" is not one of expand|migrate",
                                             optarg);
                    goto out;
                }
                break;
            case OPT_FOLLOW:
                o.follow = true;
                break;
            case OPT_VERIFY:
                o.verify = true;
                break;
            case OPT_DRY_RUN:
                o.dry_run = true;
                break;
            case OPT_FULL_FILL:
                o.full_fill = true;
                break;
            case OPT_JSON:
                json = true;
                break;
            case OPT_STATUS:
            case OPT_SWITCH:
            case OPT_REVERSE:
                if (action && action != c)
                {
                    status = cli_usage_error(err, "migrate",
                                             "--status, --switch and --reverse go one at a time");
                    goto out;
                }
                action = c;
                break;
            case OPT_LOCK_TIMEOUT:
                if (!cli_parse_long("migrate", "--lock-timeout", optarg, 10, 600000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.lock_timeout_ms = (int) n;
                break;
            case OPT_SWITCH_ATTEMPTS:
                if (!cli_parse_long("migrate", "--switch-attempts", optarg, 1, 1000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.switch_attempts = (int) n;
                attempts_given = true;
                break;
            case OPT_WINDOW_TZ:
                o.common.window_tz = optarg; /* checked below */
                break;
            CLI_GLOBAL_CASES(c, g, goto out);
            case 'h':
                migrate_usage(stdout);
                goto out;
            default:
                status = cli_usage_error(err, "migrate", "unknown or incomplete option");
                goto out;
        }
    }
    o.children = children;
    if (!window_tz_check(o.common.window_tz, err))
    {
        status = 2;
        goto out;
    }
    if (optind < argc)
    {
        status = cli_usage_error(err, "migrate", "unexpected argument \"%s\"", argv[optind]);
        goto out;
    }
    if (!o.into)
    {
        status = cli_usage_error(err, "migrate", "\"migrate\" needs --into [SCHEMA.]TABLE");
        goto out;
    }
    if (json && action != OPT_STATUS)
    {
        status = cli_usage_error(err, "migrate", "--json goes with --status");
        goto out;
    }
    if (attempts_given && action != OPT_SWITCH)
    {
        status = cli_usage_error(err, "migrate", "--switch-attempts goes with --switch");
        goto out;
    }
    /* --verify alone (no --from): the later form */
    if (!action && o.verify && !o.from)
        action = OPT_VERIFY;
    if (action)
    {
        if (o.from || o.key || o.time_column || o.nchildren || o.dry_run || o.full_fill ||
            o.common.window_tz || (o.follow && action != OPT_REVERSE) ||
            (o.verify && action != OPT_VERIFY))
        {
            status = cli_usage_error(err, "migrate",
                                     "--status, --verify, --switch and --reverse take only "
                                     "--into (and --source; --reverse --follow): the rest, "
                                     "--window-tz too, is stored by the first run");
            goto out;
        }
        if (!pg_connect(g->conninfo, &conn, err))
        {
            status = 1;
            goto out;
        }
        interrupt_install();
        status = migrate_later(conn, g->conninfo, action, &o, json, err);
        goto out;
    }
    if (!o.from || !o.key || !o.time_column)
    {
        status = cli_usage_error(err, "migrate", "%s is missing: \"migrate\" needs --from, --key, "
                                 "--time-column and --into",
                                 !o.from ? "--from" : !o.key ? "--key" : "--time-column");
        goto out;
    }
    if (o.dry_run && o.follow)
    {
        status = cli_usage_error(err, "migrate", "--dry-run and --follow exclude each other");
        goto out;
    }
    o.target_conninfo = g->conninfo;
    o.common.progress = log_current_level >= LOG_LEVEL_INFO;
    if (!pg_connect(g->conninfo, &conn, err))
    {
        status = 1;
        goto out;
    }
    interrupt_install();
    run_done = migrate_run(conn, &o, &r, err);
    if (o.dry_run && run_done)
    {
        fputs(r.plan.data, stdout);
        printf("-- dry run: nothing was changed\n");
    }
    else if (!o.dry_run && (run_done || r.copy.rows.read > 0))
        print_result(&r);
    if (!run_done)
        status = 1;
    else if (o.verify && !o.dry_run && interrupt_signal() == 0)
        status = o.follow ? run_verify(conn, g->conninfo, &r.spec, o.source_conninfo, err)
                          : run_verify_settled(conn, g->conninfo, &r.spec, &o, err);
out:
    migrate_result_free(&r);
    pg_close(conn);
    free(children);
    return status;
}
