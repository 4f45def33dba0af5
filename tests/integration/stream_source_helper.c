/*
 * Drives the stream's source side (replconn.h, source_snapshot.h) for
 * t_stream_source.sh.  The source is the libpq environment (PG* variables).
 *
 *   copy SLOT SCHEMA TABLE PUB CMD   create the slot, run CMD (a shell command, e.g. an
 *                                    insert on another connection), copy the table under the
 *                                    snapshot, then stream until a transaction with an insert
 *                                    commits, and acknowledge its end LSN
 *   hold SLOT PUB SECONDS            stream (answering keepalives) for SECONDS
 *   start SLOT PUB                   START_REPLICATION only
 *   preflight PUB SCHEMA.TABLE...    replconn_preflight
 *   open CONNINFO                    replconn_open
 *   info SCHEMA TABLE                replconn_table_info
 *   drop SLOT                        replconn_drop_slot
 *
 * On failure: the message (DETAIL and HINT lines) on stdout, and the exit
 * status v7fill would use for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "v7fill/interrupt.h"
#include "v7fill/pgoutput.h"
#include "v7fill/replconn.h"
#include "v7fill/source_snapshot.h"

/* What is open when a step fails (closed there, so a sanitizer build sees no leak). */
static ReplConn *R;
static PgConn *C;

static int
failed(const Err *err)
{
    replconn_close(R);
    pg_close(C);
    printf("%s\n", err->msg);
    if (err->detail[0])
        printf("DETAIL: %s\n", err->detail);
    if (err->hint[0])
        printf("HINT: %s\n", err->hint);
    if (err->sqlstate[0])
        printf("SQLSTATE: %s\n", err->sqlstate);
    return err_exit_status(err->code);
}

static uint64_t
be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void
split_table(const char *arg, ReplTable *t)
{
    const char *dot = strchr(arg, '.');
    memset(t, 0, sizeof *t);
    snprintf(t->schema, sizeof t->schema, "%.*s", (int) (dot - arg), arg);
    snprintf(t->name, sizeof t->name, "%s", dot + 1);
}

/* Print the table's rows as the snapshot source hands them out. */
static bool
copy_rows(const char *snapshot, const ReplTable *t, Err *err)
{
    PgConn *c = NULL;
    ReplTableInfo info;
    Source *src = NULL;
    size_t ncols;
    const char *const *cols;
    Record rec;
    bool eof = false;
    uint64_t view_lsn;

    if (!pg_connect(NULL, &c, err) || !replconn_table_info(c, t, &info, err))
    {
        pg_close(c);
        return false;
    }
    pg_close(c);
    if (!source_snapshot_open(NULL, snapshot, t, (const char *const *) info.cols, info.ncols,
                              &view_lsn, &src, err))
    {
        replconn_table_free(&info);
        return false;
    }
    replconn_table_free(&info);
    printf("name: %s\n", src->ops->name(src));
    cols = src->ops->columns(src, &ncols);
    printf("columns:");
    for (size_t i = 0; i < ncols; i++)
        printf(" %s", cols[i]);
    printf("\n");
    while (source_next(src, &rec, &eof, err) && !eof)
    {
        printf("row:");
        for (size_t i = 0; i < rec.nfields; i++)
            if (rec.fields[i].is_null)
                printf(" NULL");
            else
                printf(" %.*s", (int) rec.fields[i].len, rec.fields[i].data);
        printf("\n");
    }
    source_close(src);
    return eof;
}

