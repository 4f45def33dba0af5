/*
 * v7fill stream: option parsing over stream_run, and the closing summary.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "v7fill/interrupt.h"
#include "v7fill/log.h"
#include "v7fill/partitions.h"
#include "v7fill/pgoutput.h"
#include "v7fill/stream.h"
#include "v7fill/stream_admin.h"
#include "v7fill/stream_state.h"
#include "v7fill/timeparse.h"

enum
{
    OPT_SOURCE = 256,
    OPT_FROM,
    OPT_PUBLICATION,
    OPT_SLOT,
    OPT_MAP,
    OPT_IGNORE,
    OPT_ON_DELETE,
    OPT_ON_TRUNCATE,
    OPT_AHEAD,
    OPT_GROUP_ROWS,
    OPT_GROUP_MS,
    OPT_NO_SNAPSHOT,
    OPT_RESNAPSHOT,
    OPT_UNTIL_CAUGHT_UP,
    OPT_STREAMING,
    OPT_WINDOW_TZ,
    OPT_METRICS_LISTEN,
    OPT_WARN_RETAINED,
    OPT_RECORD_EVERY,
    OPT_STATUS,
    OPT_JSON,
    OPT_DROP,
    OPT_YES,
};

/* A source commit time (µs since the epoch) as UTC text, to the millisecond. */
static void
format_commit_time(int64_t us, char *out, size_t size)
{
    time_t secs = (time_t) (us / 1000000);
    struct tm tm;
    char day[32];

    gmtime_r(&secs, &tm);
    (void) strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    (void) snprintf(out, size, "%s.%03d+00", day, (int) (us % 1000000 / 1000));
}

