/* conf: render slurm.conf and gres.conf. Everything a cluster's daemons touch
 * lives under its own directory and its own ports, so several clusters run
 * side by side on one host without /etc/slurm or the system munged. */
#include "slurm/slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* spec key under slurmSpec.scheduling -> slurm.conf key, and its value on a
 * cluster with accounting when the spec gives none (a team's cluster:
 * priority by QoS and fair share, a QoS preempts the QoS it names by
 * requeueing their jobs, which resume from their checkpoints) */
static const struct {
    const char *spec, *conf, *acct;
} sched_keys[] = {
    {"priorityType", "PriorityType", "priority/multifactor"},
    {"priorityWeightAge", "PriorityWeightAge", "100"},
    {"priorityWeightAssoc", "PriorityWeightAssoc", NULL},
    {"priorityWeightFairshare", "PriorityWeightFairshare", "1000"},
    {"priorityWeightJobSize", "PriorityWeightJobSize", NULL},
    {"priorityWeightPartition", "PriorityWeightPartition", NULL},
    {"priorityWeightQos", "PriorityWeightQOS", "10000"},
    {"priorityWeightTres", "PriorityWeightTRES", NULL},
    {"preemptType", "PreemptType", "preempt/qos"},
    {"preemptMode", "PreemptMode", "REQUEUE"},
    {"preemptExemptTime", "PreemptExemptTime", NULL},
};

static const json_t *slurm_spec(const json_t *spec)
{
    return json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
}

/* Values were validated (one line, no '#', no '"'); quote those with blanks. */
static void put_kv(FILE *f, const char *k, const char *v)
{
    if (strpbrk(v, " \t"))
        fprintf(f, " %s=\"%s\"", k, v);
    else
        fprintf(f, " %s=%s", k, v);
}

static const json_t *node_set_config(const json_t *spec, const char *pool)
{
    size_t i;
    json_t *ns;
    json_array_foreach(json_object_get(slurm_spec(spec), "nodeSets"), i, ns)
    {
        const char *p = json_string_value(json_object_get(ns, "nodePoolId"));
        if (p && strcmp(p, pool) == 0)
            return json_object_get(ns, "config");
    }
    return NULL;
}

/* A node line: mtc's keys, with the node set's config{} overriding the
 * sizing keys (CPUs, RealMemory, Gres) and adding the rest. */
static void node_line(FILE *f, const struct slurm_layout *l, const struct slurm_node *n,
                      const json_t *cfg)
{
    char cpus[32], mem[32], gres[96];
    snprintf(cpus, sizeof(cpus), "%d", n->cpus);
    snprintf(mem, sizeof(mem), "%ld", n->memory_mb);
    snprintf(gres, sizeof(gres), "gpu:%s:%d", n->gres_type, n->gpus);
    struct {
        const char *k, *v;
    } own[] = {{"CPUs", cpus}, {"RealMemory", mem}, {"Gres", n->gpus > 0 ? gres : NULL}};
    if (l->uid) /* on hosts: the node's own host, the cluster's SlurmdPort */
        fprintf(f, "NodeName=%s NodeHostname=%s NodeAddr=%s", n->name, n->hostname, n->addr);
    else
        fprintf(f, "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d", n->name, l->hostname,
                n->port);
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        const char *v = json_string_value(json_object_get(cfg, own[i].k));
        if (v || own[i].v)
            put_kv(f, own[i].k, v ? v : own[i].v);
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)cfg, k, v)
    {
        int mine = 0;
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            mine |= strcmp(own[i].k, k) == 0;
        if (!mine)
            put_kv(f, k, json_string_value(v));
    }
    if (n->cloud)
        fprintf(f, " State=CLOUD");
    fprintf(f, "\n");
}

/* Power saving (elastic pools): Slurm suspends idle cloud nodes after
 * SuspendTime and resumes them for jobs through mtc's programs; the static
 * nodes are excluded by name. Nothing when no node is a cloud node. */
