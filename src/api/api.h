/* api: mtcd's HTTP/JSON server — the modelDevelopmentClusters (with their
 * trainingJobs) and datasets resources, operations, tokens and /healthz — on a unix socket (trusted, mode 0600)
 * and optionally on TCP, where every request needs a bearer token. */
#ifndef MTC_API_H
#define MTC_API_H

#include "common/common.h"
#include "control/control.h"
#include "store/store.h"

struct endpoint_ctl;

#define API_MAX_BODY (1024 * 1024)
/* Request bodies buffered at once, over all connections: past it → 503. */
#define API_MAX_INFLIGHT (64 * 1024 * 1024)

struct api_config {
    const char *socket_path; /* unix socket to create (required) */
    const char *listen;      /* "HOST:PORT" for TCP, or NULL */
    int threads;             /* HTTP worker threads (0 → 4) */
    /* TCP limits (0 → the defaults in server.c): connections at once, per
     * client address, and seconds a connection may stay idle */
    int max_connections, max_per_ip, idle_timeout_s;
    const char *tls_cert, *tls_key; /* PEM files: serve TCP over TLS (both or neither) */
    /* NVML libraries a spec's healthPolicy.nvmlLibrary may name (NULL-terminated,
     * may be NULL): mtcd's own configuration, never a client's choice */
    const char *const *nvml_libraries;
    /* mtcd's home: training jobs' experiments go under <home>/experiments
     * unless the cluster's spec names an experimentRoot */
    const char *home;
    struct store *store;     /* not owned */
    struct control *control; /* not owned */
    struct provider *provider; /* not owned: what a handler asks of a cluster's machines */
    struct endpoint_ctl *endpoints; /* not owned; NULL: no endpoints */
    int monitor_ms; /* how often the job monitor follows unfinished jobs (0: 5000) */
    struct backup_sched *backup; /* mtcd's periodic backups (not owned; NULL: none) */
    /* files from outside the home a backup holds too (mtcd's TLS files;
     * NULL-terminated, may be NULL) */
    const char *const *backup_extra;
    int bound_port; /* set by api_start: the TCP port bound (0: none) */
};

struct api;
struct api *api_start(const struct api_config *cfg, mtc_error_t *err);
void api_stop(struct api *a);
/* The TCP port actually bound (useful with port 0), or 0. */
int api_tcp_port(const struct api *a);

/* Roles. viewer < editor < admin each may do what the one before may; a node
 * token (ROLE_NODE) may only report the health of its own node, and nothing
 * else accepts a health report; a registrar token (ROLE_REGISTRAR) may only
 * register one run's checkpoint as one model (registrar.c). docs/api.md
 * lists what each role may do. */
enum api_role { ROLE_NONE = 0, ROLE_NODE, ROLE_REGISTRAR, ROLE_VIEWER, ROLE_EDITOR, ROLE_ADMIN };
/* "node", "registrar", "viewer", "editor", "admin" → the role; anything else
 * ROLE_NONE. */
enum api_role api_role_parse(const char *s);
const char *api_role_name(enum api_role r);

/* Who sent a request: the unix socket's owner (admin) or a token's holder. */
struct api_principal {
    enum api_role role;
    char cluster[16]; /* ROLE_NODE: the cluster and node it speaks for */
    char node[64];
    char scope[2048]; /* ROLE_REGISTRAR: what it may register (JSON, registrar.c) */
    char user[33];    /* the Unix user its training jobs run as ("": none) */
};

