/*
 * Metrics and health endpoint over libmicrohttpd.
 *
 * The listening socket is made here (socket, bind, listen) and handed to
 * libmicrohttpd with MHD_OPTION_LISTEN_SOCKET: bind's errno gives a precise
 * error at start (port in use, address not on this host), where
 * MHD_start_daemon would only return NULL.  From then on the socket is
 * libmicrohttpd's: it closes it in MHD_stop_daemon, or when it fails to start.  Its own logging stays off (lower layers never print).
 */
#include "v7fill/http_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "v7fill/mem.h"

struct HttpMetrics
{
    struct MHD_Daemon *daemon;
    Metrics *reg;
    HttpReadyFn ready;
    void *ready_arg;
    uint16_t port;
};

#define LISTEN_HINT "Give a numeric address and a port, e.g. 127.0.0.1:9187 or [::1]:9187 " \
                    "(0.0.0.0:9187 or [::]:9187 for every interface)."

/* parse_port: 1-65535, decimal digits only. */
static bool
parse_port(const char *s, uint16_t *out)
{
    if (*s == '\0' || strlen(s) > 5)
        return false;
    unsigned v = 0;
    for (; *s != '\0'; s++)
    {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (unsigned) (*s - '0');
    }
    if (v == 0 || v > 65535)
        return false;
    *out = (uint16_t) v;
    return true;
}

static bool
listen_error(const char *text, const char *why, Err *err)
{
    char shown[256];
    err_set(err, EC_USAGE, "bad listen address \"%s\": %s", err_printable(text, shown, sizeof shown), why);
    err_hint(err, "%s", LISTEN_HINT);
    return false;
}

bool
http_listen_parse(const char *text, HttpListen *out, Err *err)
{
    memset(out, 0, sizeof *out);
    char host[64];
    const char *port;
    if (text[0] == '[')
    {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return listen_error(text, "expected [IPV6]:PORT", err);
        size_t n = (size_t) (close - text - 1);
        if (n == 0 || n >= sizeof host)
            return listen_error(text, "not an IPv6 address", err);
        memcpy(host, text + 1, n);
        host[n] = '\0';
        port = close + 2;
    }
    else
    {
        const char *colon = strrchr(text, ':');
        if (colon == NULL)
            return listen_error(text, "no port", err);
        if (colon == text)
            return listen_error(text, "no address (the endpoint listens only where it is told)", err);
        if (memchr(text, ':', (size_t) (colon - text)) != NULL)
            return listen_error(text, "an IPv6 address goes in brackets", err);
        size_t n = (size_t) (colon - text);
        if (n >= sizeof host)
            return listen_error(text, "not an IPv4 address", err);
        memcpy(host, text, n);
        host[n] = '\0';
        port = colon + 1;
    }
    if (!parse_port(port, &out->port))
        return listen_error(text, "the port must be a number from 1 to 65535", err);

    if (text[0] == '[')
    {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) &out->addr;
        if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
            return listen_error(text, "not an IPv6 address", err);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(out->port);
        out->family = AF_INET6;
        out->addrlen = sizeof *a6;
    }
    else
    {
        struct sockaddr_in *a4 = (struct sockaddr_in *) &out->addr;
        if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
            return listen_error(text, "not an IPv4 address (host names are not resolved)", err);
        a4->sin_family = AF_INET;
        a4->sin_port = htons(out->port);
        out->family = AF_INET;
        out->addrlen = sizeof *a4;
    }
    return true;
}

void
http_ready_state_init(HttpReadyState *s, const char *reason)
{
    pthread_mutex_init(&s->mu, NULL);
    http_ready_state_set(s, false, reason);
}

void
http_ready_state_set(HttpReadyState *s, bool ready, const char *reason)
{
    pthread_mutex_lock(&s->mu);
    s->ready = ready;
    if (!ready)
        snprintf(s->reason, sizeof s->reason, "%s", reason != NULL ? reason : "");
    pthread_mutex_unlock(&s->mu);
}

bool
http_ready_state_cb(void *arg, char *reason, size_t size)
{
    HttpReadyState *s = arg;
    pthread_mutex_lock(&s->mu);
    bool ready = s->ready;
    if (!ready)
        snprintf(reason, size, "%s", s->reason);
    pthread_mutex_unlock(&s->mu);
    return ready;
}

