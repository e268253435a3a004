/* control reports (report.c, straggler.c): agents' health reports judged,
 * stored and counted; a node's speed results against its pool's. */
#ifndef MTC_CONTROL_REPORTS_H
#define MTC_CONTROL_REPORTS_H

#include "control/control.h"

/* A node's health results as its agent reported them (results: the
 * reportHealth array) in mode: judged (speed probes against the pool),
 * summarized and stored; a FAIL wakes the supervisor. Returns the worst
 * status (enum health_status), or -1 + err (bad results, store failure). */
int control_report_health(struct control *c, const struct store_cluster *cl, const char *node,
                          enum health_mode mode, const json_t *results, mtc_error_t *err);

/* Agents' health reports stored since mtcd started, {cluster id: count}.
 * Caller owns. */
json_t *control_report_counts(void);

/* Stragglers: a node's speed.* results against its node pool's median
 * (health_speed_judge). */
struct health_result;
/* Judge res[0..n)'s speed.compute / speed.membw results of node against the
 * latest values stored for the other nodes of its node pool (the cluster's
 * healthPolicy fractions); a worse verdict rewrites the result (FAIL: severity
 * REBOOT, the reason names the median). Returns how many results changed. */
int control_speed_compare(struct store *st, const struct store_cluster *cl, const char *node,
                          struct health_result *res, int n);

#endif
