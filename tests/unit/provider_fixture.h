/* provider_fixture: what the provider tests share — a temporary MTC_HOME whose
 * daemons are stopped by their recorded pids at exit, also when a check fails
 * or a fatal signal comes; shell commands against a cluster; its pid files;
 * and an event callback that records what supervise reports. */
#ifndef MTC_PROVIDER_FIXTURE_H
#define MTC_PROVIDER_FIXTURE_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

static char home[256];                       /* the test's MTC_HOME; "" once removed */
static void (*fixture_before_cleanup)(void); /* the test's own processes, stopped first */

/* Stop the live process each pid file in dir names ("*.pid" or "pid"). */
static void fixture_stop_pids_in(const char *dir)
{
    DIR *r = opendir(dir);
    struct dirent *e;
    while (r && (e = readdir(r))) {
        char pf[2048];
        snprintf(pf, sizeof(pf), "%s/%s", dir, e->d_name);
        int pidfile = strstr(e->d_name, ".pid") || strcmp(e->d_name, "pid") == 0;
        pid_t pid = pidfile ? mtc_pid_read(pf) : 0;
        if (pid > 0 && mtc_pid_alive(pid)) {
            printf("# cleanup: stopping pid %d (%s)\n", (int)pid, e->d_name);
            mtc_pid_stop(pid, 3000);
        }
    }
    if (r)
        closedir(r);
}

/* Every daemon of every cluster under home/clusters/ (their run/, run/slurm/ and
 * munge/ pid files), then home removed. */
static void fixture_cleanup(void)
{
    if (!home[0])
        return;
    if (fixture_before_cleanup)
        fixture_before_cleanup();
    char path[1024];
    snprintf(path, sizeof(path), "%s/clusters", home);
    DIR *d = opendir(path);
    struct dirent *c;
    while (d && (c = readdir(d))) {
        if (c->d_name[0] == '.')
            continue;
        static const char *const sub[] = {"run", "run/slurm", "munge"};
        for (int k = 0; k < 3; k++) {
            char run[1400];
            snprintf(run, sizeof(run), "%s/%s/%s", path, c->d_name, sub[k]);
            fixture_stop_pids_in(run);
        }
    }
    if (d)
        closedir(d);
    mtc_rm_rf(home);
    home[0] = '\0';
}

static void fixture_on_signal(int sig)
{
    fixture_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* home made from a mkdtemp template ("/tmp/NAME.XXXXXX") and cleaned up at exit
 * and on SIGINT, SIGTERM, SIGSEGV and SIGABRT. 0, or -1 (perror said why). */
static int fixture_home(const char *tmpl)
{
    snprintf(home, sizeof(home), "%s", tmpl);
    if (!mkdtemp(home)) {
        perror("mkdtemp");
        home[0] = '\0';
        return -1;
    }
    atexit(fixture_cleanup);
    signal(SIGINT, fixture_on_signal);
    signal(SIGTERM, fixture_on_signal);
    signal(SIGSEGV, fixture_on_signal);
    signal(SIGABRT, fixture_on_signal);
    return 0;
}

/* Run cmd with bash, env0 ("K=V") added to the environment, for up to timeout_ms.
 * Returns the exit status; *out (optional, caller frees) gets the output with
 * trailing newlines and blanks removed. */
static int fixture_sh(const char *env0, const char *cmd, char **out, int timeout_ms)
{
    char *env[] = {(char *)env0, NULL};
    char *argv[] = {"bash", "-c", (char *)cmd, NULL};
    char *o = NULL;
    int rc = mtc_run(argv, env, &o, timeout_ms);
    size_t n = o ? strlen(o) : 0;
    while (n && (o[n - 1] == '\n' || o[n - 1] == ' '))
        o[--n] = '\0';
    if (out)
        *out = o;
    else
        free(o);
    return rc;
}

/* The pid cluster id's daemon `name` recorded (home/clusters/ID/run/NAME.pid), or 0. */
static pid_t fixture_pid(const char *id, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/clusters/%s/run/%s.pid", home, id, name);
    return mtc_pid_read(path);
}

/* What provider_supervise reported: the first 16 events' types and nodes. */
struct fixture_events {
    int n;
    char types[16][32];
    char nodes[16][64];
};

/* A provider_event_fn: prints the event and records it in arg (struct fixture_events). */
static void fixture_on_event(void *arg, const char *type, const char *node, const char *message)
{
    struct fixture_events *e = arg;
    printf("# event %s %s: %s\n", type, node ? node : "-", message);
    if (e->n < 16) {
        snprintf(e->types[e->n], sizeof(e->types[0]), "%s", type);
        snprintf(e->nodes[e->n], sizeof(e->nodes[0]), "%s", node ? node : "");
        e->n++;
    }
}

#endif