static void
stream_usage(FILE *out)
{
    fputs("Usage: v7fill [-d TARGET_CONNINFO] stream TABLE --source CONNINFO --from SCHEMA.TABLE\n"
          "                --publication PUB --slot SLOT [OPTION]...\n"
          "       v7fill [-d TARGET_CONNINFO] stream --source CONNINFO\n"
          "                --from SCHEMA.TABLE=TARGET [--from SCHEMA.TABLE=TARGET]...\n"
          "                --publication PUB --slot SLOT [OPTION]...\n"
          "       v7fill [-d TARGET_CONNINFO] stream TABLE --status [--json] --slot SLOT\n"
          "                [--source CONNINFO]\n"
          "       v7fill [-d TARGET_CONNINFO] stream TABLE --drop --slot SLOT [--yes]\n"
          "                [--source CONNINFO]\n"
          "\n"
          "Copy a table of a live PostgreSQL database into TABLE (partitioned on a UUIDv7\n"
          "key) and then follow its changes over logical replication (pgoutput), exactly\n"
          "once: each source transaction's rows and the stream's position are committed in\n"
          "one target transaction, and the slot only moves over what the target committed.\n"
          "\n"
          "Source:\n"
          "  --source CONNINFO       the source database (a role with REPLICATION; the password\n"
          "                         from ~/.pgpass or PGPASSWORD is best)\n"
          "  --from SCHEMA.TABLE     the table to stream (in the publication)\n"
          "  --from SCHEMA.TABLE=TARGET\n"
          "                         once per table, without TABLE: several tables of the\n"
          "                         publication over one slot, each into its own target\n"
          "  --publication PUB      a publication holding it (created before the slot)\n"
          "  --slot SLOT            the replication slot: created with the stream (then the\n"
          "                         table is copied first); found again on later runs\n"
          "  --no-snapshot          no initial copy: only changes from the slot's creation on\n"
          "  --resnapshot           the stream's slot was invalidated (wal_status lost) or is\n"
          "                         gone: drop it, create it again and copy the table anew\n"
          "                         (rows already there count as duplicates); the counts go on\n"
          "  --no-analyze           after the initial copy, do not ANALYZE the target (and\n"
          "                         its partitions) nor VACUUM the lookup table\n"
          "\n"
          "Rows:\n"
          "  --time-column COL      the event time each id carries (default created_at)\n"
          "  --time-format FMT      iso (default), epoch-s, epoch-ms, epoch-us, or a strptime\n"
          "                         pattern, as for import\n"
          "  --source-ref TEMPLATE  how a row is named (default SCHEMA.TABLE:{pk}, the same\n"
          "                         template `v7fill import` of a dump of the table takes;\n"
          "                         only replica identity columns, any with FULL)\n"
          "  --map SRC=TARGET       source column SRC goes to target column TARGET\n"
          "  --ignore-column COL    do not write source column COL\n"
          "  --lookup-table NAME    the reference lookup (default <table>_source_ref)\n"
          "  --key-map COL          the lookup is a typed key map <table>_id_map (legacy_id of\n"
          "                         COL's type PRIMARY KEY, id uuid UNIQUE): COL, a replica\n"
          "                         identity column (smallint/integer/bigint), finds the rows\n"
          "                         of updates and deletes (not with --source-ref)\n"
          "  --retention DURATION   as for import (default: stored, pg_partman's, none)\n"
          "  --max-future DURATION  clock skew allowed ahead of now (default 5min)\n"
          "  --window-tz TZ         windows ahead start at local midnight of TZ, as made by\n"
          "                         `v7fill partitions --window-tz` (default UTC)\n"
          "\n"
          "Changes:\n"
          "  --on-delete delete|ignore     delete the target row (default), or keep it\n"
          "  --on-truncate stop|apply|ignore\n"
          "                         a TRUNCATE on the source stops the stream (default),\n"
          "                         empties the target and its lookup too, or is ignored\n"
          "  --group-rows N         a target transaction holds up to N rows (default 10000)\n"
          "  --group-ms MS          ... or what arrived within MS ms (default 200); always\n"
          "                         whole source transactions\n"
          "  --batch-rows N         rows per batch of the initial copy, and per piece of a\n"
          "                         large source transaction (its pieces: one target\n"
          "                         transaction) (default 10000)\n"
          "  --streaming on|off     large source transactions arrive while in progress\n"
          "                         (protocol 2; PostgreSQL 14 or later): with one --from\n"
          "                         table applied as they arrive, or spooled to a temporary\n"
          "                         file and applied at their commit when others interleave\n"
          "                         (with several, always spooled) (default on); off: each\n"
          "                         is sent whole at its commit\n"
          "  --jobs N               writer connections for the initial copy and the changes\n"
          "                         (default 1); batches commit in source order, one that\n"
          "                         touches a row a batch in flight touches waits for it\n"
          "  --ahead N              windows ensured after now's at start (default 2)\n"
          "  --until-caught-up      exit 0 once what the source committed before the start\n"
          "                         is applied (else: run until SIGINT/SIGTERM, exit 0)\n"
          "\n"
          "Operating:\n"
          "  --metrics-listen ADDR:PORT  serve /metrics (Prometheus), /healthz and /readyz\n"
          "                         there, e.g. 127.0.0.1:9187 (nothing listens without it)\n"
          "  --warn-retained SIZE   warn when the slot keeps more WAL on the source\n"
          "                         (checked at start and every minute; default 5GB, 0 never)\n"
          "  --record-every S       record the rows applied since the last record as a run\n"
          "                         in v7fill.run every S seconds, for v7fill report\n"
          "                         (default 60; 0: only when the stream ends); an initial\n"
          "                         copy's expired rows are recorded when the copy ends;\n"
          "                         the stream folds its older periodic rows by the hour\n"
          "  --status               where the stream stands: its stored position, the slot's\n"
          "                         confirmed and restart LSN, lag, retained WAL, quarantined\n"
          "                         rows (running or stopped; --json for a JSON object)\n"
          "  --drop                 drop the slot on the source (stopping its walsender if it\n"
          "                         is this stream's) and the stream's row in the target,\n"
          "                         after saying so; the target's rows, the lookup and the\n"
          "                         quarantined rows stay.  --yes: do not ask\n"
          "  --status and --drop reach the source with the connection string the stream\n"
          "  stored (without its password: ~/.pgpass or PGPASSFILE supplies it), or --source.\n"
          "\n"
          "State lives in the target: v7fill.stream (position, counts), and\n"
          "v7fill.stream_quarantine (rows the target refused, with the reason and the row).\n"
          "Stopping for good: drop the slot (--drop), or it keeps WAL on the source forever.\n"
          "See docs/streaming.md.\n",
          out);
}

