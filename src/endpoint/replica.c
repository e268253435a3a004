/* replica: one replica of a deployed model — a Slurm job of mtc-serve —
 * from start to stop: its script and sbatch (endpoint_replica_start), its
 * address once it listens (the node's NodeAddr and the port mtc-serve prints
 * into the job's log), its /health check, its events, and scancel. */
#include "endpoint/internal.h"
#include "slurm/slurm.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int endpoint_replica_start(struct endpoint_ctl *c, struct store_endpoint *e, const json_t *dep,
                           const char *conf, mtc_error_t *err)
{
    char dir[PATH_MAX], logdir[PATH_MAX], script[PATH_MAX + 32], logf[PATH_MAX + 32], rid[16],
        job[32];
    /* the placement: mtc-serve and the logs on the node's side (on hosts:
     * the copy on every host, the shared storage) */
    struct endpoint_place pl;
    if (endpoint_place_get(&c->cfg, sget(dep, "cluster"), c->serve, &pl, err) < 0)
        return -1;
    /* the script stays here (sbatch reads it here), the log is written on the node */
    int n = snprintf(dir, sizeof(dir), "%s/endpoints/%s/%s/%s", c->home, e->project, e->location,
                     e->name);
    if (n < 0 || (size_t)n >= sizeof(dir) ||
        endpoint_place_logdir(&pl, c->home, e->project, e->location, e->name, logdir,
                              sizeof(logdir)) < 0)
        return errprintf(err, "the replica's directory: path too long");
    if (mtc_mkdir_p(dir, 0700) < 0 || mtc_mkdir_p(logdir, 0700) < 0)
        return errprintf(err, "%s: %s", mtc_path_exists(dir) ? logdir : dir, strerror(errno));
    int next = iget(e->status, "nextReplica");
    next = next > 0 ? next : 1;
    snprintf(rid, sizeof(rid), "r%d", next);
    json_object_set_new(e->status, "nextReplica", json_integer(next + 1));
    snprintf(script, sizeof(script), "%s/%s.sh", dir, rid);
    snprintf(logf, sizeof(logf), "%s/%s.log", logdir, rid);
    const char *art = sget(dep, "artifact"), *part = sget(dep, "partition");
    /* every value is a checked name or a path under mtc's home or the
     * experiment root without a quote */
    if (strchr(art, '\'') || strchr(dir, '\'') || strchr(logdir, '\'') || strchr(pl.serve, '\''))
        return errprintf(err, "a path holds a quote: cannot write the replica's script");
    /* loopback on the local provider (its nodes are this host's processes),
     * every interface on hosts (reached at the node's NodeAddr); every
     * connection comes from mtcd (the proxy and the /health probes), so the
     * per-address limit is the whole one: at mtc-serve's default of 16 a
     * load of 16 proxied requests shut the probes out and the replica was
     * replaced as unhealthy */
    if (mtc_write_file_fmt(script, 0700,
                           "#!/bin/bash\n"
                           "# replica %s of deployed model %s of endpoint %s (written by mtcd)\n"
                           "#SBATCH --job-name=mtc-endpoint-%s\n"
                           "#SBATCH --output='%s'\n"
                           "#SBATCH --nodes=1\n"
                           "#SBATCH --ntasks=1\n"
                           "%s%s%s"
                           "exec '%s' --model '%s' --listen %s:0 --served-name '%s' "
                           "--max-connections %d --max-connections-per-ip %d\n",
                           rid, sget(dep, "id"), e->name, e->name, logf,
                           *part ? "#SBATCH --partition=" : "", part, *part ? "\n" : "", pl.serve,
                           art, pl.hosts ? "0.0.0.0" : "127.0.0.1", sget(dep, "modelVersion"),
                           ENDPOINT_REPLICA_CONNS, ENDPOINT_REPLICA_CONNS) < 0)
        return errprintf(err, "%s: %s", script, strerror(errno));
    char *out = NULL;
    if (slurm_submit(conf, script, job, &out) < 0) {
        errprintf(err, "sbatch: %.200s", out ? out : "failed");
        free(out);
        return -1;
    }
    free(out);
    json_t *reps = jget(e->status, "replicas");
    json_array_append_new(reps,
                          json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "id", rid, "deployedModelId",
                                    sget(dep, "id"), "slurmJobId", job, "state", "STARTING",
                                    "startMs", (json_int_t)mtc_now_ms(), "log", logf));
    return 0;
}

/* The port mtc-serve printed ("mtc-serve: serving NAME on HOST:PORT"), or 0. */
static int log_port(const char *logf)
{
    char *text = mtc_read_file(logf, NULL);
    int port = 0;
    const char *p = text ? strstr(text, "mtc-serve: serving ") : NULL;
    if (p) {
        size_t n = strcspn(p, "\n");
        const char *colon = memrchr(p, ':', n);
        if (colon)
            port = atoi(colon + 1);
    }
    free(text);
    return port > 0 && port < 65536 ? port : 0;
}

/* HOST:PORT of a running replica: its node's NodeAddr and the port in its log. */
int endpoint_replica_address(const char *conf, const json_t *r, char *buf, size_t len)
{
    int port = log_port(sget(r, "log"));
    if (!port)
        return -1;
    json_t *nodes = slurm_job_nodes(conf, sget(r, "slurmJobId"), NULL);
    const char *node = json_string_value(json_array_get(nodes, 0));
    char addr[64] = "";
    if (node)
        slurm_node_get(conf, node, "NodeAddr", addr, sizeof(addr));
    json_decref(nodes);
    if (!*addr)
        return -1;
    snprintf(buf, len, "%s:%d", addr, port);
    return 0;
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p, (void)u;
    return s * n;
}

/* GET /health answers 200 within 1 s. */
int endpoint_replica_healthy(const char *address)
{
    CURL *h = curl_easy_init();
    if (!h)
        return 0;
    char url[128];
    snprintf(url, sizeof(url), "http://%s/health", address);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code == 200;
}

void endpoint_replica_event(struct endpoint_ctl *c, const struct store_endpoint *e, const json_t *r,
                            const char *cluster, const char *type, const char *why)
{
    char msg[400];
    snprintf(msg, sizeof(msg), "endpoint %s: replica %s (job %s) of deployed model %s: %s", e->name,
             sget(r, "id"), sget(r, "slurmJobId"), sget(r, "deployedModelId"), why);
    store_event_add(c->cfg.store, cluster, type, NULL, msg);
    log_msg(LOG_INFO, "%s", msg);
}

void endpoint_replica_stop(struct endpoint_ctl *c, json_t *reps, size_t i, const char *conf)
{
    json_t *r = json_array_get(reps, i);
    if (conf)
        slurm_job_cancel(conf, sget(r, "slurmJobId"), NULL);
    (void)c;
    json_array_remove(reps, i);
}
