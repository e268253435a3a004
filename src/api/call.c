/* call: one API request without the HTTP transport — route lookup, role
 * check, JSON body parse, the handler run and the request observed for
 * /metrics. The libmicrohttpd glue (server.c) and the fuzz harness drive
 * requests through it; what handlers share (errors, query arguments, the
 * parent's names, list pages) is request.c's, below the handlers. */
#include "api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The request counted for /metrics under its route's place in the table. */
static void observe(const struct api_route *route, int status, double seconds)
{
    size_t i = (size_t)(route - api_routes);
    if (i < api_nroutes)
        api_metrics_observe(i, route, status, seconds);
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
    *out = (struct api_resp){.status = 200};
    r->body = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (len > 0) {
        json_error_t jerr;
        r->body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!r->body) {
            api_error(out, 400, "malformed JSON body at line %d column %d: %s", jerr.line,
                      jerr.column, jerr.text);
            observe(route, out->status, 0);
            return;
        }
        if (!json_is_object(r->body)) {
            json_decref(r->body);
            r->body = NULL;
            api_error(out, 400, "request body must be a JSON object");
            observe(route, out->status, 0);
            return;
        }
    }
    route->handler(r, out);
    json_decref(r->body);
    r->body = NULL;
    if (!out->body && !out->text)
        out->body = json_object();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    observe(route, out->status,
            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}