static int put_power(FILE *f, const struct slurm_layout *l, mtc_error_t *err)
{
    int any = 0;
    for (size_t i = 0; i < l->nnodes; i++)
        any |= l->nodes[i].cloud;
    if (!any)
        return 0;
    const struct slurm_power *pw = &l->power;
    if (!pw->suspend_program || !pw->resume_program)
        return errprintf(err, "cloud nodes need a SuspendProgram and a ResumeProgram"), -1;
    if (pw->suspend_time < -1)
        return errprintf(err, "SuspendTime %d: must be -1 (never) or >= 0", pw->suspend_time), -1;
    fprintf(f, "\n# power saving: the elastic (cloud) nodes\n");
    const struct {
        const char *k, *v;
    } progs[] = {{"SuspendProgram", pw->suspend_program},
                 {"ResumeProgram", pw->resume_program},
                 {"ResumeFailProgram", pw->resume_fail_program}};
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
        if (progs[i].v)
            fprintf(f, strpbrk(progs[i].v, " \t") ? "%s=\"%s\"\n" : "%s=%s\n", progs[i].k,
                    progs[i].v);
    fprintf(f, "SuspendTime=%d\nResumeTimeout=%d\nSuspendTimeout=%d\n", pw->suspend_time,
            pw->resume_timeout > 0 ? pw->resume_timeout : SLURM_RESUME_TIMEOUT,
            pw->suspend_timeout > 0 ? pw->suspend_timeout : SLURM_SUSPEND_TIMEOUT);
    /* a node that failed to resume becomes idle~ again once suspended (the
     * last SlurmctldParameters line wins: on hosts it keeps configless) */
    fprintf(f, "SlurmctldParameters=%sidle_on_node_suspend\n", l->uid ? "enable_configless," : "");
    /* sinfo and scontrol hide powered-down cloud nodes without it */
    fprintf(f, "PrivateData=cloud\n");
    int first = 1;
    for (size_t i = 0; i < l->nnodes; i++) {
        if (l->nodes[i].cloud)
            continue;
        fprintf(f, "%s%s", first ? "SuspendExcNodes=" : ",", l->nodes[i].name);
        first = 0;
    }
    if (!first)
        fprintf(f, "\n");
    return 0;
}

/* A stream into memory for a rendered file; NULL with err when out of memory. */
static FILE *text_open(char **buf, size_t *len, mtc_error_t *err)
{
    *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(buf, len);
    if (!f)
        errprintf(err, "out of memory");
    return f;
}

/* The text written to f (caller frees), or NULL with err "rendering NAME failed". */
static char *text_close(FILE *f, char **buf, const char *name, mtc_error_t *err)
{
    if (fclose(f) != 0) {
        free(*buf);
        errprintf(err, "rendering %s failed", name);
        return NULL;
    }
    return *buf;
}

/* Where the daemons keep their state, logs, pid files and the munge socket:
 * on hosts the per-host paths (slurmd fetches this file from slurmctld), else
 * per emulated node under the cluster's directory. */
#define PLEN_CONF 4200
/* The munge socket slurm.conf names (AuthInfo; slurmdbd's clients too). */
static void munge_socket(const struct slurm_layout *l, char *buf, size_t len)
{
    if (l->uid)
        snprintf(buf, len, SLURM_HOST_RUN "/munge/munge.socket.2", l->uid);
    else
        snprintf(buf, len, "%s/munge/socket", l->dir);
}

