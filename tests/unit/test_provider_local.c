/* test_provider_local: the local provider brings up a real 2-node Slurm
 * cluster (munged, slurmctld, two slurmd) in a temporary MTC_HOME, runs jobs
 * on it, survives killed daemons with a queued job, grows to 3 nodes and back,
 * adds and removes a partition, runs a second cluster alongside, and deletes
 * both leaving no process and no file. Every daemon is stopped by its recorded
 * pid at exit, also when a check fails. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "provider/local.h"
#include "provider/provider.h"
#include "provider_fixture.h"

static json_t *load_spec(const char *text)
{
    mtc_error_t err = {{0}};
    json_t *in = json_loads(text, 0, NULL);
    json_t *out = in ? cluster_spec_normalize(in, &err) : NULL;
    if (!out)
        printf("# spec rejected: %s\n", err.text);
    json_decref(in);
    return out;
}

/* spec with one GPU pool of n nodes, partition a3m (+ debug when asked), a login pool */
static json_t *spec_n(int n, int debug)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"nodePools\":[{\"id\":\"a3m\",\"machineSpec\":{\"machineType\":\"a3-megagpu-8g\"},"
             "\"scalingSpec\":{\"minNodeCount\":%d,\"maxNodeCount\":%d}},"
             "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"local\"}}],"
             "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\",\"partitions\":["
             "{\"id\":\"a3m\",\"nodePoolIds\":[\"a3m\"]}%s],\"defaultPartitionId\":\"a3m\"}}}",
             n, n, /* a fixed pool: elastic ones are tests/integration/elastic.sh's */
             debug ? ",{\"id\":\"debug\",\"nodePoolIds\":[\"a3m\"],\"config\":{\"MaxTime\":\"10\"}}"
                   : "");
    return load_spec(text);
}

/* SLURM_CONF=... from the provider's env script, as `mtc env` users get it. */
static void conf_env(struct provider *p, const char *id, char *buf, size_t len)
{
    mtc_error_t err = {{0}};
    char *env = provider_env(p, id, &err);
    char *s = env ? strstr(env, "export SLURM_CONF='") : NULL;
    buf[0] = '\0';
    if (s) {
        s += strlen("export SLURM_CONF='");
        snprintf(buf, len, "SLURM_CONF=%.*s", (int)(strchr(s, '\'') - s), s);
    }
    free(env);
}

/* Run a shell command against a cluster; returns exit status, *out trimmed. */
static int sh(struct provider *p, const char *id, const char *cmd, char **out)
{
    char env0[1024];
    conf_env(p, id, env0, sizeof(env0));
    return fixture_sh(env0, cmd, out, 60000);
}

/* Its standard output is what is compared (and its status 0): srun's stderr can
 * carry Slurm's own I/O noise on a busy machine ("_server_read: ... Connection
 * reset by peer" from another node's slurmstepd) after every task answered. The
 * stderr is shown when the check fails. */
static int sh_eq(struct provider *p, const char *id, const char *cmd, const char *want)
{
    char errf[1024], full[4096];
    snprintf(errf, sizeof(errf), "%s/sh_eq.stderr", home);
    snprintf(full, sizeof(full), "exec 2>'%s'\n%s", errf, cmd);
    char *o = NULL;
    int rc = sh(p, id, full, &o);
    int ok = rc == 0 && o && strcmp(o, want) == 0;
    if (!ok) {
        char *e = mtc_read_file(errf, NULL);
        printf("# `%s` -> rc %d: %s\n#   stderr: %s\n#   want: %s\n", cmd, rc, o ? o : "",
               e ? e : "", want);
        free(e);
    }
    free(o);
    return ok;
}

/* kill -9 by recorded pid and wait until it is gone */
static int kill_and_wait(pid_t pid)
{
    if (pid <= 0 || kill(pid, SIGKILL) < 0)
        return 0;
    for (int64_t end = mtc_now_ms() + 5000; mtc_now_ms() < end; mtc_sleep_ms(20))
        if (!mtc_pid_alive(pid))
            return 1;
    return 0;
}

static void on_progress(void *arg, const char *msg)
{
    (void)arg;
    printf("# progress: %s\n", msg);
}

