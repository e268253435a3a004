/* control power (power.c): elastic nodes powered up and down as Slurm's
 * power saving asks. */
#ifndef MTC_CONTROL_POWER_H
#define MTC_CONTROL_POWER_H

#include "control/control.h"

/* Elastic nodes (power.c): what Slurm's power saving asks for. */
enum control_power { CONTROL_POWER_RESUME, CONTROL_POWER_SUSPEND, CONTROL_POWER_RESUME_FAILED };
extern const struct schema_enum control_power_enum;
/* Power each of nodes (a JSON array of names) of cl up (RESUME) or down
 * (SUSPEND, RESUME_FAILED) through the provider, recording an event per node
 * (NODE_POWERED_UP, NODE_POWERED_DOWN, NODE_RESUME_FAILED; a failure:
 * NODE_POWER_FAILED). 0, or -1 + err naming the first failure. */
int control_power_nodes(struct control *c, const struct store_cluster *cl,
                        enum control_power action, const json_t *nodes, mtc_error_t *err);

#endif
