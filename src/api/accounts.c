/* accounts: a cluster's accounts and their users (issue 31, point 2) —
 * …/modelDevelopmentClusters/C/accounts[/A[/users[/U]]] mapped onto Slurm's
 * accounting database through sacctmgr (slurm/acct.c). The cluster must
 * have accounting enabled; changing accounts and users is an admin's. An
 * account: {name, description, parent, fairshare, limits {maxNodes, maxGpus,
 * maxRunningJobs, maxWall}, qos [...], users [...]}. A limit larger than the
 * cluster is refused; an account with jobs is not deleted. */
#include "api/internal.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int name_ok(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    return slurm_acct_name_valid(json_string_value(*v))
               ? 0
               : schema_error(err, path, "must match [a-z][a-z0-9_-]{0,31}");
}

static int wall_ok(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *t = json_string_value(*v);
    return *t && strspn(t, "0123456789:-") == strlen(t)
               ? 0
               : schema_error(err, path, "\"%.40s\" is not a Slurm time (D-HH:MM:SS)", t);
}

static const struct schema_field f_limits[] = {
    {.name = "maxNodes", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 100000},
    {.name = "maxGpus", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 1000000},
    {.name = "maxRunningJobs", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 1000000},
    {.name = "maxWall", .kind = SCHEMA_STR, .flags = SCHEMA_ONELINE, .check = wall_ok},
    {.name = NULL}};
static const struct schema s_limits = {f_limits, SCHEMA_PROTO3 | SCHEMA_QUOTING, NULL, NULL};

static const struct schema_field f_account[] = {
    {.name = "name", .kind = SCHEMA_STR, .check = name_ok},
    {.name = "description", .kind = SCHEMA_STR, .flags = SCHEMA_ONELINE},
    {.name = "parent", .kind = SCHEMA_STR, .check = name_ok},
    {.name = "fairshare", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 1, .hi = 1000000},
    {.name = "limits", .kind = SCHEMA_OBJ, .obj = &s_limits},
    {.name = "qos", .kind = SCHEMA_STRS, .check = NULL, .max_items = 32},
    {.name = NULL}};
/* users and the rest are what a GET shows: accepted and dropped */
static const char *const account_output[] = {"users", NULL};
static const struct schema s_account = {f_account, SCHEMA_PROTO3 | SCHEMA_QUOTING, account_output,
                                        NULL};

static const struct schema_field f_user[] = {
    {.name = "name", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED, .check = name_ok},
    {.name = NULL}};
static const struct schema s_user = {f_user, SCHEMA_PROTO3 | SCHEMA_QUOTING, NULL, NULL};

/* The cluster (accounting on), its slurm.conf into conf and its static node
 * count into *nodes. 0, or -1 with the reply set. */
static int acct_cluster(struct api_req *r, struct api_resp *out, char *conf, size_t len,
                        int *nodes)
{
    struct store_cluster cl;
    if (api_load_cluster(r, out, &cl) < 0)
        return -1;
    int on = api_accounting_on(cl.spec);
    if (nodes)
        *nodes = (int)cluster_spec_node_count(cl.spec);
    store_cluster_release(&cl);
    if (!on)
        return api_error(out, 400,
                         "precondition: cluster %s has no accounting "
                         "(orchestratorSpec.slurmSpec.accounting.enabled)",
                         r->cap[2]),
               -1;
    mtc_error_t err = {""};
    if (api_slurm_conf(r->prov, r->cap[2], conf, len, &err) < 0)
        return api_error(out, 400, "precondition: cluster %s: %s", r->cap[2], err.text), -1;
    return 0;
}

/* The account a path names (cap[3]), checked. */
static int path_account(struct api_req *r, struct api_resp *out)
{
    if (!slurm_acct_name_valid(r->cap[3]))
        return api_error(out, 400, "account \"%.40s\": must match [a-z][a-z0-9_-]{0,31}",
                         r->cap[3]),
               -1;
    return 0;
}

/* The object named name of list all (consumed; NULL: errno EIO, the
 * lister's err set), or NULL with errno ENOENT. Caller owns. */
static json_t *pick(json_t *all, const char *name)
{
    if (!all)
        return errno = EIO, NULL;
    size_t i;
    json_t *a, *found = NULL;
    json_array_foreach(all, i, a) if (strcmp(json_string_value(json_object_get(a, "name")), name) == 0)
        found = json_incref(a);
    json_decref(all);
    if (!found)
        errno = ENOENT;
    return found;
}

/* The account named name, or NULL: errno ENOENT (none), EIO (+ err). Caller owns. */
static json_t *account_named(const char *conf, const char *cluster, const char *name,
                             mtc_error_t *err)
{
    return pick(slurm_accounts(conf, cluster, err), name);
}

