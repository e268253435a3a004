/* policy: the cluster spec's healthPolicy section — strict validation
 * (snake_case or camelCase, unknown fields named), defaults, canonical
 * camelCase form, and conversion to struct health_policy. */
#include "health/health.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum pkind { P_INT, P_NUM, P_BOOL, P_STR, P_CHECKS, P_INTS, P_PATH };

/* One policy field: its camelCase name, kind, range and default. */
struct pfield {
    const char *name;
    enum pkind kind;
    double lo, hi;    /* P_INT, P_NUM, P_INTS elements: inclusive range; P_PATH: lo 1 = absolute */
    double def;       /* P_INT, P_NUM, P_BOOL */
    const char *sdef; /* P_STR */
};

static const int default_xids[] = {48, 63, 64, 74, 79, 92, 94, 95};

static const struct pfield fields[] = {
    {"checks", P_CHECKS, 0, 0, 0, NULL},
    {"intervalSeconds", P_INT, 1, 3600, 5, NULL},
    {"slurmIntervalSeconds", P_INT, 10, 65535, 60, NULL}, /* Slurm caps HealthCheckInterval */
    {"reportEverySeconds", P_INT, 1, 3600, 30, NULL},
    {"gpuMaxUncorrectedEcc", P_INT, 0, 1000000, 0, NULL},
    {"gpuMaxRetiredPages", P_INT, 0, 100000, 60, NULL},
    {"gpuTempWarnC", P_INT, 0, 200, 85, NULL},
    {"gpuTempFailC", P_INT, 0, 200, 95, NULL},
    {"gpuThrottleFail", P_BOOL, 0, 0, 0, NULL},
    {"xidFail", P_INTS, 1, 1000, 0, NULL},
    {"dcgmDiagLevel", P_INT, 0, 4, 1, NULL},
    {"diskWarnFreePercent", P_NUM, 0, 100, 10, NULL},
    {"diskMinFreePercent", P_NUM, 0, 100, 5, NULL},
    {"diskMinFreeInodesPercent", P_NUM, 0, 100, 5, NULL},
    {"nicInterface", P_STR, 0, 0, 0, ""},
    {"speedWarnFraction", P_NUM, 0, 1, 0.8, NULL},
    {"speedFailFraction", P_NUM, 0, 1, 0.5, NULL},
    {"probeIntervalSeconds", P_INT, 0, 86400, 300, NULL},
    {"nvmlLibrary", P_PATH, 0, 0, 0, ""},
    {"kernelLog", P_PATH, 1, 0, 0, ""},
    {NULL, P_INT, 0, 0, 0, NULL},
};

#define PATH "healthPolicy"

static int bad(mtc_error_t *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(mtc_error_t *err, const char *field, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    errno = EINVAL;
    return errprintf(err, PATH ".%s: %s", field, msg);
}


/* A check name or family the table knows. */
static int check_known(const char *s)
{
    for (const struct health_check *c = health_checks; c->name; c++)
        if (strcmp(c->name, s) == 0 || strcmp(c->family, s) == 0)
            return 1;
    return 0;
}

/* An interface name as the kernel allows it (IFNAMSIZ, no '/' or space). */
static int ifname_ok(const char *s)
{
    if (strlen(s) > 15)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("-_.:@", *s))
            return 0;
    return 1;
}

/* A library name or file path that reaches dlopen, a config file and shell
 * text: no blanks, quotes or shell characters. "" = the provider's choice. */
static int path_ok(const char *s, int absolute)
{
    if (!*s)
        return 1;
    if (strlen(s) > 255 || (absolute && *s != '/'))
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("/._+-", *s))
            return 0;
    return 1;
}

/* proto3 JSON may quote numbers; accept "10" as 10. */
static int number_of(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        *out = strtod(s, &end);
        return (*s && !*end && !errno && isfinite(*out)) ? 0 : -1;
    }
    return -1;
}

