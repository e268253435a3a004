/* server: libmicrohttpd glue — listening sockets, request bodies (1 MiB cap),
 * authentication, route matching and JSON replies. Handlers are in routes.c. */
#include "api/api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct api {
    struct api_config cfg;
    struct MHD_Daemon *unix_d;
    struct MHD_Daemon *tcp_d;
    int unix_fd;
    int tcp_port;
};

/* Which listener a connection came through (the MHD closure). */
struct listener {
    struct api *a;
    int trusted; /* unix socket: the owner of $MTC_HOME */
};
static struct listener unix_listener, tcp_listener;

struct conn_ctx {
    char *body;
    size_t len;
    int too_large;
};

static const struct {
    int http;
    const char *status;
} statuses[] = {
    {400, "INVALID_ARGUMENT"},  {401, "UNAUTHENTICATED"},    {403, "PERMISSION_DENIED"},
    {404, "NOT_FOUND"},         {405, "METHOD_NOT_ALLOWED"}, {409, "ALREADY_EXISTS"},
    {413, "PAYLOAD_TOO_LARGE"}, {500, "INTERNAL"},           {503, "UNAVAILABLE"},
};

int api_error(struct api_resp *out, int http, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *status = "UNKNOWN";
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
        if (statuses[i].http == http)
            status = statuses[i].status;
    /* FAILED_PRECONDITION shares 400 with INVALID_ARGUMENT: callers mark it with a prefix */
    if (http == 400 && strncmp(msg, "precondition: ", 14) == 0) {
        status = "FAILED_PRECONDITION";
        memmove(msg, msg + 14, strlen(msg + 14) + 1);
    }
    json_decref(out->body);
    out->status = http;
    out->body =
        json_pack("{s:{s:i, s:s, s:s}}", "error", "code", http, "message", msg, "status", status);
    return 0;
}

enum api_role api_role_parse(const char *s)
{
    static const char *names[] = {"", "viewer", "editor", "admin"};
    for (int i = 1; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0)
            return (enum api_role)i;
    return ROLE_NONE;
}

const char *api_query(const struct api_req *r, const char *key)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)r->conn, MHD_GET_ARGUMENT_KIND,
                                       key);
}

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

static enum MHD_Result reply_error(struct MHD_Connection *conn, int http, const char *msg)
{
    struct api_resp out = {0, NULL};
    api_error(&out, http, "%s", msg);
    enum MHD_Result rc = reply(conn, out.status, out.body);
    json_decref(out.body);
    return rc;
}

/* Match path against pattern, capturing "*" segments. 1 on match. */
static int match(const char *pattern, const char *path, char cap[4][128])
{
    int ncap = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/')
            return 0;
        p++, s++;
        size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
        if (p[0] == '*') {
            const char *verb = plen > 1 && p[1] == ':' ? p + 1 : NULL; /* ":verb" */
            size_t vlen = verb ? plen - 1 : 0;
            const char *colon = memchr(s, ':', slen);
            size_t body = colon ? (size_t)(colon - s) : slen;
            if (verb) {
                if (!colon || slen - body != vlen || memcmp(colon, verb, vlen) != 0)
                    return 0;
            } else if (colon) {
                return 0;
            }
            if (body == 0 || body >= 128 || ncap >= 4)
                return 0;
            memcpy(cap[ncap], s, body);
            cap[ncap++][body] = '\0';
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen, s += slen;
    }
    return *p == '\0' && *s == '\0';
}

static enum api_role authenticate(struct listener *l, struct MHD_Connection *conn)
{
    if (l->trusted)
        return ROLE_ADMIN;
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return ROLE_NONE;
    char hash[65], role[16];
    mtc_sha256_hex(auth + 7, hash);
    if (store_token_role(l->a->cfg.store, hash, role) < 0)
        return ROLE_NONE;
    return api_role_parse(role);
}

