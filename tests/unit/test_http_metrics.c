/*
 * Integration-level tests of the metrics endpoint (http_metrics.c): a real
 * server on a free loopback port, scraped over a socket with a minimal
 * HTTP/1.0 client written here, every line of /metrics checked against the
 * exposition format by the checker in expo_check.h (itself tested first on
 * broken documents); /healthz, /readyz with its reason, 404, 405; listen
 * address parsing; a port in use; a stalled client not holding up a scrape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "expo_check.h"
#include "v7fill/http_metrics.h"
#include "v7fill/metrics.h"
#include "v7fill/stream_metrics.h"
#include "v7fill/stream_observe.h"

/* ---- a minimal HTTP/1.0 client ---- */

typedef struct Reply
{
    int status;
    char *head; /* status line and headers */
    char *body;
} Reply;

static void
reply_free(Reply *r)
{
    free(r->head);
    free(r->body);
}

static int
connect_to(int family, uint16_t port)
{
    int fd = socket(family, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int rc;
    if (family == AF_INET6)
    {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_loopback};
        rc = connect(fd, (struct sockaddr *) &a, sizeof a);
    }
    else
    {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = connect(fd, (struct sockaddr *) &a, sizeof a);
    }
    if (rc != 0)
        fail_msg("connect to port %u: %s", port, strerror(errno));
    return fd;
}

static Reply
http_request(int family, uint16_t port, const char *method, const char *path)
{
    int fd = connect_to(family, port);
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: test\r\n\r\n", method, path);
    assert_int_equal(send(fd, req, (size_t) n, MSG_NOSIGNAL), n);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;)
    {
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
        ssize_t got = recv(fd, buf + len, cap - len - 1, 0);
        if (got < 0)
            fail_msg("recv: %s", strerror(errno));
        if (got == 0)
            break;
        len += (size_t) got;
    }
    close(fd);
    buf[len] = '\0';
    Reply r = {0};
    char *sep = strstr(buf, "\r\n\r\n");
    assert_non_null(sep);
    r.head = strndup(buf, (size_t) (sep - buf));
    r.body = strdup(sep + 4);
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &r.status), 1);
    free(buf);
    return r;
}

static Reply
http_get(uint16_t port, const char *path)
{
    return http_request(AF_INET, port, "GET", path);
}

/* A loopback port nothing listens on (the kernel's pick, then released). */
static uint16_t
free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *) &a, &alen), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static HttpMetrics *
start_on(uint16_t port, Metrics *m, HttpReadyFn ready, void *arg)
{
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    HttpMetrics *h = NULL;
    Err err = {0};
    if (!http_metrics_start(listen_at, m, ready, arg, &h, &err))
        fail_msg("start on %s: %s", listen_at, err.msg);
    assert_int_equal(http_metrics_port(h), port);
    return h;
}

/* ---- the checker itself must reject what is wrong ---- */

