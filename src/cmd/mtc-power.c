/* mtc-power: Slurm's SuspendProgram, ResumeProgram and ResumeFailProgram for
 * elastic node pools. `mtc-power --config FILE suspend|resume|resume-fail
 * HOSTLIST` expands Slurm's host list and asks mtcd (:powerNodes) to stop or
 * start those nodes through the provider. slurmctld runs it with an almost
 * empty environment, so everything comes from FILE (power.json beside
 * slurm.conf, mode 0600): clusterId, project, location, socket or url,
 * tokenFile, caFile. Exit 0 when mtcd did it, 1 when it failed, 2 usage. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "slurm/slurm.h"

/* subcommand -> :powerNodes action */
static const struct {
    const char *cmd, *action;
} actions[] = {
    {"suspend", "SUSPEND"},
    {"resume", "RESUME"},
    {"resume-fail", "RESUME_FAILED"},
};

static int usage(FILE *f)
{
    fprintf(f, "usage: mtc-power --config FILE suspend|resume|resume-fail HOSTLIST\n");
    return f == stdout ? 0 : 2;
}

/* A string field of the config (borrowed), or "" when absent. */
static const char *cfg_get(const json_t *cfg, const char *k)
{
    const char *v = json_string_value(json_object_get(cfg, k));
    return v ? v : "";
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char ts[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", gmtime_r(&t, &tm));
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s mtc-power: ", ts);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return usage(stdout);
    if (argc != 5 || strcmp(argv[1], "--config") != 0)
        return usage(stderr);
    const char *action = NULL;
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (strcmp(argv[3], actions[i].cmd) == 0)
            action = actions[i].action;
    if (!action)
        return usage(stderr);
    json_error_t je;
    json_t *cfg = json_load_file(argv[2], JSON_REJECT_DUPLICATES, &je);
    if (!cfg) {
        say("%s:%d: %s", argv[2], je.line, je.text);
        return 2;
    }
    mtc_error_t err = {""};
    json_t *nodes = slurm_hostlist_expand(argv[4], &err);
    const char *cluster = cfg_get(cfg, "clusterId"), *project = cfg_get(cfg, "project"),
               *location = cfg_get(cfg, "location");
    if (!nodes || !mtc_name_valid(project, 63) || !mtc_name_valid(location, 63) || !*cluster) {
        say("%s", nodes ? "config: clusterId, project and location are required" : err.text);
        json_decref(cfg);
        json_decref(nodes);
        return 2;
    }
    char token[512] = "";
    const char *tf = cfg_get(cfg, "tokenFile");
    if (*tf) {
        char *t = mtc_read_file(tf, NULL);
        if (!t) {
            say("cannot read %s: %s", tf, strerror(errno));
            json_decref(cfg);
            json_decref(nodes);
            return 2;
        }
        t[strcspn(t, "\r\n")] = '\0';
        snprintf(token, sizeof(token), "%s", t);
        explicit_bzero(t, strlen(t));
        free(t);
    }
    char path[512];
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:powerNodes", project,
             location, cluster);
    json_t *body = json_pack("{s:s, s:O}", "action", action, "nodes", nodes);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct mtc_mtcd m = {cfg_get(cfg, "socket"), cfg_get(cfg, "url"), cfg_get(cfg, "caFile"),
                         token};
    long status = 0;
    char *reply = NULL;
    /* mtcd waits for the cluster's lock (an update may hold it) */
    int rc = text ? mtc_mtcd_post(&m, path, text, 300, &status, &reply, &err) : -1;
    explicit_bzero(token, sizeof(token));
    if (!text)
        say("out of memory");
    else if (rc < 0)
        say("%s %s: %s", action, argv[4], err.text);
    else if (status < 200 || status > 299)
        say("%s %s: mtcd answered HTTP %ld: %.300s", action, argv[4], status, reply ? reply : "");
    else
        say("%s %s: done", action, argv[4]);
    int ok = rc == 0 && status >= 200 && status <= 299;
    free(reply);
    free(text);
    json_decref(nodes);
    json_decref(cfg);
    curl_global_cleanup();
    return ok ? 0 : 1;
}