static bool
parse_choice(const char *opt, const char *value, const char *const *names, int n, int *out,
             Err *err)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0)
        {
            *out = i;
            return true;
        }
    cli_usage_error(err, "stream", "%s: \"%s\" is not one of %s|%s%s%s", opt, value, names[0],
                    names[1], n > 2 ? "|" : "", n > 2 ? names[2] : "");
    return false;
}

static void
print_summary(const StreamStats *st)
{
    const ImportStats *r = &st->rows;
    char at[PGO_LSN_TEXT_SIZE];
    struct rusage ru;

    memset(&ru, 0, sizeof ru);
    (void) getrusage(RUSAGE_SELF, &ru);
    pgo_lsn_format(st->applied_lsn, at);
    printf("stream: read=%" PRIu64 " (initial copy %" PRIu64 ") inserted=%" PRIu64
           " updated=%" PRIu64 " deleted=%" PRIu64 " duplicates=%" PRIu64 " missing=%" PRIu64
           " quarantined=%" PRIu64 " truncates=%" PRIu64 "\n",
           r->read, st->copied, r->inserted, r->updated, r->deleted, r->duplicates, r->missing,
           r->rejected + r->expired, r->truncates);
    printf("        transactions=%" PRIu64 " skipped=%" PRIu64 " time_changed=%" PRIu64
           " deletes_ignored=%" PRIu64 " truncates_ignored=%" PRIu64 " reconnects=%" PRIu64
           " position=%s partitions_created=%" PRIu64 " elapsed=%.1fs peak_rss=%ldMB\n",
           st->transactions, st->skipped_transactions, r->time_changed, st->deletes_ignored,
           st->truncates_ignored, st->reconnects, at, r->partitions_created, r->elapsed_s,
           ru.ru_maxrss / 1024);
    if (st->streamed_direct + st->streamed_spooled + st->streamed_aborted +
            st->streamed_to_spool + st->streamed_restarts >
        0)
        printf("        streamed_direct=%" PRIu64 " streamed_spooled=%" PRIu64
               " streamed_aborted=%" PRIu64 " streamed_to_spool=%" PRIu64
               " streamed_restarts=%" PRIu64 "\n",
               st->streamed_direct, st->streamed_spooled, st->streamed_aborted,
               st->streamed_to_spool, st->streamed_restarts);
    if (r->closing_s > 0)
        printf("        of elapsed, %.1fs the ANALYZE and VACUUM after the initial copy\n",
               r->closing_s);
}

static void
print_lsn(const char *label, uint64_t lsn)
{
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(lsn, at);
    printf("  %-22s %s\n", label, at);
}

static json_t *
json_lsn(uint64_t lsn)
{
    char at[PGO_LSN_TEXT_SIZE];

    pgo_lsn_format(lsn, at);
    return json_string(at);
}

/* A stream row's counts in o: rows_read, inserted, updated, deleted, duplicates. */
static void
json_counts(json_t *o, const BatchCounts *c)
{
    json_object_set_new(o, "rows_read", json_integer((json_int_t) c->read));
    json_object_set_new(o, "inserted", json_integer((json_int_t) c->inserted));
    json_object_set_new(o, "updated", json_integer((json_int_t) c->updated));
    json_object_set_new(o, "deleted", json_integer((json_int_t) c->deleted));
    json_object_set_new(o, "duplicates", json_integer((json_int_t) c->duplicates));
}