#define API_MAX_CAPS 5 /* …/clusters/C/accounts/A/users/U */
/* What a route handler gets and fills (the route table: routes.c). */
struct api_req {
    const char *method;
    const char *path;
    char cap[API_MAX_CAPS][128]; /* captured path segments, in order */
    json_t *body;     /* parsed request body or NULL */
    /* query arguments: looked up by the transport (server.c), else parsed
     * from the raw query string ("a=1&b=2", no '?'; may be NULL) */
    const char *(*query_get)(void *ctx, const char *key);
    void *query_ctx;
    const char *query;
    char qbuf[512]; /* api_query's decoded value from query */
    struct api_principal who;
    const struct api_config *cfg;
    struct store *st;
    struct control *ctl;
    struct provider *prov;
};
struct api_resp {
    int status;
    json_t *body;
    /* a plain-text reply instead of body (malloc'd, the transport frees it):
     * /metrics' Prometheus exposition text, or a kept view's JSON */
    char *text;
    size_t text_len;
    const char *text_type; /* its Content-Type (static); NULL: Prometheus text */
    /* a file instead (a backup): file_len bytes of file_fd from offset 0,
     * Content-Type text_type; the transport closes it */
    int has_file, file_fd;
    uint64_t file_len;
};
/* Query argument (percent-decoded) or NULL. Valid until the next call on r. */
const char *api_query(struct api_req *r, const char *key);
/* Fill a google.rpc-style error; returns 0 so handlers can `return api_error(...)`. */
int api_error(struct api_resp *out, int http, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* api_route flags */
#define API_ROUTE_PROXY 1 /* routed to an endpoint's replica by the HTTP server (proxy.c),
                           * the body passed through unparsed */
#define API_ROUTE_ADMIN_TOO 2 /* a ROLE_NODE route an admin may use too (:powerNodes) */
#define API_ROUTE_REGISTRAR                                                                        \
    4 /* a registrar token may use it too; the handler checks its                                  \
       * scope (api_registrar_*) */

struct api_route {
    const char *method;
    const char *pattern; /* segments; "*" captures one, "*:verb" one with a verb suffix */
    enum api_role role;  /* the least role; ROLE_NODE: node tokens only */
    int (*handler)(struct api_req *r, struct api_resp *out);
    unsigned flags; /* API_ROUTE_* */
};
extern const struct api_route api_routes[];
extern const size_t api_nroutes;

/* JSON views (views.c) of what the store holds; each returns a new reference.
 * A cluster resource (events_for: with clusterEvents, the last 100, as that
 * caller sees them; NULL: none), an operation, the last limit events of a
 * cluster (who: the caller — an event about a training job's run shows its
 * message to the job's owners, its brief to others; NULL: every message),
 * the live tokens. */
json_t *api_cluster_json(struct store *st, struct provider *prov, const struct store_cluster *cl,
                         const struct api_principal *events_for);
json_t *api_op_json(struct store *st, struct provider *prov, const struct store_op *op);
json_t *api_events_json(struct store *st, const char *cluster_id, int limit,
                        const struct api_principal *who);
/* Whether who may read the run of a training job owned by owner (the Unix
 * user it runs as, "" for mtcd's own) — its log, metrics, and what events
 * quote of them — and act on it: an admin, any job's; a token bound to a
 * user, that user's jobs; an unbound token, mtcd's own jobs, no user's
 * (docs/api.md, "Jobs have owners"). */
int api_owner_sees(const struct api_principal *who, const char *owner);
json_t *api_tokens_json(struct store *st);
/* The nodeState a node shows: UPDATING while a remediation works on it, ERROR
 * once one gave up (FAILED), else state (a QUEUED node waits in service). */
const char *api_node_state(const char *state, const char *remediation);

/* Before the API starts: rewrite every model's refs file from the store and
 * sweep what an interrupted registration left under <home>/models
 * (registry_sweep). 0, or -1 (logged; the registry still works). */
int api_models_recover(struct store *st, const char *home);

/* The request pipeline without the HTTP transport (server.c, the fuzz harness).
 * api_route_find: the route for method+path, its captures into r->cap; NULL
 * with *status 404 (no such path) or 405 (path without this method).
 * api_authorize: 0 when r->who may use route, else fills out (403) and -1.
 * api_run: parse body[0..len) (len 0: none) as a JSON object and run the
 * route's handler; out->body is always set (caller json_decref's). */
const struct api_route *api_route_find(struct api_req *r, int *status);
int api_authorize(const struct api_req *r, const struct api_route *route, struct api_resp *out);
void api_run(struct api_req *r, const struct api_route *route, const char *body, size_t len,
             struct api_resp *out);

#endif
