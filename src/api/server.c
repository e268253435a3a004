/* server: libmicrohttpd glue — listening sockets (unix, TCP, optional TLS),
 * connection limits, authentication on a request's first callback (before any
 * body is buffered), body buffering under a per-request and a global cap, and
 * JSON replies. The request pipeline is call.c; the routes are routes.c. */
#include "api/api.h"
#include "api/internal.h"
#include "api/console.h"
#include "api/proxy.h"
#include "jobs/jobs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* TCP defaults: enough for a CLI, agents and a console; an idle connection
 * is closed after DEF_IDLE_S so idle sockets cannot pin the limit. */
#define DEF_MAX_CONNECTIONS 512
#define DEF_MAX_PER_IP 64
#define DEF_IDLE_S 15
#define UNIX_IDLE_S 60

struct api {
    struct api_config cfg;
    struct MHD_Daemon *unix_d;
    struct MHD_Daemon *tcp_d;
    int unix_fd;
    int tcp_port;
    char *tls_cert, *tls_key; /* PEM text (MHD keeps pointers to them) */
    atomic_size_t inflight;   /* body bytes buffered now, all connections */
    struct jobs_monitor *monitor; /* the training job monitor (jobs/monitor.c) */
};

/* Which listener a connection came through (the MHD closure). */
struct listener {
    struct api *a;
    int trusted; /* unix socket: the owner of $MTC_HOME */
};
static struct listener unix_listener, tcp_listener;

/* One request's state across libmicrohttpd's callbacks. */
struct conn_ctx {
    struct api_req req;
    const struct api_route *route;
    char *body;
    size_t len;
    size_t reserved; /* bytes counted in api.inflight */
    int too_large, busy;
    struct api_proxy *proxy; /* a routed request's (API_ROUTE_PROXY) */
};

static enum MHD_Result reply(struct MHD_Connection *conn, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    size_t len = text ? strlen(text) : 0;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, text ? text : "", MHD_RESPMEM_MUST_FREE);
    if (!text)
        resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, int http, const char *msg);
static enum MHD_Result reply_resp(struct MHD_Connection *conn, struct api_resp *out)
{
    if (out->has_file) { /* a backup */
        struct MHD_Response *resp = MHD_create_response_from_fd64(out->file_len, out->file_fd);
        out->has_file = 0;
        if (!resp) {
            close(out->file_fd);
            return reply_error(conn, 500, "out of memory");
        }
        MHD_add_response_header(resp, "Content-Type",
                                out->text_type ? out->text_type : "application/octet-stream");
        enum MHD_Result rc = MHD_queue_response(conn, (unsigned)out->status, resp);
        MHD_destroy_response(resp);
        json_decref(out->body);
        out->body = NULL;
        return rc;
    }
    if (out->text) { /* /metrics, a kept view */
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(out->text_len, out->text, MHD_RESPMEM_MUST_FREE);
        out->text = NULL;
        MHD_add_response_header(resp, "Content-Type",
                                out->text_type ? out->text_type
                                               : "text/plain; version=0.0.4; charset=utf-8");
        enum MHD_Result rc = MHD_queue_response(conn, (unsigned)out->status, resp);
        MHD_destroy_response(resp);
        json_decref(out->body);
        out->body = NULL;
        return rc;
    }
    enum MHD_Result rc = reply(conn, out->status, out->body);
    json_decref(out->body);
    out->body = NULL;
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, int http, const char *msg)
{
    struct api_resp out = {0};
    api_error(&out, http, "%s", msg);
    return reply_resp(conn, &out);
}

/* The unix socket's peer is the owner of $MTC_HOME (mode 0600): admin, unless
 * it presents a token (an agent's node token). Over TCP a token is required. */
static int authenticate(struct listener *l, struct MHD_Connection *conn, const char *method,
                        struct api_principal *who, const char **why)
{
    memset(who, 0, sizeof(*who));
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth && l->trusted) {
        who->role = ROLE_ADMIN;
        return 0;
    }
    if (!auth) { /* the web console's session cookie (console.c) */
        int rc = api_console_principal(conn, l->a->cfg.store, method, who, why);
        if (rc != 0)
            return rc > 0 ? 0 : -1;
    }
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return -1;
    char hash[65];
    struct store_principal p;
    mtc_sha256_hex(auth + 7, hash);
    if (store_token_lookup(l->a->cfg.store, hash, &p) < 0)
        return -1;
    who->role = api_role_parse(p.role);
    snprintf(who->cluster, sizeof(who->cluster), "%s", p.cluster);
    snprintf(who->node, sizeof(who->node), "%s", p.node);
    snprintf(who->scope, sizeof(who->scope), "%s", p.scope);
    snprintf(who->user, sizeof(who->user), "%s", p.user);
    return who->role == ROLE_NONE ? -1 : 0;
}