/* A slot of several tables: "targets", one object per target. */
static json_t *
status_targets_json(const StreamState *rows, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++)
    {
        char at[PGO_LSN_TEXT_SIZE];
        json_t *o = json_object();

        pgo_lsn_format(rows[i].end_lsn, at);
        json_object_set_new(o, "target", json_string(rows[i].target));
        json_object_set_new(o, "source_table", json_string(rows[i].source_table));
        json_object_set_new(o, "phase", json_string(rows[i].phase));
        json_object_set_new(o, "stored_lsn", json_string(at));
        json_counts(o, &rows[i].counts);
        json_array_append_new(a, o);
    }
    return a;
}

static void
status_json(const char *slot, const StreamStatus *s, const StreamState *rows, size_t n)
{
    json_t *o = json_object();
    const StreamState *t = &s->state;
    char *text;

    json_object_set_new(o, "slot", json_string(slot));
    json_object_set_new(o, "target", t->found ? json_string(t->target) : json_null());
    json_object_set_new(o, "source_table", t->found ? json_string(t->source_table) : json_null());
    json_object_set_new(o, "phase", t->found ? json_string(t->phase) : json_null());
    json_object_set_new(o, "stored_position", t->found ? json_lsn(t->end_lsn) : json_null());
    json_object_set_new(o, "last_commit_at", t->found ? json_string(s->updated_at) : json_null());
    json_object_set_new(o, "quarantined", json_integer((json_int_t) s->quarantined));
    json_object_set_new(o, "source", json_string(s->source));
    json_object_set_new(o, "source_error", s->source_ok ? json_null() : json_string(s->source_error));
    if (s->source_ok)
    {
        json_object_set_new(o, "slot_exists", json_boolean(s->slot.exists));
        json_object_set_new(o, "active", json_boolean(s->slot.active));
        json_object_set_new(o, "active_pid", s->slot.active ? json_integer(s->slot.active_pid) : json_null());
        json_object_set_new(o, "confirmed_lsn", s->slot.exists ? json_lsn(s->slot.confirmed_lsn) : json_null());
        json_object_set_new(o, "restart_lsn", s->slot.exists ? json_lsn(s->slot.restart_lsn) : json_null());
        json_object_set_new(o, "wal_status", s->slot.wal_status[0] ? json_string(s->slot.wal_status) : json_null());
        json_object_set_new(o, "retained_wal_bytes", json_integer((json_int_t) s->slot.retained));
        json_object_set_new(o, "safe_wal_size_bytes",
                            s->slot.safe_known ? json_integer(s->slot.safe_wal_size) : json_null());
        json_object_set_new(o, "lag_bytes", json_integer((json_int_t) s->lag_bytes));
        json_object_set_new(o, "lag_seconds", json_real(s->lag_s));
        json_object_set_new(o, "lag_seconds_exact", json_boolean(s->lag_s_exact || s->lag_bytes == 0));
    }
    if (t->commit_time_us > 0)
    {
        char when[40];

        format_commit_time(t->commit_time_us, when, sizeof when);
        json_object_set_new(o, "last_commit_time", json_string(when));
    }
    else
        json_object_set_new(o, "last_commit_time", json_null());
    json_counts(o, &t->counts);
    if (n > 1)
        json_object_set_new(o, "targets", status_targets_json(rows, n));
    text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", text);
    free(text);
    json_decref(o);
}

