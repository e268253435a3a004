/* call: one API request without the HTTP transport — route lookup, role
 * check, JSON body parse, query arguments (with the checks every handler
 * file shares: the parent's names, list pages) and google.rpc-style errors.
 * The libmicrohttpd glue (server.c) and the fuzz harness drive requests
 * through it. */
#include "api/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const struct {
    int http;
    const char *status;
} statuses[] = {
    {400, "INVALID_ARGUMENT"},  {401, "UNAUTHENTICATED"},    {403, "PERMISSION_DENIED"},
    {404, "NOT_FOUND"},         {405, "METHOD_NOT_ALLOWED"}, {409, "ALREADY_EXISTS"},
    {413, "PAYLOAD_TOO_LARGE"}, {500, "INTERNAL"},           {501, "UNIMPLEMENTED"},
    {503, "UNAVAILABLE"},
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

static const char *const role_names[] = {"", "node", "registrar", "viewer", "editor", "admin"};

enum api_role api_role_parse(const char *s)
{
    for (int i = ROLE_NODE; i <= ROLE_ADMIN; i++)
        if (s && strcmp(s, role_names[i]) == 0)
            return (enum api_role)i;
    return ROLE_NONE;
}

const char *api_role_name(enum api_role r)
{
    return r >= ROLE_NODE && r <= ROLE_ADMIN ? role_names[r] : "none";
}

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

/* Percent-decode s[0..n) into out (len bytes, NUL-terminated); -1 when it
 * does not fit or is malformed. */
static int url_decode(const char *s, size_t n, char *out, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || hexval((unsigned char)s[i + 1]) < 0 ||
                hexval((unsigned char)s[i + 2]) < 0)
                return -1;
            c = hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (c == 0 || o + 1 >= len)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

const char *api_query(struct api_req *r, const char *key)
{
    if (r->query_get)
        return r->query_get(r->query_ctx, key);
    char k[128];
    for (const char *p = r->query; p && *p;) {
        size_t n = strcspn(p, "&");
        const char *eq = memchr(p, '=', n);
        size_t klen = eq ? (size_t)(eq - p) : n;
        if (url_decode(p, klen, k, sizeof(k)) == 0 && strcmp(k, key) == 0) {
            if (!eq)
                return r->qbuf[0] = '\0', r->qbuf;
            if (url_decode(eq + 1, n - klen - 1, r->qbuf, sizeof(r->qbuf)) == 0)
                return r->qbuf;
            return NULL;
        }
        p += n;
        if (*p == '&')
            p++;
    }
    return NULL;
}

/* Project and location name path segments of every resource route. */
int api_check_parent(struct api_req *r, struct api_resp *out)
{
    if (!mtc_name_valid(r->cap[0], 63))
        return api_error(out, 400, "project \"%s\": must match [a-z][a-z0-9-]{0,62}", r->cap[0]),
               -1;
    if (!mtc_name_valid(r->cap[1], 63))
        return api_error(out, 400, "location \"%s\": must match [a-z][a-z0-9-]{0,62}", r->cap[1]),
               -1;
    return 0;
}

int api_page_args(struct api_req *r, struct api_resp *out, int (*token_valid)(const char *),
                  int *size, char token[128])
{
    *size = 50;
    token[0] = '\0';
    const char *ps = api_query(r, "pageSize");
    if (!ps)
        ps = api_query(r, "page_size");
    if (ps) {
        char *end;
        long v = strtol(ps, &end, 10);
        if (*ps == '\0' || *end || v < 0 || v > 1000)
            return api_error(out, 400, "pageSize: must be an integer from 0 to 1000, got \"%s\"",
                             ps),
                   -1;
        *size = v == 0 ? 50 : (int)v;
    }
    const char *t = api_query(r, "pageToken");
    if (!t)
        t = api_query(r, "page_token");
    if (t && *t && (strlen(t) >= 128 || !token_valid(t)))
        return api_error(out, 400, "pageToken: not a token this API returned"), -1;
    snprintf(token, 128, "%s", t ? t : "");
    return 0;
}

/* Match path against pattern, capturing "*" segments. 1 on match. */
static int match(const char *pattern, const char *path, char cap[API_MAX_CAPS][128])
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
            if (body == 0 || body >= 128 || ncap >= API_MAX_CAPS)
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

const struct api_route *api_route_find(struct api_req *r, int *status)
{
    int path_matched = 0;
    for (size_t i = 0; i < api_nroutes; i++) {
        if (!match(api_routes[i].pattern, r->path, r->cap))
            continue;
        path_matched = 1;
        if (strcmp(api_routes[i].method, r->method) == 0)
            return &api_routes[i];
    }
    *status = path_matched ? 405 : 404;
    return NULL;
}

int api_authorize(const struct api_req *r, const struct api_route *route, struct api_resp *out)
{
    /* node tokens and node routes only meet each other (and admins, where a
     * node route says so) */
    if ((route->flags & API_ROUTE_ADMIN_TOO) && r->who.role == ROLE_ADMIN)
        return 0;
    /* a registrar token meets only the routes that name it (the handler checks
     * its scope) */
    if (r->who.role == ROLE_REGISTRAR) {
        if (route->flags & API_ROUTE_REGISTRAR)
            return 0;
        api_error(out, 403,
                  "a registrar token may only register its run's checkpoint (and read "
                  "that upload and model)");
        return -1;
    }
    if ((route->role == ROLE_NODE) != (r->who.role == ROLE_NODE) || r->who.role < route->role) {
        if (route->role == ROLE_NODE)
            api_error(out, 403, "only a node token may do this (mtc-agent's own)");
        else if (r->who.role == ROLE_NODE)
            api_error(out, 403, "a node token may only report its node's health");
        else
            api_error(out, 403, "this token's role (%s) may not do this; it needs %s",
                      api_role_name(r->who.role), api_role_name(route->role));
        return -1;
    }
    return 0;
}

void api_run(struct api_req *r, const struct api_route *route, const char *body, size_t len,
             struct api_resp *out)
{
    out->status = 200;
    out->body = NULL;
    out->text = NULL;
    out->text_len = 0;
    out->text_type = NULL;
    r->body = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (len > 0) {
        json_error_t jerr;
        r->body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!r->body) {
            api_error(out, 400, "malformed JSON body at line %d column %d: %s", jerr.line,
                      jerr.column, jerr.text);
            api_metrics_observe(route, out->status, 0);
            return;
        }
        if (!json_is_object(r->body)) {
            json_decref(r->body);
            r->body = NULL;
            api_error(out, 400, "request body must be a JSON object");
            api_metrics_observe(route, out->status, 0);
            return;
        }
    }
    route->handler(r, out);
    json_decref(r->body);
    r->body = NULL;
    if (!out->body && !out->text)
        out->body = json_object();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    api_metrics_observe(route, out->status,
                        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}