static struct timespec state_mtime(const char *id)
{
    char path[1024];
    struct stat st;
    struct timespec zero = {0, 0};
    snprintf(path, sizeof(path), "%s/clusters/%s/state/job_state", home, id);
    return stat(path, &st) == 0 ? st.st_mtim : zero;
}

/* Wait (deadline) until slurmctld has saved its job queue again after `before`. */
static int wait_state_saved(const char *id, struct timespec before)
{
    for (int64_t end = mtc_now_ms() + 15000; mtc_now_ms() < end; mtc_sleep_ms(100)) {
        struct timespec t = state_mtime(id);
        if (t.tv_sec > before.tv_sec || (t.tv_sec == before.tv_sec && t.tv_nsec > before.tv_nsec))
            return 1;
    }
    return 0;
}

static int job_pending(struct provider *p, const char *id, const char *job)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "squeue -h -j %s -o %%T", job);
    return sh_eq(p, id, cmd, "PENDING");
}

/* 1 when no process's argv mentions home */
static int no_process_left(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int clean = 1;
    while (d && (e = readdir(d))) {
        char path[300];
        size_t len = 0;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        char *s = mtc_read_file(path, &len);
        for (size_t i = 0; s && i < len; i += strlen(s + i) + 1)
            if (strstr(s + i, home)) {
                printf("# left: pid %s %s\n", e->d_name, s);
                clean = 0;
                break;
            }
        free(s);
    }
    if (d)
        closedir(d);
    return clean;
}

/* An update's power checks (head_power_refuse, both providers): a powered-up
 * elastic node may not leave; a powered-down one may. */
static void test_power_refuse(struct provider *p)
{
    struct head c;
    mtc_error_t err = {{0}};
    char run[PLEN + 8];
    CHECK(head_init(&c, p, "pw", &err) == 0, "lc for the power checks (%s)", err.text);
    snprintf(run, sizeof(run), "%s/run", c.dir);
    CHECK(mtc_mkdir_p(run, 0755) == 0, "its run directory");
    struct head_power_change gone = {"pw-a-1", 1, 0, 1, 0}, stays = {"pw-a-1", 1, 1, 1, 1};
    CHECK(head_power_refuse(&c, &gone, 1, &err) == 0, "a powered-down elastic node may leave");
    CHECK(head_power_mark(&c, "pw-a-1", 1, &err) == 0, "node marked on");
    errno = 0;
    CHECK(head_power_refuse(&c, &gone, 1, &err) < 0 && errno == EBUSY &&
              strstr(err.text, "node pw-a-1 is powered up; lower maxNodeCount"),
          "a powered-up elastic node may not leave (%s)", err.text);
    CHECK(head_power_refuse(&c, &stays, 1, &err) == 0, "a powered-up elastic node may stay");
    struct head_power_change becomes = {"pw-a-0", 0, 1, 1, 1};
    CHECK(head_power_refuse(&c, &becomes, 1, &err) == 0,
          "without a slurmctld (no job runs) a static node may become elastic");
    mtc_rm_rf(c.dir);
}

/* A daemon whose starter died between the fork and recording its pid (no
 * pid file of ours, none of its own yet): head_running finds it by its argv,
 * which names this cluster's files, and records it — a restarted mtcd adopts
 * it instead of starting a second one (crash.sh, under load). */
static void test_running_unrecorded(struct provider *p)
{
    struct head c;
    mtc_error_t err = {{0}};
    char run[PLEN + 8], conf[PLEN + 16], rec[PLEN + 32];
    CHECK(head_init(&c, p, "ur", &err) == 0, "a cluster dir for the adoption check (%s)", err.text);
    snprintf(run, sizeof(run), "%s/run", c.dir);
    snprintf(conf, sizeof(conf), "%s/slurm.conf", c.dir);
    snprintf(rec, sizeof(rec), "%s/run/slurmd-ur-a-0.pid", c.dir);
    CHECK(mtc_mkdir_p(run, 0755) == 0, "its run directory");
    CHECK(head_slurmd_running(&c, "ur-a-0") == 0, "no daemon: none found");
    pid_t pid = fork();
    if (pid == 0) { /* argv as a slurmd of this cluster's has it: its conf and node */
        execl("/bin/sh", "sh", "-c", "sleep 30; :", conf, "ur-a-0", (char *)NULL);
        _exit(127);
    }
    /* until the child has exec'd, its argv is this program's */
    for (int i = 0; i < 500 && !mtc_cmdline_has(pid, conf, "ur-a-0"); i++)
        usleep(10000);
    pid_t found = head_slurmd_running(&c, "ur-a-0");
    CHECK(found == pid, "an unrecorded daemon found by its argv (%d, started %d)", (int)found,
          (int)pid);
    CHECK(mtc_pid_read(rec) == pid, "  and its pid recorded");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CHECK(head_slurmd_running(&c, "ur-a-0") == 0, "  gone: none found");
    mtc_rm_rf(c.dir);
}