void
http_ready_state_deinit(HttpReadyState *s)
{
    pthread_mutex_destroy(&s->mu);
}

/* respond: queue a response with a copied body and a content type. */
static enum MHD_Result
respond(struct MHD_Connection *conn, unsigned status, const char *type, char *body, size_t len,
        enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (r == NULL)
    {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result
respond_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    return respond(conn, status, "text/plain; charset=utf-8", (char *) text, strlen(text),
                   MHD_RESPMEM_MUST_COPY);
}

/* readyz: the owner's verdict, the reason kept to one printable line. */
static enum MHD_Result
readyz(const HttpMetrics *h, struct MHD_Connection *conn)
{
    char reason[256] = "";
    if (h->ready == NULL || h->ready(h->ready_arg, reason, sizeof reason))
        return respond_text(conn, MHD_HTTP_OK, "ready\n");
    reason[sizeof reason - 1] = '\0';
    for (char *p = reason; *p != '\0'; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = ' ';
    char line[300];
    snprintf(line, sizeof line, "not ready: %s\n", reason[0] != '\0' ? reason : "no reason given");
    return respond_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, line);
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method, const char *version,
       const char *upload_data, size_t *upload_data_size, void **req_cls)
{
    (void) version;
    (void) upload_data;
    (void) upload_data_size;
    (void) req_cls;
    const HttpMetrics *h = cls;
    bool known = strcmp(url, "/metrics") == 0 || strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0;
    if (!known)
        return respond_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics, /healthz or /readyz\n");
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
    if (strcmp(url, "/healthz") == 0)
        return respond_text(conn, MHD_HTTP_OK, "ok\n");
    if (strcmp(url, "/readyz") == 0)
        return readyz(h, conn);
    size_t len;
    char *body = metrics_render(h->reg, &len);
    return respond(conn, MHD_HTTP_OK, METRICS_CONTENT_TYPE, body, len, MHD_RESPMEM_MUST_FREE);
}

/* open_listener: socket, bind, listen; the errors name the address. */
static bool
open_listener(const char *text, const HttpListen *l, int *fd_out, Err *err)
{
    char shown[256];
    err_printable(text, shown, sizeof shown);
    int fd = socket(l->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return err_errno(err, EC_IO, "could not open a socket for %s", shown);
    int one = 1;
    (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *) &l->addr, l->addrlen) != 0)
    {
        int e = errno;
        close(fd);
        errno = e;
        err_errno(err, EC_IO, "could not listen on %s", shown);
        if (e == EADDRINUSE)
            err_hint(err, "Another process listens on that port; choose another one.");
        else if (e == EADDRNOTAVAIL)
            err_hint(err, "The address is not one of this host's.");
        else if (e == EACCES)
            err_hint(err, "Ports below 1024 need privileges; choose a higher one.");
        return false;
    }
    if (listen(fd, 16) != 0)
    {
        int e = errno;
        close(fd);
        errno = e;
        return err_errno(err, EC_IO, "could not listen on %s", shown);
    }
    *fd_out = fd;
    return true;
}

bool
http_metrics_start(const char *listen_text, Metrics *reg, HttpReadyFn ready, void *ready_arg,
                   HttpMetrics **out, Err *err)
{
    HttpListen l;
    int fd = -1;
    if (!http_listen_parse(listen_text, &l, err) || !open_listener(listen_text, &l, &fd, err))
        return false;
    HttpMetrics *h = xcalloc(1, sizeof *h);
    h->reg = reg;
    h->ready = ready;
    h->ready_arg = ready_arg;
    h->port = l.port;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (l.family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned) 32, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned) 10, MHD_OPTION_END);
    if (h->daemon == NULL)
    {
        /* not closed here: libmicrohttpd closes a given listen socket when it
         * fails to start (seen with 0.9.75), and a second close could close a
         * descriptor another thread has opened since */
        free(h);
        char shown[256];
        return err_set(err, EC_INTERNAL, "could not start the HTTP server on %s",
                       err_printable(listen_text, shown, sizeof shown));
    }
    *out = h;
    return true;
}

uint16_t
http_metrics_port(const HttpMetrics *h)
{
    return h->port;
}

void
http_metrics_stop(HttpMetrics *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
