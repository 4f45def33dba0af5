/*
 * migrate_state.c: v7fill.migration, a migration's stored spec (see
 * migrate_state.h), and the small helpers of migrate.h.
 */
#include "v7fill/migrate_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "v7fill/mem.h"
#include "v7fill/pgoutput.h"
#include "v7fill/state.h"
#include "v7fill/stream_admin.h"

static const char *const phase_names[] = {"new", "copy", "follow", "switched", "reverse"};

const char *
migrate_phase_name(MigratePhase p)
{
    if ((unsigned) p < sizeof phase_names / sizeof phase_names[0])
        return phase_names[p];
    return "unknown";
}

void
migrate_live_names(const MigrateSpec *s, MigrateLiveNames *n)
{
    bool switched = s->phase >= MIGRATE_PHASE_SWITCHED && s->legacy_table[0] != '\0';
    bool one_db = s->source_conninfo[0] == '\0';

    (void) snprintf(n->src_schema, sizeof n->src_schema, "%s", s->from_schema);
    (void) snprintf(n->src_table, sizeof n->src_table, "%s",
                    switched ? s->legacy_table : s->from_table);
    (void) snprintf(n->new_schema, sizeof n->new_schema, "%s",
                    switched && one_db ? s->from_schema : s->into_schema);
    (void) snprintf(n->new_table, sizeof n->new_table, "%s",
                    switched && one_db ? s->from_table : s->into_table);
}

bool
migrate_phase_parse(const char *name, MigratePhase *out)
{
    for (size_t i = 0; i < sizeof phase_names / sizeof phase_names[0]; i++)
        if (strcmp(name, phase_names[i]) == 0)
        {
            *out = (MigratePhase) i;
            return true;
        }
    return false;
}

void
migrate_spec_free(MigrateSpec *s)
{
    if (s == NULL)
        return;
    free(s->children);
    s->children = NULL;
    s->nchildren = 0;
}

void
migrate_options_default(MigrateOptions *o)
{
    memset(o, 0, sizeof *o);
    pipeline_options_default(&o->common);
    o->child_mode = MIGRATE_CHILD_EXPAND;
    o->lock_timeout_ms = 1000;
    o->switch_attempts = 10;
}

static const char *const create_sql =
    "CREATE SCHEMA IF NOT EXISTS v7fill;"
    "CREATE TABLE IF NOT EXISTS v7fill.migration ("
    "  into_schema text NOT NULL, into_table text NOT NULL,"
    "  source_conninfo text NOT NULL DEFAULT '',"
    "  from_schema text NOT NULL, from_table text NOT NULL,"
    "  key text NOT NULL, key_type text NOT NULL, time_column text NOT NULL,"
    "  map_table text NOT NULL, publication text NOT NULL, slot text NOT NULL,"
    "  children jsonb NOT NULL DEFAULT '[]', child_mode text NOT NULL DEFAULT 'expand',"
    "  phase text NOT NULL, switch_lsn pg_lsn NOT NULL DEFAULT '0/0',"
    "  legacy_table text NOT NULL DEFAULT '',"
    "  created_at timestamptz NOT NULL DEFAULT now(),"
    "  updated_at timestamptz NOT NULL DEFAULT now(),"
    "  PRIMARY KEY (into_schema, into_table));"
    "ALTER TABLE v7fill.migration ADD COLUMN IF NOT EXISTS window_tz text NOT NULL DEFAULT '';";

bool
migrate_state_setup(PgConn *c, Err *err)
{
    return state_create_once(c,
                             "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid "
                             "= to_regclass('v7fill.migration') AND attname = 'window_tz' AND NOT "
                             "attisdropped)",
                             create_sql, "the migrations' table (v7fill.migration)", err);
}

static void
copy_text(char *dst, size_t size, const char *src)
{
    (void) snprintf(dst, size, "%s", src ? src : "");
}