/* The first callback of a request: who is asking, for which route — all
 * decided from the headers, so an unauthenticated or unauthorized request is
 * answered before a byte of its body is read. */
static enum MHD_Result begin(struct listener *l, struct MHD_Connection *conn, const char *url,
                             const char *method, struct conn_ctx *ctx)
{
    struct api_req *r = &ctx->req;
    r->method = method;
    r->path = url;
    r->cfg = &l->a->cfg;
    r->st = l->a->cfg.store;
    r->ctl = l->a->cfg.control;
    r->prov = l->a->cfg.provider;
    if (!l->trusted && api_console_owns(url))
        return api_console_handle(conn, url, method, r->st, l->a->tls_cert != NULL);
    const char *why = "missing or invalid bearer token";
    if (authenticate(l, conn, method, &r->who, &why) < 0)
        return reply_error(conn, strstr(why, "header") ? 403 : 401, why);
    int status = 404;
    ctx->route = api_route_find(r, &status);
    if (!ctx->route)
        return reply_error(conn, status,
                           status == 405 ? "method not allowed on this resource"
                                         : "no such resource");
    struct api_resp out = {0};
    if (api_authorize(r, ctx->route, &out) < 0)
        return reply_resp(conn, &out);
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > API_MAX_BODY)
        return reply_error(conn, 413, "request body larger than 1 MiB");
    return MHD_YES;
}

/* Buffer one chunk of the body, counting it against the global cap. */
static void take_chunk(struct api *a, struct conn_ctx *ctx, const char *data, size_t n)
{
    if (ctx->too_large || ctx->busy)
        return;
    if (ctx->len + n > API_MAX_BODY) {
        ctx->too_large = 1;
        return;
    }
    size_t before = atomic_fetch_add(&a->inflight, n);
    ctx->reserved += n;
    char *nb = before + n <= API_MAX_INFLIGHT ? realloc(ctx->body, ctx->len + n + 1) : NULL;
    if (!nb) {
        ctx->busy = 1;
        return;
    }
    ctx->body = nb;
    memcpy(ctx->body + ctx->len, data, n);
    ctx->len += n;
}

