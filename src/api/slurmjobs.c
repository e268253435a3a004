/* slurmjobs: a cluster's Slurm queue through the API — GET …/slurmJobs, every
 * running and waiting job with its user, account, QoS, nodes and pending
 * reason (the console's cluster page) — and how the API finds a cluster's
 * slurm.conf and whether it keeps accounting (accounts.c, metrics.c). */
#include "api/internal.h"
#include "control/control.h"
#include "provider/provider.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

int api_slurm_conf(struct provider *prov, const char *id, char *conf, size_t len, mtc_error_t *err)
{
    char *env = provider_env(prov, id, err);
    int rc = env ? provider_env_get(env, "SLURM_CONF", conf, len) : -1;
    free(env);
    if (rc < 0 && !*err->text)
        errprintf(err, "no slurm.conf");
    return rc;
}

int api_accounting_on(const json_t *spec)
{
    const json_t *a = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "accounting");
    return json_is_true(json_object_get(a, "enabled"));
}

int api_slurm_up(const char *state)
{
    int s = schema_enum_parse(&cluster_state_enum, state, 0);
    return s == CLUSTER_STATE_RUNNING || s == CLUSTER_STATE_UPDATING;
}

/* GET …/modelDevelopmentClusters/C/slurmJobs — {"slurmJobs": [...]} as
 * slurm_queue has them; a cluster that is not RUNNING or UPDATING has no
 * queue to ask (FAILED_PRECONDITION naming its state). */
int api_slurm_jobs(struct api_req *r, struct api_resp *out)
{
    struct store_cluster cl;
    if (api_load_cluster_head(r, out, &cl) < 0)
        return 0;
    int up = api_slurm_up(cl.state);
    char state[sizeof(cl.state)];
    memcpy(state, cl.state, sizeof(state));
    store_cluster_release(&cl);
    if (!up)
        return api_error(out, 400, "precondition: cluster %s is %s: no Slurm queue to show",
                         r->cap[2], state);
    char conf[PATH_MAX];
    mtc_error_t err = {""};
    if (api_slurm_conf(r->prov, r->cap[2], conf, sizeof(conf), &err) < 0)
        return api_error(out, 400, "precondition: cluster %s: %s", r->cap[2], err.text);
    json_t *jobs = slurm_queue(conf, &err);
    if (!jobs)
        return api_error(out, 503, "cluster %s: %s", r->cap[2], err.text);
    out->body = json_pack("{s:o}", "slurmJobs", jobs);
    return 0;
}
