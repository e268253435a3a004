/* control healthscan (healthscan*.c, docs/healthscan.md): the cluster health
 * scanner's request — its checks, its schema, and the HEALTH_SCAN
 * operation's request made from it. */
#ifndef MTC_CONTROL_HEALTHSCAN_H
#define MTC_CONTROL_HEALTHSCAN_H

#include "control/control.h"

/* Health scans (healthscan*.c, docs/healthscan.md): the checks a scan runs. */
enum control_scan_check { CONTROL_SCAN_GPU, CONTROL_SCAN_COLLECTIVE, CONTROL_SCAN_STRAGGLER };
extern const struct schema_enum control_scan_check_enum;
/* The :healthScan request: checks (names or "all"), nodes (names or Slurm
 * hostlists), partition, drainBadNodes, force, maxBytes, microbatches,
 * failFraction. */
extern const struct schema control_scan_request_schema;
/* A HEALTH_SCAN operation's request for the canonical request req on cluster
 * cl (caller owns): the nodes resolved (given, else the partition's or every
 * compute node; at least 2, all of the cluster's compute nodes) and idle in
 * Slurm unless req's force (never down or drained ones). NULL with err (one
 * line, "precondition: ..." for a state that forbids it) and *http (400, 404,
 * 500, 503). */
json_t *control_healthscan_prepare(struct control *c, const struct store_cluster *cl,
                                   const json_t *req, int *http, mtc_error_t *err);

#endif