static bool
children_parse(const char *text, MigrateSpec *out, Err *err)
{
    json_error_t jerr;
    json_t *arr = json_loads(text, 0, &jerr);
    size_t i;
    json_t *v;

    if (arr == NULL || !json_is_array(arr))
    {
        json_decref(arr);
        return err_set(err, EC_CONFIG, "v7fill.migration.children of %s.%s is not a JSON array",
                       out->into_schema, out->into_table);
    }
    out->nchildren = json_array_size(arr);
    out->children = out->nchildren ? xcalloc(out->nchildren, sizeof *out->children) : NULL;
    json_array_foreach(arr, i, v)
    {
        copy_text(out->children[i].schema, sizeof out->children[i].schema,
                  json_string_value(json_object_get(v, "schema")));
        copy_text(out->children[i].table, sizeof out->children[i].table,
                  json_string_value(json_object_get(v, "table")));
        copy_text(out->children[i].fk_column, sizeof out->children[i].fk_column,
                  json_string_value(json_object_get(v, "fk_column")));
        copy_text(out->children[i].time_column, sizeof out->children[i].time_column,
                  json_string_value(json_object_get(v, "time_column")));
        copy_text(out->children[i].into_table, sizeof out->children[i].into_table,
                  json_string_value(json_object_get(v, "into_table")));
    }
    json_decref(arr);
    return true;
}

static char *
children_json(const MigrateSpec *s)
{
    json_t *arr = json_array();
    char *text;

    for (size_t i = 0; i < s->nchildren; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s}", "schema",
                                             s->children[i].schema, "table", s->children[i].table,
                                             "fk_column", s->children[i].fk_column,
                                             "time_column", s->children[i].time_column,
                                             "into_table", s->children[i].into_table));
    text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return text;
}

bool
migrate_state_get(PgConn *target, const char *into_schema, const char *into_table,
                  MigrateSpec *out, bool *found, Err *err)
{
    const char *params[2] = {into_schema, into_table};
    PGresult *res;
    bool ok = true;

    memset(out, 0, sizeof *out);
    *found = false;
    if (!pg_query(target, "SELECT to_regclass('v7fill.migration') IS NOT NULL", 0, NULL, &res,
                  err))
        return false;
    if (PQgetvalue(res, 0, 0)[0] != 't')
    {
        PQclear(res);
        return true;
    }
    PQclear(res);
    if (!pg_query(target,
                  "SELECT source_conninfo, from_schema, from_table, key, key_type, time_column, "
                  "map_table, publication, slot, children::text, child_mode, phase, "
                  "switch_lsn::text, legacy_table, coalesce(to_jsonb(m) ->> 'window_tz', '') "
                  "FROM v7fill.migration m WHERE into_schema = $1 AND into_table = $2",
                  2, params, &res, err))
    {
        err_prefix(err, "could not read the migration (v7fill.migration)");
        return false;
    }
    if (PQntuples(res) == 1)
    {
        *found = true;
        copy_text(out->source_conninfo, sizeof out->source_conninfo, PQgetvalue(res, 0, 0));
        copy_text(out->from_schema, sizeof out->from_schema, PQgetvalue(res, 0, 1));
        copy_text(out->from_table, sizeof out->from_table, PQgetvalue(res, 0, 2));
        copy_text(out->key, sizeof out->key, PQgetvalue(res, 0, 3));
        copy_text(out->key_type, sizeof out->key_type, PQgetvalue(res, 0, 4));
        copy_text(out->time_column, sizeof out->time_column, PQgetvalue(res, 0, 5));
        copy_text(out->into_schema, sizeof out->into_schema, into_schema);
        copy_text(out->into_table, sizeof out->into_table, into_table);
        copy_text(out->map_table, sizeof out->map_table, PQgetvalue(res, 0, 6));
        copy_text(out->publication, sizeof out->publication, PQgetvalue(res, 0, 7));
        copy_text(out->slot, sizeof out->slot, PQgetvalue(res, 0, 8));
        out->child_mode = strcmp(PQgetvalue(res, 0, 10), "migrate") == 0 ? MIGRATE_CHILD_MIGRATE
                                                                          : MIGRATE_CHILD_EXPAND;
        if (!migrate_phase_parse(PQgetvalue(res, 0, 11), &out->phase))
            ok = err_set(err, EC_CONFIG, "v7fill.migration: %s.%s has an unknown phase \"%s\"",
                         into_schema, into_table, PQgetvalue(res, 0, 11));
        (void) pgo_lsn_parse(PQgetvalue(res, 0, 12), &out->switch_lsn);
        copy_text(out->legacy_table, sizeof out->legacy_table, PQgetvalue(res, 0, 13));
        copy_text(out->window_tz, sizeof out->window_tz, PQgetvalue(res, 0, 14));
        ok = ok && children_parse(PQgetvalue(res, 0, 9), out, err);
    }
    PQclear(res);
    if (!ok)
        migrate_spec_free(out);
    return ok;
}

