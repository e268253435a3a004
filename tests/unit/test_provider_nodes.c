/* test_provider_nodes: node repair on a real 2-node local cluster in a temp
 * MTC_HOME — restart, reboot (kills a running job step's processes),
 * reimage (wipes spool and scratch) and replace (fresh emulated hardware)
 * each come back with a new registered slurmd; node checks through mtc-agent
 * see ECC errors written into the node's emulated NVML state and a faulty
 * fma() preloaded through its hardware environment (hw/env); every node runs
 * an mtc-agent that supervise restarts. Every daemon is stopped by its
 * recorded pid at exit, also when a check fails. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "provider/provider.h"
#include "provider_fixture.h"
#include "slurm/slurm.h"

static char cdir[512], conf[600];
static pid_t srun_pid;

/* The job step's srun, before the cluster's daemons. */
static void stop_srun(void)
{
    if (srun_pid > 0)
        mtc_pid_stop(srun_pid, 2000);
}

static int sh(const char *cmd, char **out)
{
    char env0[700];
    snprintf(env0, sizeof(env0), "SLURM_CONF=%s", conf);
    return fixture_sh(env0, cmd, out, 30000);
}

static pid_t pid_of(const char *name)
{
    return fixture_pid("tn", name);
}

static char *node_file(const char *node, const char *rel)
{
    static char path[1024];
    snprintf(path, sizeof(path), "%s/nodes/%s/%s", cdir, node, rel);
    return path;
}

/* 1 when pid's initial environment holds the string kv ("K=V") */
static int env_has(pid_t pid, const char *kv)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    char *e = mtc_read_file(path, &len);
    int found = 0;
    for (size_t i = 0; e && i < len && !found; i += strlen(e + i) + 1)
        found = strcmp(e + i, kv) == 0;
    free(e);
    return found;
}

/* A process whose environment has SLURMD_NODENAME=node and whose argv is
 * "sleep 300" — the job step's task on that emulated node. */
static pid_t find_task(const char *node)
{
    /* by node name and this test's own slurm.conf: the sanitizer build's
     * run of this test may be running beside it, with the same node names */
    char want[128], mine[700];
    snprintf(want, sizeof(want), "SLURMD_NODENAME=%s", node);
    snprintf(mine, sizeof(mine), "SLURM_CONF=%s", conf);
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char path[300];
        size_t len = 0;
        pid_t pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        char *c = mtc_read_file(path, &len);
        const char *base = c ? strrchr(c, '/') : NULL;
        base = base ? base + 1 : c;
        int sleep300 = c && strcmp(base, "sleep") == 0 && strlen(c) + 4 < len &&
                       strcmp(c + strlen(c) + 1, "300") == 0;
        free(c);
        if (sleep300 && env_has(pid, want) && env_has(pid, mine))
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

static pid_t parent_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *st = mtc_read_file(path, NULL);
    char *rp = st ? strrchr(st, ')') : NULL;
    int ppid = 0;
    char s;
    if (rp)
        sscanf(rp + 1, " %c %d", &s, &ppid);
    free(st);
    return ppid;
}

static int registered(const char *node)
{
    mtc_error_t err;
    json_t *st = slurm_node_states(conf, &err);
    int ok = slurm_state_registered(json_string_value(json_object_get(st, node)));
    json_decref(st);
    return ok;
}

/* results[] entry for check, or NULL */
static json_t *result(json_t *results, const char *check)
{
    size_t i;
    json_t *r;
    json_array_foreach(
        results, i,
        r) if (!strcmp(json_string_value(json_object_get(r, "check")) ?: "", check)) return r;
    return NULL;
}

static int any_fail(json_t *results)
{
    size_t i;
    json_t *r;
    json_array_foreach(results, i, r)
    {
        if (!strcmp(json_string_value(json_object_get(r, "status")) ?: "", "FAIL")) {
            printf("# FAIL %s: %s\n", json_string_value(json_object_get(r, "check")),
                   json_string_value(json_object_get(r, "reason")));
            return 1;
        }
    }
    return 0;
}