static void
test_checker_rejects(void **state)
{
    (void) state;
    char why[512];
    const char *good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n"
                       "# HELP h H.\n# TYPE h histogram\n"
                       "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 5.5\nh_count 2\n";
    if (!expo_check(good, true, why, sizeof why))
        fail_msg("good text rejected: %s", why);
    const struct
    {
        const char *text;
        const char *why;
    } bad[] = {
        {"# TYPE a gauge\na 1", "newline"},
        {"a 1\n# TYPE a gauge\n", "after its samples"},
        {"# TYPE a gauge\n# TYPE a gauge\na 1\n", "second TYPE"},
        {"# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"2\"} 1\n", "not together"},
        {"# TYPE a gauge\na 1\na 2\n", "twice"},
        {"# TYPE a gauge\na{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 1\n", "twice"},
        {"# TYPE a gauge\na{x=\"1\\t\"} 1\n", "bad escape"},
        {"# TYPE a gauge\na{x=\"1} 1\n", "unterminated"},
        {"# TYPE a gauge\na{x=1} 1\n", "expected"},
        {"# TYPE a gauge\na{1x=\"1\"} 1\n", "label name"},
        {"# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n", "twice"},
        {"# TYPE a gauge\n9a 1\n", "metric name"},
        {"# TYPE a gauge\na{x=\"\xff\"} 1\n", "UTF-8"},
        {"# TYPE a gauge\na{x=\"\xed\xa0\x80\"} 1\n", "UTF-8"},
        {"# HELP a \xc3\n", "UTF-8"},
        {"# TYPE a gauge\na 1.2.3\n", "bad value"},
        {"# TYPE a gauge\na inf\n", "bad value"},
        {"# TYPE a gauge\na\n", "space"},
        {"# TYPE a gauge\na 1 12x\n", "timestamp"},
        {"# TYPE a_total counter\na_total -1\n", "negative"},
        {"# TYPE a blob\na 1\n", "unknown type"},
        {"# HELP a x\\q\n", "escape"},
        {"# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
         "increasing"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "decrease"},
        {"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "+Inf"},
        {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n", "_count differs"},
        {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n", "_sum"},
        {"# TYPE h histogram\nh_bucket 1\n", "le"},
        {"# TYPE h histogram\nh 1\n", "without _bucket"},
        {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\nh_bucket{le=\"5\"} 1\n", "after its +Inf"},
        {"a 1\n", "lacks HELP"}, /* strict */
        {"# HELP a A.\n# TYPE a counter\na 1\n", "_total"}, /* strict */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
        why[0] = '\0';
        if (expo_check(bad[i].text, true, why, sizeof why))
            fail_msg("bad text %zu accepted:\n%s", i, bad[i].text);
        if (strstr(why, bad[i].why) == NULL)
            fail_msg("bad text %zu: \"%s\" does not say \"%s\"", i, why, bad[i].why);
    }
}

/* ---- the server ---- */

/* Every stream metric with values, label values that need escaping. */
static void
fill_stream_metrics(StreamMetrics *sm)
{
    Err err = {0};
    MetricSeries *s;
    const char *ops[] = {"insert", "update", "delete", "truncate"};
    for (size_t i = 0; i < 4; i++)
    {
        assert_true(stream_metrics_series(sm, SM_ROWS_APPLIED, (const char *[]) {"events", ops[i]}, 2, &s, &err));
        metrics_counter_add(s, 10 * (i + 1));
    }
    assert_true(stream_metrics_series(sm, SM_ROWS_APPLIED, (const char *[]) {"we\"ird\\ta\nble", "insert"}, 2,
                                      &s, &err));
    metrics_counter_add(s, 1);
    assert_true(stream_metrics_series(sm, SM_ROWS_APPLIED, (const char *[]) {"latin1_\xe9t\xe9", "insert"}, 2,
                                      &s, &err));
    metrics_counter_add(s, 1);
    assert_true(stream_metrics_series(sm, SM_DUPLICATES, (const char *[]) {"events"}, 1, &s, &err));
    metrics_counter_add(s, 4);
    assert_true(stream_metrics_series(sm, SM_QUARANTINED, (const char *[]) {"events", "no_window"}, 2, &s, &err));
    metrics_counter_add(s, 2);
    metrics_counter_add(metrics_only(sm->fam[SM_SOURCE_TXNS]), 100);
    metrics_counter_add(metrics_only(sm->fam[SM_TARGET_COMMITS]), 7);
    metrics_counter_add(metrics_only(sm->fam[SM_RECEIVED_BYTES]), 123456);
    metrics_gauge_set(metrics_only(sm->fam[SM_APPLY_LAG_BYTES]), 8192);
    metrics_gauge_set(metrics_only(sm->fam[SM_APPLY_LAG_SECONDS]), 0.125);
    metrics_gauge_set(metrics_only(sm->fam[SM_SLOT_RETAINED_WAL]), 16777216);
    assert_true(stream_metrics_set_wal_status(sm, "reserved", &err));
    metrics_gauge_set(metrics_only(sm->fam[SM_SLOT_SAFE_WAL_SIZE]), INFINITY);
    assert_true(stream_metrics_series(sm, SM_INSERT_DELAY, (const char *[]) {"events"}, 1, &s, &err));
    const double delays[] = {0.0005, 0.002, 1.5, 90, 86400 * 40.0, 86400 * 400.0};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++)
        metrics_histogram_observe(s, delays[i]);
    assert_true(stream_metrics_series(sm, SM_LATE_ROWS, (const char *[]) {"events"}, 1, &s, &err));
    metrics_counter_add(s, 1);
    assert_true(stream_metrics_series(sm, SM_NEAR_CUTOFF_ROWS, (const char *[]) {"events"}, 1, &s, &err));
    metrics_counter_add(s, 3);
    assert_true(stream_metrics_series(sm, SM_RECONNECTS, (const char *[]) {"source"}, 1, &s, &err));
    metrics_counter_add(s, 1);
    assert_true(stream_metrics_series(sm, SM_RECONNECTS, (const char *[]) {"target"}, 1, &s, &err));
    metrics_gauge_set(metrics_only(sm->fam[SM_LAST_APPLIED_LSN]), (double) UINT64_C(0x16B374D8));
    metrics_gauge_set(metrics_only(sm->fam[SM_INITIAL_COPY_RUNNING]), 1);
    assert_true(stream_metrics_series(sm, SM_INITIAL_COPY_ROWS, (const char *[]) {"events"}, 1, &s, &err));
    metrics_counter_add(s, 5000);
}

static void
assert_has(const char *text, const char *line)
{
    if (strstr(text, line) == NULL)
        fail_msg("missing \"%s\" in:\n%s", line, text);
}

static void
test_scrape_stream_metrics(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    StreamMetrics sm;
    Err err = {0};
    assert_true(stream_metrics_define(m, &sm, &err));
    uint16_t port = free_port();
    HttpMetrics *h = start_on(port, m, NULL, NULL);

    /* defined but not yet set: still valid */
    Reply r = http_get(port, "/metrics");
    assert_int_equal(r.status, 200);
    char why[512];
    if (!expo_check(r.body, true, why, sizeof why))
        fail_msg("%s\n%s", why, r.body);
    reply_free(&r);

    fill_stream_metrics(&sm);
    r = http_get(port, "/metrics");
    assert_int_equal(r.status, 200);
    assert_has(r.head, "Content-Type: text/plain; version=0.0.4; charset=utf-8");
    if (!expo_check(r.body, true, why, sizeof why))
        fail_msg("%s\n%s", why, r.body);
    for (int i = 0; i < SM_COUNT; i++)
    {
        char line[256];
        snprintf(line, sizeof line, "# TYPE %s ", stream_metric_def((StreamMetric) i)->name);
        assert_has(r.body, line);
    }
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"events\",op=\"truncate\"} 40\n");
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"we\\\"ird\\\\ta\\nble\",op=\"insert\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_apply_lag_seconds 0.125\n");
    assert_has(r.body, "\nv7fill_stream_slot_safe_wal_size_bytes +Inf\n");
    assert_has(r.body, "\nv7fill_stream_slot_wal_status{status=\"reserved\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_bucket{table=\"events\",le=\"0.001\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_bucket{table=\"events\",le=\"31536000\"} 5\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_bucket{table=\"events\",le=\"+Inf\"} 6\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_count{table=\"events\"} 6\n");
    assert_has(r.body, "\nv7fill_stream_last_applied_lsn 380859608\n");
    assert_has(r.body, "\nv7fill_stream_reconnects_total{side=\"target\"} 0\n");
    reply_free(&r);

    /* HEAD: the headers only */
    r = http_request(AF_INET, port, "HEAD", "/metrics");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "");
    reply_free(&r);

    http_metrics_stop(h);
    metrics_free(m);
}