static void
status_text(const char *slot, const StreamStatus *s)
{
    const StreamState *t = &s->state;

    printf("stream (slot %s)\n", slot);
    if (t->found)
    {
        printf("  %-22s %s -> %s (publication %s, phase %s)\n", "tables", t->source_table,
               t->target, t->publication, t->phase);
        print_lsn("stored position", t->end_lsn);
        if (t->commit_time_us > 0)
        {
            char when[40];

            format_commit_time(t->commit_time_us, when, sizeof when);
            printf("  %-22s %s (its source commit: %s)\n", "last commit applied", s->updated_at,
                   when);
        }
        else
            printf("  %-22s %s\n", "last commit applied", s->updated_at);
        printf("  %-22s read=%" PRIu64 " inserted=%" PRIu64 " updated=%" PRIu64
               " deleted=%" PRIu64 " duplicates=%" PRIu64 "\n",
               "rows", t->counts.read, t->counts.inserted, t->counts.updated, t->counts.deleted,
               t->counts.duplicates);
    }
    else
        printf("  %-22s none (no row in v7fill.stream)\n", "target state");
    printf("  %-22s %" PRIu64 " rows (v7fill.stream_quarantine)\n", "quarantined",
           s->quarantined);
    if (!s->source_ok)
    {
        printf("  %-22s not reached: %s\n", "source", s->source_error);
        return;
    }
    if (!s->slot.exists)
    {
        printf("  %-22s does not exist on the source\n", "slot");
        return;
    }
    if (s->slot.active)
        printf("  %-22s active (walsender pid %d), wal_status %s\n", "slot", s->slot.active_pid,
               s->slot.wal_status[0] ? s->slot.wal_status : "-");
    else
        printf("  %-22s inactive (the stream is stopped), wal_status %s\n", "slot",
               s->slot.wal_status[0] ? s->slot.wal_status : "-");
    print_lsn("confirmed_flush_lsn", s->slot.confirmed_lsn);
    print_lsn("restart_lsn", s->slot.restart_lsn);
    printf("  %-22s %" PRIu64 " bytes, %.1f s%s\n", "lag", s->lag_bytes, s->lag_s,
           s->lag_bytes == 0 || s->lag_s_exact
               ? ""
               : " at most (the row predates stored commit times: since the position was stored)");
    printf("  %-22s %" PRIu64 " bytes", "retained WAL", s->slot.retained);
    if (s->slot.safe_known)
        printf(" (%" PRId64 " bytes more before the slot is lost)\n", s->slot.safe_wal_size);
    else
        printf(" (no limit: max_slot_wal_keep_size = -1)\n");
}

/* A slot of several tables: one line per target. */
static void
status_targets_text(const StreamState *rows, size_t n)
{
    for (size_t i = 0; n > 1 && i < n; i++)
    {
        char at[PGO_LSN_TEXT_SIZE];

        pgo_lsn_format(rows[i].end_lsn, at);
        printf("  %-22s %s -> %s phase %s position %s read=%" PRIu64 " inserted=%" PRIu64
               " updated=%" PRIu64 " deleted=%" PRIu64 "\n",
               i == 0 ? "targets" : "", rows[i].source_table, rows[i].target, rows[i].phase, at,
               rows[i].counts.read, rows[i].counts.inserted, rows[i].counts.updated,
               rows[i].counts.deleted);
    }
}

/* The stream's status, its row the one of TABLE (a slot of several tables has
 * one per target: *rows, *nrows). */
static bool
status_of(PgConn *conn, const char *table, const char *slot, const char *source, StreamStatus *s,
          StreamState **rows, size_t *nrows, Err *err)
{
    *rows = NULL;
    *nrows = 0;
    if (!stream_admin_status(conn, slot, source, s, err))
        return false;
    if (!s->state.found)
        return true;
    if (!stream_state_list(conn, slot, NULL, rows, nrows, err))
        return false;
    for (size_t i = 0; i < *nrows; i++)
        if (strcmp((*rows)[i].target, table) == 0)
            s->state = (*rows)[i];
    return true;
}

static bool
status_matches(const char *table, const char *slot, const StreamStatus *s, Err *err)
{
    if (s->state.found && strcmp(s->state.target, table) != 0)
        return err_set(err, EC_CONFIG, "slot \"%s\" streams into %s, not %s", slot,
                       s->state.target, table);
    return true;
}

static int
stream_status(PgConn *conn, const char *table, const char *slot, const char *source, bool json,
              Err *err)
{
    StreamStatus s;
    StreamState *rows = NULL;
    size_t n = 0;

    if (!status_of(conn, table, slot, source, &s, &rows, &n, err) ||
        !status_matches(table, slot, &s, err))
    {
        free(rows);
        return 1;
    }
    if (json)
        status_json(slot, &s, rows, n);
    else
    {
        status_text(slot, &s);
        status_targets_text(rows, n);
    }
    free(rows);
    return 0;
}

