/*
 * Import / plan report rendering.
 */
#include "v7fill/import_report.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "v7fill/civil.h"
#include "v7fill/mem.h"
#include "v7fill/timeparse.h"

static void
window_label(const WindowCount *w, char *out, size_t size)
{
    char a[48];
    char b[48];
    /* dates when both edges are midnight UTC; windows in a local zone
     * (--window-tz) and odd partitions show their instants */
    if (!civil_format_day_bound(w->lower_us, a, sizeof a) ||
        !civil_format_day_bound(w->upper_us, b, sizeof b))
    {
        civil_format_instant(w->lower_us, a, sizeof a);
        civil_format_instant(w->upper_us, b, sizeof b);
    }
    (void) snprintf(out, size, "[%s, %s)", a, b);
}

void
import_report_print(FILE *out, const ImportStats *st, bool plan)
{
    double rate = import_stats_rate(st);

    fprintf(out, "%s\n", plan ? "plan (nothing was written)" : "import report");
    fprintf(out, "  files          %" PRIu64, st->files);
    if (st->files_resumed)
        fprintf(out, " (%" PRIu64 " resumed)", st->files_resumed);
    if (st->files_skipped)
        fprintf(out, " (%" PRIu64 " skipped: imported completely by an earlier run)",
                st->files_skipped);
    fputc('\n', out);
    fprintf(out, "  rows read      %" PRIu64, st->read);
    if (st->read_resumed)
        fprintf(out, "   (%" PRIu64 " of them accounted for by earlier, interrupted runs)",
                st->read_resumed);
    fputc('\n', out);
    fprintf(out, "  %-14s %" PRIu64 "\n", plan ? "would insert" : "inserted", st->inserted);
    fprintf(out, "  duplicates     %" PRIu64 "\n", st->duplicates);
    fprintf(out, "  rejected       %" PRIu64 "\n", st->rejected);
    for (size_t i = 0; i < st->nreasons; i++)
        fprintf(out, "    %-28s %" PRIu64 "   e.g. %s\n", st->reasons[i].reason,
                st->reasons[i].count, st->reasons[i].example);
    if (st->retention_us > 0)
    {
        char ret[48];
        char near[48];
        duration_format(st->retention_us, ret, sizeof ret);
        duration_format(st->near_cutoff_us, near, sizeof near);
        fprintf(out, "  retention      %s\n", st->retention_from);
        fprintf(out, "  %-14s %" PRIu64 "   (window retired under retention %s: not inserted%s)\n",
                "expired", st->expired, ret, st->expired_kept ? "" : "; see the late-rows file");
        if (st->expired_kept)
            fprintf(out, "  expired, kept  %" PRIu64 "   (--keep-expired: retention will drop them)\n",
                    st->expired_kept);
        fprintf(out, "  near cutoff    %" PRIu64 "   (inserted; window retires within %s)\n",
                st->near_cutoff, near);
        if ((st->expired || st->near_cutoff || st->expired_kept) && st->late_path[0])
            fprintf(out, "  late rows file %s\n", st->late_path);
    }
    else if (st->expired)
        fprintf(out, "  expired        %" PRIu64 "\n", st->expired);
    if (plan && st->lookup_keys_ordered)
        fprintf(out, "  lookup keys    ordered: %" PRIu64 " of %" PRIu64
                     " rows' references end in an integer%s\n",
                st->keys_ordered, st->read,
                st->read > 0 && st->keys_ordered == 0
                    ? " (a --source-ref ending in the source's serial key, if it has one, "
                      "would order the lookup)"
                    : "");
    else
        fprintf(out, "  lookup keys    %s\n", st->lookup_keys_ordered ? "ordered" : "hashed");
    if (!plan)
    {
        fprintf(out, "  partitions     %" PRIu64 " created\n", st->partitions_created);
        fprintf(out, "  elapsed        %.2f s (%.0f rows/s)", st->elapsed_s, rate);
        if (st->closing_s > 0)
            fprintf(out, ", of which %.2f s the closing ANALYZE and VACUUM", st->closing_s);
        fputc('\n', out);
        if (st->rejected)
            fprintf(out, "  rejects file   %s\n", st->rejects_path);
    }
    if (st->nwindows)
    {
        if (st->read_resumed)
            fprintf(out, "  rows per window (this run's: the earlier runs' rows are not in it):\n");
        else
            fprintf(out, "  rows per window:\n");
        for (size_t i = 0; i < st->nwindows; i++)
        {
            char label[64];
            window_label(&st->windows[i], label, sizeof label);
            char left[64] = "";
            if (st->windows[i].near_cutoff > 0)
            {
                char d[48];
                duration_format(st->windows[i].time_left_us, d, sizeof d);
                (void) snprintf(left, sizeof left, "  %" PRIu64 " near cutoff, retires in %s",
                                st->windows[i].near_cutoff, d);
            }
            fprintf(out, "    %s %-32s %10" PRIu64 "%s%s\n", label,
                    st->windows[i].partition[0] ? st->windows[i].partition : "(new partition)",
                    st->windows[i].rows, plan && st->windows[i].created ? "  would be created" : "",
                    left);
        }
    }
    if (plan && st->ddl.len)
        fprintf(out, "  partitions that would be created:\n%s\n", st->ddl.data);
    fprintf(out, "read=%" PRIu64 " inserted=%" PRIu64 " duplicates=%" PRIu64 " rejected=%" PRIu64,
            st->read, st->inserted, st->duplicates, st->rejected);
    if (st->expired)
        fprintf(out, " expired=%" PRIu64, st->expired);
    if (st->updated + st->deleted + st->missing + st->truncates > 0)
    {
        /* Row operations (a stream): their terms join the balance. */
        fprintf(out,
                " updated=%" PRIu64 " deleted=%" PRIu64 " missing=%" PRIu64
                " (deletes %" PRIu64 ") time_changed=%" PRIu64 " truncates=%" PRIu64 " (%s)\n",
                st->updated, st->deleted, st->missing, st->missing_deletes, st->time_changed,
                st->truncates,
                import_stats_balanced(st) ? "balanced: read = inserted + duplicates + rejected + "
                                            "expired + updated + deleted + missing deletes"
                                          : "DOES NOT BALANCE");
        return;
    }
    fprintf(out, " (%s)\n",
            import_stats_balanced(st)
                ? (st->expired ? "balanced: read = inserted + duplicates + rejected + expired"
                               : "balanced: read = inserted + duplicates + rejected")
                : "DOES NOT BALANCE");
}

