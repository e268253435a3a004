/* api: mtcd's HTTP/JSON server — the modelDevelopmentClusters resource,
 * operations, tokens and /healthz — on a unix socket (trusted, mode 0600)
 * and optionally on TCP, where every request needs a bearer token. */
#ifndef MTC_API_H
#define MTC_API_H

#include "common/common.h"
#include "control/control.h"
#include "store/store.h"

#define API_MAX_BODY (1024 * 1024)

struct api_config {
    const char *socket_path; /* unix socket to create (required) */
    const char *listen;      /* "HOST:PORT" for TCP, or NULL */
    int threads;             /* HTTP worker threads (0 → 4) */
    struct store *store;     /* not owned */
    struct control *control; /* not owned */
};

struct api;
struct api *api_start(const struct api_config *cfg, mtc_error_t *err);
void api_stop(struct api *a);
/* The TCP port actually bound (useful with port 0), or 0. */
int api_tcp_port(const struct api *a);

/* Roles, weakest first. */
enum api_role { ROLE_NONE = 0, ROLE_VIEWER, ROLE_EDITOR, ROLE_ADMIN };
enum api_role api_role_parse(const char *s);

/* What a route handler gets and fills (routes.c). */
struct api_req {
    const char *method;
    const char *path;
    char cap[4][128]; /* captured path segments, in order */
    json_t *body;     /* parsed request body or NULL */
    void *conn;       /* struct MHD_Connection*, for query arguments */
    struct store *st;
    struct control *ctl;
};
struct api_resp {
    int status;
    json_t *body;
};
/* Query argument or NULL. */
const char *api_query(const struct api_req *r, const char *key);
/* Fill a google.rpc-style error; returns 0 so handlers can `return api_error(...)`. */
int api_error(struct api_resp *out, int http, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct api_route {
    const char *method;
    const char *pattern; /* segments; "*" captures one, "*:verb" one with a verb suffix */
    enum api_role role;
    int (*handler)(struct api_req *r, struct api_resp *out);
};
extern const struct api_route api_routes[];
extern const size_t api_nroutes;

#endif