/* account_named, or NULL with the reply set (404, 500). */
static json_t *find_account(const char *conf, const char *cluster, const char *name,
                            struct api_resp *out)
{
    mtc_error_t err = {""};
    json_t *a = account_named(conf, cluster, name, &err);
    if (!a && errno == ENOENT)
        api_error(out, 404, "account %s not found in cluster %s", name, cluster);
    else if (!a)
        api_error(out, 500, "%s", err.text);
    return a;
}

/* The request's account (canonical) as sacctmgr's settings; limits larger
 * than the cluster are refused. 0, or -1 with the reply set. */
static int account_of(const json_t *canon, int nodes, struct slurm_account *a, char *qos,
                      size_t qlen, struct api_resp *out)
{
    const json_t *lim = json_object_get(canon, "limits");
    a->description = json_string_value(json_object_get(canon, "description"));
    a->parent = json_string_value(json_object_get(canon, "parent"));
    a->fairshare = (int)json_integer_value(json_object_get(canon, "fairshare"));
#define LIMIT(k) (json_object_get(lim, k) ? (int)json_integer_value(json_object_get(lim, k)) : SLURM_ACCT_UNSET)
    a->max_nodes = LIMIT("maxNodes");
    a->max_gpus = LIMIT("maxGpus");
    a->max_running_jobs = LIMIT("maxRunningJobs");
#undef LIMIT
    a->max_wall = json_string_value(json_object_get(lim, "maxWall"));
    if (a->max_nodes > nodes)
        return api_error(out, 400,
                         "limits.maxNodes: %d is more than the cluster's %d nodes: it would "
                         "never bind",
                         a->max_nodes, nodes),
               -1;
    *qos = '\0';
    size_t i;
    json_t *q;
    json_array_foreach(json_object_get(canon, "qos"), i, q)
    {
        if (!slurm_acct_name_valid(json_string_value(q)))
            return api_error(out, 400, "qos[%zu]: must match [a-z][a-z0-9_-]{0,31}", i), -1;
        snprintf(qos + strlen(qos), qlen - strlen(qos), "%s%s", i ? "," : "", json_string_value(q));
    }
    a->qos = json_array_size(json_object_get(canon, "qos")) ? qos : NULL;
    return 0;
}

int api_account_list(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *all = slurm_accounts(conf, r->cap[2], &err);
    if (!all)
        return api_error(out, 500, "%s", err.text);
    out->body = json_pack("{s:o}", "accounts", all);
    return 0;
}

int api_account_get(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    out->body = find_account(conf, r->cap[2], r->cap[3], out);
    return 0;
}

/* POST (create: name from ?accountId= or the body) and PATCH (update). */
static int put_account(struct api_req *r, struct api_resp *out, int create)
{
    char conf[PATH_MAX], qos[1200];
    int nodes = 0;
    mtc_error_t err = {""};
    json_t *canon = schema_normalize(r->body ? r->body : json_object(), &s_account, "", &err);
    if (!canon)
        return api_error(out, 400, "%s", err.text);
    const char *given = create ? api_query(r, "accountId") : r->cap[3];
    if (!given)
        given = json_string_value(json_object_get(canon, "name"));
    char name[40] = ""; /* a name longer than this is not valid anyway */
    if (given && strlen(given) < sizeof(name))
        memcpy(name, given, strlen(given) + 1);
    struct slurm_account a = {.name = name};
    if (!slurm_acct_name_valid(name)) {
        json_decref(canon);
        return api_error(out, 400, "account name: give accountId= or \"name\", matching "
                                   "[a-z][a-z0-9_-]{0,31}");
    }
    if (acct_cluster(r, out, conf, sizeof(conf), &nodes) < 0 ||
        account_of(canon, nodes, &a, qos, sizeof(qos), out) < 0) {
        json_decref(canon);
        return 0;
    }
    json_t *had = account_named(conf, r->cap[2], name, &err);
    if (!had && errno == EIO) {
        json_decref(canon);
        return api_error(out, 500, "%s", err.text);
    }
    if (create && had) {
        json_decref(had), json_decref(canon);
        return api_error(out, 409, "account %s already exists in cluster %s", name, r->cap[2]);
    }
    if (!create && !had) {
        json_decref(canon);
        return api_error(out, 404, "account %s not found in cluster %s", name, r->cap[2]);
    }
    json_decref(had);
    int rc = create ? slurm_account_add(conf, r->cap[2], &a, &err)
                    : slurm_account_modify(conf, r->cap[2], &a, &err);
    json_decref(canon);
    if (rc < 0)
        return api_error(out, 400, "account %s: %s", name, err.text);
    out->body = find_account(conf, r->cap[2], name, out);
    return 0;
}

int api_account_create(struct api_req *r, struct api_resp *out)
{
    return put_account(r, out, 1);
}

