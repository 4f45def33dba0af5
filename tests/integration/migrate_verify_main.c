/*
 * migrate_verify_main.c: migrate_verify() from the command line, for
 * t_migrate_verify.sh until `v7fill migrate --into X --verify` exists.
 *
 *   migrate_verify_main -d TARGET [--source SOURCE] --from S.T --key K
 *       --time-column C --into S.T --slot SLOT [--child 'S.T(FK)']...
 *       [--range-keys N] [--json]
 *
 * Without --source the source is the target's database (one connection).
 * Prints the verdict table (or the JSON); exits 0 when it is OK, 1 on a
 * mismatch, the error's exit status when a check could not run.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v7fill/mem.h"
#include "v7fill/migrate_verify.h"

static int
split(const char *qual, char *schema, char *table)
{
    const char *dot = strchr(qual, '.');

    if (dot == NULL || dot - qual >= 64 || strlen(dot + 1) >= 64)
        return -1;
    memcpy(schema, qual, (size_t) (dot - qual));
    schema[dot - qual] = '\0';
    strcpy(table, dot + 1);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dbname", required_argument, NULL, 'd'},    {"source", required_argument, NULL, 's'},
        {"from", required_argument, NULL, 'f'},      {"key", required_argument, NULL, 'k'},
        {"time-column", required_argument, NULL, 't'}, {"into", required_argument, NULL, 'i'},
        {"slot", required_argument, NULL, 'S'},      {"child", required_argument, NULL, 'c'},
        {"range-keys", required_argument, NULL, 'r'}, {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    MigrateSpec spec;
    const char *target_ci = "";
    const char *source_ci = NULL;
    size_t range_keys = 0;
    int json = 0;
    int o;
    PgConn *dst = NULL;
    PgConn *src = NULL;
    VerifyReport rep;
    Err err = {0};
    int rc;

    memset(&spec, 0, sizeof spec);
    while ((o = getopt_long(argc, argv, "d:", opts, NULL)) != -1)
    {
        switch (o)
        {
        case 'd': target_ci = optarg; break;
        case 's': source_ci = optarg; break;
        case 'f':
            if (split(optarg, spec.from_schema, spec.from_table))
                return 2;
            break;
        case 'k': (void) snprintf(spec.key, sizeof spec.key, "%s", optarg); break;
        case 't': (void) snprintf(spec.time_column, sizeof spec.time_column, "%s", optarg); break;
        case 'i':
            if (split(optarg, spec.into_schema, spec.into_table))
                return 2;
            (void) snprintf(spec.map_table, sizeof spec.map_table, "%s_id_map", spec.into_table);
            break;
        case 'S': (void) snprintf(spec.slot, sizeof spec.slot, "%s", optarg); break;
        case 'c':
        {
            MigrateChild *c;
            char qual[140];
            char *paren;

            spec.children = xrealloc(spec.children, (spec.nchildren + 1) * sizeof *spec.children);
            c = &spec.children[spec.nchildren++];
            memset(c, 0, sizeof *c);
            (void) snprintf(qual, sizeof qual, "%s", optarg);
            paren = strchr(qual, '(');
            if (paren == NULL || paren[strlen(paren) - 1] != ')')
                return 2;
            paren[strlen(paren) - 1] = '\0';
            *paren = '\0';
            (void) snprintf(c->fk_column, sizeof c->fk_column, "%s", paren + 1);
            if (split(qual, c->schema, c->table))
                return 2;
            break;
        }
        case 'r': range_keys = strtoul(optarg, NULL, 10); break;
        case 'j': json = 1; break;
        default: return 2;
        }
    }
    if (!pg_connect(target_ci, &dst, &err) ||
        (source_ci && !pg_connect(source_ci, &src, &err)))
    {
        fprintf(stderr, "error: %s\n", err.msg);
        pg_close(dst);
        free(spec.children);
        return err_exit_status(err.code);
    }
    if (!migrate_verify_ex(src ? src : dst, dst, &spec, range_keys, &rep, &err))
    {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = err_exit_status(err.code);
    }
    else
    {
        if (json)
        {
            Buf b;

            buf_init(&b);
            (void) verify_report_json(&rep, &b);
            printf("%s\n", b.data);
            buf_free(&b);
        }
        else
            verify_report_print(stdout, &rep);
        rc = rep.ok ? 0 : 1;
    }
    verify_report_free(&rep);
    pg_close(src);
    pg_close(dst);
    free(spec.children);
    return rc;
}
