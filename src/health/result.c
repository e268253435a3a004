/* result: a check's result — the status, severity and mode names (one
 * enum table each), health_set, the worst of a pass and results as JSON.
 * What every check file and the runner build on; it calls none of them. */
#include "health/health.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const status_names[] = {
    [HEALTH_PASS] = "PASS",
    [HEALTH_WARN] = "WARN",
    [HEALTH_FAIL] = "FAIL",
    [HEALTH_UNKNOWN] = "UNKNOWN",
};
const struct schema_enum health_status_enum = SCHEMA_ENUM(status_names, NULL);
const struct schema_enum health_result_status_enum = {status_names, HEALTH_FAIL + 1, NULL};

const struct schema_enum health_severity_enum =
    SCHEMA_NAMES(NULL, [HEALTH_SEV_NONE] = "NONE", [HEALTH_SEV_RESTART] = "RESTART",
                 [HEALTH_SEV_REBOOT] = "REBOOT", [HEALTH_SEV_REIMAGE] = "REIMAGE",
                 [HEALTH_SEV_REPLACE] = "REPLACE");

const struct schema_enum health_mode_enum =
    SCHEMA_NAMES(NULL, [HEALTH_MODE_HEALTH] = "HEALTH", [HEALTH_MODE_PROLOG] = "PROLOG",
                 [HEALTH_MODE_EPILOG] = "EPILOG");

const char *health_status_name(enum health_status s)
{
    return schema_enum_name(&health_status_enum, (int)s) ?: "FAIL";
}

const char *health_severity_name(int sev)
{
    return schema_enum_name(&health_severity_enum, sev) ?: "NONE";
}

int health_set(struct health_result *r, enum health_status st, int sev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->status = st;
    if (sev >= 0)
        r->severity = sev;
    return 0;
}

json_t *health_results_json(const struct health_result *r, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:f}", "check", r[i].check,
                                           "status", health_status_name(r[i].status), "severity",
                                           health_severity_name(r[i].severity), "reason",
                                           r[i].reason, "value", r[i].value));
    return a;
}

enum health_status health_worst(const struct health_result *r, int n, int *severity)
{
    enum health_status w = HEALTH_PASS;
    int sev = HEALTH_SEV_NONE;
    for (int i = 0; i < n; i++) {
        if (r[i].status > w)
            w = r[i].status;
        if (r[i].status == HEALTH_FAIL && r[i].severity > sev)
            sev = r[i].severity;
    }
    if (severity)
        *severity = sev;
    return w;
}