static void put_paths(FILE *f, const struct slurm_layout *l)
{
    const char *d = l->dir;
    if (l->uid) {
        char run[128], var[128];
        snprintf(run, sizeof(run), SLURM_HOST_RUN, l->uid);
        snprintf(var, sizeof(var), SLURM_HOST_VAR, l->uid);
        fprintf(f, "SlurmctldParameters=enable_configless\n");
        fprintf(
            f,
            "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=%s/munge/munge.socket.2\n",
            run);
        fprintf(f, "SlurmUser=root\nSlurmdUser=root\n");
        if (l->state_dir)
            fprintf(f, "StateSaveLocation=%s\n", l->state_dir);
        else
            fprintf(f, "StateSaveLocation=%s/state\n", d);
        fprintf(f, "SlurmdSpoolDir=%s/spool\n", var);
        /* two controllers: each keeps its pid file and log on its own host
         * (the controller's slurmctld is started with -L <dir>/log/...) */
        if (l->backup_addr)
            fprintf(f, "SlurmctldPidFile=%s/slurmctld.pid\nSlurmctldLogFile=%s/log/slurmctld.log\n",
                    run, var);
        else
            fprintf(f,
                    "SlurmctldPidFile=%s/run/slurm/slurmctld.pid\n"
                    "SlurmctldLogFile=%s/log/slurmctld.log\n",
                    d, d);
        fprintf(f, "SlurmdPidFile=%s/slurmd.pid\nSlurmdLogFile=%s/log/slurmd.log\n", run, var);
        fprintf(f, "SlurmctldDebug=info\nSlurmdDebug=info\n");
        /* must exist on every host: the pmix plugin puts each step's directory there */
        fprintf(f, "TmpFS=%s/tmp\n", run);
        int ipv6 = strchr(l->ctld_addr, ':') != NULL ||
                   (l->backup_addr && strchr(l->backup_addr, ':') != NULL);
        for (size_t i = 0; i < l->nnodes; i++)
            ipv6 |= strchr(l->nodes[i].addr, ':') != NULL;
        if (ipv6)
            fprintf(f, "CommunicationParameters=EnableIPv6\n");
        return;
    }
    fprintf(f, "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=%s/munge/socket\n", d);
    fprintf(f, "SlurmUser=root\nSlurmdUser=root\n");
    fprintf(f, "StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool/%%n\n", d, d);
    fprintf(f, "SlurmctldPidFile=%s/run/slurm/slurmctld.pid\n", d);
    fprintf(f, "SlurmdPidFile=%s/run/slurm/slurmd-%%n.pid\n", d);
    fprintf(f, "SlurmctldLogFile=%s/log/slurmctld.log\nSlurmdLogFile=%s/log/slurmd-%%n.log\n", d,
            d);
    fprintf(f, "SlurmctldDebug=info\nSlurmdDebug=info\n");
    /* per node: PMIx puts each step's spmix_appdir under TmpFS, which would
     * collide between emulated nodes sharing one /tmp */
    fprintf(f, "TmpFS=%s/tmp/%%n\n", d);
}

/* Timeouts and fan-out (slurm_sizing_for; zeros: the usual values). */
static void put_sizing(FILE *f, const struct slurm_sizing *z, int ctld_timeout)
{
    fprintf(f, "SlurmctldTimeout=%d\nSlurmdTimeout=%d\nMessageTimeout=%d\n",
            ctld_timeout > 0 ? ctld_timeout : 30,
            z->slurmd_timeout > 0 ? z->slurmd_timeout : SLURM_SLURMD_TIMEOUT,
            z->message_timeout > 0 ? z->message_timeout : SLURM_MSG_TIMEOUT);
    if (z->tree_width > 0)
        fprintf(f, "TreeWidth=%d\n", z->tree_width);
}

/* Plugins, timeouts, the scripts slurmd runs (on hosts, copied to each
 * host) and the spec's scheduling values. */
static void put_behaviour(FILE *f, const json_t *spec, const struct slurm_layout *l)
{
    /* no cgroups: emulated nodes (and test hosts) share one host and one cgroup tree */
    fprintf(f, "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n");
    if (l->acct.port > 0) { /* slurmdbd: every job recorded, usage gathered from /proc */
        char sock[PLEN_CONF];
        munge_socket(l, sock, sizeof(sock));
        fprintf(f,
                "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=%s\n"
                "AccountingStoragePort=%d\nAccountingStoragePass=%s\n"
                "AccountingStorageTRES=gres/gpu\nJobAcctGatherType=jobacct_gather/linux\n"
                "JobAcctGatherFrequency=30\n",
                l->acct.host, l->acct.port, sock);
        if (l->acct.enforce && *l->acct.enforce)
            fprintf(f, "AccountingStorageEnforce=%s\n", l->acct.enforce);
        /* fair share follows usage within a minute, not Slurm's 5: a team's
         * cluster runs few, long jobs (the pass over them is cheap), and a
         * team that just had the nodes should wait behind one that did not */
        fprintf(f, "PriorityCalcPeriod=1\n");
    } else {
        fprintf(f, "JobAcctGatherType=jobacct_gather/none\n");
    }
    fprintf(f, "MpiDefault=none\nMailProg=/bin/true\n");
    fprintf(f, "SchedulerType=sched/backfill\nSelectType=select/cons_tres\n"
               "SelectTypeParameters=CR_Core\nGresTypes=gpu\n");
    /* a node whose slurmd comes back is usable again without an admin */
    fprintf(f, "ReturnToService=2\n");
    put_sizing(f, &l->sizing, l->ctld_timeout);
    fprintf(f, "KillWait=5\nInactiveLimit=0\nMinJobAge=300\n");
    char etc[128];
    if (l->uid)
        snprintf(etc, sizeof(etc), SLURM_HOST_ETC, l->uid);
    const char *e = l->uid ? etc : l->dir;
    if (l->spank)
        fprintf(f, "PlugStackConfig=%s/etc/plugstack.conf\n", e);
    if (l->prolog)
        fprintf(f, "Prolog=%s/etc/prolog.sh\n", e);
    if (l->epilog)
        fprintf(f, "Epilog=%s/etc/epilog.sh\n", e);
    if (l->health_interval > 0)
        fprintf(f,
                "HealthCheckProgram=%s/etc/health.sh\nHealthCheckInterval=%d\n"
                "HealthCheckNodeState=ANY%s\n",
                e, l->health_interval, l->sizing.health_cycle ? ",CYCLE" : "");
    const json_t *sch = json_object_get(slurm_spec(spec), "scheduling");
    for (size_t i = 0; i < sizeof(sched_keys) / sizeof(sched_keys[0]); i++) {
        json_t *v = json_object_get(sch, sched_keys[i].spec);
        if (json_is_string(v))
            fprintf(f, "%s=%s\n", sched_keys[i].conf, json_string_value(v));
        else if (json_is_integer(v))
            fprintf(f, "%s=%lld\n", sched_keys[i].conf, (long long)json_integer_value(v));
        else if (l->acct.port > 0 && sched_keys[i].acct)
            fprintf(f, "%s=%s\n", sched_keys[i].conf, sched_keys[i].acct);
    }
}

