/* healthscan job: the scan's directory and job script (one `srun mtc-scan
 * MODE` per check on the chosen nodes, with what the machine type asks of
 * them), the mtc-scan it runs, and the wait for the job to leave Slurm's
 * queue. */
#include "control/healthscan_internal.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Single-quoted for the shell; our own paths and validated names only (no '). */
static int put_q(FILE *f, const char *s)
{
    if (strchr(s, '\''))
        return -1;
    fprintf(f, "'%s'", s);
    return 0;
}

/* name under dirfd (a directory, not followed when a symlink) made mode. */
static int fchmod_dir(int dirfd, const char *name, mode_t mode, mtc_error_t *err)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd < 0 || fchmod(fd, mode) < 0 ? errprintf(err, "%s: %s", name, strerror(errno)) : 0;
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Where the scan's files go: a directory only root (mtcd's user) can write,
 * mode 0700 — the script sbatch runs as root and the reports mtcd trusts
 * must be beyond every user's reach. A local cluster's nodes are this
 * machine: the cluster's own directory (under MTC_HOME). A cluster on hosts
 * needs storage every host shares: <experimentRoot>/.mtc-healthscans, with
 * every directory from / to it checked (root's, writable by no one else
 * unless sticky): a user who could write the experiment root could rename
 * the scans' directory away and put their own in its place. */