bool
migrate_state_put(PgConn *c, const MigrateSpec *s, Err *err)
{
    char *clean = stream_conninfo_without_password(s->source_conninfo);
    char *children = children_json(s);
    char lsn[PGO_LSN_TEXT_SIZE];
    const char *params[16];
    bool ok;

    pgo_lsn_format(s->switch_lsn, lsn);
    params[0] = s->into_schema;
    params[1] = s->into_table;
    params[2] = clean;
    params[3] = s->from_schema;
    params[4] = s->from_table;
    params[5] = s->key;
    params[6] = s->key_type;
    params[7] = s->time_column;
    params[8] = s->map_table;
    params[9] = s->publication;
    params[10] = s->slot;
    params[11] = children;
    params[12] = s->child_mode == MIGRATE_CHILD_MIGRATE ? "migrate" : "expand";
    params[13] = migrate_phase_name(s->phase);
    params[14] = lsn;
    params[15] = s->legacy_table;
    ok = pg_exec_params(
        c,
        "INSERT INTO v7fill.migration (into_schema, into_table, source_conninfo, from_schema, "
        "from_table, key, key_type, time_column, map_table, publication, slot, children, "
        "child_mode, phase, switch_lsn, legacy_table) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
        "$10, $11, $12::jsonb, $13, $14, $15::pg_lsn, $16) ON CONFLICT (into_schema, into_table) "
        "DO UPDATE SET source_conninfo = EXCLUDED.source_conninfo, from_schema = "
        "EXCLUDED.from_schema, from_table = EXCLUDED.from_table, key = EXCLUDED.key, key_type = "
        "EXCLUDED.key_type, time_column = EXCLUDED.time_column, map_table = EXCLUDED.map_table, "
        "publication = EXCLUDED.publication, slot = EXCLUDED.slot, children = "
        "EXCLUDED.children, child_mode = EXCLUDED.child_mode, phase = EXCLUDED.phase, "
        "switch_lsn = EXCLUDED.switch_lsn, legacy_table = EXCLUDED.legacy_table, updated_at = "
        "now()",
        16, params, err);
    if (!ok)
        err_prefix(err, "could not store the migration into %s.%s (v7fill.migration)",
                   s->into_schema, s->into_table);
    free(children);
    free(clean);
    return ok;
}

bool
migrate_state_put_window_tz(PgConn *c, const MigrateSpec *s, Err *err)
{
    const char *params[3] = {s->into_schema, s->into_table, s->window_tz};

    if (pg_exec_params(c,
                       "UPDATE v7fill.migration SET window_tz = $3 WHERE into_schema = $1 AND "
                       "into_table = $2 AND window_tz IS DISTINCT FROM $3",
                       3, params, err))
        return true;
    err_prefix(err, "could not store the windows' zone of the migration into %s.%s",
               s->into_schema, s->into_table);
    return false;
}

bool
migrate_state_set_phase(PgConn *c, const MigrateSpec *s, MigratePhase p, Err *err)
{
    const char *params[3] = {s->into_schema, s->into_table, migrate_phase_name(p)};
    PGresult *res;
    bool ok;

    if (!pg_query(c,
                  "UPDATE v7fill.migration SET phase = $3, updated_at = now() WHERE into_schema "
                  "= $1 AND into_table = $2 RETURNING 1",
                  3, params, &res, err))
    {
        err_prefix(err, "could not store the phase of the migration into %s.%s", s->into_schema,
                   s->into_table);
        return false;
    }
    ok = PQntuples(res) == 1 ||
         err_set(err, EC_INTERNAL, "no migration into %s.%s in v7fill.migration to set phase %s",
                 s->into_schema, s->into_table, migrate_phase_name(p));
    PQclear(res);
    return ok;
}
