/* report: a node's health results become its stored health — the worst
 * status and severity, the first failing (else warning) check and its reason
 * — whether an agent reported them (the API) or the remediation controller
 * ran the checks itself after an action. Speed probes are judged here too. */
#include "control/internal.h"
#include "control/reports.h"
#include "health/health.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum health_status control_record_health(struct control *c, const struct store_cluster *cl,
                                         const char *node, enum health_mode mode, int judge_speed,
                                         struct health_result *res, int n, const json_t *results)
{
    /* an agent's speed probes are judged here, against the node pool's median */
    int rejudged = judge_speed ? control_speed_compare(c->st, cl, node, res, n) : 0;
    int sev = 0;
    enum health_status worst = health_worst(res, n, &sev);
    json_t *stored =
        rejudged || !results ? health_results_json(res, n) : json_incref((json_t *)results);
    struct store_health h = {.results = stored};
    snprintf(h.status, sizeof(h.status), "%s", health_status_name(worst));
    snprintf(h.severity, sizeof(h.severity), "%s", health_severity_name(sev));
    const char *in = mode == HEALTH_MODE_HEALTH ? "" : " in ";
    const char *mname = mode == HEALTH_MODE_HEALTH ? "" : schema_enum_name(&health_mode_enum, mode);
    for (int pass = 0; pass < 2 && !*h.failing_check; pass++) { /* first FAIL, else first WARN */
        for (int i = 0; i < n; i++) {
            if (res[i].status == (pass == 0 ? HEALTH_FAIL : HEALTH_WARN)) {
                snprintf(h.failing_check, sizeof(h.failing_check), "%s", res[i].check);
                snprintf(h.reason, sizeof(h.reason), "%.240s%s%s", res[i].reason, in, mname);
                break;
            }
        }
    }
    int put = store_health_put(c->st, cl->id, node, &h);
    json_decref(stored);
    if (put < 0)
        return (enum health_status) - 1;
    if (worst == HEALTH_FAIL) {
        log_msg(LOG_WARNING, "cluster %s node %s: %s failed: %s", cl->id, node, h.failing_check,
                h.reason);
        control_poke(c);
    }
    return worst;
}

/* Agents' reports stored since mtcd started, by cluster id (for /metrics:
 * a load test checks that none was lost). */
static json_t *report_counts;
static pthread_mutex_t counts_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_report(const char *id)
{
    pthread_mutex_lock(&counts_lock);
    if (!report_counts)
        report_counts = json_object();
    json_t *v = json_object_get(report_counts, id);
    json_object_set_new(report_counts, id, json_integer(v ? json_integer_value(v) + 1 : 1));
    pthread_mutex_unlock(&counts_lock);
}

json_t *control_report_counts(void)
{
    pthread_mutex_lock(&counts_lock);
    json_t *out = report_counts ? json_deep_copy(report_counts) : json_object();
    pthread_mutex_unlock(&counts_lock);
    return out;
}

int control_report_health(struct control *c, const struct store_cluster *cl, const char *node,
                          enum health_mode mode, const json_t *results, mtc_error_t *err)
{
    struct health_result res[64];
    int n = health_results_parse(results, res, 64, err);
    if (n < 0) {
        errno = EINVAL;
        return -1;
    }
    int worst = (int)control_record_health(c, cl, node, mode, 1, res, n, results);
    if (worst < 0) {
        errno = EIO;
        return errprintf(err, "cannot store the report");
    }
    count_report(cl->id);
    return worst;
}
