/* proxy: requests to an endpoint (…/endpoints/E/v1/completions,
 * chat/completions, models) passed to one of its replicas without holding
 * an HTTP thread. The connection is suspended (libmicrohttpd's
 * suspend/resume) while a worker thread — at most API_MAX_PROXIES at once,
 * past that 503 — sends the body to the replica endpoint_pick chose and
 * collects its answer; the connection is resumed to send the status and
 * headers, then each chunk as it arrives (SSE streams pass through). A
 * replica that fails before its first byte (refused, reset, killed) is
 * marked not ready and the request goes to another (at most 3 tries).
 * Idle libcurl handles are kept per replica (their connections stay open). */
#include "api/internal.h"
#include "api/proxy.h"
#include "endpoint/endpoint.h"

#include <curl/curl.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API_MAX_PROXIES 256
#define TRIES 3

struct api_proxy {
    pthread_mutex_t lock;
    atomic_int refs; /* the connection, the worker, the response */
    atomic_int gone; /* the connection ended */
    struct MHD_Connection *conn;
    struct endpoint_ctl *ec;
    char project[128], location[128], name[128], path[64], method[8];
    char *body;
    size_t len;
    /* the answer */
    int status;
    char ctype[128];
    struct endpoint_pick pick;
    char *buf;
    size_t blen, boff, bcap;
    int headers, done, suspended, queued;
};

static atomic_int nproxies;
static atomic_int stopping;

/* Idle libcurl handles by replica address: a handle keeps its connection
 * open, so the next request to that replica skips the connect. */
#define POOL_MAX 64
static struct {
    char address[80];
    CURL *h;
} pool[POOL_MAX];
static int npool;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static CURL *handle_get(const char *address)
{
    CURL *h = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int i = npool - 1; i >= 0 && !h; i--)
        if (strcmp(pool[i].address, address) == 0) {
            h = pool[i].h;
            pool[i] = pool[--npool];
        }
    pthread_mutex_unlock(&pool_lock);
    if (h)
        curl_easy_reset(h); /* options cleared, the connection kept */
    return h ? h : curl_easy_init();
}

/* Back to the pool after a clean transfer, POOL_PER_REPLICA idle ones a
 * replica at most (an idle connection holds one of the replica's); otherwise
 * closed. */
#define POOL_PER_REPLICA 8
static void handle_put(const char *address, CURL *h, int ok)
{
    pthread_mutex_lock(&pool_lock);
    int same = 0;
    for (int i = 0; i < npool; i++)
        same += strcmp(pool[i].address, address) == 0;
    if (ok && npool < POOL_MAX && same < POOL_PER_REPLICA && !atomic_load(&stopping)) {
        snprintf(pool[npool].address, sizeof(pool[npool].address), "%s", address);
        pool[npool++].h = h;
        h = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (h)
        curl_easy_cleanup(h);
}

static void unref(struct api_proxy *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        pthread_mutex_destroy(&p->lock);
        free(p->body);
        free(p->buf);
        free(p);
    }
}

/* Under p->lock: let a suspended connection go on. */
static void wake(struct api_proxy *p)
{
    if (p->suspended) {
        p->suspended = 0;
        MHD_resume_connection(p->conn);
    }
}

static int append(struct api_proxy *p, const char *d, size_t n)
{
    if (p->blen + n > p->bcap) {
        size_t cap = (p->blen + n) * 2 + 4096;
        char *nb = realloc(p->buf, cap);
        if (!nb)
            return -1;
        p->buf = nb, p->bcap = cap;
    }
    memcpy(p->buf + p->blen, d, n);
    p->blen += n;
    return 0;
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    struct api_proxy *p = arg;
    size_t len = size * n;
    int code;
    if (len > 5 && strncmp(line, "HTTP/", 5) == 0 && sscanf(line, "HTTP/%*s %d", &code) == 1) {
        p->status = code;
    } else if (len > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
        const char *v = line + 13;
        while (*v == ' ')
            v++;
        snprintf(p->ctype, sizeof(p->ctype), "%.*s", (int)strcspn(v, "\r\n"), v);
    } else if ((len == 2 && line[0] == '\r') || (len == 1 && line[0] == '\n')) {
        if (p->status >= 200) {
            pthread_mutex_lock(&p->lock);
            p->headers = 1;
            wake(p);
            pthread_mutex_unlock(&p->lock);
        }
    }
    return len;
}

static size_t on_body(char *d, size_t size, size_t n, void *arg)
{
    struct api_proxy *p = arg;
    pthread_mutex_lock(&p->lock);
    int ok = !atomic_load(&p->gone) && append(p, d, size * n) == 0;
    wake(p);
    pthread_mutex_unlock(&p->lock);
    return ok ? size * n : 0;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)a, (void)b, (void)c, (void)d;
    struct api_proxy *p = arg;
    return atomic_load(&stopping) || atomic_load(&p->gone);
}

