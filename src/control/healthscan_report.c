/* healthscan report: each mode's JSON report (untrusted: written by the scan
 * job) folded into the scan's report — per node and per pair, the worst
 * state first. */
#include "control/healthscan_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int state_rank(const char *s)
{
    return !s ? -1 : !strcmp(s, "PASS") ? 0 : !strcmp(s, "WARN") ? 1 : !strcmp(s, "FAIL") ? 3 : 2;
}

/* s cut to fit buf (at a UTF-8 character's start), or NULL for NULL. */
static const char *clip(const char *s, char *buf, size_t len)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    if (n >= len) {
        n = len - 1;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* A state the scan job reported, as one mtc knows (anything else: ERROR). */
static const char *known_state(const char *s)
{
    static const char *const known[] = {"PASS", "WARN", "FAIL", "ERROR"};
    for (size_t i = 0; s && i < sizeof(known) / sizeof(known[0]); i++)
        if (!strcmp(s, known[i]))
            return known[i];
    return "ERROR";
}

/* A mode's verdict: its "state", else the worst of its nodes' and pairs'. */
static const char *report_state(const json_t *r)
{
    const char *st = json_string_value(json_object_get(r, "state"));
    if (st)
        return known_state(st);
    const char *keys[] = {"nodes", "pairs"};
    for (int k = 0; k < 2; k++) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(r, keys[k]), i, n)
        {
            const char *s = json_string_value(json_object_get(n, "state"));
            if (s && state_rank(known_state(s)) > state_rank(st))
                st = known_state(s);
        }
    }
    return st;
}

/* Fold one mode's report into the scan's: its nodes' verdicts into nodes
 * (name -> {node, state, reason, results[]}), its pairs and ring sizes. */
static void fold(json_t *report, json_t *nodes, const char *check, const char *mode,
                 const json_t *r)
{
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(r, "nodes"), i, n)
    {
        const char *name = json_string_value(json_object_get(n, "node"));
        if (!name)
            continue;
        json_t *agg = json_object_get(nodes, name);
        if (!agg) {
            agg = json_pack("{s:s, s:s, s:[]}", "node", name, "state", "PASS", "results");
            json_object_set_new(nodes, name, agg);
        }
        json_t *res = json_deep_copy(n);
        json_object_del(res, "node");
        json_object_set_new(res, "check", json_string(check));
        json_object_set_new(res, "mode", json_string(mode));
        json_array_append_new(json_object_get(agg, "results"), res);
        const char *st = known_state(json_string_value(json_object_get(n, "state")));
        const char *was = json_string_value(json_object_get(agg, "state"));
        if (state_rank(st) > state_rank(was)) {
            char why_buf[240];
            const char *why =
                clip(json_string_value(json_object_get(n, "reason")), why_buf, sizeof(why_buf));
            json_object_set_new(agg, "state", json_string(st));
            /* "CHECK: REASON", unless mtc-scan's reason names it already */
            size_t cl = strlen(check);
            json_object_set_new(agg, "reason",
                                why && !strncmp(why, check, cl) && why[cl] == ':'
                                    ? json_string(why)
                                    : json_sprintf("%s: %s", check, why ? why : "no reason given"));
        }
    }
    json_t *p;
    json_array_foreach(json_object_get(r, "pairs"), i, p)
    {
        json_t *q = json_deep_copy(p);
        json_object_set_new(q, "check", json_string(check));
        json_array_append_new(json_object_get(report, "pairs"), q);
    }
    if (json_object_get(r, "sizes"))
        json_object_set(report, "ring", json_object_get(r, "sizes"));
    if (json_object_get(r, "heatmap"))
        json_object_set(report, "heatmap", json_object_get(r, "heatmap"));
}

/* The last line of text that names an error (srun's "error: N: task 1:
 * Segmentation fault"), else its last non-empty line, into buf. */
