/*
 * migrate_maptrig.c: the trigger on a parent's map setting children's
 * <fk>_uuid when the map row arrives (see migrate_maptrig.h).
 */
#include "v7fill/migrate_maptrig.h"

#include <stdlib.h>
#include <string.h>

bool
migrate_maptrig_sql(const MapTrig *t, const char *tag, Buf *out)
{
    bool follow = t->mode == MAPTRIG_FOLLOW_MAP;
    char *body;

    if (follow)
        body = xasprintf("BEGIN\n"
                         "  IF TG_OP = 'DELETE' THEN\n"
                         "    UPDATE %s c SET %s = NULL WHERE c.%s = OLD.legacy_id AND c.%s IS NOT NULL;\n"
                         "  ELSE\n"
                         "    UPDATE %s c SET %s = NEW.id WHERE c.%s = NEW.legacy_id\n"
                         "       AND c.%s IS DISTINCT FROM NEW.id;\n"
                         "  END IF;\n"
                         "  RETURN NULL;\n"
                         "END\n",
                         t->child, t->fku, t->fk, t->fku, t->child, t->fku, t->fk, t->fku);
    else
        /* Deferred to the commit: the capture writes the map row before the
         * parent's new row, and <fk>_uuid's foreign key is checked at once.
         * Only while both rows are there (a row that did not land loses its
         * map row again in the same transaction).  Not when the child is
         * locked against writes (the switch holds the lock until the
         * capture's last commit): the key is recorded, and the lock's holder
         * sets its children (an index look-up, not a scan of the child).
         * The record reads nothing of the child, so it never waits. */
        body = xasprintf("BEGIN\n"
                         "  BEGIN\n"
                         "    LOCK TABLE %s IN ROW EXCLUSIVE MODE NOWAIT;\n"
                         "  EXCEPTION WHEN lock_not_available THEN\n"
                         "    INSERT INTO " MAPTRIG_LATE_TABLE " (child, fk_attnum, legacy_id)\n"
                         "      VALUES (%s, %s, NEW.legacy_id) ON CONFLICT DO NOTHING;\n"
                         "    RETURN NULL;\n"
                         "  END;\n"
                         "  UPDATE %s c SET %s = NEW.id WHERE c.%s = NEW.legacy_id AND c.%s IS NULL\n"
                         "     AND EXISTS (SELECT 1 FROM %s m WHERE m.legacy_id = NEW.legacy_id\n"
                         "                    AND m.id = NEW.id)\n"
                         "     AND EXISTS (SELECT 1 FROM %s p WHERE p.id = NEW.id);\n"
                         "  RETURN NULL;\n"
                         "END\n",
                         t->child, t->child_oid, t->fk_attnum, t->child, t->fku, t->fk,
                         t->fku, t->map, t->parent);
    if (strstr(body, tag) != NULL || strstr(t->fn, tag) != NULL ||
        strstr(t->trigger, tag) != NULL || strstr(t->map, tag) != NULL)
    {
        free(body);
        return false;
    }
    buf_printf(out,
               "CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql\n"
               "  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS %s\n%s%s;\n",
               t->fn, tag, body, tag);
    if (follow)
        buf_printf(out,
                   "CREATE OR REPLACE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s\n"
                   "  FOR EACH ROW EXECUTE FUNCTION %s();\n",
                   t->trigger, t->map, t->fn);
    else /* no OR REPLACE for a constraint trigger */
        buf_printf(out,
                   "DROP TRIGGER IF EXISTS %s ON %s;\n"
                   "CREATE CONSTRAINT TRIGGER %s AFTER INSERT OR UPDATE ON %s\n"
                   "  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION %s();\n",
                   t->trigger, t->map, t->trigger, t->map, t->fn);
    free(body);
    return true;
}

bool
migrate_maptrig_drop(PgConn *c, const char *trigger, const char *map, Err *err)
{
    char *sql = xasprintf("DROP TRIGGER IF EXISTS %s ON %s", trigger, map);
    bool ok = pg_exec(c, sql, err);

    free(sql);
    return ok;
}