/* One PartitionName line per partition of the spec: its pools' nodes, the
 * default, its own config (State=UP unless it says otherwise). */
static void put_partitions(FILE *f, const json_t *spec, const struct slurm_layout *l)
{
    const json_t *ss = slurm_spec(spec);
    const char *def = json_string_value(json_object_get(ss, "defaultPartitionId"));
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(ss, "partitions"), i, p)
    {
        const char *id = json_string_value(json_object_get(p, "id"));
        json_t *ids = json_object_get(p, "nodePoolIds");
        fprintf(f, "PartitionName=%s", id);
        int first = 1;
        for (size_t n = 0; n < l->nnodes; n++) {
            if (!mtc_json_array_has(ids, l->nodes[n].pool))
                continue;
            fprintf(f, "%s%s", first ? " Nodes=" : ",", l->nodes[n].name);
            first = 0;
        }
        fprintf(f, " Default=%s", def && strcmp(def, id) == 0 ? "YES" : "NO");
        const char *k;
        json_t *v;
        int has_state = 0;
        json_object_foreach(json_object_get(p, "config"), k, v)
        {
            put_kv(f, k, json_string_value(v));
            has_state |= strcasecmp(k, "State") == 0;
        }
        if (!has_state)
            fprintf(f, " State=UP");
        fprintf(f, "\n");
    }
}

char *slurm_conf_render(const json_t *spec, const struct slurm_layout *l, mtc_error_t *err)
{
    char *buf;
    size_t len;
    FILE *f = text_open(&buf, &len, err);
    if (!f)
        return NULL;
    fprintf(f,
            "# slurm.conf for mtc cluster %s — generated by mtc from the cluster spec;\n"
            "# edits are overwritten on the next update.\n",
            l->cluster);
    fprintf(f, "ClusterName=%s\n", l->cluster);
    fprintf(f, "SlurmctldHost=%s(%s)\n", l->hostname, l->uid ? l->ctld_addr : "127.0.0.1");
    if (l->uid && l->backup_addr) /* Slurm's backup: in control after SlurmctldTimeout */
        fprintf(f, "SlurmctldHost=%s(%s)\n", l->backup_host, l->backup_addr);
    fprintf(f, "SlurmctldPort=%d\nSlurmdPort=%d\n", l->ctld_port, l->slurmd_port);
    put_paths(f, l);
    put_behaviour(f, spec, l);
    fprintf(f, l->uid ? "\n# nodes: one slurmd per host\n"
                      : "\n# nodes: one slurmd per node, each on its own port\n");
    for (size_t i = 0; i < l->nnodes; i++)
        node_line(f, l, &l->nodes[i], node_set_config(spec, l->nodes[i].pool));
    /* slurmctld refuses to start without any node; a FUTURE node is never
     * expected to register and is never scheduled */
    if (l->nnodes == 0)
        fprintf(f,
                "NodeName=%s-none NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=1 State=FUTURE\n",
                l->cluster, l->hostname, l->slurmd_port);
    if (put_power(f, l, err) < 0) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fprintf(f, "\n# partitions\n");
    put_partitions(f, spec, l);
    return text_close(f, &buf, "slurm.conf", err);
}