char *
import_report_json(const ImportStats *st, bool plan)
{
    json_t *root = json_object();
    json_t *reasons = json_array();
    json_t *windows = json_array();
    char *text;

    json_object_set_new(root, "plan", json_boolean(plan));
    json_object_set_new(root, "files", json_integer((json_int_t) st->files));
    json_object_set_new(root, "files_resumed", json_integer((json_int_t) st->files_resumed));
    json_object_set_new(root, "files_skipped", json_integer((json_int_t) st->files_skipped));
    json_object_set_new(root, "read", json_integer((json_int_t) st->read));
    json_object_set_new(root, "read_resumed", json_integer((json_int_t) st->read_resumed));
    json_object_set_new(root, "inserted", json_integer((json_int_t) st->inserted));
    json_object_set_new(root, "duplicates", json_integer((json_int_t) st->duplicates));
    json_object_set_new(root, "rejected", json_integer((json_int_t) st->rejected));
    json_object_set_new(root, "expired", json_integer((json_int_t) st->expired));
    json_object_set_new(root, "expired_kept", json_integer((json_int_t) st->expired_kept));
    json_object_set_new(root, "near_cutoff", json_integer((json_int_t) st->near_cutoff));
    json_object_set_new(root, "retention_s",
                        st->retention_us ? json_real((double) st->retention_us / 1e6) : json_null());
    json_object_set_new(root, "near_cutoff_s", json_real((double) st->near_cutoff_us / 1e6));
    json_object_set_new(root, "retention_from", json_string(st->retention_from));
    json_object_set_new(root, "late_file", st->late_path[0] ? json_string(st->late_path) : json_null());
    json_object_set_new(root, "balanced", json_boolean(import_stats_balanced(st)));
    json_object_set_new(root, "partitions_created",
                        json_integer((json_int_t) st->partitions_created));
    json_object_set_new(root, "batches", json_integer((json_int_t) st->batches));
    json_object_set_new(root, "elapsed_s", json_real(st->elapsed_s));
    json_object_set_new(root, "closing_s", json_real(st->closing_s));
    json_object_set_new(root, "rows_per_s", json_real(import_stats_rate(st)));
    json_object_set_new(root, "rejects_file", json_string(st->rejects_path));
    json_object_set_new(root, "lookup_table", json_string(st->lookup_table));
    json_object_set_new(root, "lookup_keys", json_string(st->lookup_keys_ordered ? "ordered" : "hashed"));
    if (plan)
        json_object_set_new(root, "references_ending_in_integer",
                            json_integer((json_int_t) st->keys_ordered));
    for (size_t i = 0; i < st->nreasons; i++)
    {
        json_t *r = json_object();
        json_object_set_new(r, "reason", json_string(st->reasons[i].reason));
        json_object_set_new(r, "count", json_integer((json_int_t) st->reasons[i].count));
        json_object_set_new(r, "example", json_string(st->reasons[i].example));
        json_array_append_new(reasons, r);
    }
    json_object_set_new(root, "rejected_by_reason", reasons);
    for (size_t i = 0; i < st->nwindows; i++)
    {
        json_t *w = json_object();
        char a[48];
        char b[48];
        civil_format_rfc3339(st->windows[i].lower_us, false, a, sizeof a);
        civil_format_rfc3339(st->windows[i].upper_us, false, b, sizeof b);
        json_object_set_new(w, "from", json_string(a));
        json_object_set_new(w, "to", json_string(b));
        json_object_set_new(w, "partition", st->windows[i].partition[0]
                                                ? json_string(st->windows[i].partition)
                                                : json_null());
        json_object_set_new(w, "rows", json_integer((json_int_t) st->windows[i].rows));
        json_object_set_new(w, "near_cutoff", json_integer((json_int_t) st->windows[i].near_cutoff));
        if (plan)
            json_object_set_new(w, "would_create", json_boolean(st->windows[i].created));
        json_array_append_new(windows, w);
    }
    json_object_set_new(root, "windows", windows);
    if (plan)
        json_object_set_new(root, "ddl", json_string(st->ddl.data ? st->ddl.data : ""));
    if (st->delay_json)
    {
        json_error_t jerr;
        json_t *delay = json_loads(st->delay_json, 0, &jerr);
        if (delay)
            json_object_set_new(root, "delay", delay);
    }
    text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return text;
}

