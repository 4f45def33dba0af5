/*
 * The metrics and health HTTP endpoint (libmicrohttpd), for --metrics-listen.
 *
 *   GET /metrics   200, the registry in the text exposition format 0.0.4
 *   GET /healthz   200 "ok" while the server runs
 *   GET /readyz    200 "ready", or 503 "not ready: <reason>" (one line) as
 *                  the owner's readiness callback says
 *   other paths    404;  a method other than GET or HEAD: 405 (Allow: GET, HEAD)
 *
 * The server answers on its own thread (libmicrohttpd's internal polling
 * thread); a scrape only copies the registry's values under its mutex for a
 * moment, so the owner's loop never waits on a client.
 *
 * Listen address: "IPV4:PORT" or "[IPV6]:PORT", numeric, port 1-65535, e.g.
 * 127.0.0.1:9187, [::1]:9187; 0.0.0.0:9187 or [::]:9187 for every interface.
 * A missing address (":9187"), a host name, or a bad port is a usage error:
 * the endpoint listens only where it is told.
 */
#ifndef V7FILL_HTTP_METRICS_H
#define V7FILL_HTTP_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "v7fill/err.h"
#include "v7fill/metrics.h"

/* A parsed listen address. */
typedef struct HttpListen
{
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int family;    /* AF_INET or AF_INET6 */
    uint16_t port; /* 1-65535 */
} HttpListen;

/* Parse "127.0.0.1:9187" / "[::1]:9187"; anything else → EC_USAGE naming the
 * text and what is expected. */
V7FILL_MUST_CHECK bool http_listen_parse(const char *text, HttpListen *out, Err *err);

/* Readiness: return true when ready; otherwise false and a short reason in
 * reason (size bytes; control characters are shown as spaces).  Called on
 * the server's thread for each GET /readyz: it must be quick and thread-safe. */
typedef bool (*HttpReadyFn)(void *arg, char *reason, size_t size);

/* A ready-made readiness for http_metrics_start (ready = http_ready_state_cb,
 * ready_arg = the state): the owner's loop sets it when its state changes,
 * the server's thread reads it under its mutex. */
typedef struct HttpReadyState
{
    pthread_mutex_t mu;
    bool ready;
    char reason[256];
} HttpReadyState;

/* Not ready, for reason (e.g. "starting"). */
void http_ready_state_init(HttpReadyState *s, const char *reason);
/* reason is kept when not ready (cut to fit); ignored when ready. */
void http_ready_state_set(HttpReadyState *s, bool ready, const char *reason);
bool http_ready_state_cb(void *arg, char *reason, size_t size);
void http_ready_state_deinit(HttpReadyState *s);

typedef struct HttpMetrics HttpMetrics;

/* Listen on `listen` (parsed as by http_listen_parse) and serve reg (borrowed:
 * it must outlive the server).  ready may be NULL (always ready).  The socket
 * is bound before this returns: a bad address → EC_USAGE; the port in use, an
 * address not on this host, or a privileged port → EC_IO naming the address
 * and the system's reason; the server not starting → EC_INTERNAL. */
V7FILL_MUST_CHECK bool http_metrics_start(const char *listen, Metrics *reg, HttpReadyFn ready, void *ready_arg,
                                          HttpMetrics **out, Err *err);

/* The port listened on. */
uint16_t http_metrics_port(const HttpMetrics *h);

/* Stop serving (waits for the server thread) and free; NULL-safe. */
void http_metrics_stop(HttpMetrics *h);

#endif /* V7FILL_HTTP_METRICS_H */