int api_account_patch(struct api_req *r, struct api_resp *out)
{
    return path_account(r, out) < 0 ? 0 : put_account(r, out, 0);
}

int api_account_delete(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    json_t *a = find_account(conf, r->cap[2], r->cap[3], out);
    if (!a)
        return 0;
    json_decref(a);
    mtc_error_t err = {""};
    json_t *jobs = slurm_account_jobs(conf, r->cap[3], &err);
    if (!jobs)
        return api_error(out, 500, "%s", err.text);
    if (json_array_size(jobs) > 0) {
        char list[512] = "";
        size_t i;
        json_t *j;
        json_array_foreach(jobs, i, j) if (strlen(list) < sizeof(list) - 40)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                     json_string_value(j));
        json_decref(jobs);
        return api_error(out, 400,
                         "precondition: account %s has jobs running or waiting: %s (cancel them "
                         "first)",
                         r->cap[3], list);
    }
    json_decref(jobs);
    if (slurm_account_delete(conf, r->cap[2], r->cap[3], &err) < 0)
        return api_error(out, 400, "account %s: %s", r->cap[3], err.text);
    out->body = json_object();
    return 0;
}

int api_account_users(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    json_t *a = find_account(conf, r->cap[2], r->cap[3], out);
    if (a) {
        out->body = json_pack("{s:O}", "users", json_object_get(a, "users"));
        json_decref(a);
    }
    return 0;
}

/* POST …/users {"name": U} adds; DELETE …/users/U removes. */
static int change_user(struct api_req *r, struct api_resp *out, const char *user, int add)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    json_t *a = find_account(conf, r->cap[2], r->cap[3], out);
    if (!a)
        return 0;
    int member = 0;
    size_t i;
    json_t *u;
    json_array_foreach(json_object_get(a, "users"), i, u) member |= strcmp(json_string_value(u), user) == 0;
    json_decref(a);
    if (add && member)
        return api_error(out, 409, "user %s is already in account %s", user, r->cap[3]);
    if (!add && !member)
        return api_error(out, 404, "user %s is not in account %s", user, r->cap[3]);
    mtc_error_t err = {""};
    if (slurm_account_user(conf, r->cap[2], r->cap[3], user, add, &err) < 0)
        return api_error(out, 400, "user %s: %s", user, err.text);
    out->body = find_account(conf, r->cap[2], r->cap[3], out);
    return 0;
}

int api_account_user_add(struct api_req *r, struct api_resp *out)
{
    mtc_error_t err = {""};
    json_t *canon = r->body ? schema_normalize(r->body, &s_user, "", &err) : NULL;
    if (!canon)
        return api_error(out, 400, "%s", r->body ? err.text : "body: {\"name\": USER}");
    char user[40];
    snprintf(user, sizeof(user), "%s", json_string_value(json_object_get(canon, "name")));
    json_decref(canon);
    return change_user(r, out, user, 1);
}

int api_account_user_remove(struct api_req *r, struct api_resp *out)
{
    if (!slurm_acct_name_valid(r->cap[4]))
        return api_error(out, 400, "user \"%.40s\": must match [a-z][a-z0-9_-]{0,31}", r->cap[4]);
    return change_user(r, out, r->cap[4], 0);
}

/* ---- …/qos: qualities of service (priority, limits, preemption) ---- */

static const struct schema_field f_qos[] = {
    {.name = "name", .kind = SCHEMA_STR, .check = name_ok},
    {.name = "priority", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 1000000},
    {.name = "limits", .kind = SCHEMA_OBJ, .obj = &s_limits},
    {.name = "preempt", .kind = SCHEMA_STRS, .max_items = 16},
    {.name = "graceSeconds", .kind = SCHEMA_INT, .flags = SCHEMA_RANGE, .lo = 0, .hi = 3600},
    {.name = NULL}};
static const struct schema s_qos = {f_qos, SCHEMA_PROTO3 | SCHEMA_QUOTING, NULL, NULL};

/* The QoS named name (NULL: errno ENOENT, or EIO + err). Caller owns. */
static json_t *qos_named(const char *conf, const char *name, mtc_error_t *err)
{
    return pick(slurm_qos_list(conf, err), name);
}

int api_qos_list(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *all = slurm_qos_list(conf, &err);
    if (!all)
        return api_error(out, 500, "%s", err.text);
    out->body = json_pack("{s:o}", "qos", all);
    return 0;
}

int api_qos_get(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    mtc_error_t err = {""};
    out->body = qos_named(conf, r->cap[3], &err);
    if (!out->body)
        return api_error(out, errno == ENOENT ? 404 : 500, "qos %s: %s", r->cap[3],
                         errno == ENOENT ? "not found" : err.text);
    return 0;
}