static void
test_health_and_errors(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    HttpReadyState rd;
    http_ready_state_init(&rd, "starting");
    uint16_t port = free_port();
    HttpMetrics *h = start_on(port, m, http_ready_state_cb, &rd);

    Reply r = http_get(port, "/healthz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    reply_free(&r);

    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: starting\n");
    reply_free(&r);

    http_ready_state_set(&rd, true, NULL);
    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ready\n");
    reply_free(&r);

    http_ready_state_set(&rd, false, "source: not connected\nretrying in 5 s");
    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: source: not connected retrying in 5 s\n"); /* one line */
    reply_free(&r);

    r = http_get(port, "/healthz"); /* alive though not ready */
    assert_int_equal(r.status, 200);
    reply_free(&r);

    const char *missing[] = {"/", "/metrics/", "/metricsx", "/health", "/readyz/x"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
    {
        r = http_get(port, missing[i]);
        if (r.status != 404)
            fail_msg("%s: %d, not 404", missing[i], r.status);
        reply_free(&r);
    }
    r = http_get(port, "/metrics?name=x"); /* a query string is not part of the path */
    assert_int_equal(r.status, 200);
    reply_free(&r);

    const char *methods[] = {"POST", "PUT", "DELETE", "OPTIONS"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    {
        r = http_request(AF_INET, port, methods[i], "/metrics");
        if (r.status != 405)
            fail_msg("%s: %d, not 405", methods[i], r.status);
        assert_has(r.head, "Allow: GET, HEAD");
        reply_free(&r);
    }

    http_metrics_stop(h);
    http_ready_state_deinit(&rd);
    /* stopped: the port is free again */
    h = start_on(port, m, NULL, NULL);
    r = http_get(port, "/readyz"); /* no readiness callback: ready */
    assert_int_equal(r.status, 200);
    reply_free(&r);
    http_metrics_stop(h);
    http_metrics_stop(NULL);
    metrics_free(m);
}

static void
test_port_in_use(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    uint16_t port = free_port();
    HttpMetrics *h = start_on(port, m, NULL, NULL);
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    HttpMetrics *h2 = NULL;
    Err err = {0};
    assert_false(http_metrics_start(listen_at, m, NULL, NULL, &h2, &err));
    assert_int_equal(err.code, EC_IO);
    assert_has(err.msg, "could not listen on 127.0.0.1:");
    assert_has(err.msg, "Address already in use");
    assert_has(err.hint, "Another process");
    /* the first server still answers */
    Reply r = http_get(port, "/healthz");
    assert_int_equal(r.status, 200);
    reply_free(&r);
    http_metrics_stop(h);

    /* an address not on this host (unless the system lets anyone bind one) */
    FILE *nonlocal = fopen("/proc/sys/net/ipv4/ip_nonlocal_bind", "r");
    int allowed = 0;
    if (nonlocal != NULL)
    {
        if (fscanf(nonlocal, "%d", &allowed) != 1)
            allowed = 0;
        fclose(nonlocal);
    }
    if (!allowed)
    {
        err_clear(&err);
        assert_false(http_metrics_start("192.0.2.1:9187", m, NULL, NULL, &h2, &err));
        assert_int_equal(err.code, EC_IO);
        assert_has(err.hint, "not one of this host's");
    }
    metrics_free(m);
}

static void
test_listen_parse(void **state)
{
    (void) state;
    const struct
    {
        const char *text;
        int family;
        uint16_t port;
    } good[] = {
        {"127.0.0.1:9187", AF_INET, 9187},
        {"[::1]:9187", AF_INET6, 9187},
        {"0.0.0.0:1", AF_INET, 1},
        {"[::]:65535", AF_INET6, 65535},
        {"[::ffff:127.0.0.1]:80", AF_INET6, 80},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    {
        HttpListen l;
        Err err = {0};
        if (!http_listen_parse(good[i].text, &l, &err))
            fail_msg("%s: %s", good[i].text, err.msg);
        assert_int_equal(l.family, good[i].family);
        assert_int_equal(l.port, good[i].port);
    }
    const struct
    {
        const char *text;
        const char *why;
    } bad[] = {
        {":9187", "no address"},
        {"9187", "no port"},
        {"", "no port"},
        {"127.0.0.1", "no port"},
        {"127.0.0.1:", "1 to 65535"},
        {"127.0.0.1:0", "1 to 65535"},
        {"127.0.0.1:65536", "1 to 65535"},
        {"127.0.0.1:99999999999", "1 to 65535"},
        {"127.0.0.1:80a", "1 to 65535"},
        {"127.0.0.1:-1", "1 to 65535"},
        {"127.0.0.1: 80", "1 to 65535"},
        {"localhost:9187", "not an IPv4 address"},
        {"300.1.1.1:9187", "not an IPv4 address"},
        {"::1:9187", "brackets"},
        {"[::1]9187", "[IPV6]:PORT"},
        {"[::1:9187", "[IPV6]:PORT"},
        {"[]:9187", "not an IPv6"},
        {"[127.0.0.1]:9187", "not an IPv6"},
        {"[::1]:0", "1 to 65535"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
        HttpListen l;
        Err err = {0};
        if (http_listen_parse(bad[i].text, &l, &err))
            fail_msg("\"%s\" accepted", bad[i].text);
        assert_int_equal(err.code, EC_USAGE);
        if (strstr(err.msg, bad[i].why) == NULL)
            fail_msg("\"%s\": \"%s\" does not say \"%s\"", bad[i].text, err.msg, bad[i].why);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i].text);
        assert_has(err.msg, quoted);
        assert_has(err.hint, "127.0.0.1:9187");
    }
    /* http_metrics_start refuses before opening anything */
    Metrics *m = metrics_new();
    HttpMetrics *h = NULL;
    Err err = {0};
    assert_false(http_metrics_start(":9187", m, NULL, NULL, &h, &err));
    assert_int_equal(err.code, EC_USAGE);
    metrics_free(m);
}

static void
test_ipv6(void **state)
{
    (void) state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
    if (probe < 0 || bind(probe, (struct sockaddr *) &a, sizeof a) != 0)
    {
        if (probe >= 0)
            close(probe);
        skip(); /* no IPv6 loopback here */
    }
    socklen_t alen = sizeof a;
    assert_int_equal(getsockname(probe, (struct sockaddr *) &a, &alen), 0);
    close(probe);
    uint16_t port = ntohs(a.sin6_port);
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "[::1]:%u", port);
    Metrics *m = metrics_new();
    HttpMetrics *h = NULL;
    Err err = {0};
    if (!http_metrics_start(listen_at, m, NULL, NULL, &h, &err))
        fail_msg("%s: %s", listen_at, err.msg);
    Reply r = http_request(AF_INET6, port, "GET", "/healthz");
    assert_int_equal(r.status, 200);
    reply_free(&r);
    http_metrics_stop(h);
    metrics_free(m);
}

/* A client that connects and never finishes its request must not hold up
 * another scrape, nor the owner's updates. */
static void
test_stalled_client(void **state)
{
    (void) state;
    Metrics *m = metrics_new();
    MetricFamily *f = NULL;
    Err err = {0};
    assert_true(metrics_define(m, &(MetricDef) {METRIC_COUNTER, "ticks_total", "Ticks."}, &f, &err));
    uint16_t port = free_port();
    HttpMetrics *h = start_on(port, m, NULL, NULL);
    int stalled = connect_to(AF_INET, port);
    assert_int_equal(send(stalled, "GET /metr", 9, MSG_NOSIGNAL), 9);
    metrics_counter_add(metrics_only(f), 41);
    metrics_counter_add(metrics_only(f), 1);
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    Reply r = http_get(port, "/metrics");
    gettimeofday(&t1, NULL);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "\nticks_total 42\n");
    double ms = (double) (t1.tv_sec - t0.tv_sec) * 1e3 + (double) (t1.tv_usec - t0.tv_usec) / 1e3;
    if (ms > 2000)
        fail_msg("the scrape took %.0f ms beside a stalled client", ms);
    reply_free(&r);
    close(stalled);
    http_metrics_stop(h);
    metrics_free(m);
}

/* count_of: occurrences of needle in text */
static size_t
count_of(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A stream of two targets: one HELP and TYPE per family, one sample per target
 * labelled with its table (escaped), the slot's series once; /readyz ready
 * only when both targets are, else the first that is not, named. */
static void
test_observer_targets(void **state)
{
    (void) state;
    const char *tables[] = {"orders_v7", "we\"ird\\t"};
    char listen_at[64];
    uint16_t port = free_port();
    StreamObserver *ob = NULL;
    Err err = {0};
    char why[512];

    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    if (!stream_observer_start(listen_at, tables, 2, &ob, &err))
        fail_msg("start: %s", err.msg);
    StreamObserver *ob2 = stream_observer_target(ob, 1);
    assert_non_null(ob2);
    assert_ptr_equal(stream_observer_target(ob, 0), ob);
    assert_null(stream_observer_target(ob, 2));

    Reply r = http_get(port, "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: orders_v7: starting\n");
    reply_free(&r);
    stream_observer_ready(ob, true, NULL);
    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: we\"ird\\t: starting\n");
    reply_free(&r);
    stream_observer_ready(ob2, true, NULL);
    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 200);
    reply_free(&r);
    stream_observer_ready(ob2, false, "reconnecting to the target: gone");
    r = http_get(port, "/readyz");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "not ready: we\"ird\\t: reconnecting to the target: gone\n");
    reply_free(&r);

    BatchCounts a = {.inserted = 5, .updated = 2}, b = {.inserted = 7, .deleted = 1};
    stream_observer_commit(ob, &a, 100);
    /* delays published by their commit; those of a rolled-back transaction never */
    stream_observer_delay(ob2, 500000, 0);
    stream_observer_delay(ob2, 250000, 0);
    stream_observer_commit(ob2, &b, 200);
    stream_observer_delay(ob2, 2000000, 1 /* DELAY_NEAR_CUTOFF */);
    stream_observer_delay(ob2, 3000000, 2 /* DELAY_EXPIRED */);
    stream_observer_rollback(ob2);
    stream_observer_commit(ob2, &b, 300);
    stream_observer_delay(ob, 1000, 0); /* not committed yet */
    stream_observer_progress(ob, 3, 1000, 10, 0.5);
    stream_observer_progress(ob2, 4, 0, 20, 0);
    stream_observer_copy(ob2, false, 9);
    stream_observer_reconnect(ob2, true);
    stream_observer_reconnect(ob, false);
    SlotWal w = {.exists = true, .retained = 4096, .wal_status = "reserved", .keep_size_mb = 100};
    stream_observer_slot(ob2, "s", &w, 0);

    r = http_get(port, "/metrics");
    assert_int_equal(r.status, 200);
    if (!expo_check(r.body, true, why, sizeof why))
        fail_msg("%s\n%s", why, r.body);
    for (int i = 0; i < SM_COUNT; i++)
    {
        char line[256];
        snprintf(line, sizeof line, "# TYPE %s ", stream_metric_def((StreamMetric) i)->name);
        assert_int_equal(count_of(r.body, line), 1);
        snprintf(line, sizeof line, "# HELP %s ", stream_metric_def((StreamMetric) i)->name);
        assert_int_equal(count_of(r.body, line), 1);
    }
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"insert\"} 5\n");
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"update\"} 2\n");
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"we\\\"ird\\\\t\",op=\"insert\"} 7\n");
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"we\\\"ird\\\\t\",op=\"delete\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_target_commits_total{table=\"orders_v7\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_target_commits_total{table=\"we\\\"ird\\\\t\"} 2\n");
    assert_has(r.body, "\nv7fill_stream_source_transactions_total{table=\"orders_v7\"} 3\n");
    assert_has(r.body, "\nv7fill_stream_source_transactions_total{table=\"we\\\"ird\\\\t\"} 4\n");
    assert_has(r.body, "\nv7fill_stream_apply_lag_bytes{table=\"we\\\"ird\\\\t\"} 20\n");
    assert_has(r.body, "\nv7fill_stream_apply_lag_seconds{table=\"orders_v7\"} 0.5\n");
    assert_has(r.body, "\nv7fill_stream_last_applied_lsn{table=\"orders_v7\"} 100\n");
    assert_has(r.body, "\nv7fill_stream_last_applied_lsn{table=\"we\\\"ird\\\\t\"} 300\n");
    assert_has(r.body, "\nv7fill_stream_initial_copy_running{table=\"we\\\"ird\\\\t\"} 0\n");
    assert_has(r.body, "\nv7fill_stream_initial_copy_rows_total{table=\"we\\\"ird\\\\t\"} 9\n");
    /* the slot's and the source connection's: once, without a table */
    assert_has(r.body, "\nv7fill_stream_received_bytes_total 1000\n");
    assert_has(r.body, "\nv7fill_stream_slot_retained_wal_bytes 4096\n");
    assert_has(r.body, "\nv7fill_stream_slot_wal_status{status=\"reserved\"} 1\n");
    /* reconnects: each target's own connection, the source's once (table "": no label) */
    assert_has(r.body, "\nv7fill_stream_reconnects_total{table=\"orders_v7\",side=\"target\"} 0\n");
    assert_has(r.body, "\nv7fill_stream_reconnects_total{table=\"we\\\"ird\\\\t\",side=\"target\"} 1\n");
    assert_has(r.body, "\nv7fill_stream_reconnects_total{table=\"\",side=\"source\"} 1\n");
    assert_int_equal(count_of(r.body, "\nv7fill_stream_reconnects_total{"), 3);
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_bucket{table=\"we\\\"ird\\\\t\",le=\"0.1\"} 0\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_bucket{table=\"we\\\"ird\\\\t\",le=\"1\"} 2\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_count{table=\"we\\\"ird\\\\t\"} 2\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_sum{table=\"we\\\"ird\\\\t\"} 0.75\n");
    assert_has(r.body, "\nv7fill_stream_near_cutoff_rows_total{table=\"we\\\"ird\\\\t\"} 0\n");
    assert_has(r.body, "\nv7fill_stream_late_rows_total{table=\"we\\\"ird\\\\t\"} 0\n");
    assert_has(r.body, "\nv7fill_stream_insert_delay_seconds_count{table=\"orders_v7\"} 0\n");
    assert_int_equal(count_of(r.body, "\nv7fill_stream_slot_retained_wal_bytes"), 1);
    assert_int_equal(count_of(r.body, "\nv7fill_stream_clock_offset_seconds "), 1);
    reply_free(&r);
    stream_observer_free(ob2); /* not the owner: nothing */
    stream_observer_free(ob);

    /* one target: the families without a table label stay so; no name in /readyz */
    port = free_port();
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    if (!stream_observer_start(listen_at, tables, 1, &ob, &err))
        fail_msg("start: %s", err.msg);
    assert_null(stream_observer_target(ob, 1));
    stream_observer_commit(ob, &a, 100);
    r = http_get(port, "/metrics");
    if (!expo_check(r.body, true, why, sizeof why))
        fail_msg("%s\n%s", why, r.body);
    assert_has(r.body, "\nv7fill_stream_target_commits_total 1\n");
    assert_has(r.body, "\nv7fill_stream_last_applied_lsn 100\n");
    assert_has(r.body, "\nv7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"insert\"} 5\n");
    reply_free(&r);
    r = http_get(port, "/readyz");
    assert_string_equal(r.body, "not ready: starting\n");
    reply_free(&r);
    stream_observer_free(ob);
}