static int
stream_drop(PgConn *conn, const char *table, const char *slot, const char *source, bool yes,
            Err *err)
{
    StreamStatus s;
    char answer[16] = "";
    StreamState *rows = NULL;
    size_t n = 0;
    bool ok = status_of(conn, table, slot, source, &s, &rows, &n, err) &&
              status_matches(table, slot, &s, err);

    free(rows);
    if (!ok)
        return 1;
    if (!s.source_ok)
    {
        err_set(err, EC_PG_CONNECT, "cannot reach the source to drop slot \"%s\": %s", slot,
                s.source_error);
        err_hint(err, "Give --source CONNINFO, or delete only the target's state: DELETE FROM "
                      "v7fill.stream WHERE slot = '%s';",
                 slot);
        return 1;
    }
    printf("This will, for slot \"%s\":\n", slot);
    if (s.slot.exists && s.slot.active)
        printf("  - terminate its walsender on the source (pid %d): a running stream stops\n",
               s.slot.active_pid);
    if (s.slot.exists)
        printf("  - drop replication slot \"%s\" on the source (%s), releasing %" PRIu64
               " bytes of WAL\n",
               slot, s.source, s.slot.retained);
    else
        printf("  - (no slot \"%s\" on the source: nothing to drop there)\n", slot);
    if (s.state.found)
        printf("  - delete the stream's row%s in v7fill.stream (position and counts%s)\n",
               n > 1 ? "s" : "", n > 1 ? " of every target of the slot" : "");
    printf("Kept: the rows of %s, its lookup, and the %" PRIu64
           " quarantined rows in v7fill.stream_quarantine\n"
           "  (DELETE FROM v7fill.stream_quarantine WHERE slot = '%s'; removes them).\n",
           table, s.quarantined, slot);
    fflush(stdout);
    if (!yes)
    {
        if (!isatty(STDIN_FILENO))
        {
            err_set(err, EC_USAGE, "--drop asks before it drops, and stdin is not a terminal");
            err_hint(err, "Add --yes to drop without asking.");
            return 2;
        }
        printf("Proceed? [y/N] ");
        fflush(stdout);
        if (fgets(answer, sizeof answer, stdin) == NULL || (answer[0] != 'y' && answer[0] != 'Y'))
        {
            printf("Nothing done.\n");
            return 0;
        }
    }
    if (!stream_admin_drop(conn, slot, source ? source : s.source, &s, err))
        return 1;
    printf("Dropped.\n");
    return 0;
}

