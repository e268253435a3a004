/* power: Slurm's power saving asks (through mtc-power and :powerNodes) for
 * elastic nodes to be started or stopped; the provider does it, and each
 * change is a cluster event (a resume that failed: NODE_RESUME_FAILED). */
#include "control/internal.h"
#include "control/power.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const struct schema_enum control_power_enum =
    SCHEMA_NAMES(NULL, [CONTROL_POWER_RESUME] = "RESUME", [CONTROL_POWER_SUSPEND] = "SUSPEND",
                 [CONTROL_POWER_RESUME_FAILED] = "RESUME_FAILED");

/* per action: power on?, the event, its message */
static const struct {
    int on;
    const char *event, *message;
} power_actions[] = {
    [CONTROL_POWER_RESUME] = {1, "NODE_POWERED_UP", "Slurm resumed the node for a job; started"},
    [CONTROL_POWER_SUSPEND] = {0, "NODE_POWERED_DOWN", "idle past suspendTimeSeconds; stopped"},
    [CONTROL_POWER_RESUME_FAILED] = {0, "NODE_RESUME_FAILED",
                                     "did not register within resumeTimeoutSeconds: Slurm marked "
                                     "it DOWN and requeued its jobs; stopped"},
};

int control_power_nodes(struct control *c, const struct store_cluster *cl,
                        enum control_power action, const json_t *nodes, mtc_error_t *err)
{
    size_t i, failed = 0;
    json_t *n;
    char first[sizeof(err->text)] = "";
    json_array_foreach(nodes, i, n)
    {
        const char *node = json_string_value(n);
        mtc_error_t e = {""};
        if (provider_power(c->prov, cl->id, cl->spec, node, power_actions[action].on, &e) < 0) {
            if (!failed++)
                snprintf(first, sizeof(first), "%s", e.text);
            log_msg(LOG_ERR, "cluster %s: %s %s: %s", cl->id, CONTROL_NAME(control_power_enum,
                                                                            action), node, e.text);
            store_event_add(c->st, cl->id, "NODE_POWER_FAILED", node, e.text);
            continue;
        }
        store_event_add(c->st, cl->id, power_actions[action].event, node,
                        power_actions[action].message);
    }
    /* the API shows the new states at once, not at the next supervisor pass */
    json_decref(control_refresh_nodes(c, cl->id, cl->spec, cl->nodes));
    if (failed) {
        errno = EIO;
        return errprintf(err, "%zu of %zu node(s) failed: %s", failed, json_array_size(nodes),
                         first);
    }
    return 0;
}