int api_qos_create(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX], pre[600] = "", name[40] = "";
    int nodes = 0;
    mtc_error_t err = {""};
    json_t *canon = schema_normalize(r->body ? r->body : json_object(), &s_qos, "", &err);
    if (!canon)
        return api_error(out, 400, "%s", err.text);
    const char *given = api_query(r, "qosId");
    if (!given)
        given = json_string_value(json_object_get(canon, "name"));
    if (given && strlen(given) < sizeof(name))
        memcpy(name, given, strlen(given) + 1);
    const json_t *lim = json_object_get(canon, "limits");
    struct slurm_qos q = {
        .name = name,
        .priority = (int)json_integer_value(json_object_get(canon, "priority")),
        .max_nodes = json_object_get(lim, "maxNodes") ? (int)json_integer_value(json_object_get(lim, "maxNodes")) : -1,
        .max_gpus = json_object_get(lim, "maxGpus") ? (int)json_integer_value(json_object_get(lim, "maxGpus")) : -1,
        .max_wall = json_string_value(json_object_get(lim, "maxWall")),
        .grace_s = (int)json_integer_value(json_object_get(canon, "graceSeconds")),
    };
    int rc = 0;
    if (!slurm_acct_name_valid(name))
        rc = api_error(out, 400, "qos name: give qosId= or \"name\", matching [a-z][a-z0-9_-]{0,31}");
    else if (acct_cluster(r, out, conf, sizeof(conf), &nodes) < 0)
        rc = -1;
    else if (q.max_nodes > nodes)
        rc = api_error(out, 400, "limits.maxNodes: %d is more than the cluster's %d nodes: it would never bind",
                       q.max_nodes, nodes);
    size_t i;
    json_t *p;
    json_array_foreach(rc == 0 ? json_object_get(canon, "preempt") : NULL, i, p)
    {
        mtc_error_t e2 = {""};
        json_t *other = slurm_acct_name_valid(json_string_value(p)) ? qos_named(conf, json_string_value(p), &e2) : NULL;
        if (!other) {
            rc = api_error(out, 400, "preempt[%zu]: no qos \"%.40s\" in cluster %s", i,
                           json_string_value(p), r->cap[2]);
            break;
        }
        json_decref(other);
        snprintf(pre + strlen(pre), sizeof(pre) - strlen(pre), "%s%s", i ? "," : "", json_string_value(p));
    }
    q.preempt = *pre ? pre : NULL;
    json_t *had = rc == 0 ? qos_named(conf, name, &err) : NULL;
    if (had) {
        json_decref(had);
        rc = api_error(out, 409, "qos %s already exists in cluster %s", name, r->cap[2]);
    }
    if (rc == 0 && slurm_qos_add(conf, &q, &err) < 0)
        api_error(out, 400, "qos %s: %s", name, err.text);
    else if (rc == 0)
        out->body = qos_named(conf, name, &err);
    json_decref(canon);
    return 0;
}

int api_qos_delete(struct api_req *r, struct api_resp *out)
{
    char conf[PATH_MAX];
    if (path_account(r, out) < 0 || acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *q = qos_named(conf, r->cap[3], &err);
    if (!q)
        return api_error(out, errno == ENOENT ? 404 : 500, "qos %s: %s", r->cap[3],
                         errno == ENOENT ? "not found" : err.text);
    json_decref(q);
    if (slurm_qos_delete(conf, r->cap[3], &err) < 0)
        return api_error(out, 400, "qos %s: %s", r->cap[3], err.text);
    out->body = json_object();
    return 0;
}

/* GET …/accounts:usage?since=S — node-hours and GPU-hours per account and
 * user from the accounting database (sacct; S as sacct's -S takes it:
 * 2026-12-01, 2026-12-01T08:00, now-7days; default now-7days). */
int api_account_usage(struct api_req *r, struct api_resp *out)
{
    const char *since = api_query(r, "since");
    char s[40];
    snprintf(s, sizeof(s), "%s", since ? since : "now-7days");
    int ok = since == NULL || (*since && strlen(since) < 32 &&
                               strspn(since, "0123456789-:T") == strlen(since));
    if (!ok && since && strncmp(since, "now-", 4) == 0) {
        char *end;
        long n = strtol(since + 4, &end, 10);
        ok = n > 0 && n < 100000 &&
             (!strcmp(end, "days") || !strcmp(end, "hours") || !strcmp(end, "minutes"));
    }
    if (!ok)
        return api_error(out, 400, "since \"%.40s\": a date (2026-12-01[T08:00]) or now-N(days|hours|minutes)",
                         since);
    char conf[PATH_MAX];
    if (acct_cluster(r, out, conf, sizeof(conf), NULL) < 0)
        return 0;
    mtc_error_t err = {""};
    json_t *u = slurm_usage(conf, s, &err);
    if (!u)
        return api_error(out, 500, "%s", err.text);
    out->body = json_pack("{s:s, s:o}", "since", s, "usage", u);
    return 0;
}