bool
import_report_check_path(const char *path, Err *err)
{
    struct stat st;
    const char *slash = strrchr(path, '/');
    char *dir;
    bool ok = true;

    if (strcmp(path, "-") == 0)
        return true;
    if (stat(path, &st) == 0)
    {
        if (!S_ISREG(st.st_mode))
            return err_set(err, EC_IO, "could not write report \"%s\": not a regular file", path);
        if (access(path, W_OK) != 0)
            return err_errno(err, EC_IO, "could not write report \"%s\"", path);
        return true;
    }
    dir = slash == NULL ? xstrdup(".") : xstrndup(path, slash == path ? 1 : (size_t) (slash - path));
    if (access(dir, W_OK | X_OK) != 0)
        ok = err_errno(err, EC_IO, "could not write report \"%s\"", path);
    free(dir);
    return ok;
}

bool
import_report_write_json(const char *path, const ImportStats *st, bool plan, Err *err)
{
    char *text = import_report_json(st, plan);
    FILE *f;
    bool ok = true;

    if (text == NULL)
        return err_set(err, EC_INTERNAL, "could not render the JSON report");
    if (strcmp(path, "-") == 0)
    {
        fputs(text, stdout);
        fputc('\n', stdout);
        free(text);
        return true;
    }
    f = fopen(path, "w");
    if (f == NULL)
    {
        free(text);
        return err_errno(err, EC_IO, "could not write report \"%s\"", path);
    }
    if (fputs(text, f) < 0 || fputc('\n', f) == EOF)
        ok = err_errno(err, EC_IO, "could not write report \"%s\"", path);
    if (fclose(f) != 0 && ok)
        ok = err_errno(err, EC_IO, "could not write report \"%s\"", path);
    free(text);
    return ok;
}