static json_t *norm_field(const struct pfield *f, const json_t *v, mtc_error_t *err)
{
    double d;
    size_t i;
    json_t *e, *arr;
    switch (f->kind) {
    case P_INT:
        if (number_of(v, &d) < 0 || d != floor(d) || d < f->lo || d > f->hi) {
            bad(err, f->name, "must be an integer from %.0f to %.0f", f->lo, f->hi);
            return NULL;
        }
        return json_integer((json_int_t)d);
    case P_NUM:
        if (number_of(v, &d) < 0 || d < f->lo || d > f->hi) {
            bad(err, f->name, "must be a number from %g to %g", f->lo, f->hi);
            return NULL;
        }
        return json_real(d);
    case P_BOOL:
        if (!json_is_boolean(v)) {
            bad(err, f->name, "must be true or false");
            return NULL;
        }
        return json_deep_copy(v);
    case P_STR:
        if (!json_is_string(v) || !ifname_ok(json_string_value(v))) {
            bad(err, f->name, "must be a network interface name (up to 15 of [A-Za-z0-9-_.:@])");
            return NULL;
        }
        return json_deep_copy(v);
    case P_PATH:
        if (!json_is_string(v) || !path_ok(json_string_value(v), f->lo != 0)) {
            bad(err, f->name, "must be %s of up to 255 of [A-Za-z0-9/._+-] (or \"\")",
                f->lo != 0 ? "an absolute path" : "a library name or path");
            return NULL;
        }
        return json_deep_copy(v);
    case P_CHECKS:
        if (!json_is_array(v)) {
            bad(err, f->name, "must be an array of check names or families");
            return NULL;
        }
        if (json_array_size(v) > HEALTH_MAX_CHECKS) {
            bad(err, f->name, "at most %d entries", HEALTH_MAX_CHECKS);
            return NULL;
        }
        arr = json_array();
        json_array_foreach(v, i, e)
        {
            const char *s = json_string_value(e);
            if (!s || !check_known(s)) {
                json_decref(arr);
                errno = EINVAL;
                errprintf(err, PATH ".%s[%zu]: unknown check \"%.40s\" (see `mtc-agent checks`)",
                          f->name, i, s ? s : "(not a string)");
                return NULL;
            }
            json_array_append(arr, e);
        }
        return arr;
    case P_INTS:
        if (!json_is_array(v) || json_array_size(v) > HEALTH_MAX_XIDS) {
            bad(err, f->name, "must be an array of at most %d integers", HEALTH_MAX_XIDS);
            return NULL;
        }
        arr = json_array();
        json_array_foreach(v, i, e)
        {
            if (number_of(e, &d) < 0 || d != floor(d) || d < f->lo || d > f->hi) {
                json_decref(arr);
                errno = EINVAL;
                errprintf(err, PATH ".%s[%zu]: must be an integer from %.0f to %.0f", f->name, i,
                          f->lo, f->hi);
                return NULL;
            }
            json_array_append_new(arr, json_integer((json_int_t)d));
        }
        return arr;
    }
    return NULL;
}

static json_t *default_of(const struct pfield *f)
{
    json_t *a;
    switch (f->kind) {
    case P_INT:
        return json_integer((json_int_t)f->def);
    case P_NUM:
        return json_real(f->def);
    case P_BOOL:
        return json_boolean(f->def != 0);
    case P_STR:
    case P_PATH:
        return json_string(f->sdef);
    case P_CHECKS:
        a = json_array();
        /* every family, in table order */
        for (const struct health_check *c = health_checks; c->name; c++) {
            int seen = 0;
            for (size_t i = 0; i < json_array_size(a); i++)
                seen |= strcmp(json_string_value(json_array_get(a, i)), c->family) == 0;
            if (!seen)
                json_array_append_new(a, json_string(c->family));
        }
        return a;
    case P_INTS:
        a = json_array();
        for (size_t i = 0; i < sizeof(default_xids) / sizeof(default_xids[0]); i++)
            json_array_append_new(a, json_integer(default_xids[i]));
        return a;
    }
    return json_null();
}

