/* mutate: the endpoints' mutations — create, deployModel (the cluster, its
 * partition and the model version checked, on hosts the version staged on the
 * shared storage), undeployModel (its replicas stopped), update (displayName,
 * the split) and delete — each serialized with the controller's tick under
 * its lock, the routing table rebuilt after it. */
#include "endpoint/internal.h"
#include "registry/registry.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int endpoint_create(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *spec, mtc_error_t *err)
{
    struct store_endpoint e = {0};
    snprintf(e.project, sizeof(e.project), "%s", project);
    snprintf(e.location, sizeof(e.location), "%s", location);
    snprintf(e.name, sizeof(e.name), "%s", name);
    e.spec = json_deep_copy(spec);
    json_object_set_new(e.spec, "deployedModels", json_array());
    json_object_set_new(e.spec, "trafficSplit", json_object());
    json_object_set_new(e.spec, "nextId", json_integer(1));
    e.status = json_pack("{s:[], s:i}", "replicas", "nextReplica", 1);
    pthread_mutex_lock(&c->lock);
    int rc = store_endpoint_create(c->cfg.store, &e);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        errprintf(err, errno == EEXIST ? "endpoint %s already exists" : "store: cannot add %s",
                  name);
    store_endpoint_release(&e);
    return rc;
}

/* The version a reference names now (its number) and its artifact's path. */
static int resolve_model(struct endpoint_ctl *c, const char *project, const char *location,
                         const char *ref, char *version, size_t vlen, char *path, size_t plen,
                         mtc_error_t *err)
{
    if (registry_resolve(c->home, project, location, ref, -1, NULL, path, plen, err) < 0)
        return -1;
    struct registry_ref r;
    int v = 0;
    if (registry_ref_parse(ref, &r, err) < 0 ||
        registry_resolve_version(c->home, project, location, ref, &v, err) < 0)
        return -1;
    snprintf(version, vlen, "%s@%d", r.name, v);
    return 0;
}

int endpoint_deploy(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const json_t *deployed, const json_t *split, char id[16],
                    mtc_error_t *err)
{
    char version[128], path[PATH_MAX], conf[PATH_MAX];
    const char *cluster = sget(deployed, "cluster");
    struct store_cluster cl;
    if (store_cluster_get(c->cfg.store, cluster, &cl) < 0 || strcmp(cl.project, project) ||
        strcmp(cl.location, location)) {
        if (errno != ENOENT)
            store_cluster_release(&cl);
        errno = ENOENT;
        return errprintf(err,
                         "deployedModel.cluster: cluster %s not found in projects/%s/locations/%s",
                         cluster, project, location);
    }
    store_cluster_release(&cl);
    struct endpoint_place pl;
    if (endpoint_cluster_conf(&c->cfg, cluster, conf, sizeof(conf), err) < 0) {
        errno = EBUSY;
        return -1;
    }
    if (endpoint_place_get(&c->cfg, cluster, c->serve, &pl, err) < 0)
        return -1;
    const char *part = sget(deployed, "partition");
    if (*part) {
        json_t *parts = slurm_partitions(conf, err);
        int known = parts && jget(parts, part);
        json_decref(parts);
        if (!known) {
            errno = EINVAL;
            return errprintf(err, "deployedModel.partition: cluster %s has no partition %s",
                             cluster, part);
        }
    }
    if (resolve_model(c, project, location, sget(deployed, "model"), version, sizeof(version), path,
                      sizeof(path), err) < 0) {
        char m[sizeof(err->text) + 32];
        snprintf(m, sizeof(m), "deployedModel.model: %s", err->text);
        int e = errno == ENOENT ? ENOENT : EINVAL;
        errprintf(err, "%.*s", (int)sizeof(err->text) - 1, m);
        errno = e;
        return -1;
    }
    /* on hosts the replicas read a copy on the shared storage (made here,
     * once per version: this request waits for the copy) */
    char staged[PATH_MAX] = "";
    if (pl.hosts) {
        char model[PATH_MAX];
        if (endpoint_stage(&pl, path, model, sizeof(model), staged, sizeof(staged), err) < 0) {
            errno = EBUSY;
            return -1;
        }
        snprintf(path, sizeof(path), "%s", model);
    }
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    int rc = -1;
    json_t *newsplit = NULL;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        endpoint_unstage(c->cfg.store, staged);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels");
    if (json_array_size(deps) >= ENDPOINT_MAX_DEPLOYED) {
        errprintf(err, "precondition: endpoint %s already has %d deployed models", name,
                  ENDPOINT_MAX_DEPLOYED);
        errno = EBUSY;
        goto out;
    }
    int next = iget(e.spec, "nextId");
    next = next > 0 ? next : 1;
    snprintf(id, 16, "d%d", next);
    json_t *d = json_deep_copy(deployed);
    char now[40];
    mtc_time_rfc3339(mtc_now_ms(), now, sizeof(now));
    json_object_set_new(d, "id", json_string(id));
    json_object_set_new(d, "modelVersion", json_string(version));
    json_object_set_new(d, "artifact", json_string(path));
    if (*staged)
        json_object_set_new(d, "staged", json_string(staged));
    json_object_set_new(d, "createTime", json_string(now));
    json_t *after = json_deep_copy(deps);
    json_array_append_new(after, d);
    if (split) {
        newsplit = endpoint_split_check(split, after, id, err);
    } else {
        newsplit = json_deep_copy(jget(e.spec, "trafficSplit"));
        json_object_set_new(newsplit, id, json_integer(json_array_size(deps) == 0 ? 100 : 0));
    }
    if (!newsplit) {
        json_decref(after);
        goto out;
    }
    json_object_set_new(e.spec, "deployedModels", after);
    json_object_set_new(e.spec, "trafficSplit", newsplit);
    json_object_set_new(e.spec, "nextId", json_integer(next + 1));
    rc = store_endpoint_put(c->cfg.store, &e);
    if (rc < 0)
        errprintf(err, "store: cannot update endpoint %s", name);
out : {
    char key[200];
    endpoint_key(key, sizeof(key), project, location, name);
    if (rc == 0)
        endpoint_rt_rebuild(c, key, &e);
}
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    if (rc == 0)
        endpoint_kick(c);
    else
        endpoint_unstage(c->cfg.store, staged);
    return rc;
}