static const char *query_get(void *conn, const char *key)
{
    return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct listener *l = cls;
    struct conn_ctx *ctx = *con_cls;
    if (!ctx) {
        if (!(ctx = calloc(1, sizeof(*ctx))))
            return MHD_NO;
        *con_cls = ctx;
        return begin(l, conn, url, method, ctx);
    }
    if (*upload_size > 0) {
        take_chunk(l->a, ctx, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (ctx->too_large)
        return reply_error(conn, 413, "request body larger than 1 MiB");
    if (ctx->busy)
        return reply_error(conn, 503, "server busy: too many request bodies in flight");
    ctx->req.query_get = query_get;
    ctx->req.query_ctx = conn;
    if (ctx->route->flags & API_ROUTE_PROXY) {
        char *body = ctx->proxy ? NULL : ctx->body;
        if (!ctx->proxy)
            ctx->body = NULL; /* the proxy's now */
        return api_proxy_request(conn, &ctx->req, body, body ? ctx->len : 0, &ctx->proxy);
    }
    struct api_resp out;
    api_run(&ctx->req, ctx->route, ctx->body, ctx->len, &out);
    return reply_resp(conn, &out);
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)conn, (void)toe;
    struct listener *l = cls;
    struct conn_ctx *ctx = *con_cls;
    if (ctx) {
        atomic_fetch_sub(&l->a->inflight, ctx->reserved);
        api_proxy_end(ctx->proxy);
        free(ctx->body);
        free(ctx);
        *con_cls = NULL;
    }
}

static int unix_listen(const char *path, mtc_error_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return errprintf(err, "socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errprintf(err, "socket: %s", strerror(errno));
    unlink(path);
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0 || chmod(path, 0600) < 0 || listen(fd, 128) < 0) {
        errprintf(err, "cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int parse_listen(const char *spec, struct sockaddr_in *sa, mtc_error_t *err)
{
    char host[128];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
        return errprintf(err, "--listen: expected HOST:PORT, got \"%s\"", spec);
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return errprintf(err, "--listen: bad port in \"%s\"", spec);
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return errprintf(err, "--listen: \"%s\" is not an IPv4 address", host);
    return 0;
}

static int start_tcp(struct api *a, unsigned flags, unsigned threads, mtc_error_t *err)
{
    const struct api_config *cfg = &a->cfg;
    struct sockaddr_in sa;
    if (parse_listen(cfg->listen, &sa, err) < 0)
        return -1;
    if (!cfg->tls_cert != !cfg->tls_key)
        return errprintf(err, "--tls-cert and --tls-key go together");
    if (cfg->tls_cert) {
        if (!(a->tls_cert = mtc_read_file(cfg->tls_cert, NULL)))
            return errprintf(err, "--tls-cert %s: %s", cfg->tls_cert, strerror(errno));
        if (!(a->tls_key = mtc_read_file(cfg->tls_key, NULL)))
            return errprintf(err, "--tls-key %s: %s", cfg->tls_key, strerror(errno));
        flags |= MHD_USE_TLS;
    }
    unsigned max_conn =
        cfg->max_connections > 0 ? (unsigned)cfg->max_connections : DEF_MAX_CONNECTIONS;
    unsigned per_ip = cfg->max_per_ip > 0 ? (unsigned)cfg->max_per_ip : DEF_MAX_PER_IP;
    unsigned idle = cfg->idle_timeout_s > 0 ? (unsigned)cfg->idle_timeout_s : DEF_IDLE_S;
    /* TLS options last: MHD rejects them on a daemon without MHD_USE_TLS */
    a->tcp_d = MHD_start_daemon(
        flags, ntohs(sa.sin_port), NULL, NULL, on_request, &tcp_listener, MHD_OPTION_SOCK_ADDR, &sa,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED, on_done, &tcp_listener,
        MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip, MHD_OPTION_LISTEN_BACKLOG_SIZE, 256u,
        a->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, a->tls_cert,
        MHD_OPTION_HTTPS_MEM_KEY, a->tls_key, MHD_OPTION_END);
    if (!a->tcp_d)
        return errprintf(err, "cannot listen on %s%s: %s", cfg->listen,
                         a->tls_cert ? " with TLS (check the certificate and key)" : "",
                         strerror(errno));
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->tcp_d, MHD_DAEMON_INFO_BIND_PORT);
    a->tcp_port = info ? info->port : ntohs(sa.sin_port);
    a->cfg.bound_port = a->tcp_port;
    return 0;
}

struct api *api_start(const struct api_config *cfg, mtc_error_t *err)
{
    struct api *a = calloc(1, sizeof(*a));
    if (!a) {
        errprintf(err, "out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->unix_fd = -1;
    api_proxy_allow();
    unsigned threads = cfg->threads > 0 ? (unsigned)cfg->threads : 4;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                     MHD_ALLOW_SUSPEND_RESUME; /* the endpoint proxy's */
    unix_listener = (struct listener){a, 1};
    tcp_listener = (struct listener){a, 0};

    if ((a->unix_fd = unix_listen(cfg->socket_path, err)) < 0)
        goto error;
    a->unix_d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &unix_listener, MHD_OPTION_LISTEN_SOCKET, a->unix_fd,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED, on_done, &unix_listener,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)UNIX_IDLE_S, MHD_OPTION_END);
    if (!a->unix_d) {
        errprintf(err, "cannot start HTTP server on %s", cfg->socket_path);
        goto error;
    }
    a->unix_fd = -1; /* MHD closes the listening socket it was given */
    if (cfg->listen && start_tcp(a, flags, threads, err) < 0)
        goto error;
    struct jobs_ops ops;
    control_jobs_ops(cfg->control, &ops);
    if (cfg->store && !(a->monitor = jobs_monitor_start(cfg->store, &ops, cfg->monitor_ms, err)))
        goto error;
    return a;
error:
    api_stop(a);
    return NULL;
}

void api_stop(struct api *a)
{
    if (!a)
        return;
    int saved = errno;
    jobs_monitor_stop(a->monitor);
    api_proxy_stop(5000); /* resumes every suspended connection before MHD stops */
    if (a->tcp_d)
        MHD_stop_daemon(a->tcp_d);
    if (a->unix_d)
        MHD_stop_daemon(a->unix_d);
    api_view_forget(a->cfg.store); /* no request runs now */
    if (a->unix_fd >= 0)
        close(a->unix_fd);
    if (a->cfg.socket_path)
        unlink(a->cfg.socket_path);
    free(a->tls_cert);
    free(a->tls_key);
    free(a);
    errno = saved;
}

int api_tcp_port(const struct api *a)
{
    return a ? a->tcp_port : 0;
}