int healthscan_dir(struct control *c, const struct store_cluster *cl, const char *op_id, char *dir,
                   size_t len, mtc_error_t *err)
{
    const char *root = json_string_value(json_object_get(cl->spec, "experimentRoot"));
    char base[PATH_MAX];
    const char *sub = "healthscans";
    if (cluster_spec_on_hosts(cl->spec)) {
        if (!root || !*root)
            return errprintf(err, "a cluster on hosts scans with an experimentRoot (storage every "
                                  "host shares): the nodes write the reports there");
        snprintf(base, sizeof(base), "%s", root);
        sub = ".mtc-healthscans";
    } else if (provider_cluster_dir(c->prov, cl->id, base, sizeof(base), err) < 0) {
        return -1;
    }
    if ((size_t)snprintf(dir, len, "%s/%s/%s", base, sub, op_id) >= len)
        return errprintf(err, "%s: path too long", base);
    mtc_error_t e = {""};
    int b = mtc_dir_open_trusted(base, 0, 0, &e), s = -1, o = -1, rc = -1;
    if (b >= 0 && (s = mtc_dir_at(b, sub, 1, 0700, &e)) >= 0 && fchmod_dir(b, sub, 0700, &e) == 0 &&
        (o = mtc_dir_at(s, op_id, 1, 0700, &e)) >= 0)
        rc = 0;
    else
        errprintf(err,
                  "the scan's directory %s: %s (a scan writes its script and reads its "
                  "reports only where no one but root can write)",
                  dir, e.text);
    int fds[] = {o, s, b};
    for (size_t i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return rc;
}

void healthscan_machine_opts(const struct store_cluster *cl, const json_t *nodes,
                             struct healthscan_machine *m)
{
    memset(m, 0, sizeof(*m));
    m->nvml = json_string_value(
        json_object_get(json_object_get(cl->spec, "healthPolicy"), "nvmlLibrary"));
    if (m->nvml && !*m->nvml)
        m->nvml = NULL;
    char type[64] = "";
    size_t i, k;
    json_t *v, *n, *p;
    json_array_foreach(nodes, i, v)
    {
        const char *pool = NULL, *t = NULL;
        json_array_foreach(cl->nodes, k, n)
        {
            const char *name = json_string_value(json_object_get(n, "instanceName"));
            if (name && !strcmp(name, json_string_value(v)))
                pool = json_string_value(json_object_get(n, "nodePoolId"));
        }
        json_array_foreach(json_object_get(cl->spec, "nodePools"), k, p)
        {
            const char *id = json_string_value(json_object_get(p, "id"));
            if (pool && id && !strcmp(id, pool))
                t = json_string_value(
                    json_object_get(json_object_get(p, "machineSpec"), "machineType"));
        }
        if (!t || (*type && strcmp(type, t) != 0))
            return;
        snprintf(type, sizeof(type), "%s", t);
    }
    struct cluster_machine_type mt;
    mtc_error_t err;
    if (!*type || cluster_machine_type_lookup(type, &mt, &err) < 0)
        return;
    m->gpus = mt.accelerator_count;
    if (cluster_spec_on_hosts(cl->spec)) {
        m->min_pair = mt.min_pair_bus_gbps;
        m->min_allreduce = mt.min_allreduce_bus_gbps;
    }
}

/* The batch script: one srun step per mode, each writing MODE.json, MODE.err
 * and MODE.rc; "done" at the end. */
int healthscan_write_script(const char *path, const char *dir, const char *scan,
                            const struct healthscan_target *t, const struct healthscan_machine *mo,
                            const json_t *req, mtc_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    const json_t *nodes = json_object_get(req, "nodes");
    const char *part = json_string_value(json_object_get(req, "partition"));
    size_t n = json_array_size(nodes), i;
    json_t *v;
    int bad = 0;
    fprintf(f, "#!/bin/bash\n# mtc healthscan: checks");
    json_array_foreach(json_object_get(req, "checks"), i, v)
        fprintf(f, " %s", json_string_value(v));
    fprintf(f, "\n#SBATCH --job-name=mtc-healthscan\n#SBATCH --nodes=%zu\n", n);
    fprintf(f, "#SBATCH --ntasks-per-node=1\n#SBATCH --nodelist=");
    json_array_foreach(nodes, i, v) fprintf(f, "%s%s", i ? "," : "", json_string_value(v));
    fprintf(f, "\n");
    if (part)
        fprintf(f, "#SBATCH --partition=%s\n", part);
    /* forced onto busy nodes it shares them (its figures then include their load) */
    if (!json_is_true(json_object_get(req, "force")))
        fprintf(f, "#SBATCH --exclusive\n");
    fprintf(f, "#SBATCH --time=%d\n#SBATCH --no-requeue\n#SBATCH --output=", SCAN_LIMIT_S / 60);
    bad |= put_q(f, dir);
    fprintf(f, "/job.log\n\nD=");
    bad |= put_q(f, dir);
    fprintf(f, "\nSCAN=");
    bad |= put_q(f, scan);
    fprintf(f, "\nexport OMP_NUM_THREADS=1\n");
    if (*t->net) /* ranks on several hosts: Open MPI over TCP on the cluster's network */
        fprintf(f,
                "export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp "
                "OMPI_MCA_btl_tcp_if_include='%s'\n",
                t->net);
    /* a step whose ranks crashed before rank 0 reported (not a verdict: exit
     * 0 pass, 1 fail, 2 usage; 124 its time limit) runs once more: Open MPI's
     * start-up under a loaded machine sometimes loses a rank */
    fprintf(f,
            "step() { # MODE ARGS...: one srun step, its report, stderr and exit status\n"
            "    echo \"$1\" >\"$D/step\"\n"
            "    for a in 1 2; do\n"
            "        timeout %d srun --mpi=pmix --kill-on-bad-exit=1 -N %zu "
            "--ntasks-per-node=1 \"$SCAN\" \"$@\" >\"$D/$1.json\" 2>\"$D/$1.err\"\n"
            "        rc=$?\n        echo $a >\"$D/$1.attempts\"\n"
            "        case $rc in 0|1|2|124) break ;; esac\n"
            "        [ -s \"$D/$1.json\" ] && break # rank 0 reported; the others were stopped\n"
            "        cp \"$D/$1.err\" \"$D/$1.err.$a\"\n"
            "    done\n"
            "    echo $rc >\"$D/$1.rc\"\n}\n",
            SCAN_STEP_S, n);
    int mb = (int)json_integer_value(json_object_get(req, "maxBytes"));
    int micro = (int)json_integer_value(json_object_get(req, "microbatches"));
    double ff = json_real_value(json_object_get(req, "failFraction"));
    int secs = (int)json_integer_value(json_object_get(req, "burnInSeconds"));
    json_array_foreach(json_object_get(req, "checks"), i, v)
    {
        int k = schema_enum_parse(&control_scan_check_enum, json_string_value(v), 0);
        for (int m = 0; k >= 0 && healthscan_modes[k][m]; m++) {
            const char *mode = healthscan_modes[k][m];
            fprintf(f, "step %s", mode);
            if (mb && (!strcmp(mode, "pairs") || !strcmp(mode, "ring")))
                fprintf(f, " --max-bytes %d", mb);
            if (micro && !strcmp(mode, "pipeline"))
                fprintf(f, " --microbatches %d", micro);
            if (ff > 0 && (!strcmp(mode, "pairs") || !strcmp(mode, "pipeline")))
                fprintf(f, " --fail-fraction %.4g", ff);
            double min = !strcmp(mode, "pairs")  ? mo->min_pair
                         : !strcmp(mode, "ring") ? mo->min_allreduce
                                                 : 0;
            if (min > 0)
                fprintf(f, " --nccl --min-bus-gbps %g", min);
            if (!strcmp(mode, "gpu")) {
                if (mo->gpus > 0)
                    fprintf(f, " --expected-gpus %d", mo->gpus);
                if (secs > 0)
                    fprintf(f, " --seconds %d", secs);
                if (mo->nvml) {
                    fprintf(f, " --nvml-library ");
                    bad |= put_q(f, mo->nvml);
                }
                if (*mo->gpu_dir) {
                    fprintf(f, " --gpu-dir ");
                    bad |= put_q(f, mo->gpu_dir);
                }
            }
            fprintf(f, "\n");
        }
    }
    fprintf(f, "echo done >\"$D/step\"\n: >\"$D/done\"\n");
    if (fclose(f) != 0 || bad)
        return errprintf(err, "cannot write %s%s", path, bad ? ": a quote in a path" : "");
    return 0;
}

/* The mtc-scan the nodes run: the copy on the hosts, else the one built
 * beside mtcd (a local cluster's nodes are this machine). */
int healthscan_program(const struct control *c, const struct store_cluster *cl,
                       const struct healthscan_target *t, char *buf, size_t len, mtc_error_t *err)
{
    (void)c;
    if (*t->scan) {
        snprintf(buf, len, "%s", t->scan);
        return 0;
    }
    if (cluster_spec_on_hosts(cl->spec))
        return errprintf(err, "mtc-scan is not on the cluster's hosts (it was not built beside "
                              "mtcd when they were set up)");
    char self[PATH_MAX] = "";
    if (mtc_exe_dir(self, sizeof(self)) < 0)
        return errprintf(err, "cannot find mtcd's own directory");
    snprintf(buf, len, "%.4000s/mtc-scan", self);
    if (access(buf, X_OK) < 0)
        return errprintf(err, "mtc-scan is not installed beside mtcd (%s)", buf);
    return 0;
}

/* A file the scan job wrote: untrusted input, read only up to 4 MiB (more
 * is no report of mtc-scan's; NULL then, as for a missing file). */
char *healthscan_read_text(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t n = 0;
    char *t = mtc_read_file(path, &n);
    if (t && n > (4u << 20)) {
        free(t);
        return NULL;
    }
    return t;
}

/* Wait for the job to leave Slurm's queue; progress names its step. 0, or -1
 * (cancelled after waiting too long to start or running too long). */
int healthscan_wait_job(struct control *c, const struct store_op *op, const char *conf,
                        const char *job, const char *dir, mtc_error_t *err)
{
    int64_t start = mtc_now_ms(), running_since = 0, done_since = 0;
    char last[256] = "";
    for (;;) {
        char state[32] = "";
        int known = slurm_job_state(conf, job, state, sizeof(state)) == 0;
        char *done = healthscan_read_text(dir, "done");
        free(done);
        int64_t now = mtc_now_ms();
        if (done && !done_since)
            done_since = now;
        /* the script's end: the report is complete; waiting for the job to
         * leave the nodes (COMPLETING) lets the next scan find them idle */
        if ((done && (!known || now - done_since > 30000 ||
                      (strcmp(state, "RUNNING") != 0 && strcmp(state, "COMPLETING") != 0))) ||
            (known && strcmp(state, "PENDING") != 0 && strcmp(state, "RUNNING") != 0 &&
             strcmp(state, "CONFIGURING") != 0 && strcmp(state, "COMPLETING") != 0))
            return done || !strcmp(state, "COMPLETED") || !strcmp(state, "FAILED")
                       ? 0
                       : errprintf(err, "scan job %s ended %s before it finished", job, state);
        if (!known && now - start > 60000)
            return errprintf(err, "scan job %s vanished from Slurm without its reports", job);
        if (strcmp(state, "RUNNING") == 0 && !running_since)
            running_since = now;
        const char *why =
            !running_since && now - start > SCAN_PENDING_S * 1000        ? "did not start within"
            : running_since && now - running_since > SCAN_LIMIT_S * 1000 ? "ran longer than"
                                                                         : NULL;
        if (why) {
            slurm_job_cancel(conf, job, NULL);
            return errprintf(err, "scan job %s %s %d s: cancelled", job, why,
                             running_since ? SCAN_LIMIT_S : SCAN_PENDING_S);
        }
        char *step = healthscan_read_text(dir, "step"), msg[256];
        if (step)
            step[strcspn(step, "\n")] = '\0';
        snprintf(msg, sizeof(msg), "job %s %s%s%s", job, state, step ? ": " : "", step ? step : "");
        free(step);
        if (strcmp(msg, last) != 0) {
            store_op_progress(c->st, op->id, msg);
            snprintf(last, sizeof(last), "%s", msg);
        }
        mtc_sleep_ms(500);
    }
}