/* The answer is mtcd's own google.rpc error (nothing came from a replica). */
static void set_error(struct api_proxy *p, int http, const char *msg)
{
    struct api_resp out = {0};
    api_error(&out, http, "%s", msg);
    char *text = json_dumps(out.body, JSON_COMPACT);
    json_decref(out.body);
    pthread_mutex_lock(&p->lock);
    p->status = http;
    snprintf(p->ctype, sizeof(p->ctype), "application/json");
    p->blen = p->boff = 0;
    if (text)
        append(p, text, strlen(text));
    p->headers = 1;
    pthread_mutex_unlock(&p->lock);
    free(text);
}

static void *worker(void *arg)
{
    struct api_proxy *p = arg;
    char tried[TRIES][16];
    int ntried = 0;
    char why[400] = "";
    int http = 503;
    for (int t = 0; t < TRIES; t++) {
        mtc_error_t err = {""};
        struct endpoint_pick pick;
        if (endpoint_pick(p->ec, p->project, p->location, p->name, tried, ntried, &pick, &err) <
            0) {
            if (t == 0 || !*why) {
                http = errno == ENOENT ? 404 : 503;
                snprintf(why, sizeof(why), "%s", err.text);
            }
            break;
        }
        p->pick = pick;
        CURL *h = handle_get(pick.address);
        if (!h) {
            endpoint_done(p->ec, &pick, 0);
            snprintf(why, sizeof(why), "out of memory");
            break;
        }
        char url[192];
        snprintf(url, sizeof(url), "http://%s%s", pick.address, p->path);
        /* the split chose the model: a JSON body's "model" names what this
         * replica serves (anything else goes as it came: the replica answers) */
        char *send = NULL;
        size_t send_len = p->len;
        json_t *j = p->len ? json_loadb(p->body, p->len, 0, NULL) : NULL;
        if (json_is_object(j)) {
            json_object_set_new(j, "model", json_string(pick.model));
            if ((send = json_dumps(j, JSON_COMPACT)))
                send_len = strlen(send);
        }
        json_decref(j);
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        hdr = curl_slist_append(hdr, "Expect:");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        /* a kept connection idle for longer may have been closed by the
         * replica — mtc-serve answers 408 and shuts one that brings no request
         * within its --request-timeout (10 s) — and that 408 would be read as
         * this request's answer: connect afresh instead */
        curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, (long)ENDPOINT_REPLICA_REUSE_S);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 900L);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        if (strcmp(p->method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, send ? send : p->body ? p->body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)send_len);
        }
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, p);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, p);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
        p->status = 0;
        CURLcode rc = curl_easy_perform(h);
        curl_slist_free_all(hdr);
        handle_put(pick.address, h, rc == CURLE_OK);
        free(send);
        pthread_mutex_lock(&p->lock);
        int started = p->headers;
        pthread_mutex_unlock(&p->lock);
        endpoint_done(p->ec, &pick, rc != CURLE_OK);
        if (rc == CURLE_OK || started || atomic_load(&p->gone) || atomic_load(&stopping)) {
            *why = '\0';
            break;
        }
        /* nothing reached the client: the same request on another replica */
        snprintf(why, sizeof(why), "endpoint %s: replica %s failed: %s", p->name, pick.replica,
                 curl_easy_strerror(rc));
        http = 503;
        snprintf(tried[ntried++], 16, "%s", pick.replica);
    }
    pthread_mutex_lock(&p->lock);
    int started = p->headers;
    pthread_mutex_unlock(&p->lock);
    if (!started)
        set_error(p, http, *why ? why : "endpoint: no replica answered");
    pthread_mutex_lock(&p->lock);
    p->done = 1;
    wake(p);
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_sub(&nproxies, 1);
    unref(p);
    return NULL;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct api_proxy *p = cls;
    pthread_mutex_lock(&p->lock);
    ssize_t n = 0;
    if (p->boff < p->blen) {
        size_t k = p->blen - p->boff < max ? p->blen - p->boff : max;
        memcpy(buf, p->buf + p->boff, k);
        p->boff += k;
        if (p->boff == p->blen)
            p->boff = p->blen = 0;
        n = (ssize_t)k;
    } else if (p->done) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        p->suspended = 1;
        MHD_suspend_connection(p->conn);
    }
    pthread_mutex_unlock(&p->lock);
    return n;
}

static void response_free(void *cls)
{
    unref(cls);
}

