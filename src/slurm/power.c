/* power: what mtc reads of Slurm's power saving — compact host lists
 * ("c1-gpu-[1-3,5]", "a-1,b-[01-02]") expanded to names, as the power-saving
 * programs receive them, and a node's power state from sinfo's suffixes. */
#include "slurm/slurm.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOSTLIST_MAX 4096
#define NAME_MAX_LEN 256

/* Expand one item (no top-level commas) into out; recursion handles each
 * bracket group in turn. 0, or -1 + err. */
static int expand_item(const char *item, size_t len, json_t *out, mtc_error_t *err)
{
    const char *lb = memchr(item, '[', len);
    if (!lb) {
        if (len == 0 || len >= NAME_MAX_LEN || memchr(item, ']', len))
            return errprintf(err, "bad host name \"%.*s\"", (int)(len > 64 ? 64 : len), item);
        if (json_array_size(out) >= HOSTLIST_MAX)
            return errprintf(err, "more than %d hosts", HOSTLIST_MAX);
        char name[NAME_MAX_LEN];
        snprintf(name, sizeof(name), "%.*s", (int)len, item);
        json_array_append_new(out, json_string(name));
        return 0;
    }
    const char *rb = memchr(lb, ']', len - (size_t)(lb - item));
    if (!rb || rb == lb + 1)
        return errprintf(err, "unbalanced or empty brackets in \"%.*s\"",
                         (int)(len > 64 ? 64 : len), item);
    size_t pre = (size_t)(lb - item), post = len - (size_t)(rb + 1 - item);
    for (const char *r = lb + 1; r < rb;) {
        const char *end = memchr(r, ',', (size_t)(rb - r));
        if (!end)
            end = rb;
        const char *dash = memchr(r, '-', (size_t)(end - r));
        const char *hi_s = dash ? dash + 1 : r;
        size_t lo_len = (size_t)((dash ? dash : end) - r), hi_len = (size_t)(end - hi_s);
        int ok = lo_len > 0 && hi_len > 0 && lo_len <= 9 && hi_len <= 9;
        for (size_t k = 0; ok && k < lo_len; k++)
            ok = isdigit((unsigned char)r[k]);
        for (size_t k = 0; ok && k < hi_len; k++)
            ok = isdigit((unsigned char)hi_s[k]);
        long lo = ok ? strtol(r, NULL, 10) : 0, hi = ok ? strtol(hi_s, NULL, 10) : 0;
        if (!ok || hi < lo)
            return errprintf(err, "bad range \"%.*s\" in \"%.*s\"", (int)(end - r), r,
                             (int)(len > 64 ? 64 : len), item);
        if (hi - lo >= HOSTLIST_MAX)
            return errprintf(err, "more than %d hosts", HOSTLIST_MAX);
        int width = r[0] == '0' && lo_len > 1 ? (int)lo_len : 0; /* zero-padded: "01-12" */
        for (long v = lo; v <= hi; v++) {
            char buf[2 * NAME_MAX_LEN];
            int n = snprintf(buf, sizeof(buf), "%.*s%0*ld%.*s", (int)pre, item, width, v,
                             (int)post, rb + 1);
            if (n < 0 || (size_t)n >= sizeof(buf))
                return errprintf(err, "host name too long in \"%.64s\"", item);
            if (expand_item(buf, (size_t)n, out, err) < 0)
                return -1;
        }
        r = end < rb ? end + 1 : rb;
    }
    return 0;
}

json_t *slurm_hostlist_expand(const char *list, mtc_error_t *err)
{
    json_t *out = json_array();
    if (!list || !*list) {
        json_decref(out);
        errno = EINVAL;
        return errprintf(err, "empty host list"), NULL;
    }
    const char *s = list;
    while (*s) {
        int depth = 0;
        const char *e = s;
        for (; *e && (depth > 0 || *e != ','); e++)
            depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
        if (expand_item(s, (size_t)(e - s), out, err) < 0) {
            json_decref(out);
            errno = EINVAL;
            return NULL;
        }
        s = *e ? e + 1 : e;
    }
    return out;
}

/* sinfo's compact state suffixes (man sinfo, NODE STATE CODES) */
static const struct {
    char suffix;
    enum slurm_power_state state;
} suffixes[] = {
    {'~', SLURM_POWERED_DOWN},
    {'#', SLURM_POWERING_UP},
    {'%', SLURM_POWERING_DOWN},
};

const struct schema_enum slurm_power_state_enum =
    SCHEMA_NAMES(NULL, [SLURM_POWER_ON] = "RUNNING", [SLURM_POWERED_DOWN] = "POWERED_DOWN",
                 [SLURM_POWERING_UP] = "POWERING_UP", [SLURM_POWERING_DOWN] = "POWERING_DOWN");

enum slurm_power_state slurm_power_state_of(const char *state)
{
    for (size_t i = 0; state && *state && i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
        if (strchr(state, suffixes[i].suffix))
            return suffixes[i].state;
    return SLURM_POWER_ON;
}

pid_t slurm_slurmd_boot(const char *conf, const char *node, const char *logpath)
{
    /* a resumed node must report a boot at or after Slurm's resume request
     * (slurmctld computes it as the registration's time less the reported
     * uptime, both in whole seconds): `slurmd -b` reports the uptime as the
     * seconds since slurmd itself started, and it starts in the second after
     * this call. (The host's uptime counts from long before; a time namespace
     * booted "now" still counted slurmd's own start-up, 2-4 s on a busy
     * host, and put the boot before the request: issue 48.) */
    time_t t0 = time(NULL);
    while (time(NULL) == t0)
        mtc_sleep_ms(20);
    char env0[4200], env1[128];
    snprintf(env0, sizeof(env0), "SLURM_CONF=%s", conf);
    snprintf(env1, sizeof(env1), "MTC_NODE=%s", node); /* as slurm_slurmd_start */
    char *env[] = {env0, env1, NULL};
    char *argv[] = {"slurmd", "-b", "-D", "-f", (char *)conf, "-N", (char *)node, NULL};
    return mtc_spawn(argv, env, logpath);
}