/* The action left the node with a new live slurmd (old one gone) that is registered. */
static void check_action(struct provider *p, json_t *spec, const char *node, const char *action)
{
    mtc_error_t err = {{0}};
    char name[96];
    snprintf(name, sizeof(name), "slurmd-%s", node);
    pid_t old = pid_of(name);
    char agent_name[96];
    snprintf(agent_name, sizeof(agent_name), "agent-%s", node);
    pid_t old_agent = pid_of(agent_name);
    int64_t t0 = mtc_now_ms();
    int rc = provider_node_action(p, "tn", spec, node, action, &err);
    CHECK(rc == 0, "%s %s returns 0 in %.1f s (%s)", action, node, (mtc_now_ms() - t0) / 1000.0,
          err.text);
    pid_t now = pid_of(name);
    CHECK(old > 0 && !mtc_pid_alive(old), "%s: old slurmd %d is gone", action, (int)old);
    CHECK(now > 0 && now != old && mtc_pid_alive(now), "%s: a new slurmd %d runs", action,
          (int)now);
    CHECK(registered(node), "%s: %s is registered", action, node);
    pid_t agent = pid_of(agent_name);
    CHECK(agent > 0 && agent != old_agent && mtc_pid_alive(agent) && !mtc_pid_alive(old_agent),
          "%s: the node's mtc-agent was restarted (%d -> %d)", action, (int)old_agent, (int)agent);
}