int endpoint_undeploy(struct endpoint_ctl *c, const char *project, const char *location,
                      const char *name, const char *id, const json_t *split, mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    int rc = -1;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels");
    json_t *after = json_array(), *d, *newsplit = NULL;
    size_t i;
    int found = 0;
    json_array_foreach(deps, i, d)
    {
        if (strcmp(sget(d, "id"), id) == 0)
            found = 1;
        else
            json_array_append(after, d);
    }
    if (!found) {
        errno = ENOENT;
        errprintf(err, "deployedModelId %s: not deployed on endpoint %s", id, name);
        goto out;
    }
    if (split) {
        newsplit = endpoint_split_check(split, after, NULL, err);
    } else {
        newsplit = json_deep_copy(jget(e.spec, "trafficSplit"));
        int share = iget(newsplit, id);
        json_object_del(newsplit, id);
        if (json_array_size(after) == 1)
            json_object_set_new(newsplit, sget(json_array_get(after, 0), "id"), json_integer(100));
        else if (share > 0 && json_array_size(after) > 1) {
            json_decref(newsplit);
            newsplit = NULL;
            errno = EINVAL;
            errprintf(err,
                      "trafficSplit: required: %s has %d%% of the traffic and %zu models "
                      "remain",
                      id, share, json_array_size(after));
        }
    }
    if (!newsplit)
        goto out;
    /* its replicas go now (the cluster read before deps is replaced) */
    json_t *reps = jget(e.status, "replicas");
    char conf[PATH_MAX];
    mtc_error_t e2 = {""};
    int have_conf = endpoint_cluster_conf(&c->cfg, sget(endpoint_find_id(deps, id), "cluster"),
                                          conf, sizeof(conf), &e2) == 0;
    char staged[PATH_MAX];
    snprintf(staged, sizeof(staged), "%s", sget(endpoint_find_id(deps, id), "staged"));
    json_object_set_new(e.spec, "deployedModels", json_incref(after));
    json_object_set_new(e.spec, "trafficSplit", newsplit);
    for (size_t k = json_array_size(reps); k-- > 0;)
        if (strcmp(sget(json_array_get(reps, k), "deployedModelId"), id) == 0)
            endpoint_replica_stop(c, reps, k, have_conf ? conf : NULL);
    rc = store_endpoint_put(c->cfg.store, &e);
    if (rc < 0)
        errprintf(err, "store: cannot update endpoint %s", name);
    else
        endpoint_unstage(c->cfg.store, staged); /* its copy on hosts, unless another uses it */
    char key[200];
    endpoint_key(key, sizeof(key), project, location, name);
    endpoint_rt_rebuild(c, key, &e);
out:
    json_decref(after);
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int endpoint_update(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, const char *display, const json_t *split, mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    int rc = -1;
    json_t *newsplit = NULL;
    if (split &&
        !(newsplit = endpoint_split_check(split, jget(e.spec, "deployedModels"), NULL, err)))
        goto out;
    if (newsplit)
        json_object_set_new(e.spec, "trafficSplit", newsplit);
    if (display)
        json_object_set_new(e.spec, "displayName", json_string(display));
    if ((rc = store_endpoint_put(c->cfg.store, &e)) < 0) {
        errprintf(err, "store: cannot update endpoint %s", name);
        goto out;
    }
    char key[200];
    endpoint_key(key, sizeof(key), project, location, name);
    endpoint_rt_rebuild(c, key, &e);
out:
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int endpoint_delete(struct endpoint_ctl *c, const char *project, const char *location,
                    const char *name, mtc_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    struct store_endpoint e;
    if (store_endpoint_get(c->cfg.store, project, location, name, &e) < 0) {
        pthread_mutex_unlock(&c->lock);
        errno = ENOENT;
        return errprintf(err, "endpoint %s not found", name);
    }
    json_t *deps = jget(e.spec, "deployedModels"), *reps = jget(e.status, "replicas");
    for (size_t k = json_array_size(reps); k-- > 0;) {
        json_t *dep = endpoint_find_id(deps, sget(json_array_get(reps, k), "deployedModelId"));
        char conf[PATH_MAX];
        mtc_error_t e2 = {""};
        int ok = dep &&
                 endpoint_cluster_conf(&c->cfg, sget(dep, "cluster"), conf, sizeof(conf), &e2) == 0;
        endpoint_replica_stop(c, reps, k, ok ? conf : NULL);
    }
    int rc = store_endpoint_delete(c->cfg.store, project, location, name);
    size_t i;
    json_t *d;
    json_array_foreach(deps, i, d) if (rc == 0) endpoint_unstage(c->cfg.store, sget(d, "staged"));
    char key[200];
    endpoint_key(key, sizeof(key), project, location, name);
    endpoint_rt_rebuild(c, key, NULL);
    store_endpoint_release(&e);
    pthread_mutex_unlock(&c->lock);
    if (rc < 0)
        errprintf(err, "store: cannot delete endpoint %s", name);
    return rc;
}
