/* policy: the cluster spec's healthPolicy section — its field table (kinds,
 * limits, defaults, the C struct members) for the schema engine, the rules
 * across fields, and conversion to struct health_policy. */
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A check name or family the table knows. */
static int check_known(const char *s)
{
    for (const struct health_check *c = health_checks; c->name; c++)
        if (strcmp(c->name, s) == 0 || strcmp(c->family, s) == 0)
            return 1;
    return 0;
}

/* Hook: every entry names a check or a family. */
static int known_checks(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    (void)f;
    size_t i;
    json_t *e;
    json_array_foreach(*v, i, e)
    {
        if (!check_known(json_string_value(e))) {
            char sub[300];
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            return schema_error(err, sub, "unknown check \"%.40s\" (see `mtc-agent checks`)",
                                json_string_value(e));
        }
    }
    return 0;
}

/* Hook: an interface name as the kernel allows it (IFNAMSIZ, no '/' or space). */
static int ifname(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    int ok = strlen(s) <= 15;
    for (; ok && *s; s++)
        ok = isalnum((unsigned char)*s) || strchr("-_.:@", *s);
    return ok ? 0
              : schema_error(err, path,
                             "must be a network interface name (up to 15 of [A-Za-z0-9-_.:@])");
}

/* Hook: a library name or file path that reaches dlopen, a config file and
 * shell text: no blanks, quotes or shell characters. "" = the provider's
 * choice. f->arg non-NULL: the path must be absolute. */
static int file_path(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    const char *s = json_string_value(*v);
    int ok = !*s || (strlen(s) <= 255 && (!f->arg || *s == '/'));
    for (; ok && *s; s++)
        ok = isalnum((unsigned char)*s) || strchr("/._+-", *s);
    return ok ? 0
              : schema_error(err, path, "must be %s of up to 255 of [A-Za-z0-9/._+-] (or \"\")",
                             f->arg ? "an absolute path" : "a library name or path");
}

/* Defaults computed from the check table, and the rules across fields. */
static int policy_rules(json_t *p, const char *path, mtc_error_t *err)
{
    char q[300];
    if (!json_object_get(p, "checks")) { /* every family, in table order */
        json_t *a = json_array();
        for (const struct health_check *c = health_checks; c->name; c++) {
            int seen = 0;
            for (size_t i = 0; i < json_array_size(a); i++)
                seen |= strcmp(json_string_value(json_array_get(a, i)), c->family) == 0;
            if (!seen)
                json_array_append_new(a, json_string(c->family));
        }
        json_object_set_new(p, "checks", a);
    }
#define NUM(k) json_number_value(json_object_get(p, k))
    if (NUM("gpuTempWarnC") > NUM("gpuTempFailC"))
        return schema_error(err, schema_join(q, sizeof(q), path, "gpuTempWarnC"),
                            "must not be above gpuTempFailC");
    if (NUM("diskWarnFreePercent") < NUM("diskMinFreePercent"))
        return schema_error(err, schema_join(q, sizeof(q), path, "diskWarnFreePercent"),
                            "must not be below diskMinFreePercent");
    if (NUM("speedWarnFraction") < NUM("speedFailFraction"))
        return schema_error(err, schema_join(q, sizeof(q), path, "speedWarnFraction"),
                            "must not be below speedFailFraction");
#undef NUM
    return 0;
}

#define P(m) SCHEMA_MEMBER(struct health_policy, m)
/* an array member and its count */
#define LIST(k, max, m, n)                                                                         \
    .kind = k, .max_items = max, P(m), .count_off = offsetof(struct health_policy, n)
/* XIDs that mean a broken GPU or driver: FAIL */
#define CRITICAL_XIDS "[48, 63, 64, 74, 79, 92, 94, 95]"
#define RANGE(lo_, hi_, d) .flags = SCHEMA_RANGE, .lo = lo_, .hi = hi_, .dflt = d
#define INT(lo_, hi_, d) .kind = SCHEMA_INT, RANGE(lo_, hi_, d)
#define NUM(lo_, hi_, d) .kind = SCHEMA_NUM, RANGE(lo_, hi_, d)