/* The page of a one-target stream, byte for byte as before streams of several
 * targets (and per-target reconnects, delays published at commit) existed:
 * taken from that version with the same calls. */
#define ONE_TARGET_PAGE \
    "# HELP v7fill_stream_rows_applied_total Rows applied to the target table, by operation (a TRUNCATE counts 1).\n" \
    "# TYPE v7fill_stream_rows_applied_total counter\n" \
    "v7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"insert\"} 5\n" \
    "v7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"update\"} 2\n" \
    "v7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"delete\"} 1\n" \
    "v7fill_stream_rows_applied_total{table=\"orders_v7\",op=\"truncate\"} 1\n" \
    "# HELP v7fill_stream_duplicates_total Inserts not applied because the row was already in the target.\n" \
    "# TYPE v7fill_stream_duplicates_total counter\n" \
    "v7fill_stream_duplicates_total{table=\"orders_v7\"} 3\n" \
    "# HELP v7fill_stream_quarantined_rows_total Rows set aside in the quarantine table instead of the target, by reason.\n" \
    "# TYPE v7fill_stream_quarantined_rows_total counter\n" \
    "v7fill_stream_quarantined_rows_total{table=\"orders_v7\",reason=\"rejected\"} 1\n" \
    "v7fill_stream_quarantined_rows_total{table=\"orders_v7\",reason=\"late\"} 2\n" \
    "# HELP v7fill_stream_source_transactions_total Source transactions applied to the target.\n" \
    "# TYPE v7fill_stream_source_transactions_total counter\n" \
    "v7fill_stream_source_transactions_total 3\n" \
    "# HELP v7fill_stream_target_commits_total Transactions committed in the target (each holds one or more source transactions).\n" \
    "# TYPE v7fill_stream_target_commits_total counter\n" \
    "v7fill_stream_target_commits_total 1\n" \
    "# HELP v7fill_stream_received_bytes_total Bytes of replication messages received from the source.\n" \
    "# TYPE v7fill_stream_received_bytes_total counter\n" \
    "v7fill_stream_received_bytes_total 1000\n" \
    "# HELP v7fill_stream_apply_lag_bytes Source end of WAL minus the last applied commit's LSN.\n" \
    "# TYPE v7fill_stream_apply_lag_bytes gauge\n" \
    "v7fill_stream_apply_lag_bytes 10\n" \
    "# HELP v7fill_stream_apply_lag_seconds Now minus the source commit time of the last applied transaction, corrected for the clock offset between the servers; 0 when caught up.\n" \
    "# TYPE v7fill_stream_apply_lag_seconds gauge\n" \
    "v7fill_stream_apply_lag_seconds 0.5\n" \
    "# HELP v7fill_stream_slot_retained_wal_bytes WAL the source keeps for the slot: pg_current_wal_lsn() minus restart_lsn.\n" \
    "# TYPE v7fill_stream_slot_retained_wal_bytes gauge\n" \
    "v7fill_stream_slot_retained_wal_bytes 4096\n" \
    "# HELP v7fill_stream_slot_wal_status The slot's wal_status: 1 for the current status, 0 for the others.\n" \
    "# TYPE v7fill_stream_slot_wal_status gauge\n" \
    "v7fill_stream_slot_wal_status{status=\"reserved\"} 0\n" \
    "v7fill_stream_slot_wal_status{status=\"extended\"} 1\n" \
    "v7fill_stream_slot_wal_status{status=\"unreserved\"} 0\n" \
    "v7fill_stream_slot_wal_status{status=\"lost\"} 0\n" \
    "# HELP v7fill_stream_slot_safe_wal_size_bytes WAL that can still be written before the slot is lost (safe_wal_size); +Inf when max_slot_wal_keep_size is unlimited.\n" \
    "# TYPE v7fill_stream_slot_safe_wal_size_bytes gauge\n" \
    "v7fill_stream_slot_safe_wal_size_bytes 8192\n" \
    "# HELP v7fill_stream_insert_delay_seconds Delay from the time a row's id carries to its insert into the target.\n" \
    "# TYPE v7fill_stream_insert_delay_seconds histogram\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"0.001\"} 0\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"0.01\"} 0\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"0.1\"} 0\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"1\"} 2\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"10\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"60\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"600\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"3600\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"21600\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"86400\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"172800\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"604800\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"1209600\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"2592000\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"5184000\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"7776000\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"15552000\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"31536000\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_bucket{table=\"orders_v7\",le=\"+Inf\"} 3\n" \
    "v7fill_stream_insert_delay_seconds_sum{table=\"orders_v7\"} 2.75\n" \
    "v7fill_stream_insert_delay_seconds_count{table=\"orders_v7\"} 3\n" \
    "# HELP v7fill_stream_late_rows_total Rows whose time window was already past the retention cutoff when they arrived.\n" \
    "# TYPE v7fill_stream_late_rows_total counter\n" \
    "v7fill_stream_late_rows_total{table=\"orders_v7\"} 1\n" \
    "# HELP v7fill_stream_near_cutoff_rows_total Rows whose time window retires within the near-cutoff horizon.\n" \
    "# TYPE v7fill_stream_near_cutoff_rows_total counter\n" \
    "v7fill_stream_near_cutoff_rows_total{table=\"orders_v7\"} 1\n" \
    "# HELP v7fill_stream_reconnects_total Reconnections after a lost connection, by side (source or target).\n" \
    "# TYPE v7fill_stream_reconnects_total counter\n" \
    "v7fill_stream_reconnects_total{side=\"source\"} 2\n" \
    "v7fill_stream_reconnects_total{side=\"target\"} 1\n" \
    "# HELP v7fill_stream_last_applied_lsn End LSN of the last applied source commit, as a number.\n" \
    "# TYPE v7fill_stream_last_applied_lsn gauge\n" \
    "v7fill_stream_last_applied_lsn 380859608\n" \
    "# HELP v7fill_stream_initial_copy_running 1 while the initial copy of the source table runs, else 0.\n" \
    "# TYPE v7fill_stream_initial_copy_running gauge\n" \
    "v7fill_stream_initial_copy_running 0\n" \
    "# HELP v7fill_stream_initial_copy_rows_total Rows copied into the target by the initial copy.\n" \
    "# TYPE v7fill_stream_initial_copy_rows_total counter\n" \
    "v7fill_stream_initial_copy_rows_total{table=\"orders_v7\"} 9\n" \
    "# HELP v7fill_stream_clock_offset_seconds The source server's clock minus the target server's, each read at the middle of a round trip from this host.\n" \
    "# TYPE v7fill_stream_clock_offset_seconds gauge\n" \
    "v7fill_stream_clock_offset_seconds -1.5\n"