json_t *health_policy_normalize(const json_t *in, mtc_error_t *err)
{
    char camel[64];
    const char *k;
    json_t *v;
    if (in && !json_is_object(in) && !json_is_null(in)) {
        errno = EINVAL;
        errprintf(err, PATH ": must be an object");
        return NULL;
    }
    json_t *given = json_object();
    if (in && json_is_object(in)) {
        json_object_foreach((json_t *)in, k, v)
        {
            mtc_camel_case(k, camel, sizeof(camel));
            const struct pfield *f = fields;
            while (f->name && strcmp(f->name, camel) != 0)
                f++;
            if (!f->name) {
                bad(err, k, "unknown field");
                goto error;
            }
            if (json_object_get(given, f->name)) {
                bad(err, f->name, "field given twice (snake_case and camelCase)");
                goto error;
            }
            if (json_is_null(v))
                continue; /* proto3: null means "not set" */
            json_t *n = norm_field(f, v, err);
            if (!n)
                goto error;
            json_object_set_new(given, f->name, n);
        }
    }
    json_t *out = json_object();
    for (const struct pfield *f = fields; f->name; f++) {
        json_t *n = json_object_get(given, f->name);
        json_object_set_new(out, f->name, n ? json_incref(n) : default_of(f));
    }
    json_decref(given);
    /* cross-field rules */
    if (json_integer_value(json_object_get(out, "gpuTempWarnC")) >
        json_integer_value(json_object_get(out, "gpuTempFailC"))) {
        bad(err, "gpuTempWarnC", "must not be above gpuTempFailC");
        json_decref(out);
        return NULL;
    }
    if (json_real_value(json_object_get(out, "diskWarnFreePercent")) <
        json_real_value(json_object_get(out, "diskMinFreePercent"))) {
        bad(err, "diskWarnFreePercent", "must not be below diskMinFreePercent");
        json_decref(out);
        return NULL;
    }
    if (json_real_value(json_object_get(out, "speedWarnFraction")) <
        json_real_value(json_object_get(out, "speedFailFraction"))) {
        bad(err, "speedWarnFraction", "must not be below speedFailFraction");
        json_decref(out);
        return NULL;
    }
    return out;
error:
    json_decref(given);
    return NULL;
}

int health_policy_parse(const json_t *in, struct health_policy *p, mtc_error_t *err)
{
    json_t *c = health_policy_normalize(in, err);
    size_t i;
    json_t *e;
    if (!c)
        return -1;
    memset(p, 0, sizeof(*p));
#define I(k) ((int)json_integer_value(json_object_get(c, k)))
#define D(k) json_number_value(json_object_get(c, k))
    json_array_foreach(json_object_get(c, "checks"), i, e)
        snprintf(p->checks[p->nchecks++], sizeof(p->checks[0]), "%s", json_string_value(e));
    p->interval_seconds = I("intervalSeconds");
    p->slurm_interval_seconds = I("slurmIntervalSeconds");
    p->report_every_seconds = I("reportEverySeconds");
    p->gpu_max_uncorrected_ecc = I("gpuMaxUncorrectedEcc");
    p->gpu_max_retired_pages = I("gpuMaxRetiredPages");
    p->gpu_temp_warn_c = I("gpuTempWarnC");
    p->gpu_temp_fail_c = I("gpuTempFailC");
    p->gpu_throttle_fail = json_is_true(json_object_get(c, "gpuThrottleFail"));
    json_array_foreach(json_object_get(c, "xidFail"), i, e) p->xid_fail[p->nxid_fail++] =
        (int)json_integer_value(e);
    p->dcgm_diag_level = I("dcgmDiagLevel");
    p->disk_warn_free_percent = D("diskWarnFreePercent");
    p->disk_min_free_percent = D("diskMinFreePercent");
    p->disk_min_free_inodes_percent = D("diskMinFreeInodesPercent");
    snprintf(p->nic_interface, sizeof(p->nic_interface), "%s",
             json_string_value(json_object_get(c, "nicInterface")));
    p->speed_warn_fraction = D("speedWarnFraction");
    p->speed_fail_fraction = D("speedFailFraction");
    p->probe_interval_seconds = I("probeIntervalSeconds");
#undef I
#undef D
    json_decref(c);
    return 0;
}
