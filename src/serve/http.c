/* serve http: mtc-serve's HTTP front — libmicrohttpd with a thread per connection (a
 * request waits for its tokens, a stream is pulled as they come), bounded connections (in
 * all and per client address, refused at accept) and bodies, a deadline for each request
 * (conns.c), a route table, OpenAI-shaped errors, and the engine thread that steps the
 * generation engine while there is work. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "serve/internal.h"

struct body {
    char *buf;
    size_t len;
    int too_big;
};

enum route_kind { R_GET, R_POST };
struct route {
    const char *path;
    enum route_kind method;
    int needs_model; // 503 until the model is loaded
    void (*get)(struct serve *s, struct serve_reply *r);
    void (*post)(struct serve *s, const json_t *body, struct serve_reply *r);
};

static void health(struct serve *s, struct serve_reply *r)
{
    if (!s->ready) {
        serve_error(r, 503, "loading the model");
        return;
    }
    r->status = 200;
    r->body = json_pack("{s:s,s:s}", "status", "ok", "model", s->name);
}

static void metrics(struct serve *s, struct serve_reply *r)
{
    r->status = 200;
    r->body_text = serve_metrics_render(s->mt, s->ready ? s->e : NULL);
    r->content_type = "text/plain; version=0.0.4";
    if (!r->body_text)
        serve_error(r, 500, "out of memory");
}

static const struct route routes[] = {
    {"/health", R_GET, 0, health, NULL},
    {"/metrics", R_GET, 0, metrics, NULL},
    {"/v1/models", R_GET, 1, serve_models, NULL},
    {"/v1/completions", R_POST, 1, NULL, serve_completions},
    {"/v1/chat/completions", R_POST, 1, NULL, serve_chat},
};

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    size_t n = serve_stream_read(cls, buf, max);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_done(void *cls)
{
    serve_stream_free(cls);
}

static enum MHD_Result send_reply(struct serve *s, struct MHD_Connection *conn,
                                  struct serve_reply *r)
{
    struct MHD_Response *resp;
    const char *ctype = "application/json";
    if (r->stream) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_cb, r->stream,
                                                 stream_done);
        ctype = "text/event-stream";
        if (resp)
            MHD_add_response_header(resp, "Cache-Control", "no-cache");
        else
            serve_stream_free(r->stream);
    } else if (r->body_text) {
        resp = MHD_create_response_from_buffer(strlen(r->body_text), r->body_text,
                                               MHD_RESPMEM_MUST_FREE);
        ctype = r->content_type;
        if (!resp)
            free(r->body_text);
    } else {
        char *text = r->body ? json_dumps(r->body, JSON_COMPACT) : NULL;
        json_decref(r->body);
        resp = MHD_create_response_from_buffer(text ? strlen(text) : 0, text ? text : "",
                                               text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp)
            free(text);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype);
    serve_metrics_status(s->mt, r->status);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* The guard's record of a connection (its socket context). */
static struct serve_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct serve *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = i ? serve_conns_open(s->conns, i->connect_fd) : NULL;
    } else {
        serve_conns_close(s->conns, *socket_context);
        *socket_context = NULL;
    }
}

static void count_timeout(void *arg)
{
    serve_metrics_status(((struct serve *)arg)->mt, 408);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    struct serve *s = cls;
    (void)version;
    struct body *b = *con_cls;
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b)
            return MHD_NO;
        const char *cl =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body)
            b->too_big = 1;
        *con_cls = b;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!b->too_big && b->len + *upload_size <= s->cfg.max_body) {
            char *nb = realloc(b->buf, b->len + *upload_size + 1);
            if (nb) {
                memcpy(nb + b->len, upload, *upload_size);
                b->buf = nb;
                b->len += *upload_size;
                b->buf[b->len] = 0;
            } else {
                b->too_big = 1;
            }
        } else {
            b->too_big = 1;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    /* the whole request is here: unless the deadline answered 408 already */
    if (serve_conns_handle(s->conns, conn_of(conn)) < 0)
        return MHD_NO;
    struct serve_reply r = {0};
    const struct route *rt = NULL;
    int path_known = 0;
    int post = !strcmp(method, "POST");
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (!strcmp(url, routes[i].path)) {
            path_known = 1;
            if ((routes[i].method == R_POST) == post &&
                (post || !strcmp(method, "GET") || !strcmp(method, "HEAD")))
                rt = &routes[i];
        }
    if (!path_known) {
        serve_error(&r, 404, "no route %.100s %.200s", method, url);
    } else if (!rt) {
        serve_error(&r, 405, "method %.20s is not allowed on %.200s", method, url);
    } else if (rt->needs_model && !s->ready) {
        serve_error(&r, 503, "the model is still loading");
    } else if (b->too_big) {
        serve_error(&r, 413, "the request body is larger than %zu bytes", s->cfg.max_body);
    } else if (rt->get) {
        rt->get(s, &r);
    } else {
        json_error_t je;
        json_t *body = json_loadb(b->buf ? b->buf : "", b->len, JSON_REJECT_DUPLICATES, &je);
        if (!body)
            serve_error(&r, 400, "the body is not valid JSON: %s (line %d, column %d)", je.text,
                        je.line, je.column);
        else
            rt->post(s, body, &r);
        json_decref(body);
    }
    if (!r.body && !r.body_text && !r.stream)
        serve_error(&r, 500, "out of memory");
    return send_reply(s, conn, &r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct serve *s = cls;
    (void)toe;
    serve_conns_done(s->conns, conn_of(conn)); /* the next request's clock starts */
    struct body *b = *con_cls;
    if (b) {
        free(b->buf);
        free(b);
        *con_cls = NULL;
    }
}

static void *engine_main(void *arg)
{
    struct serve *s = arg;
    mtc_error_t err;
    if (s->cfg.threads > 0) // OpenMP's thread count is per thread: set it where decoding runs
        omp_set_num_threads(s->cfg.threads);
    while (!s->stopping) {
        if (!gen_wait(s->e))
            continue;
        if (gen_step(s->e, &err) < 0)
            log_msg(LOG_ERR, "mtc-serve: decode step failed: %s", err.text);
    }
    return NULL;
}

static int parse_listen(const char *listen, struct sockaddr_in *sa, mtc_error_t *err)
{
    char host[256];
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    char *end;
    errno = EINVAL;
    if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof host)
        return errprintf(err, "--listen %s: want HOST:PORT", listen ? listen : "(none)");
    memcpy(host, listen, colon - listen);
    host[colon - listen] = 0;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 0 || port > 65535)
        return errprintf(err, "--listen %s: port must be 0..65535", listen);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return errprintf(err, "--listen %s: %s is not an IPv4 address", listen, host);
    return 0;
}