void healthscan_last_line(const char *text, char *buf, size_t len)
{
    *buf = '\0';
    const char *e = NULL;
    for (const char *p = text ? strstr(text, "error") : NULL; p; p = strstr(p + 1, "error"))
        e = p;
    if (e) {
        while (e > text && e[-1] != '\n')
            e--;
        snprintf(buf, len, "%.*s", (int)strcspn(e, "\n"), e);
        return;
    }
    const char *end = text ? text + strlen(text) : NULL;
    while (end && end > text && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    if (!end || end == text)
        return;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    snprintf(buf, len, "%.*s", (int)(end - start), start);
}

/* The report of the files under dir for req's checks (caller owns). */
json_t *healthscan_build_report(const json_t *req, const char *dir, const char *job)
{
    json_t *report = json_pack("{s:s, s:O, s:s, s:[], s:[]}", "state", "PASS", "checks",
                               json_object_get(req, "checks"), "jobId", job, "scans", "pairs");
    json_t *nodes = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(req, "checks"), i, v)
    {
        const char *check = json_string_value(v);
        int k = schema_enum_parse(&control_scan_check_enum, check, 0);
        for (int m = 0; k >= 0 && healthscan_modes[k][m]; m++) {
            const char *mode = healthscan_modes[k][m];
            char name[32], line[200];
            snprintf(name, sizeof(name), "%s.json", mode);
            char *text = healthscan_read_text(dir, name);
            snprintf(name, sizeof(name), "%s.err", mode);
            char *errs = healthscan_read_text(dir, name);
            snprintf(name, sizeof(name), "%s.rc", mode);
            char *rc = healthscan_read_text(dir, name);
            json_t *r = text ? json_loads(text, 0, NULL) : NULL;
            const char *st = r ? report_state(r) : NULL;
            snprintf(name, sizeof(name), "%s.attempts", mode);
            char *att = healthscan_read_text(dir, name);
            json_t *scan =
                json_pack("{s:s, s:s, s:i, s:i}", "check", check, "mode", mode, "exitStatus",
                          rc ? atoi(rc) : -1, "attempts", att ? atoi(att) : 0);
            free(att);
            /* a complete report counts whatever the step's exit status (rank 0
             * exiting 1 on a FAIL makes srun stop the other ranks) */
            if (!r || !st || !rc) {
                healthscan_last_line(errs, line, sizeof(line));
                if (rc && atoi(rc) == 124)
                    snprintf(line, sizeof(line), "ran over %d s: stopped", SCAN_STEP_S);
                json_object_set_new(scan, "state", json_string("ERROR"));
                json_object_set_new(scan, "reason",
                                    json_sprintf("mtc-scan %s %s: %s", mode,
                                                 rc ? "failed" : "did not run",
                                                 *line ? line : "no report"));
            } else {
                json_object_set_new(scan, "state", json_string(st));
                if (json_object_get(r, "reason"))
                    json_object_set(scan, "reason", json_object_get(r, "reason"));
                fold(report, nodes, check, mode, r);
            }
            const char *ss = json_string_value(json_object_get(scan, "state"));
            /* a check that could not run fails the scan, never a node */
            if (state_rank(ss) > state_rank(json_string_value(json_object_get(report, "state"))))
                json_object_set_new(report, "state",
                                    json_string(state_rank(ss) >= 2 ? "FAIL" : ss));
            json_array_append_new(json_object_get(report, "scans"), scan);
            json_decref(r);
            free(text);
            free(errs);
            free(rc);
        }
    }
    json_t *list = json_array();
    json_array_foreach(json_object_get(req, "nodes"), i, v)
    {
        json_t *n = json_object_get(nodes, json_string_value(v));
        json_array_append(list, n ? n
                                  : json_pack("{s:s, s:s, s:s, s:[]}", "node", json_string_value(v),
                                              "state", "UNKNOWN", "reason",
                                              "no check reported on this node", "results"));
        if (!n)
            json_decref(json_array_get(list, json_array_size(list) - 1));
    }
    json_object_set_new(report, "nodes", list);
    json_decref(nodes);
    return report;
}