int main(void)
{
    mtc_error_t err = {{0}};
    char *o = NULL;
    if (fixture_home("/tmp/mtcpl.XXXXXX") < 0)
        return 1;
    int64_t t_start = mtc_now_ms();

    struct provider *p = provider_create("local", home, &err);
    CHECK(p != NULL, "local provider created (%s)", err.text);
    CHECK(provider_create("cloudy", home, &err) == NULL, "unknown provider kind rejected");
    if (!p)
        return check_done();
    CHECK(!provider_exists(p, "ta"), "cluster absent before apply");
    struct provider *bad = provider_create("local", "/tmp/with space", &err);
    CHECK(bad && provider_apply(bad, "ta", NULL, NULL, NULL, &err) < 0 &&
              strstr(err.text, "MTC_HOME"),
          "MTC_HOME with a blank rejected (%s)", err.text);
    provider_destroy(bad);
    test_power_refuse(p);
    test_running_unrecorded(p);

    /* create */
    json_t *s2 = spec_n(2, 0);
    int rc = provider_apply(p, "ta", s2, on_progress, NULL, &err);
    CHECK(rc == 0, "2-node cluster created (%s)", err.text);
    if (rc != 0)
        return check_done();
    CHECK(provider_exists(p, "ta"), "cluster exists after apply");
    printf("# created in %lld ms\n", (long long)(mtc_now_ms() - t_start));
    CHECK(sh_eq(p, "ta", "sinfo -h -N -o '%N %t' | sort -u", "ta-a3m-0 idle\nta-a3m-1 idle"),
          "sinfo lists both emulated nodes idle");
    CHECK(sh_eq(p, "ta", "sinfo -h -o %P", "a3m*"), "partition a3m is the default");
    CHECK(sh_eq(p, "ta", "srun -Q -N2 -l printenv SLURMD_NODENAME | sort",
                "0: ta-a3m-0\n1: ta-a3m-1"),
          "srun -N2 runs on both nodes");
    /* without CAP_MKNOD the device files are plain files: Slurm still
     * allocates the GPUs but sets no CUDA_VISIBLE_DEVICES */
    char dev[1024];
    struct stat dst;
    snprintf(dev, sizeof(dev), "%s/clusters/ta/nodes/ta-a3m-0/hw/nvidia7", home);
    if (stat(dev, &dst) == 0 && S_ISCHR(dst.st_mode))
        CHECK(sh_eq(p, "ta", "srun -Q -N1 --gres=gpu:h100:8 printenv CUDA_VISIBLE_DEVICES",
                    "0,1,2,3,4,5,6,7"),
              "a job gets the node's 8 emulated GPUs");
    else
        CHECK(sh_eq(p, "ta", "srun -Q -N1 --gres=gpu:h100:8 printenv SLURM_GPUS_ON_NODE", "8"),
              "a job gets the node's 8 emulated GPUs (plain device files)");
    CHECK(sh_eq(p, "ta",
                "srun -N1 --gres=gpu:h100:9 true 2>&1 | grep -c 'Requested node configuration is "
                "not available'",
                "1"),
          "more GPUs than a node has is refused");
    CHECK(sh_eq(p, "ta", "srun -Q --mpi=pmix -N2 -n2 printenv PMIX_RANK | sort", "0\n1"),
          "srun --mpi=pmix sets up PMIx on both emulated nodes");
    rc = sh(p, "ta", "sbatch -p general --wrap true", &o);
    CHECK(rc != 0 && o && strstr(o, "invalid partition specified: general"),
          "sbatch -p general: Slurm's invalid partition error (%s)", o ? o : "");
    free(o);
    json_t *nodes = provider_nodes(p, "ta", s2, &err);
    CHECK(nodes && json_array_size(nodes) == 3, "provider_nodes: 2 compute + 1 login");
    json_t *n0 = json_array_get(nodes, 0);
    CHECK(n0 && strcmp(json_string_value(json_object_get(n0, "instanceName")), "ta-a3m-0") == 0 &&
              strcmp(json_string_value(json_object_get(n0, "nodeState")), "RUNNING") == 0 &&
              strcmp(json_string_value(json_object_get(n0, "slurmState")), "idle") == 0,
          "node 0 RUNNING/idle");
    CHECK(strcmp(json_string_value(json_object_get(json_array_get(nodes, 2), "nodePoolType")) ?: "",
                 "NODE_POOL_TYPE_LOGIN") == 0,
          "login node reported");
    json_decref(nodes);
    char *envtext = provider_env(p, "ta", &err);
    CHECK(envtext && strstr(envtext, "export SLURM_CONF=") &&
              strstr(envtext, "/clusters/ta/slurm.conf"),
          "env script exports SLURM_CONF");
    free(envtext);

    /* a queued job survives killed daemons */
    char job[32] = "";
    struct timespec t_sub = state_mtime("ta");
    rc = sh(p, "ta", "sbatch --parsable --hold --wrap true", &o);
    if (rc == 0 && o)
        snprintf(job, sizeof(job), "%s", o);
    free(o);
    CHECK(job[0], "held job submitted (%s)", job);
    CHECK(wait_state_saved("ta", t_sub), "job queue saved to StateSaveLocation");

    struct fixture_events ev = {0};
    pid_t old = fixture_pid("ta", "slurmd-ta-a3m-0");
    CHECK(kill_and_wait(old), "slurmd of ta-a3m-0 killed by pid");
    CHECK(provider_supervise(p, "ta", s2, fixture_on_event, &ev, &err) == 0, "supervise (%s)",
          err.text);
    CHECK(ev.n == 1 && strcmp(ev.types[0], "SLURMD_RESTART") == 0 &&
              strcmp(ev.nodes[0], "ta-a3m-0") == 0,
          "SLURMD_RESTART reported for ta-a3m-0");
    pid_t now = fixture_pid("ta", "slurmd-ta-a3m-0");
    CHECK(now != old && mtc_pid_alive(now), "slurmd restarted with a new pid");

    memset(&ev, 0, sizeof(ev));
    CHECK(kill_and_wait(fixture_pid("ta", "slurmctld")), "slurmctld killed by pid");
    CHECK(provider_supervise(p, "ta", s2, fixture_on_event, &ev, &err) == 0, "supervise (%s)",
          err.text);
    CHECK(ev.n == 1 && strcmp(ev.types[0], "SLURMCTLD_RESTART") == 0, "SLURMCTLD_RESTART reported");
    CHECK(job_pending(p, "ta", job), "queued job survived the slurmctld kill");

    memset(&ev, 0, sizeof(ev));
    CHECK(kill_and_wait(fixture_pid("ta", "munged")), "munged killed by pid");
    CHECK(provider_supervise(p, "ta", s2, fixture_on_event, &ev, &err) == 0, "supervise (%s)",
          err.text);
    CHECK(ev.n == 1 && strcmp(ev.types[0], "MUNGED_RESTART") == 0, "MUNGED_RESTART reported");
    CHECK(sh_eq(p, "ta", "srun -N2 true >/dev/null 2>&1 && echo ok", "ok"),
          "jobs run after the restarts");
    memset(&ev, 0, sizeof(ev));
    CHECK(provider_supervise(p, "ta", s2, fixture_on_event, &ev, &err) == 0 && ev.n == 0,
          "supervise with everything up reports nothing");

    /* the caller restarts: a new provider adopts the daemons */
    pid_t pc = fixture_pid("ta", "slurmctld"), pd = fixture_pid("ta", "slurmd-ta-a3m-1"),
          pm = fixture_pid("ta", "munged");
    provider_destroy(p);
    p = provider_create("local", home, &err);
    CHECK(provider_apply(p, "ta", s2, NULL, NULL, &err) == 0, "apply again after restart (%s)",
          err.text);
    CHECK(fixture_pid("ta", "slurmctld") == pc && fixture_pid("ta", "slurmd-ta-a3m-1") == pd &&
              fixture_pid("ta", "munged") == pm && mtc_pid_alive(pc),
          "running daemons adopted, none started twice");

    /* apply also restarts what died, and only that */
    pid_t pd0 = fixture_pid("ta", "slurmd-ta-a3m-0");
    CHECK(kill_and_wait(fixture_pid("ta", "slurmd-ta-a3m-1")) &&
              kill_and_wait(fixture_pid("ta", "slurmctld")),
          "slurmctld and one slurmd killed");
    CHECK(provider_apply(p, "ta", s2, NULL, NULL, &err) == 0, "apply brings them back (%s)",
          err.text);
    CHECK(mtc_pid_alive(fixture_pid("ta", "slurmctld")) &&
              mtc_pid_alive(fixture_pid("ta", "slurmd-ta-a3m-1")) &&
              fixture_pid("ta", "slurmd-ta-a3m-0") == pd0 && fixture_pid("ta", "munged") == pm,
          "dead daemons restarted, live ones kept");
    CHECK(job_pending(p, "ta", job), "queued job survived");
    /* a pid file lost (caller died right after the start): found by Slurm's own pid file */
    char pf[1024];
    snprintf(pf, sizeof(pf), "%s/clusters/ta/run/slurmd-ta-a3m-0.pid", home);
    unlink(pf);
    CHECK(provider_apply(p, "ta", s2, NULL, NULL, &err) == 0 &&
              fixture_pid("ta", "slurmd-ta-a3m-0") == pd0,
          "slurmd without mtc's pid file adopted, not started twice");

    /* grow to 3 nodes */
    json_t *s3 = spec_n(3, 0);
    int64_t t = mtc_now_ms();
    CHECK(provider_apply(p, "ta", s3, on_progress, NULL, &err) == 0, "update 2 -> 3 nodes (%s)",
          err.text);
    printf("# 2->3 in %lld ms\n", (long long)(mtc_now_ms() - t));
    /* mix/alloc are fine: a job whose end the killed slurmctld never saved
     * may still be recovered as running for a while */
    CHECK(sh_eq(p, "ta", "sinfo -h -N -o '%N %t' | sort -u | sed -E 's/ (idle|mix|alloc)$/ up/'",
                "ta-a3m-0 up\nta-a3m-1 up\nta-a3m-2 up"),
          "three nodes up");
    CHECK(job_pending(p, "ta", job), "queued job survived the node add");
    CHECK(sh_eq(p, "ta", "srun -Q -N3 -l printenv SLURMD_NODENAME | sort | tail -1", "2: ta-a3m-2"),
          "srun -N3 reaches the new node");

    /* shrink to 2 and add a partition. First pretend an earlier shrink died
     * after saving the new layout: the node is gone from cluster.json but its
     * slurmd still runs, and apply must still stop it. */
    pid_t p2 = fixture_pid("ta", "slurmd-ta-a3m-2");
    char lpath[1024];
    snprintf(lpath, sizeof(lpath), "%s/clusters/ta/cluster.json", home);
    json_t *lay = json_load_file(lpath, 0, NULL);
    CHECK(lay && json_array_remove(json_object_get(lay, "nodes"), 2) == 0 &&
              json_dump_file(lay, lpath, 0) == 0,
          "layout rewritten without ta-a3m-2");
    json_decref(lay);
    json_t *s2d = spec_n(2, 1);
    CHECK(provider_apply(p, "ta", s2d, on_progress, NULL, &err) == 0,
          "update 3 -> 2 nodes + partition debug (%s)", err.text);
    CHECK(!mtc_pid_alive(p2), "removed node's slurmd stopped");
    CHECK(sh_eq(p, "ta", "sinfo -h -N -o '%N' | sort -u", "ta-a3m-0\nta-a3m-1"), "two nodes left");
    CHECK(sh_eq(p, "ta", "sinfo -h -o '%P %l' | sort", "a3m* infinite\ndebug 10:00"),
          "partition debug added with its MaxTime");
    CHECK(job_pending(p, "ta", job), "queued job survived the node removal");
    pc = fixture_pid("ta", "slurmctld");
    CHECK(provider_apply(p, "ta", s2, on_progress, NULL, &err) == 0,
          "update: partition debug removed (%s)", err.text);
    CHECK(fixture_pid("ta", "slurmctld") == pc,
          "partition-only change reconfigures without a restart");
    CHECK(sh_eq(p, "ta", "sinfo -h -o %P", "a3m*"), "partition debug gone");
    CHECK(job_pending(p, "ta", job), "queued job survived the partition change");

    /* a second cluster alongside */
    struct provider_hooks hooks = {.health_check = "touch {dir}/health-$SLURMD_NODENAME",
                                   .health_interval_s = 30,
                                   .prolog = "echo {cluster} >> {dir}/prolog.log"};
    CHECK(provider_set_hooks(p, &hooks, &err) == 0, "hooks set for clusters applied from now on");
    json_t *cpu =
        load_spec("{\"nodePools\":[{\"id\":\"cpu\",\"machineSpec\":{\"machineType\":\"local\"}}]}");
    CHECK(provider_apply(p, "tb", cpu, NULL, NULL, &err) == 0, "second cluster created (%s)",
          err.text);
    CHECK(sh_eq(p, "tb", "srun -N1 printenv SLURMD_NODENAME", "tb-cpu-0"),
          "second cluster runs jobs");
    CHECK(sh_eq(p, "ta", "srun -N2 printenv SLURM_CLUSTER_NAME | sort -u", "ta"),
          "first cluster still works alongside");
    CHECK(job_pending(p, "ta", job), "first cluster's queued job untouched by the second");
    CHECK(sh_eq(p, "tb", "sinfo -h -o %P", "cpu*"), "each cluster sees only its own partitions");
    CHECK(sh_eq(p, "tb", "cat $(dirname $SLURM_CONF)/prolog.log", "tb"),
          "prolog hook ran for the job");
    char hpath[1024];
    snprintf(hpath, sizeof(hpath), "%s/clusters/tb/health-tb-cpu-0", home);
    int health_ran = 0;
    for (int64_t end = mtc_now_ms() + 15000; !health_ran && mtc_now_ms() < end; mtc_sleep_ms(100))
        health_ran = mtc_path_exists(hpath);
    CHECK(health_ran, "HealthCheckProgram hook ran on the node");

    /* delete both */
    pid_t all[8] = {fixture_pid("ta", "munged"),          fixture_pid("ta", "slurmctld"),
                    fixture_pid("ta", "slurmd-ta-a3m-0"), fixture_pid("ta", "slurmd-ta-a3m-1"),
                    fixture_pid("tb", "munged"),          fixture_pid("tb", "slurmctld"),
                    fixture_pid("tb", "slurmd-tb-cpu-0"), 0};
    CHECK(provider_delete(p, "ta", &err) == 0, "cluster ta deleted (%s)", err.text);
    CHECK(provider_delete(p, "tb", &err) == 0, "cluster tb deleted (%s)", err.text);
    int dead = 1;
    for (int i = 0; i < 7; i++)
        dead &= all[i] > 0 && !mtc_pid_alive(all[i]);
    CHECK(dead, "every daemon stopped");
    CHECK(!provider_exists(p, "ta") && !provider_exists(p, "tb"), "cluster directories removed");
    CHECK(provider_delete(p, "ta", &err) == 0, "delete is idempotent");
    CHECK(no_process_left(), "no process mentions the test's MTC_HOME");
    CHECK(provider_apply(p, "Bad-Id", s2, NULL, NULL, &err) < 0 &&
              strstr(err.text, "invalid cluster id"),
          "invalid cluster id rejected before touching files");

    json_decref(s2);
    json_decref(s3);
    json_decref(s2d);
    json_decref(cpu);
    provider_destroy(p);
    printf("# total %lld ms\n", (long long)(mtc_now_ms() - t_start));
    return check_done();
}