static enum MHD_Result reply_json_error(struct MHD_Connection *conn, struct api_resp *out)
{
    char *text = json_dumps(out->body, JSON_COMPACT);
    json_decref(out->body);
    out->body = NULL;
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        text ? strlen(text) : 0, text ? text : "", text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)out->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* Queue the answer: a complete one from a buffer, else a stream. */
static enum MHD_Result queue_answer(struct api_proxy *p)
{
    struct MHD_Response *resp;
    if (p->done) {
        resp = MHD_create_response_from_buffer(p->blen - p->boff, p->buf + p->boff,
                                               MHD_RESPMEM_MUST_COPY);
    } else {
        atomic_fetch_add(&p->refs, 1);
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, p,
                                                 response_free);
    }
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", *p->ctype ? p->ctype : "application/json");
    if (*p->pick.deployed) {
        MHD_add_response_header(resp, "X-Mtc-Deployed-Model", p->pick.deployed);
        MHD_add_response_header(resp, "X-Mtc-Replica", p->pick.replica);
    }
    if (strncmp(p->ctype, "text/event-stream", 17) == 0)
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    p->queued = 1;
    enum MHD_Result rc = MHD_queue_response(p->conn, (unsigned)p->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result api_proxy_request(struct MHD_Connection *conn, struct api_req *r, char *body,
                                  size_t len, struct api_proxy **state)
{
    struct api_proxy *p = *state;
    if (!p) {
        struct api_resp out = {0};
        if (api_check_parent(r, &out) < 0)
            return reply_json_error(conn, &out);
        if (!mtc_name_valid(r->cap[2], 63)) {
            api_error(&out, 400, "endpoint \"%.64s\": must match [a-z][a-z0-9-]{0,62}", r->cap[2]);
            return reply_json_error(conn, &out);
        }
        if (!r->cfg->endpoints) {
            api_error(&out, 503, "this mtcd runs no endpoints controller");
            return reply_json_error(conn, &out);
        }
        if (atomic_fetch_add(&nproxies, 1) >= API_MAX_PROXIES || atomic_load(&stopping)) {
            atomic_fetch_sub(&nproxies, 1);
            api_error(&out, 503, "endpoint %s: too many requests in flight", r->cap[2]);
            return reply_json_error(conn, &out);
        }
        if (!(p = calloc(1, sizeof(*p)))) {
            atomic_fetch_sub(&nproxies, 1);
            return MHD_NO;
        }
        pthread_mutex_init(&p->lock, NULL);
        atomic_init(&p->refs, 2);
        p->conn = conn;
        p->ec = r->cfg->endpoints;
        snprintf(p->project, sizeof(p->project), "%s", r->cap[0]);
        snprintf(p->location, sizeof(p->location), "%s", r->cap[1]);
        snprintf(p->name, sizeof(p->name), "%s", r->cap[2]);
        const char *v1 = strstr(r->path, "/v1/");
        snprintf(p->path, sizeof(p->path), "%s", v1 ? v1 : "/v1/models");
        snprintf(p->method, sizeof(p->method), "%s", r->method);
        p->body = body; /* taken */
        p->len = len;
        *state = p;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        pthread_mutex_lock(&p->lock);
        if (pthread_create(&t, &at, worker, p) != 0) {
            pthread_mutex_unlock(&p->lock);
            pthread_attr_destroy(&at);
            atomic_fetch_sub(&nproxies, 1);
            atomic_fetch_sub(&p->refs, 1);
            api_error(&out, 503, "endpoint %s: cannot start a worker", r->cap[2]);
            return reply_json_error(conn, &out);
        }
        pthread_attr_destroy(&at);
        if (!p->headers) {
            p->suspended = 1;
            MHD_suspend_connection(conn);
            pthread_mutex_unlock(&p->lock);
            return MHD_YES;
        }
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_lock(&p->lock);
    enum MHD_Result rc = MHD_YES;
    if (p->queued) {
        rc = MHD_YES;
    } else if (!p->headers) {
        p->suspended = 1;
        MHD_suspend_connection(conn);
    } else {
        rc = queue_answer(p);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void api_proxy_end(struct api_proxy *p)
{
    if (!p)
        return;
    atomic_store(&p->gone, 1);
    unref(p);
}

void api_proxy_allow(void)
{
    atomic_store(&stopping, 0);
}

void api_proxy_stop(int wait_ms)
{
    atomic_store(&stopping, 1);
    for (int i = 0; i < wait_ms / 10 && atomic_load(&nproxies) > 0; i++)
        usleep(10000);
    pthread_mutex_lock(&pool_lock);
    while (npool > 0)
        curl_easy_cleanup(pool[--npool].h);
    pthread_mutex_unlock(&pool_lock);
}