/* Served names reach URLs and JSON only, but keep them plain. */
static int name_ok(const char *n)
{
    if (!*n || strlen(n) > 128)
        return 0;
    for (const char *p = n; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') ||
              strchr("._-@:/", *p)))
            return 0;
    return 1;
}

struct serve *serve_create(const struct serve_config *cfg, mtc_error_t *err)
{
    struct sockaddr_in sa;
    if (parse_listen(cfg->listen, &sa, err) < 0)
        return NULL;
    struct serve *s = calloc(1, sizeof *s);
    if (!s) {
        errprintf(err, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    if (s->cfg.max_batch <= 0)
        s->cfg.max_batch = 8;
    if (s->cfg.max_conn <= 0)
        s->cfg.max_conn = 64;
    if (!s->cfg.max_body)
        s->cfg.max_body = 1 << 20;
    if (s->cfg.idle_timeout <= 0)
        s->cfg.idle_timeout = 60;
    if (s->cfg.max_conn_per_ip <= 0)
        s->cfg.max_conn_per_ip = 16;
    if (s->cfg.request_timeout <= 0)
        s->cfg.request_timeout = 10;
    pthread_mutex_init(&s->id_mu, NULL);
    if (cfg->served_name) {
        snprintf(s->name, sizeof s->name, "%s", cfg->served_name);
    } else if (cfg->model) { // the directory's base name
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", cfg->model);
        size_t n = strlen(tmp);
        while (n > 1 && tmp[n - 1] == '/')
            tmp[--n] = 0;
        const char *base = strrchr(tmp, '/');
        snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : tmp);
    }
    if (!name_ok(s->name)) {
        errno = EINVAL;
        errprintf(err, "served name \"%.60s\": 1-128 characters of [A-Za-z0-9._-@:/]; pass "
                       "--served-name",
                  s->name);
        goto error;
    }
    s->mt = serve_metrics_create();
    if (!s->mt) {
        errprintf(err, "out of memory");
        goto error;
    }
    if (!(s->conns = serve_conns_create(s->cfg.request_timeout, count_timeout, s, err)))
        goto error;
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                MHD_USE_ERROR_LOG,
                            0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            /* both caps apply at accept, before a thread is taken */
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_conn,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_conn_per_ip,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.idle_timeout,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 128u, MHD_OPTION_END);
    if (!s->d) {
        errprintf(err, "cannot listen on %s: %s", cfg->listen, strerror(errno));
        goto error;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : ntohs(sa.sin_port);
    return s;
error:
    serve_destroy(s);
    return NULL;
}

int serve_load(struct serve *s, mtc_error_t *err)
{
    if (s->cfg.threads > 0)
        omp_set_num_threads(s->cfg.threads);
    if (serve_load_model(s, err) < 0)
        return -1;
    if (model_decode_set_dtype(s->m, s->cfg.dtype, err) < 0) // before the KV cache: it follows
        return -1;
    int max_seq = model_cfg(s->m)->max_seq;
    s->ctx = s->cfg.ctx > 0 ? s->cfg.ctx : max_seq;
    if (s->ctx > max_seq) {
        errno = EINVAL;
        return errprintf(err, "--ctx %d is longer than the model's %d positions", s->ctx,
                         max_seq);
    }
    s->e = gen_create(s->m, s->cfg.max_batch, s->ctx, err);
    if (!s->e)
        return -1;
    if (pthread_create(&s->engine_thread, NULL, engine_main, s)) {
        errno = EAGAIN;
        return errprintf(err, "cannot start the engine thread");
    }
    s->engine_started = 1;
    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
    return 0;
}

int serve_port(const struct serve *s)
{
    return s->port;
}

const char *serve_name(const struct serve *s)
{
    return s->name;
}

void serve_destroy(struct serve *s)
{
    if (!s)
        return;
    int e = errno;
    s->ready = 0;
    if (s->d) // waits for the connection threads (the engine still runs their requests)
        MHD_stop_daemon(s->d);
    serve_conns_destroy(s->conns);
    if (s->engine_started) {
        s->stopping = 1;
        gen_wake(s->e);
        pthread_join(s->engine_thread, NULL);
    }
    gen_destroy(s->e);
    model_destroy(s->m);
    tok_destroy(s->tk);
    serve_metrics_destroy(s->mt);
    pthread_mutex_destroy(&s->id_mu);
    free(s);
    errno = e;
}
