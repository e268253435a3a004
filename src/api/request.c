/* request: what every handler shares about its request — google.rpc-style
 * errors, role names, query arguments (percent-decoded), the checks of the
 * parent's names and of list pages. Calls nothing of api's above it. */
#include "api/internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