static const char one_target_page[] = ONE_TARGET_PAGE;

static void
test_observer_one_target_page(void **state)
{
    (void) state;
    const char *tables[] = {"orders_v7"};
    char listen_at[64];
    uint16_t port = free_port();
    StreamObserver *ob = NULL;
    Err err = {0};
    BatchCounts a = {.inserted = 5, .updated = 2, .deleted = 1, .duplicates = 3, .rejected = 1,
                     .expired = 2, .truncates = 1};
    SlotWal w = {.exists = true, .retained = 4096, .wal_status = "extended", .safe_known = true,
                 .safe_wal_size = 8192, .keep_size_mb = 100};

    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    if (!stream_observer_start(listen_at, tables, 1, &ob, &err))
        fail_msg("start: %s", err.msg);
    stream_observer_ready(ob, true, NULL);
    stream_observer_copy(ob, true, 9);
    stream_observer_delay(ob, 500000, 0);
    stream_observer_delay(ob, 2000000, 1);
    stream_observer_delay(ob, 250000, 2);
    stream_observer_commit(ob, &a, 380859608);
    stream_observer_copy(ob, false, 9);
    stream_observer_progress(ob, 3, 1000, 10, 0.5);
    stream_observer_reconnect(ob, true);
    stream_observer_reconnect(ob, false);
    stream_observer_reconnect(ob, false);
    stream_observer_slot(ob, "s", &w, 0);
    stream_observer_clock(ob, -1500000);
    Reply r = http_get(port, "/metrics");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, one_target_page);
    reply_free(&r);
    stream_observer_free(ob);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_rejects),  cmocka_unit_test(test_scrape_stream_metrics),
        cmocka_unit_test(test_health_and_errors), cmocka_unit_test(test_port_in_use),
        cmocka_unit_test(test_listen_parse),     cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_stalled_client),   cmocka_unit_test(test_observer_targets),
        cmocka_unit_test(test_observer_one_target_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