int main(void)
{
    mtc_error_t err = {{0}};
    char *o = NULL, path[1024], spec_text[2048], cmd[1024];
    const char *build = getenv("MTC_BUILD");
    char bdir[512], agent[700], nvml[700], badfma[700];
    if (!build || !*build) {
        if (!getcwd(bdir, sizeof(bdir) - 8))
            return 1;
        strcat(bdir, "/build");
        build = bdir;
    }
    snprintf(agent, sizeof(agent), "%s/bin/mtc-agent", build);
    snprintf(nvml, sizeof(nvml), "%s/fakes/libnvml.so", build);
    snprintf(badfma, sizeof(badfma), "%s/fakes/libbadfma.so", build);
    if (!mtc_path_exists(agent) || !mtc_path_exists(nvml) || !mtc_path_exists(badfma)) {
        printf("# %s or %s missing: run make first\n", agent, nvml);
        CHECK(0, "mtc-agent and the fake NVML are built");
        return check_done();
    }
    fixture_before_cleanup = stop_srun;
    if (fixture_home("/tmp/mtcpn.XXXXXX") < 0)
        return 1;
    snprintf(cdir, sizeof(cdir), "%s/clusters/tn", home);
    snprintf(conf, sizeof(conf), "%s/slurm.conf", cdir);
    int64_t t_start = mtc_now_ms();

    struct provider *p = provider_create("local", home, &err);
    CHECK(p != NULL, "provider (%s)", err.text);
    if (!p)
        return check_done();
    struct provider_hooks hooks = {.agent = agent};
    provider_set_hooks(p, &hooks, &err);
    snprintf(
        spec_text, sizeof(spec_text),
        "{\"nodePools\":[{\"id\":\"a3m\",\"machineSpec\":{\"machineType\":\"a3-megagpu-8g\"},"
        "\"scalingSpec\":{\"minNodeCount\":2}}],"
        "\"healthPolicy\":{\"checks\":[\"gpu\",\"disk\",\"sdc\",\"daemon\"],\"intervalSeconds\":2,"
        "\"nvml_library\":\"%s\"}}",
        nvml);
    json_t *in = json_loads(spec_text, 0, NULL);
    json_t *spec = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(spec != NULL, "spec with a healthPolicy naming the emulated NVML (%s)", err.text);
    if (!spec)
        return check_done();
    int rc = provider_apply(p, "tn", spec, NULL, NULL, &err);
    CHECK(rc == 0, "2-node cluster up in %.1f s (%s)", (mtc_now_ms() - t_start) / 1000.0, err.text);
    if (rc < 0)
        return check_done();
    const char *n0 = "tn-a3m-0", *n1 = "tn-a3m-1";

    /* agents and their config */
    pid_t a0 = pid_of("agent-tn-a3m-0"), a1 = pid_of("agent-tn-a3m-1");
    CHECK(a0 > 0 && mtc_pid_alive(a0) && a1 > 0 && mtc_pid_alive(a1),
          "every node runs an mtc-agent (%d, %d)", (int)a0, (int)a1);
    json_t *cfg = json_load_file(node_file(n0, "agent.json"), 0, NULL);
    snprintf(path, sizeof(path), "%s/mtcd.sock", home);
    CHECK(cfg && !strcmp(json_string_value(json_object_get(cfg, "nodeId")), n0) &&
              !strcmp(json_string_value(json_object_get(cfg, "socket")), path) &&
              json_integer_value(json_object_get(cfg, "expectedGpus")) == 8 &&
              !strcmp(json_string_value(json_object_get(cfg, "nvmlLibrary")), nvml) &&
              strstr(json_string_value(json_object_get(cfg, "kernelLog")) ?: "",
                     "/nodes/tn-a3m-0/hw/") &&
              json_integer_value(
                  json_object_get(json_object_get(cfg, "healthPolicy"), "intervalSeconds")) == 2,
          "agent.json: node, mtcd socket, 8 GPUs, emulated NVML, node's kernel log, policy");
    json_decref(cfg);
    CHECK(mtc_path_exists(node_file(n0, "hw/nvidia7")) &&
              mtc_path_exists(node_file(n0, "hw/nvml.state")),
          "emulated hardware: GPU device files and NVML state in nodes/<node>/hw");

    /* node checks */
    json_t *res = provider_node_check(p, "tn", spec, n0, &err);
    json_t *gc = result(res, "gpu.count");
    CHECK(res && !any_fail(res) && gc &&
              !strcmp(json_string_value(json_object_get(gc, "status")), "PASS") &&
              json_number_value(json_object_get(gc, "value")) == 8,
          "node_check on a healthy node: no FAIL, gpu.count PASS with 8 GPUs (%s)", err.text);
    json_decref(res);
    mtc_write_file_fmt(node_file(n0, "hw/nvml.state"), 0644, "count 8\ngpu 3 ecc=4\n");
    res = provider_node_check(p, "tn", spec, n0, &err);
    json_t *ecc = result(res, "gpu.ecc");
    CHECK(ecc && !strcmp(json_string_value(json_object_get(ecc, "status")), "FAIL") &&
              !strcmp(json_string_value(json_object_get(ecc, "severity")), "REBOOT"),
          "ECC errors in the node's NVML state: gpu.ecc FAIL REBOOT (%s)",
          ecc ? json_string_value(json_object_get(ecc, "reason")) : err.text);
    json_decref(res);
    /* hw/env: the emulated hardware's environment, here a faulty fma();
     * bad lines and keys mtc sets are ignored (the sanitizer build wants its
     * runtime first in the library list: ASAN_OPTIONS) */
    const char *asan = getenv("ASAN_OPTIONS");
    mtc_write_file_fmt(node_file(n0, "hw/env"), 0644,
                       "# a bad FPU\nLD_PRELOAD=%s\nASAN_OPTIONS=%s%sverify_asan_link_order=0\n"
                       "\nlower_case=1\nMTC_NODE=tn-a3m-1\nno equals sign\nHW_NOTE=a b=c\n",
                       badfma, asan ? asan : "", asan && *asan ? ":" : "");
    res = provider_node_check(p, "tn", spec, n0, &err);
    json_t *sdc = result(res, "sdc"), *slurmd = result(res, "daemon.slurmd");
    CHECK(sdc && !strcmp(json_string_value(json_object_get(sdc, "status")), "FAIL") &&
              !strcmp(json_string_value(json_object_get(sdc, "severity")), "REPLACE") && slurmd &&
              !strcmp(json_string_value(json_object_get(slurmd, "status")), "PASS"),
          "hw/env LD_PRELOAD=libbadfma: sdc FAIL REPLACE, daemon.slurmd still PASS (%s)",
          sdc ? json_string_value(json_object_get(sdc, "reason")) : err.text);
    json_decref(res);
    /* the Slurm hooks source agent.env (dash runs them): same lines taken */
    snprintf(cmd, sizeof(cmd),
             "dash -c '. %s/nodes/%s/agent.env && printf \"%%s|%%s|%%s\" \"$HW_NOTE\" "
             "\"$MTC_NODE\" \"${lower_case-unset}\"'",
             cdir, n0);
    sh(cmd, &o);
    CHECK(o && !strcmp(o, "a b=c|tn-a3m-0|unset"), "agent.env sourced by sh exports hw/env (%s)",
          o ? o : "");
    free(o);
    res = provider_node_check(p, "tn", spec, n1, &err);
    CHECK(res && !any_fail(res), "the other node's GPUs and FPU are unaffected");
    json_decref(res);
    CHECK(provider_node_check(p, "tn", spec, "tn-a3m-9", &err) == NULL,
          "node_check of an unknown node fails (%s)", err.text);
    CHECK(provider_node_action(p, "tn", spec, n0, "explode", &err) < 0 &&
              strstr(err.text, "unknown node action"),
          "unknown action rejected (%s)", err.text);

    /* restart */
    check_action(p, spec, n1, "restart");

    /* reboot with a job step running on the node, drained as the controller does */
    snprintf(cmd, sizeof(cmd), "SLURM_CONF=%s", conf);
    char *env[] = {cmd, NULL};
    char *srun[] = {"srun", "-w", (char *)n0, "sleep", "300", NULL};
    snprintf(path, sizeof(path), "%s/srun.out", home);
    srun_pid = mtc_spawn(srun, env, path);
    pid_t task = 0;
    for (int64_t end = mtc_now_ms() + 20000; !task && mtc_now_ms() < end; mtc_sleep_ms(200))
        task = find_task(n0);
    pid_t stepd = task ? parent_of(task) : 0;
    if (!task) {
        char *so = mtc_read_file(path, NULL);
        printf("# srun output: %s\n", so ? so : "(none)");
        free(so);
        sh("squeue; sinfo", &o);
        printf("# %s\n", o ? o : "");
        free(o);
    }
    CHECK(task > 0 && stepd > 1, "job step running on %s: task %d under slurmstepd %d", n0,
          (int)task, (int)stepd);
    sh("scontrol update nodename=tn-a3m-0 state=drain reason=test", NULL);
    pid_t other = pid_of("slurmd-tn-a3m-1");
    check_action(p, spec, n0, "reboot");
    CHECK(task > 0 && !mtc_pid_alive(task) && !mtc_pid_alive(stepd),
          "reboot killed the job's task and its slurmstepd");
    CHECK(other == pid_of("slurmd-tn-a3m-1") && mtc_pid_alive(other),
          "the other node's slurmd was left alone");
    sh("sinfo -h -n tn-a3m-0 -o %t", &o);
    CHECK(o && !strncmp(o, "dr", 2), "the node stays drained (%s)", o ? o : "");
    free(o);
    mtc_pid_stop(srun_pid, 2000);
    srun_pid = 0;

    /* reimage: local state wiped, hardware kept */
    snprintf(path, sizeof(path), "%s/spool/%s/marker", cdir, n0);
    mtc_write_file_fmt(path, 0644, "x\n");
    char tmpm[1024];
    snprintf(tmpm, sizeof(tmpm), "%s/tmp/%s/marker", cdir, n0);
    mtc_write_file_fmt(tmpm, 0644, "x\n");
    check_action(p, spec, n0, "reimage");
    CHECK(!mtc_path_exists(path) && !mtc_path_exists(tmpm),
          "reimage wiped the node's spool and scratch dirs");
    char *state = mtc_read_file(node_file(n0, "hw/nvml.state"), NULL);
    CHECK(state && strstr(state, "ecc=4") && mtc_path_exists(node_file(n0, "hw/env")),
          "reimage keeps the hardware (ECC errors and hw/env remain)");
    snprintf(path, sizeof(path), "LD_PRELOAD=%s", badfma);
    a0 = pid_of("agent-tn-a3m-0");
    CHECK(env_has(a0, path) && env_has(a0, "HW_NOTE=a b=c") && env_has(a0, "MTC_NODE=tn-a3m-0") &&
              !env_has(a0, "MTC_NODE=tn-a3m-1") && !env_has(a0, "lower_case=1"),
          "the node's agent runs with hw/env's valid lines, mtc's MTC_NODE kept");
    free(state);

    /* replace: fresh hardware and a new instance id */
    char *inst = mtc_read_file(node_file(n0, "instance"), NULL);
    mtc_write_file_fmt(node_file(n0, "hw/kernel.log"), 0644,
                       "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus\n");
    check_action(p, spec, n0, "replace");
    char *inst2 = mtc_read_file(node_file(n0, "instance"), NULL);
    state = mtc_read_file(node_file(n0, "hw/nvml.state"), NULL);
    char *klog = mtc_read_file(node_file(n0, "hw/kernel.log"), NULL);
    CHECK(inst && inst2 && strcmp(inst, inst2) != 0, "replace: new instance id (%s -> %s)",
          inst ? inst : "", inst2 ? inst2 : "");
    CHECK(state && !strstr(state, "ecc") && strstr(state, "count 8") && klog && !*klog &&
              mtc_path_exists(node_file(n0, "hw/nvidia7")),
          "replace: fresh hardware (healthy NVML state, empty kernel log, device files)");
    a0 = pid_of("agent-tn-a3m-0");
    CHECK(!mtc_path_exists(node_file(n0, "hw/env")) && a0 > 0 && !env_has(a0, path) &&
              !env_has(a0, "HW_NOTE=a b=c"),
          "replace drops hw/env: the new agent runs without it");
    free(inst);
    free(inst2);
    free(state);
    free(klog);
    res = provider_node_check(p, "tn", spec, n0, &err);
    CHECK(res && !any_fail(res), "node_check passes on the replacement (%s)", err.text);
    json_decref(res);

    /* a killed agent comes back through supervise */
    a1 = pid_of("agent-tn-a3m-1");
    if (a1 > 0)
        kill(a1, SIGKILL);
    for (int64_t end = mtc_now_ms() + 3000; mtc_now_ms() < end && mtc_pid_alive(a1);)
        mtc_sleep_ms(20);
    struct fixture_events ev = {0};
    rc = provider_supervise(p, "tn", spec, fixture_on_event, &ev, &err);
    pid_t a1b = pid_of("agent-tn-a3m-1");
    CHECK(rc == 0 && ev.n == 1 && !strcmp(ev.types[0], "AGENT_RESTART") &&
              !strcmp(ev.nodes[0], n1) && a1b != a1 && mtc_pid_alive(a1b),
          "supervise restarts a killed mtc-agent (event AGENT_RESTART)");

    /* delete stops the agents too */
    a0 = pid_of("agent-tn-a3m-0");
    CHECK(provider_delete(p, "tn", &err) == 0 && !mtc_pid_alive(a0) && !mtc_pid_alive(a1b),
          "delete stops every agent (%s)", err.text);
    printf("# total %.1f s\n", (mtc_now_ms() - t_start) / 1000.0);
    json_decref(spec);
    provider_destroy(p);
    return check_done();
}