static enum MHD_Result dispatch(struct listener *l, struct MHD_Connection *conn, const char *method,
                                const char *url, struct conn_ctx *ctx)
{
    struct api_req r = {.method = method,
                        .path = url,
                        .conn = conn,
                        .st = l->a->cfg.store,
                        .ctl = l->a->cfg.control};
    struct api_resp out = {200, NULL};
    const struct api_route *route = NULL;
    int path_matched = 0;
    for (size_t i = 0; i < api_nroutes && !route; i++) {
        if (!match(api_routes[i].pattern, url, r.cap))
            continue;
        path_matched = 1;
        if (strcmp(api_routes[i].method, method) == 0)
            route = &api_routes[i];
    }
    enum api_role role = authenticate(l, conn);
    if (role == ROLE_NONE)
        return reply_error(conn, 401, "missing or invalid bearer token");
    if (!route)
        return reply_error(conn, path_matched ? 405 : 404,
                           path_matched ? "method not allowed on this resource"
                                        : "no such resource");
    if (role < route->role)
        return reply_error(conn, 403, "this token's role may not do this");
    if (ctx->len > 0) {
        json_error_t jerr;
        r.body = json_loadb(ctx->body, ctx->len, JSON_REJECT_DUPLICATES, &jerr);
        if (!r.body) {
            char msg[300];
            snprintf(msg, sizeof(msg), "malformed JSON body at line %d column %d: %s", jerr.line,
                     jerr.column, jerr.text);
            return reply_error(conn, 400, msg);
        }
        if (!json_is_object(r.body)) {
            json_decref(r.body);
            return reply_error(conn, 400, "request body must be a JSON object");
        }
    }
    route->handler(&r, &out);
    json_decref(r.body);
    if (!out.body)
        out.body = json_object();
    enum MHD_Result rc = reply(conn, out.status, out.body);
    json_decref(out.body);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct listener *l = cls;
    struct conn_ctx *ctx = *con_cls;
    if (!ctx) {
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > API_MAX_BODY)
            ctx->too_large = 1;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!ctx->too_large && ctx->len + *upload_size <= API_MAX_BODY) {
            char *nb = realloc(ctx->body, ctx->len + *upload_size + 1);
            if (!nb)
                return MHD_NO;
            ctx->body = nb;
            memcpy(ctx->body + ctx->len, upload_data, *upload_size);
            ctx->len += *upload_size;
        } else {
            ctx->too_large = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (ctx->too_large)
        return reply_error(conn, 413, "request body larger than 1 MiB");
    return dispatch(l, conn, method, url, ctx);
}

static void on_done(void *cls, struct MHD_Connection *conn, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    struct conn_ctx *ctx = *con_cls;
    if (ctx) {
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

struct api *api_start(const struct api_config *cfg, mtc_error_t *err)
{
    struct api *a = calloc(1, sizeof(*a));
    if (!a) {
        errprintf(err, "out of memory");
        return NULL;
    }
    a->cfg = *cfg;
    a->unix_fd = -1;
    unsigned threads = cfg->threads > 0 ? (unsigned)cfg->threads : 4;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    unix_listener = (struct listener){a, 1};
    tcp_listener = (struct listener){a, 0};

    if ((a->unix_fd = unix_listen(cfg->socket_path, err)) < 0)
        goto error;
    a->unix_d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &unix_listener,
                                 MHD_OPTION_LISTEN_SOCKET, a->unix_fd, MHD_OPTION_THREAD_POOL_SIZE,
                                 threads, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
    if (!a->unix_d) {
        errprintf(err, "cannot start HTTP server on %s", cfg->socket_path);
        goto error;
    }
    a->unix_fd = -1; /* MHD closes the listening socket it was given */
    if (cfg->listen) {
        struct sockaddr_in sa;
        if (parse_listen(cfg->listen, &sa, err) < 0)
            goto error;
        a->tcp_d = MHD_start_daemon(
            flags, ntohs(sa.sin_port), NULL, NULL, on_request, &tcp_listener, MHD_OPTION_SOCK_ADDR,
            &sa, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
            MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
        if (!a->tcp_d) {
            errprintf(err, "cannot listen on %s: %s", cfg->listen, strerror(errno));
            goto error;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->tcp_d, MHD_DAEMON_INFO_BIND_PORT);
        a->tcp_port = info ? info->port : ntohs(sa.sin_port);
    }
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
    if (a->tcp_d)
        MHD_stop_daemon(a->tcp_d);
    if (a->unix_d)
        MHD_stop_daemon(a->unix_d);
    if (a->unix_fd >= 0)
        close(a->unix_fd);
    if (a->cfg.socket_path)
        unlink(a->cfg.socket_path);
    free(a);
    errno = saved;
}

int api_tcp_port(const struct api *a)
{
    return a ? a->tcp_port : 0;
}