char *slurm_gres_render(const struct slurm_layout *l, mtc_error_t *err)
{
    char *buf;
    size_t len;
    FILE *f = text_open(&buf, &len, err);
    if (!f)
        return NULL;
    fprintf(f, "# gres.conf for mtc cluster %s — generated by mtc.\nAutoDetect=off\n", l->cluster);
    for (size_t i = 0; i < l->nnodes; i++) {
        const struct slurm_node *n = &l->nodes[i];
        if (n->gpus <= 0)
            continue;
        fprintf(f, "NodeName=%s Name=gpu Type=%s File=", n->name, n->gres_type);
        if (l->fake_gpus && l->uid) /* emulated GPUs of a test host */
            fprintf(f, SLURM_HOST_VAR "/hw/nvidia", l->uid);
        else if (l->fake_gpus)
            fprintf(f, "%s/nodes/%s/hw/nvidia", l->dir, n->name);
        else
            fprintf(f, "/dev/nvidia");
        if (n->gpus == 1)
            fprintf(f, "0\n");
        else
            fprintf(f, "[0-%d]\n", n->gpus - 1);
    }
    return text_close(f, &buf, "gres.conf", err);
}

char *slurm_plugstack_render(const struct slurm_layout *l, mtc_error_t *err)
{
    if (!l->spank)
        return errprintf(err, "no container plugin"), NULL;
    char *buf;
    size_t len;
    FILE *f = text_open(&buf, &len, err);
    if (!f)
        return NULL;
    fprintf(f, "# plugstack.conf for mtc cluster %s — generated by mtc.\n", l->cluster);
    fprintf(f, "# The container plugin (docs/containers.md); %%n is the node's name.\n");
    fprintf(f, "required %s", l->spank);
    /* registry images: mtc (beside the plugin's lib/mtc/) pulls into the cache */
    char mtc[1024] = "";
    const char *suffix = strstr(l->spank, "/lib/mtc/spank_mtc.so");
    if (suffix)
        snprintf(mtc, sizeof(mtc), "%.*s/bin/mtc", (int)(suffix - l->spank), l->spank);
    double gb = l->image_cache_gb > 0 ? l->image_cache_gb : 200;
    if (l->uid) {
        fprintf(f, " runtime=" SLURM_HOST_VAR "/containers", l->uid);
        if (l->fake_gpus)
            fprintf(f,
                    " gpus=" SLURM_HOST_VAR "/hw driver=" SLURM_HOST_VAR
                    "/hw/driver ib=" SLURM_HOST_VAR "/hw/ib",
                    l->uid, l->uid, l->uid);
        fprintf(f, " bind=" SLURM_HOST_RUN "/tmp", l->uid);
        /* mtc's enroot (hosts_bundle's link) for steps outside containers */
        fprintf(f, " path=" SLURM_HOST_VAR "/path", l->uid);
        fprintf(f, " pull=" SLURM_HOST_VAR "/bin/mtc", l->uid);
        if (l->image_cache)
            fprintf(f, " cache=%s", l->image_cache);
        else
            fprintf(f, " cache=" SLURM_HOST_VAR "/images", l->uid);
    } else {
        fprintf(f, " runtime=%s/nodes/%%n/containers", l->dir);
        if (l->fake_gpus)
            fprintf(f, " gpus=%s/nodes/%%n/hw driver=%s/nodes/%%n/hw/driver ib=%s/nodes/%%n/hw/ib",
                    l->dir, l->dir, l->dir);
        fprintf(f, " bind=%s/tmp/%%n", l->dir);
        if (mtc[0])
            fprintf(f, " pull=%s", mtc);
        fprintf(f, " cache=%s", l->image_cache ? l->image_cache : l->dir);
        if (!l->image_cache)
            fprintf(f, "/images");
    }
    fprintf(f, " cachegb=%g\n", gb);
    return text_close(f, &buf, "plugstack.conf", err);
}