static const struct schema_field fields[] = {
    {.name = "checks",
     LIST(SCHEMA_STRS, HEALTH_MAX_CHECKS, checks, nchecks),
     .check = known_checks},
    {.name = "intervalSeconds", INT(1, 3600, "5"), P(interval_seconds)},
    /* Slurm caps HealthCheckInterval */
    {.name = "slurmIntervalSeconds", INT(10, 65535, "60"), P(slurm_interval_seconds)},
    {.name = "reportEverySeconds", INT(1, 3600, "30"), P(report_every_seconds)},
    {.name = "gpuMaxUncorrectedEcc", INT(0, 1000000, "0"), P(gpu_max_uncorrected_ecc)},
    {.name = "gpuMaxRetiredPages", INT(0, 100000, "60"), P(gpu_max_retired_pages)},
    {.name = "gpuTempWarnC", INT(0, 200, "85"), P(gpu_temp_warn_c)},
    {.name = "gpuTempFailC", INT(0, 200, "95"), P(gpu_temp_fail_c)},
    {.name = "gpuThrottleFail", .kind = SCHEMA_BOOL, .dflt = "false", P(gpu_throttle_fail)},
    {.name = "xidFail",
     LIST(SCHEMA_INTS, HEALTH_MAX_XIDS, xid_fail, nxid_fail),
     RANGE(1, 1000, CRITICAL_XIDS)},
    {.name = "dcgmDiagLevel", INT(0, 4, "1"), P(dcgm_diag_level)},
    {.name = "diskWarnFreePercent", NUM(0, 100, "10"), P(disk_warn_free_percent)},
    {.name = "diskMinFreePercent", NUM(0, 100, "5"), P(disk_min_free_percent)},
    {.name = "diskMinFreeInodesPercent", NUM(0, 100, "5"), P(disk_min_free_inodes_percent)},
    {.name = "nicInterface", .kind = SCHEMA_STR, .dflt = "\"\"", .check = ifname, P(nic_interface)},
    {.name = "speedWarnFraction", NUM(0, 1, "0.8"), P(speed_warn_fraction)},
    {.name = "speedFailFraction", NUM(0, 1, "0.5"), P(speed_fail_fraction)},
    {.name = "probeIntervalSeconds", INT(0, 86400, "300"), P(probe_interval_seconds)},
    /* mtcd's remediation queue (src/control/remqueue.h): sized for large clusters */
    {.name = "maxConcurrentRemediations",
     INT(1, 1024, "32"),
     P(max_concurrent_remediations)},
    {.name = "maxDrainedFraction", NUM(0, 1, "0.1"), P(max_drained_fraction)},
    /* mtc-agent (root, in Slurm's HealthCheckProgram and prolog) dlopens it */
    {.name = "nvmlLibrary",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_ROOT_EXEC,
     .dflt = "\"\"",
     .check = file_path},
    /* ... and reads it, as root: any file on the node would do */
    {.name = "kernelLog",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_ROOT_EXEC,
     .dflt = "\"\"",
     .check = file_path,
     .arg = ""},
    {.name = NULL},
};

const struct schema health_policy_schema = {fields, SCHEMA_PROTO3, NULL, policy_rules};

json_t *health_policy_normalize(const json_t *in, mtc_error_t *err)
{
    json_t *empty = json_object();
    json_t *out = schema_normalize(in && !json_is_null(in) ? in : empty, &health_policy_schema,
                                   "healthPolicy", err);
    json_decref(empty);
    return out;
}

int health_policy_parse(const json_t *in, struct health_policy *p, mtc_error_t *err)
{
    json_t *c = health_policy_normalize(in, err);
    if (!c)
        return -1;
    memset(p, 0, sizeof(*p));
    int rc = schema_fill(c, &health_policy_schema, p);
    json_decref(c);
    return rc < 0 ? errprintf(err, "healthPolicy: does not fit struct health_policy") : 0;
}