static int
cmd_copy(char **argv)
{
    ReplSystem sys;
    ReplTable t;
    Err err = {0};
    uint64_t consistent;
    uint64_t end_lsn = 0;
    char snapshot[128];
    char lsn[PGO_LSN_TEXT_SIZE];
    bool seen_insert = false;
    time_t until;

    memset(&t, 0, sizeof t);
    snprintf(t.schema, sizeof t.schema, "%s", argv[3]);
    snprintf(t.name, sizeof t.name, "%s", argv[4]);
    if (!replconn_open(NULL, &R, &err) || !replconn_identify(R, &sys, &err) ||
        !replconn_create_slot(R, argv[2], &consistent, snapshot, sizeof snapshot, &err))
        return failed(&err);
    pgo_lsn_format(consistent, lsn);
    printf("systemid=%s timeline=%u\nconsistent=%s\n", sys.systemid, sys.timeline, lsn);
    fflush(stdout);
    if (system(argv[6]) != 0)
        fprintf(stderr, "command failed: %s\n", argv[6]);
    if (!copy_rows(snapshot, &t, &err))
        return failed(&err);
    if (!replconn_start(R, argv[2], consistent, argv[5], 1, false, &err))
        return failed(&err);
    until = time(NULL) + 20;
    while (time(NULL) < until && end_lsn == 0)
    {
        char *buf;
        int len;

        if (!replconn_recv(R, 500, &buf, &len, &err))
            return failed(&err);
        if (len == 0)
            continue;
        if (buf[0] == 'w' && len > 25)
        {
            char m = buf[25];
            printf("w %c\n", m);
            if (m == 'I')
                seen_insert = true;
            if (m == 'C' && seen_insert && len >= 25 + 26)
                end_lsn = be64((const unsigned char *) buf + 25 + 10);
        }
        else if (buf[0] == 'k' && len >= 18 && buf[17] &&
                 !replconn_send_status(R, 0, 0, 0, false, &err))
            return failed(&err);
        replconn_freemem(buf);
    }
    if (end_lsn == 0)
    {
        printf("no insert streamed\n");
        return 1;
    }
    if (!replconn_send_status(R, end_lsn, end_lsn, end_lsn, false, &err) ||
        !replconn_stop(R, &err))
        return failed(&err);
    pgo_lsn_format(end_lsn, lsn);
    printf("acked=%s\n", lsn);
    {
        ReplSlotInfo si;

        if (!replconn_slot_info(R, argv[2], &si, &err))
            return failed(&err);
        pgo_lsn_format(si.confirmed_flush_lsn, lsn);
        printf("slot: exists=%d plugin=%s active=%d confirmed=%s wal_status=%s\n", si.exists,
               si.plugin, si.active, lsn, si.wal_status);
    }
    replconn_close(R);
    return 0;
}

static int
cmd_hold(char **argv)
{
    Err err = {0};
    time_t until = time(NULL) + atoi(argv[4]);

    if (!replconn_open(NULL, &R, &err) || !replconn_start(R, argv[2], 0, argv[3], 2, true, &err))
        return failed(&err);
    printf("streaming\n");
    fflush(stdout);
    while (time(NULL) < until)
    {
        char *buf;
        int len;

        if (!replconn_recv(R, 200, &buf, &len, &err))
            return failed(&err);
        if (len > 0 && buf[0] == 'k' && len >= 18 && buf[17] &&
            !replconn_send_status(R, 0, 0, 0, false, &err))
            return failed(&err);
        replconn_freemem(buf);
    }
    if (!replconn_stop(R, &err))
        return failed(&err);
    replconn_close(R);
    printf("stopped\n");
    return 0;
}

int
main(int argc, char **argv)
{
    Err err = {0};
    const char *cmd = argc > 1 ? argv[1] : "";

    setvbuf(stdout, NULL, _IOLBF, 0);
    interrupt_install();
    if (strcmp(cmd, "copy") == 0 && argc == 7)
        return cmd_copy(argv);
    if (strcmp(cmd, "hold") == 0 && argc == 5)
        return cmd_hold(argv);
    if (strcmp(cmd, "start") == 0 && argc == 4)
    {
    
        if (!replconn_open(NULL, &R, &err) || !replconn_start(R, argv[2], 0, argv[3], 1, false, &err))
            return failed(&err);
        printf("streaming\n");
        replconn_close(R);
        return 0;
    }
    if (strcmp(cmd, "preflight") == 0 && argc >= 4)
    {
                ReplTable t[8];
        size_t n = 0;

        for (int i = 3; i < argc && n < 8; i++)
            split_table(argv[i], &t[n++]);
        if (!pg_connect(NULL, &C, &err) || !replconn_preflight(C, argv[2], t, n, &err))
            return failed(&err);
        pg_close(C);
        printf("preflight ok\n");
        return 0;
    }
    if (strcmp(cmd, "open") == 0 && argc == 3)
    {
    
        if (!replconn_open(argv[2], &R, &err))
            return failed(&err);
        printf("opened\n");
        replconn_close(R);
        return 0;
    }
    if (strcmp(cmd, "info") == 0 && argc == 4)
    {
                ReplTable t;
        ReplTableInfo info;

        memset(&t, 0, sizeof t);
        snprintf(t.schema, sizeof t.schema, "%s", argv[2]);
        snprintf(t.name, sizeof t.name, "%s", argv[3]);
        if (!pg_connect(NULL, &C, &err) || !replconn_table_info(C, &t, &info, &err))
            return failed(&err);
        printf("replident=%c\n", info.replident);
        for (size_t i = 0; i < info.ncols; i++)
            printf("%s %s key=%d pk=%d\n", info.cols[i], info.types[i], info.key[i], info.pk[i]);
        replconn_table_free(&info);
        pg_close(C);
        return 0;
    }
    if (strcmp(cmd, "drop") == 0 && argc == 3)
    {
    
        if (!replconn_open(NULL, &R, &err) || !replconn_drop_slot(R, argv[2], &err))
            return failed(&err);
        replconn_close(R);
        printf("dropped\n");
        return 0;
    }
    fprintf(stderr, "usage: see the comment at the top of stream_source_helper.c\n");
    return 2;
}