int
cmd_stream(int argc, char **argv, GlobalOpts *g, Err *err)
{
    static const struct option longopts[] = {
        {"source", required_argument, NULL, OPT_SOURCE},
        {"from", required_argument, NULL, OPT_FROM},
        {"publication", required_argument, NULL, OPT_PUBLICATION},
        {"slot", required_argument, NULL, OPT_SLOT},
        {"time-column", required_argument, NULL, CLI_OPT_TIME_COLUMN},
        {"time-format", required_argument, NULL, CLI_OPT_TIME_FORMAT},
        {"source-ref", required_argument, NULL, CLI_OPT_SOURCE_REF},
        {"map", required_argument, NULL, OPT_MAP},
        {"ignore-column", required_argument, NULL, OPT_IGNORE},
        {"on-delete", required_argument, NULL, OPT_ON_DELETE},
        {"on-truncate", required_argument, NULL, OPT_ON_TRUNCATE},
        {"ahead", required_argument, NULL, OPT_AHEAD},
        {"group-rows", required_argument, NULL, OPT_GROUP_ROWS},
        {"group-ms", required_argument, NULL, OPT_GROUP_MS},
        {"no-snapshot", no_argument, NULL, OPT_NO_SNAPSHOT},
        {"no-analyze", no_argument, NULL, CLI_OPT_NO_ANALYZE},
        {"resnapshot", no_argument, NULL, OPT_RESNAPSHOT},
        {"until-caught-up", no_argument, NULL, OPT_UNTIL_CAUGHT_UP},
        {"streaming", required_argument, NULL, OPT_STREAMING},
        {"lookup-table", required_argument, NULL, CLI_OPT_LOOKUP_TABLE},
        {"key-map", required_argument, NULL, CLI_OPT_KEY_MAP},
        {"retention", required_argument, NULL, CLI_OPT_RETENTION},
        {"max-future", required_argument, NULL, CLI_OPT_MAX_FUTURE},
        {"window-tz", required_argument, NULL, OPT_WINDOW_TZ},
        {"batch-rows", required_argument, NULL, CLI_OPT_BATCH_ROWS},
        {"jobs", required_argument, NULL, CLI_OPT_JOBS},
        {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
        {"warn-retained", required_argument, NULL, OPT_WARN_RETAINED},
        {"record-every", required_argument, NULL, OPT_RECORD_EVERY},
        {"status", no_argument, NULL, OPT_STATUS},
        {"json", no_argument, NULL, OPT_JSON},
        {"drop", no_argument, NULL, OPT_DROP},
        {"yes", no_argument, NULL, OPT_YES},
        CLI_GLOBAL_LONGOPTS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const on_delete[] = {"delete", "ignore"};
    static const char *const on_truncate[] = {"stop", "apply", "ignore"};
    static const char *const on_off[] = {"on", "off"};
    StreamOptions o;
    StreamStats st;
    ColumnMap *maps = NULL;
    size_t nmaps = 0;
    const char **ignore = NULL;
    size_t nignore = 0;
    const char **froms = NULL;
    size_t nfroms = 0;
    StreamTable *tables = NULL;
    size_t ntables = 0;
    PgConn *conn = NULL;
    int status = 0;
    int c;
    int choice;
    long n;
    uint64_t size;
    int action = 0; /* 0 run, OPT_STATUS, OPT_DROP */
    bool json = false, yes = false;

    stream_options_default(&o);
    o.streaming = true;
    memset(&st, 0, sizeof st);
    while ((c = getopt_long(argc, argv, CLI_GLOBAL_SHORTOPTS "h", longopts, NULL)) != -1)
    {
        int shared = cli_pipeline_option("stream", c, optarg, &o.common, err);

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
                froms = xrealloc(froms, (nfroms + 1) * sizeof *froms);
                froms[nfroms++] = optarg;
                o.from = optarg;
                break;
            case OPT_PUBLICATION:
                o.publication = optarg;
                break;
            case OPT_SLOT:
                o.slot = optarg;
                break;
            case OPT_MAP:
                if (!cli_parse_map("stream", optarg, &maps, &nmaps, err))
                {
                    status = 2;
                    goto out;
                }
                break;
            case OPT_IGNORE:
                ignore = xrealloc(ignore, (nignore + 1) * sizeof *ignore);
                ignore[nignore++] = optarg;
                break;
            case OPT_ON_DELETE:
                if (!parse_choice("--on-delete", optarg, on_delete, 2, &choice, err))
                {
                    status = 2;
                    goto out;
                }
                o.on_delete = (StreamOnDelete) choice;
                break;
            case OPT_STREAMING:
                if (!parse_choice("--streaming", optarg, on_off, 2, &choice, err))
                {
                    status = 2;
                    goto out;
                }
                o.streaming = choice == 0;
                break;
            case OPT_ON_TRUNCATE:
                if (!parse_choice("--on-truncate", optarg, on_truncate, 3, &choice, err))
                {
                    status = 2;
                    goto out;
                }
                o.on_truncate = (StreamOnTruncate) choice;
                break;
            case OPT_RECORD_EVERY:
                if (!cli_parse_long("stream", "--record-every", optarg, 0, 86400, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.record_every_s = (int) n;
                break;
            case OPT_AHEAD:
                if (!cli_parse_long("stream", "--ahead", optarg, 0, 1000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.ahead = (int) n;
                break;
            case OPT_GROUP_ROWS:
                if (!cli_parse_long("stream", "--group-rows", optarg, 1, 1000000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.group_rows = (size_t) n;
                break;
            case OPT_GROUP_MS:
                if (!cli_parse_long("stream", "--group-ms", optarg, 1, 3600000, &n, err))
                {
                    status = 2;
                    goto out;
                }
                o.group_ms = (int) n;
                break;
            case OPT_NO_SNAPSHOT:
                o.no_snapshot = true;
                break;
            case OPT_RESNAPSHOT:
                o.resnapshot = true;
                break;
            case OPT_METRICS_LISTEN:
                o.metrics_listen = optarg;
                break;
            case OPT_WARN_RETAINED:
                if (!cli_parse_size("stream", "--warn-retained", optarg, 0, UINT64_MAX, &size, err))
                {
                    status = 2;
                    goto out;
                }
                o.warn_retained = size;
                break;
            case OPT_STATUS:
            case OPT_DROP:
                if (action && action != c)
                {
                    status = cli_usage_error(err, "stream", "--status and --drop go alone");
                    goto out;
                }
                action = c;
                break;
            case OPT_JSON:
                json = true;
                break;
            case OPT_YES:
                yes = true;
                break;
            case OPT_UNTIL_CAUGHT_UP:
                o.until_caught_up = true;
                break;
            case OPT_WINDOW_TZ:
                if (!window_tz_check(optarg, err))
                {
                    status = 2;
                    goto out;
                }
                o.common.window_tz = optarg;
                break;
            CLI_GLOBAL_CASES(c, g, goto out);
            case 'h':
                stream_usage(stdout);
                goto out;
            default:
                status = cli_usage_error(err, "stream", "unknown or incomplete option");
                goto out;
        }
    }
    if (!action && !json && !yes &&
        !stream_tables_parse(froms, nfroms, argc - optind > 0, &tables, &ntables, err))
    {
        status = 2;
        goto out;
    }
    if (argc - optind != (ntables > 0 ? 0 : 1))
    {
        status = cli_usage_error(err, "stream", "\"stream\" needs one TABLE (the target)");
        goto out;
    }
    if (action || json || yes)
    {
        if (!action || !o.slot || (json && action != OPT_STATUS) || (yes && action != OPT_DROP))
        {
            status = cli_usage_error(err, "stream",
                                     "--status [--json] and --drop [--yes] need --slot");
            goto out;
        }
        if (!pg_connect(g->conninfo, &conn, err))
        {
            status = 1;
            goto out;
        }
        status = action == OPT_STATUS
                     ? stream_status(conn, argv[optind], o.slot, o.source_conninfo, json, err)
                     : stream_drop(conn, argv[optind], o.slot, o.source_conninfo, yes, err);
        goto out;
    }
    if (!o.source_conninfo || !o.from || !o.publication || !o.slot)
    {
        status = cli_usage_error(err, "stream",
                                 "\"stream\" needs --source, --from, --publication and --slot");
        goto out;
    }
    if (o.resnapshot && o.no_snapshot)
    {
        status = cli_usage_error(err, "stream",
                                 "--resnapshot copies the table anew: not with --no-snapshot");
        goto out;
    }
    o.common.table = ntables > 0 ? tables[0].target : argv[optind];
    o.tables = tables;
    o.ntables = ntables;
    o.common.progress = log_current_level >= LOG_LEVEL_INFO;
    o.common.maps = maps;
    o.common.nmaps = nmaps;
    o.common.ignore = ignore;
    o.common.nignore = nignore;
    if (!pg_connect(g->conninfo, &conn, err))
    {
        status = 1;
        goto out;
    }
    interrupt_install();
    if (!stream_run(conn, &o, &st, err))
        status = 1;
    print_summary(&st);
    import_stats_free(&st.rows);
out:
    pg_close(conn);
    free(maps);
    free(ignore);
    free(froms);
    stream_tables_free(tables, ntables);
    return status;
}
