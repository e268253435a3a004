/* shared: what the control's files below the supervisor and the operations
 * call — the supervisor's wake-up and what it has seen (passes, slurmd
 * restarts, the nodes' view), a node's remediation state and the
 * remediation's events, the datasets' configuration. Calls nothing of
 * control's above it. */
#include "control/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const struct schema_enum control_remediation_enum =
    SCHEMA_NAMES(NULL, [CONTROL_REM_NONE] = "", [CONTROL_REM_PENDING] = "PENDING",
                 [CONTROL_REM_REMEDIATING] = "REMEDIATING", [CONTROL_REM_FAILED] = "FAILED",
                 [CONTROL_REM_QUEUED] = "QUEUED");

/* Set a node's remediation state (the store keeps its name). */
void control_set_remediation(struct control *c, const char *id, const char *node,
                             enum control_remediation state)
{
    store_health_set_remediation(c->st, id, node, CONTROL_NAME(control_remediation_enum, state));
}

void control_event(struct control *c, const char *id, const char *type, const char *node,
                   const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    store_event_add(c->st, id, type, node, msg);
    log_msg(LOG_WARNING, "cluster %s: %s %s: %s", id, type, node, msg);
}

void control_poke(struct control *c)
{
    pthread_mutex_lock(&c->lock);
    c->poked = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

json_t *control_supervision_passes(struct control *c)
{
    pthread_mutex_lock(&c->lock);
    json_t *out = json_deep_copy(c->passes);
    pthread_mutex_unlock(&c->lock);
    return out ? out : json_object();
}

int control_slurmd_supervised(struct control *c, const char *cluster, const char *node,
                              int64_t report_ms)
{
    char key[160];
    snprintf(key, sizeof(key), "%s/%s", cluster, node);
    pthread_mutex_lock(&c->lock);
    json_t *sup = json_object_get(c->supervised, cluster);
    json_t *r = json_object_get(c->restarts, key);
    int64_t looked = sup ? json_integer_value(sup) : 0;
    int64_t prev = json_integer_value(json_array_get(r, 0));
    int64_t last = r ? json_integer_value(json_array_get(r, 1)) : 0;
    pthread_mutex_unlock(&c->lock);
    if (looked <= report_ms)
        return 1; /* no pass has looked at the daemons since the report */
    int flapping = prev > 0 && last - prev < SLURMD_FLAP_MS;
    return last > 0 && !flapping && last >= report_ms - SLURMD_START_GRACE_MS;
}

json_t *control_refresh_nodes(struct control *c, const char *id, const json_t *spec,
                              const json_t *stored)
{
    json_t *nodes = provider_nodes(c->prov, id, spec, NULL);
    if (nodes && !json_equal(nodes, stored))
        store_cluster_set_nodes(c->st, id, nodes);
    return nodes;
}

void control_set_datasets(struct control *c, const struct control_datasets *d)
{
    c->datasets = *d;
}

const struct control_datasets *control_datasets(const struct control *c)
{
    return &c->datasets;
}
