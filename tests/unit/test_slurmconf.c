/* test_slurmconf: slurm.conf / gres.conf rendering — node names and ports,
 * partitions with Default=YES, gres lines, config{} pass-through, scheduling;
 * plugstack.conf's registry image arguments (pull=, cache=, cachegb=),
 * enroot's dir (path=) and the emulated hardware's trees (driver=, ib=), the
 * spec's containers.cacheMaxGb; the cache of the answers that change with the
 * configuration only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "slurm/slurm.h"

static json_t *spec_of(const char *text)
{
    json_error_t je;
    mtc_error_t err = {{0}};
    json_t *in = json_loads(text, 0, &je);
    json_t *out = in ? cluster_spec_normalize(in, &err) : NULL;
    if (!out)
        printf("# spec rejected: %s %s\n", je.text, err.text);
    json_decref(in);
    return out;
}

/* 1 when text has a line exactly equal to line */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    printf("# missing line: %s\n", line);
    return 0;
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* Calls of the fake scontrol so far (lines of dir/calls). */
static int calls(const char *dir)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/calls", dir);
    size_t n = 0;
    char *t = mtc_read_file(path, &n);
    int c = t ? count_of(t, "\n") : 0;
    free(t);
    return c;
}

/* slurm_cmd_cached through slurm_partitions_cached, with a fake scontrol
 * first on PATH that counts its calls and prints dir/nodes nodes (exit 1
 * when dir/fail exists): kept while slurm.conf is unchanged and young
 * enough, asked again when it changes or is older, a failure never kept. */
/* Lines of text that start with prefix. */
static int count_lines(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        n += strncmp(l, prefix, strlen(prefix)) == 0;
    return n;
}

static void test_cmd_cached(void)
{
    char dir[] = "/tmp/mtc-slurmcache.XXXXXX", path[512], conf[512], env[4096];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(path, sizeof(path), "%s/scontrol", dir);
    mtc_write_file_fmt(path, 0755,
                       "#!/bin/sh\necho x >>%s/calls\n[ -e %s/fail ] && { echo 'slurm_load_partitions: "
                       "down'; exit 1; }\necho \"PartitionName=a3m AllowGroups=ALL Default=YES "
                       "TotalNodes=$(cat %s/nodes) TotalCPUs=4\"\n",
                       dir, dir, dir);
    snprintf(path, sizeof(path), "%s/nodes", dir);
    mtc_write_file_fmt(path, 0644, "2");
    snprintf(conf, sizeof(conf), "%s/slurm.conf", dir);
    mtc_write_file_fmt(conf, 0644, "ClusterName=c1\n");
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "");
    snprintf(env, sizeof(env), "%s:%s", dir, saved);
    setenv("PATH", env, 1);
    mtc_error_t err = {""};
    json_t *p = slurm_partitions_cached(conf, 60000, &err);
    int n = (int)json_integer_value(json_object_get(json_object_get(p, "a3m"), "nodes"));
    CHECK(n == 2 && calls(dir) == 1, "asked once: 2 nodes (%d, %d calls) %s", n, calls(dir), err.text);
    json_decref(p);
    mtc_write_file_fmt(path, 0644, "3");
    p = slurm_partitions_cached(conf, 60000, &err);
    n = (int)json_integer_value(json_object_get(json_object_get(p, "a3m"), "nodes"));
    CHECK(n == 2 && calls(dir) == 1, "kept: the same answer, Slurm not asked (%d, %d calls)", n,
          calls(dir));
    json_decref(p);
    p = slurm_partitions(conf, &err);
    n = (int)json_integer_value(json_object_get(json_object_get(p, "a3m"), "nodes"));
    CHECK(n == 3 && calls(dir) == 2, "slurm_partitions asks now (%d, %d calls)", n, calls(dir));
    json_decref(p);
    mtc_write_file_fmt(path, 0644, "4");
    p = slurm_partitions_cached(conf, 60000, &err);
    n = (int)json_integer_value(json_object_get(json_object_get(p, "a3m"), "nodes"));
    CHECK(n == 3 && calls(dir) == 2, "and keeps its answer (%d, %d calls)", n, calls(dir));
    json_decref(p);
    mtc_write_file_fmt(conf, 0644, "ClusterName=c1\nNodeName=more\n");
    p = slurm_partitions_cached(conf, 60000, &err);
    n = (int)json_integer_value(json_object_get(json_object_get(p, "a3m"), "nodes"));
    CHECK(n == 4 && calls(dir) == 3, "slurm.conf changed: asked again (%d, %d calls)", n, calls(dir));
    json_decref(p);
    mtc_sleep_ms(30);
    p = slurm_partitions_cached(conf, 20, &err);
    CHECK(p && calls(dir) == 4, "older than max_age_ms: asked again (%d calls)", calls(dir));
    json_decref(p);
    snprintf(path, sizeof(path), "%s/fail", dir);
    mtc_write_file_fmt(path, 0644, "1");
    snprintf(conf, sizeof(conf), "%s/other.conf", dir); /* another cluster */
    mtc_write_file_fmt(conf, 0644, "ClusterName=c2\n");
    p = slurm_partitions_cached(conf, 60000, &err);
    CHECK(!p && strstr(err.text, "scontrol show partition: slurm_load_partitions: down"),
          "a failure: NULL, said: %s", err.text);
    unlink(path);
    p = slurm_partitions_cached(conf, 60000, &err);
    CHECK(p && calls(dir) == 6, "a failure is not kept: asked again (%d calls)", calls(dir));
    json_decref(p);
    setenv("PATH", saved, 1);
    free(saved);
    mtc_rm_rf(dir);
}

/* plugstack.conf: the plugin's mtc, the image cache and its limit */
static void test_plugstack(void)
{
    mtc_error_t err = {{0}};
    struct slurm_layout l = {.cluster = "c", .dir = "/m/clusters/c",
                             .spank = "/opt/mtc/lib/mtc/spank_mtc.so"};
    char *t = slurm_plugstack_render(&l, &err);
    CHECK(t && strstr(t, " pull=/opt/mtc/bin/mtc cache=/m/clusters/c/images cachegb=200\n"),
          "local: mtc beside the plugin, the cluster's images/, 200 GB by default");
    free(t);
    l.image_cache_gb = 50;
    l.image_cache = "/shared/exp/.mtc-images";
    t = slurm_plugstack_render(&l, &err);
    CHECK(t && strstr(t, " cache=/shared/exp/.mtc-images cachegb=50\n"),
          "a shared cache and the spec's limit");
    free(t);
    l.image_cache = NULL;
    l.uid = "1234";
    l.spank = "/var/lib/mtc/1234/lib/spank_mtc.so";
    t = slurm_plugstack_render(&l, &err);
    CHECK(t && strstr(t, " path=/var/lib/mtc/1234/path pull=/var/lib/mtc/1234/bin/mtc "
                         "cache=/var/lib/mtc/1234/images cachegb=50"),
          "hosts: each host's own mtc and cache, and its enroot's dir");
    free(t);
    l.fake_gpus = 1;
    t = slurm_plugstack_render(&l, &err);
    CHECK(t && strstr(t, " driver=/var/lib/mtc/1234/hw/driver ib=/var/lib/mtc/1234/hw/ib "),
          "hosts with emulated hardware: the driver's and the HCAs' trees under hw/");
    free(t);
    l.uid = NULL;
    t = slurm_plugstack_render(&l, &err);
    CHECK(t && strstr(t, " driver=/m/clusters/c/nodes/%n/hw/driver "
                         "ib=/m/clusters/c/nodes/%n/hw/ib "),
          "local with emulated hardware: each node's trees under nodes/%%n/hw/");
    free(t);
    l.fake_gpus = 0;
    l.uid = "1234";
    json_t *spec = spec_of("{\"nodePools\":[{\"id\":\"p\",\"machineSpec\":{\"machineType\":"
                           "\"n2-standard-4\"}}],\"containers\":{\"cacheMaxGb\":10}}");
    CHECK(spec && json_number_value(json_object_get(json_object_get(spec, "containers"),
                                                    "cacheMaxGb")) == 10,
          "containers.cacheMaxGb is a spec field");
    json_decref(spec);
    json_error_t je;
    json_t *in = json_loads("{\"nodePools\":[{\"id\":\"p\",\"machineSpec\":{\"machineType\":"
                            "\"n2-standard-4\"}}],\"containers\":{\"cacheMaxGb\":0}}",
                            0, &je);
    spec = cluster_spec_normalize(in, &err);
    CHECK(!spec && strstr(err.text, "cacheMaxGb"), "cacheMaxGb 0 refused, naming it: %s",
          err.text);
    json_decref(spec);
    json_decref(in);
}

int main(void)
{
    test_plugstack();
    json_t *spec = spec_of(
        "{\"nodePools\":[{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"a3-megagpu-8g\"},"
        "\"scalingSpec\":{\"minNodeCount\":2}},{\"id\":\"cpu\",\"machineSpec\":{\"machineType\":"
        "\"n2-standard-4\"}},"
        "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"local\"}}],"
        "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\",\"partitions\":["
        "{\"id\":\"a3m\",\"nodePoolIds\":[\"gpu\"],\"config\":{\"MaxTime\":\"01:00:00\","
        "\"OverSubscribe\":\"EXCLUSIVE\"}},"
        "{\"id\":\"all\",\"nodePoolIds\":[\"gpu\",\"cpu\"],\"config\":{\"state\":\"DOWN\"}}],"
        "\"defaultPartitionId\":\"a3m\","
        "\"nodeSets\":[{\"nodePoolId\":\"gpu\",\"config\":{\"Features\":\"h100,mega\",\"Weight\":"
        "\"5\",\"RealMemory\":\"1000\"}}],"
        "\"scheduling\":{\"preemptType\":\"preempt/"
        "partition_prio\",\"preemptMode\":\"REQUEUE\",\"priorityWeightAge\":100}}}}");
    CHECK(spec != NULL, "spec normalized");
    struct slurm_node nodes[3] = {
        {.name = "c1-gpu-0",
         .pool = "gpu",
         .port = 21001,
         .cpus = 2,
         .memory_mb = 4000,
         .gres_type = "h100",
         .gpus = 8},
        {.name = "c1-gpu-1",
         .pool = "gpu",
         .port = 21002,
         .cpus = 2,
         .memory_mb = 4000,
         .gres_type = "h100",
         .gpus = 8},
        {.name = "c1-cpu-0", .pool = "cpu", .port = 21003, .cpus = 2, .memory_mb = 3000},
    };
    struct slurm_layout l = {.cluster = "c1",
                             .dir = "/tmp/mtc/clusters/c1",
                             .hostname = "host1",
                             .ctld_port = 21000,
                             .slurmd_port = 21001,
                             .nodes = nodes,
                             .nnodes = 3,
                             .fake_gpus = 1};
    mtc_error_t err = {{0}};
    char *conf = slurm_conf_render(spec, &l, &err);
    CHECK(conf != NULL, "slurm.conf rendered (%s)", err.text);
    if (!conf)
        return check_done();
    CHECK(has_line(conf, "ClusterName=c1"), "ClusterName");
    CHECK(has_line(conf, "SlurmctldHost=host1(127.0.0.1)"), "SlurmctldHost on loopback");
    CHECK(has_line(conf, "SlurmctldPort=21000"), "SlurmctldPort");
    CHECK(has_line(conf, "SlurmdPort=21001"), "SlurmdPort");
    CHECK(has_line(conf, "AuthInfo=socket=/tmp/mtc/clusters/c1/munge/socket"), "own munge socket");
    CHECK(has_line(conf, "StateSaveLocation=/tmp/mtc/clusters/c1/state"), "StateSaveLocation");
    CHECK(has_line(conf, "SlurmdSpoolDir=/tmp/mtc/clusters/c1/spool/%n"), "per-node spool (%%n)");
    CHECK(has_line(conf, "SlurmdPidFile=/tmp/mtc/clusters/c1/run/slurm/slurmd-%n.pid"),
          "per-node pid file");
    CHECK(has_line(conf, "ReturnToService=2"), "ReturnToService=2");
    CHECK(has_line(conf, "TmpFS=/tmp/mtc/clusters/c1/tmp/%n"), "per-node TmpFS (PMIx dirs)");
    CHECK(has_line(conf, "SlurmUser=root"), "SlurmUser=root");
    CHECK(has_line(conf, "JobAcctGatherType=jobacct_gather/none") &&
              !strstr(conf, "AccountingStorageType") && !strstr(conf, "PriorityType"),
          "no accounting: no slurmdbd, no multifactor priority");
    /* accounting on (issue 31): slurmdbd, usage gathered, QoS priority and preemption */
    struct slurm_layout la = l;
    la.acct = (struct slurm_accounting){.port = 31000, .host = "127.0.0.1", .enforce = "associations,limits"};
    char *ca = slurm_conf_render(spec, &la, &err);
    CHECK(ca && has_line(ca, "AccountingStorageType=accounting_storage/slurmdbd") &&
              has_line(ca, "AccountingStorageHost=127.0.0.1") && has_line(ca, "AccountingStoragePort=31000") &&
              has_line(ca, "AccountingStoragePass=/tmp/mtc/clusters/c1/munge/socket") &&
              has_line(ca, "JobAcctGatherType=jobacct_gather/linux") &&
              has_line(ca, "AccountingStorageEnforce=associations,limits"),
          "accounting: slurmdbd's port, the munge socket for it, usage gathered, enforcement");
    CHECK(ca && has_line(ca, "PriorityType=priority/multifactor") &&
              has_line(ca, "PriorityWeightQOS=10000") && has_line(ca, "PreemptMode=REQUEUE"),
          "  QoS priority, preemption by requeue");
    CHECK(ca && has_line(ca, "PriorityCalcPeriod=1") && !strstr(conf, "PriorityCalcPeriod"),
          "  fair share recalculated each minute (Slurm's default: 5); not without accounting");
    CHECK(ca && has_line(ca, "PreemptType=preempt/partition_prio") && !strstr(ca, "preempt/qos") &&
              count_of(ca, "\nPreemptType=") == 1 && count_of(ca, "\nPriorityWeightAge=") == 1,
          "  the spec's own scheduling keys win (preemptType, priorityWeightAge), each key once");
    free(ca);
    CHECK(has_line(conf,
                   "NodeName=c1-gpu-0 NodeHostname=host1 NodeAddr=127.0.0.1 Port=21001 CPUs=2 "
                   "RealMemory=1000 Gres=gpu:h100:8 Features=h100,mega Weight=5"),
          "gpu node: own port, gres, node-set config overrides RealMemory and adds keys");
    CHECK(has_line(conf,
                   "NodeName=c1-gpu-1 NodeHostname=host1 NodeAddr=127.0.0.1 Port=21002 CPUs=2 "
                   "RealMemory=1000 Gres=gpu:h100:8 Features=h100,mega Weight=5"),
          "second gpu node on its own port");
    CHECK(has_line(conf, "NodeName=c1-cpu-0 NodeHostname=host1 NodeAddr=127.0.0.1 Port=21003 "
                         "CPUs=2 RealMemory=3000"),
          "cpu node without Gres");
    CHECK(has_line(conf, "PartitionName=a3m Nodes=c1-gpu-0,c1-gpu-1 Default=YES MaxTime=01:00:00 "
                         "OverSubscribe=EXCLUSIVE State=UP"),
          "default partition with config{} passed through");
    CHECK(
        has_line(conf, "PartitionName=all Nodes=c1-gpu-0,c1-gpu-1,c1-cpu-0 Default=NO State=DOWN"),
        "second partition, State from config{} replaces State=UP");
    CHECK(has_line(conf, "PreemptType=preempt/partition_prio") &&
              has_line(conf, "PreemptMode=REQUEUE") && has_line(conf, "PriorityWeightAge=100"),
          "scheduling keys rendered");
    CHECK(!strstr(conf, "login"), "login pool gets no slurmd node line");
    CHECK(!strstr(conf, "Prolog="), "no Prolog without scripts");
    free(conf);

    char *gres = slurm_gres_render(&l, &err);
    CHECK(gres && has_line(gres, "NodeName=c1-gpu-0 Name=gpu Type=h100 "
                                 "File=/tmp/mtc/clusters/c1/nodes/c1-gpu-0/hw/nvidia[0-7]"),
          "gres line with fake device files");
    CHECK(gres && !strstr(gres, "c1-cpu-0"), "no gres line for a CPU node");
    free(gres);
    l.fake_gpus = 0;
    gres = slurm_gres_render(&l, &err);
    CHECK(gres && has_line(gres, "NodeName=c1-gpu-1 Name=gpu Type=h100 File=/dev/nvidia[0-7]"),
          "gres line with real devices");
    free(gres);

    /* a value with a blank is quoted; prolog/epilog point into the cluster dir */
    json_t *s2 =
        spec_of("{\"nodePools\":[{\"id\":\"c\",\"machineSpec\":{\"machineType\":\"local\"}}],"
                "\"orchestratorSpec\":{\"slurmSpec\":{\"nodeSets\":[{\"nodePoolId\":\"c\","
                "\"config\":{\"Reason\":\"new disk\"}}]}}}");
    struct slurm_node one = {
        .name = "c2-c-0", .pool = "c", .port = 22001, .cpus = 1, .memory_mb = 100};
    struct slurm_layout l2 = {.cluster = "c2",
                              .dir = "/d",
                              .hostname = "h",
                              .ctld_port = 22000,
                              .slurmd_port = 22001,
                              .nodes = &one,
                              .nnodes = 1,
                              .prolog = 1,
                              .epilog = 1};
    conf = slurm_conf_render(s2, &l2, &err);
    CHECK(conf && has_line(conf, "NodeName=c2-c-0 NodeHostname=h NodeAddr=127.0.0.1 Port=22001 "
                                 "CPUs=1 RealMemory=100 Reason=\"new disk\""),
          "value with a blank is quoted");
    CHECK(conf && has_line(conf, "PartitionName=c Nodes=c2-c-0 Default=YES State=UP"),
          "default partition per compute pool");
    CHECK(conf && has_line(conf, "Prolog=/d/etc/prolog.sh") &&
              has_line(conf, "Epilog=/d/etc/epilog.sh"),
          "prolog and epilog");
    free(conf);
    /* no compute node at all: a FUTURE placeholder keeps slurmctld starting */
    l2.nnodes = 0;
    conf = slurm_conf_render(s2, &l2, &err);
    CHECK(conf && has_line(conf, "NodeName=c2-none NodeHostname=h NodeAddr=127.0.0.1 Port=22001 "
                                 "CPUs=1 State=FUTURE"),
          "zero nodes: FUTURE placeholder node");
    CHECK(conf && has_line(conf, "PartitionName=c Default=YES State=UP"),
          "zero nodes: partition without Nodes=");
    free(conf);
    l2.health_interval = 30;
    conf = slurm_conf_render(s2, &l2, &err);
    CHECK(conf && has_line(conf, "HealthCheckProgram=/d/etc/health.sh") &&
              has_line(conf, "HealthCheckInterval=30") &&
              has_line(conf, "HealthCheckNodeState=ANY"),
          "health check program");
    free(conf);
    json_decref(s2);
    json_decref(spec);

    /* a cluster on hosts: configless, real host names and addresses, every
     * slurmd path under the cluster uid's directories on the hosts */
    json_t *s3 =
        spec_of("{\"nodePools\":[{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},"
                "\"hosts\":[\"10.2.0.2\"]},{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":"
                "\"host\"},\"scalingSpec\":{\"minNodeCount\":2},\"hosts\":[\"10.2.0.3\",\"n4\"]}],"
                "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\"}}}");
    struct slurm_node hn[3] = {
        {.name = "h1-gpu-0",
         .pool = "gpu",
         .cpus = 4,
         .memory_mb = 900,
         .gres_type = "gpu",
         .gpus = 2,
         .hostname = "th-3",
         .addr = "10.2.0.3"},
        {.name = "h1-gpu-1",
         .pool = "gpu",
         .cpus = 4,
         .memory_mb = 900,
         .hostname = "n4",
         .addr = "n4"},
        {.name = "h1-login-0",
         .pool = "login",
         .cpus = 2,
         .memory_mb = 500,
         .hostname = "th-2",
         .addr = "10.2.0.2"},
    };
    struct slurm_layout lh = {.cluster = "h1",
                              .dir = "/m/clusters/h1",
                              .hostname = "ctl",
                              .ctld_port = 23000,
                              .slurmd_port = 6818,
                              .nodes = hn,
                              .nnodes = 3,
                              .fake_gpus = 1,
                              .prolog = 1,
                              .health_interval = 30,
                              .uid = "u1234",
                              .ctld_addr = "10.2.0.1"};
    conf = s3 ? slurm_conf_render(s3, &lh, &err) : NULL;
    CHECK(conf != NULL, "hosts slurm.conf rendered (%s)", err.text);
    CHECK(conf && has_line(conf, "SlurmctldHost=ctl(10.2.0.1)"),
          "slurmctld on the controller, at the address the hosts reach");
    CHECK(conf && has_line(conf, "SlurmctldParameters=enable_configless") &&
              has_line(conf, "SlurmdPort=6818"),
          "configless, one SlurmdPort");
    CHECK(conf && has_line(conf, "AuthInfo=socket=/run/mtc/u1234/munge/munge.socket.2"),
          "the cluster's munge socket, same path everywhere");
    CHECK(conf && has_line(conf, "StateSaveLocation=/m/clusters/h1/state") &&
              has_line(conf, "SlurmctldLogFile=/m/clusters/h1/log/slurmctld.log"),
          "slurmctld's files in the cluster dir");
    CHECK(conf && has_line(conf, "SlurmdSpoolDir=/var/lib/mtc/u1234/spool") &&
              has_line(conf, "SlurmdPidFile=/run/mtc/u1234/slurmd.pid") &&
              has_line(conf, "SlurmdLogFile=/var/lib/mtc/u1234/log/slurmd.log") &&
              has_line(conf, "TmpFS=/run/mtc/u1234/tmp"),
          "slurmd's files under the uid's directories on the hosts");
    CHECK(conf && has_line(conf, "Prolog=/etc/mtc/u1234/etc/prolog.sh") &&
              has_line(conf, "HealthCheckProgram=/etc/mtc/u1234/etc/health.sh"),
          "scripts where the hosts have them");
    CHECK(conf && has_line(conf, "NodeName=h1-gpu-0 NodeHostname=th-3 NodeAddr=10.2.0.3 CPUs=4 "
                                 "RealMemory=900 Gres=gpu:gpu:2"),
          "a node on its host: NodeHostname, NodeAddr, no Port");
    CHECK(conf && has_line(conf, "NodeName=h1-gpu-1 NodeHostname=n4 NodeAddr=n4 CPUs=4 "
                                 "RealMemory=900"),
          "a host given by name");
    CHECK(conf && has_line(conf, "NodeName=h1-login-0 NodeHostname=th-2 NodeAddr=10.2.0.2 CPUs=2 "
                                 "RealMemory=500"),
          "the login host has a slurmd node");
    CHECK(conf && has_line(conf, "PartitionName=gpu Nodes=h1-gpu-0,h1-gpu-1 Default=YES State=UP"),
          "the login node is in no partition");
    CHECK(conf && !strstr(conf, "127.0.0.1") && !strstr(conf, "%n"), "nothing local left");
    CHECK(conf && has_line(conf, "SlurmctldTimeout=30") && count_lines(conf, "SlurmctldHost=") == 1,
          "one controller, SlurmctldTimeout 30");
    /* Slurm's backup controller on the login host: both hosts, the shared
     * state, each slurmctld's pid file and log on its own host */
    struct slurm_layout lb = lh;
    lb.backup_host = "th-2", lb.backup_addr = "10.2.0.2", lb.state_dir = "/shared/h1.state";
    lb.ctld_timeout = 10;
    char *bconf = s3 ? slurm_conf_render(s3, &lb, &err) : NULL;
    CHECK(bconf && has_line(bconf, "SlurmctldHost=ctl(10.2.0.1)") &&
              has_line(bconf, "SlurmctldHost=th-2(10.2.0.2)") &&
              strstr(bconf, "SlurmctldHost=ctl") < strstr(bconf, "SlurmctldHost=th-2"),
          "two SlurmctldHost lines, the controller first");
    CHECK(bconf && has_line(bconf, "SlurmctldTimeout=10") &&
              has_line(bconf, "StateSaveLocation=/shared/h1.state"),
          "SlurmctldTimeout from failoverSeconds, the shared StateSaveLocation");
    CHECK(bconf && has_line(bconf, "SlurmctldPidFile=/run/mtc/u1234/slurmctld.pid") &&
              has_line(bconf, "SlurmctldLogFile=/var/lib/mtc/u1234/log/slurmctld.log"),
          "each slurmctld's pid file and log under the per-host directories");
    free(bconf);
    char check_path[] = "/tmp/mtc-hostsconf.XXXXXX";
    int fd = mkstemp(check_path);
    if (fd >= 0)
        close(fd);
    mtc_error_t cerr = {{0}};
    CHECK(conf && slurm_conf_check(conf, check_path, &cerr) == 0,
          "Slurm parses the hosts slurm.conf (%s)", cerr.text);
    free(conf);
    gres = slurm_gres_render(&lh, &err);
    CHECK(gres && has_line(gres, "NodeName=h1-gpu-0 Name=gpu Type=gpu "
                                 "File=/var/lib/mtc/u1234/hw/nvidia[0-1]"),
          "emulated GPUs of a test host under its /var/lib/mtc/<uid>/hw");
    free(gres);
    json_decref(s3);

    /* power saving: cloud nodes get State=CLOUD, the static ones SuspendExcNodes */
    {
        json_t *s4 = spec_of(
            "{\"nodePools\":[{\"id\":\"c\",\"machineSpec\":{\"machineType\":\"local\"},"
            "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":3}}]}");
        struct slurm_node el[3] = {
            {.name = "e1-c-0", .pool = "c", .port = 23001, .cpus = 1, .memory_mb = 100},
            {.name = "e1-c-1", .pool = "c", .port = 23002, .cpus = 1, .memory_mb = 100, .cloud = 1},
            {.name = "e1-c-2", .pool = "c", .port = 23003, .cpus = 1, .memory_mb = 100, .cloud = 1},
        };
        struct slurm_layout le = {.cluster = "e1",
                                  .dir = "/tmp/mtc-e1",
                                  .hostname = "h",
                                  .ctld_port = 23000,
                                  .slurmd_port = 23001,
                                  .nodes = el,
                                  .nnodes = 3};
        char *c4 = slurm_conf_render(s4, &le, &err);
        CHECK(c4 == NULL && strstr(err.text, "SuspendProgram"),
              "cloud nodes without power programs are refused (%s)", err.text);
        free(c4);
        le.power = (struct slurm_power){.suspend_program = "/tmp/mtc-e1/etc/suspend.sh",
                                        .resume_program = "/tmp/mtc-e1/etc/resume.sh",
                                        .resume_fail_program = "/tmp/mtc-e1/etc/resume-fail.sh",
                                        .suspend_time = 30};
        c4 = slurm_conf_render(s4, &le, &err);
        CHECK(c4 != NULL, "power-saving slurm.conf rendered (%s)", err.text);
        CHECK(c4 && has_line(c4, "NodeName=e1-c-0 NodeHostname=h NodeAddr=127.0.0.1 Port=23001 "
                                 "CPUs=1 RealMemory=100"),
              "a static node has no State=");
        CHECK(c4 && has_line(c4, "NodeName=e1-c-2 NodeHostname=h NodeAddr=127.0.0.1 Port=23003 "
                                 "CPUs=1 RealMemory=100 State=CLOUD"),
              "an elastic node is State=CLOUD");
        CHECK(c4 && has_line(c4, "SuspendProgram=/tmp/mtc-e1/etc/suspend.sh") &&
                  has_line(c4, "ResumeProgram=/tmp/mtc-e1/etc/resume.sh") &&
                  has_line(c4, "ResumeFailProgram=/tmp/mtc-e1/etc/resume-fail.sh"),
              "the power programs");
        CHECK(c4 && has_line(c4, "SuspendTime=30") && has_line(c4, "ResumeTimeout=300") &&
                  has_line(c4, "SuspendTimeout=60"),
              "SuspendTime from the layout, default timeouts");
        CHECK(c4 && has_line(c4, "SuspendExcNodes=e1-c-0"), "static nodes never suspended");
        CHECK(c4 && has_line(c4, "PrivateData=cloud"), "powered-down nodes visible in sinfo");
        CHECK(c4 && has_line(c4, "PartitionName=c Nodes=e1-c-0,e1-c-1,e1-c-2 Default=YES State=UP"),
              "cloud nodes are in their partition");
        char p4[] = "/tmp/mtc-powerconf.XXXXXX";
        int fd4 = mkstemp(p4);
        if (fd4 >= 0)
            close(fd4);
        mtc_error_t e4 = {{0}};
        CHECK(c4 && slurm_conf_check(c4, p4, &e4) == 0, "Slurm parses the power-saving slurm.conf (%s)",
              e4.text);
        unlink(p4);
        free(c4);
        le.power.suspend_time = -1;
        le.power.resume_timeout = 20;
        c4 = slurm_conf_render(s4, &le, &err);
        CHECK(c4 && has_line(c4, "SuspendTime=-1") && has_line(c4, "ResumeTimeout=20"),
              "SuspendTime -1 (never) and an own ResumeTimeout");
        free(c4);
        le.power.suspend_time = -2;
        c4 = slurm_conf_render(s4, &le, &err);
        CHECK(c4 == NULL && strstr(err.text, "SuspendTime -2"), "SuspendTime below -1 refused (%s)",
              err.text);
        free(c4);
        for (int k = 0; k < 3; k++)
            el[k].cloud = 0;
        c4 = slurm_conf_render(s4, &le, &err);
        CHECK(c4 && !strstr(c4, "Suspend") && !strstr(c4, "CLOUD"),
              "no cloud node: no power saving at all");
        free(c4);
        json_decref(s4);
    }

    /* the prolog wrapper runs the hook, then the scripts in order, and stops at a failure */
    char dir[] = "/tmp/mtc-scripts.XXXXXX", cmd[512], hook[256], path[300];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(hook, sizeof(hook), "echo hook >> %s/out", dir);
    snprintf(cmd, sizeof(cmd), "[\"echo one >> %s/out\", \"exit 3\", \"echo never >> %s/out\"]",
             dir, dir);
    json_t *scripts = json_loads(cmd, 0, NULL);
    CHECK(slurm_scripts_write(dir, "prolog", hook, scripts, &err) == 1, "prolog written");
    snprintf(path, sizeof(path), "%s/etc/prolog.sh", dir);
    char *argv[] = {"bash", path, NULL};
    CHECK(mtc_run(argv, NULL, NULL, 10000) == 3, "prolog fails with the failing script's status");
    snprintf(path, sizeof(path), "%s/out", dir);
    char *out = mtc_read_file(path, NULL);
    CHECK_STR(out, "hook\none\n", "hook first, then scripts in order, none after the failure");
    free(out);
    CHECK(slurm_scripts_write(dir, "epilog", NULL, NULL, &err) == 0, "nothing to run: no epilog");
    CHECK(slurm_health_write(dir, "true", &err) == 1, "health wrapper written");
    json_decref(scripts);
    mtc_rm_rf(dir);

    /* power saving's host lists and node states */
    static const struct {
        const char *in, *want;
    } lists[] = {
        {"el-cpu-1", "[\"el-cpu-1\"]"},
        {"el-cpu-[1-2]", "[\"el-cpu-1\", \"el-cpu-2\"]"},
        {"a-[1,3-4],b-7", "[\"a-1\", \"a-3\", \"a-4\", \"b-7\"]"},
        {"n[08-10]", "[\"n08\", \"n09\", \"n10\"]"},
        {"r[1-2]-n[1-2]", "[\"r1-n1\", \"r1-n2\", \"r2-n1\", \"r2-n2\"]"},
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        json_t *got = slurm_hostlist_expand(lists[i].in, &err);
        char *txt = got ? json_dumps(got, JSON_COMPACT) : NULL;
        json_t *want = json_loads(lists[i].want, 0, NULL);
        CHECK(got && json_equal(got, want), "host list %s -> %s (got %s)", lists[i].in,
              lists[i].want, txt ? txt : err.text);
        free(txt);
        json_decref(got);
        json_decref(want);
    }
    static const char *const bad_lists[] = {"", "a-[1-", "a-[]", "a-[3-1]", "a-[x]", "a-]"};
    for (size_t i = 0; i < sizeof(bad_lists) / sizeof(bad_lists[0]); i++) {
        json_t *got = slurm_hostlist_expand(bad_lists[i], &err);
        CHECK(!got && *err.text, "bad host list \"%s\" refused (%s)", bad_lists[i], err.text);
        json_decref(got);
    }
    CHECK(slurm_hostlist_expand("n[0-99999]", &err) == NULL, "a huge host list refused");
    static const struct {
        const char *state;
        enum slurm_power_state want;
    } states[] = {{"idle~", SLURM_POWERED_DOWN}, {"down~", SLURM_POWERED_DOWN},
                  {"alloc#", SLURM_POWERING_UP},  {"mix#", SLURM_POWERING_UP},
                  {"idle%", SLURM_POWERING_DOWN}, {"idle", SLURM_POWER_ON},
                  {"alloc", SLURM_POWER_ON},      {"idle!", SLURM_POWER_ON},
                  {NULL, SLURM_POWER_ON}};
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
        CHECK(slurm_power_state_of(states[i].state) == states[i].want, "state %s -> %s",
              states[i].state ? states[i].state : "(none)",
              schema_enum_name(&slurm_power_state_enum, states[i].want));
    /* `scontrol show job -o` of a whole cluster: one line a job */
    json_t *js = slurm_job_states_parse(
        "JobId=7 JobName=a UserId=root(0) Priority=1 Account=(null) JobState=RUNNING Reason=None "
        "Requeue=1 Restarts=0 BatchFlag=1\n"
        "JobId=12 JobName=b Account=team JobState=PENDING Reason=BeginTime Requeue=1 Restarts=2 "
        "BatchFlag=1\n"
        "JobId=13 JobName=c JobState=COMPLETED Reason=None\n"
        "garbage line\n");
    CHECK(json_object_size(js) == 3, "three jobs read, the garbage line passed over");
    CHECK_STR(json_string_value(json_object_get(json_object_get(js, "7"), "state")), "RUNNING",
              "a running job's state");
    CHECK(json_integer_value(json_object_get(json_object_get(js, "12"), "restarts")) == 2 &&
              strcmp(json_string_value(json_object_get(json_object_get(js, "12"), "state")),
                     "PENDING") == 0,
          "a requeued job: PENDING, Restarts=2");
    CHECK_STR(json_string_value(json_object_get(json_object_get(js, "12"), "reason")), "BeginTime",
              "its reason: Slurm's requeue hold (the monitor lifts it)");
    CHECK(json_integer_value(json_object_get(json_object_get(js, "13"), "restarts")) == 0,
          "no Restarts= field: 0");
    CHECK_STR(json_string_value(json_object_get(json_object_get(js, "12"), "account")), "team",
              "its account");
    CHECK_STR(json_string_value(json_object_get(json_object_get(js, "7"), "account")), "",
              "Account=(null) (no accounting): \"\"");
    json_decref(js);
    js = slurm_job_states_parse("No jobs in the system\n");
    CHECK(js && json_object_size(js) == 0, "no jobs: an empty object");
    json_decref(js);

    /* squeue in queue.c's format: a running job, one waiting on its
     * account's node limit, one without accounting, a name with a '|' */
    json_t *q = slurm_queue_parse(
        "7|cpu|root|a|normal|RUNNING|2|ac-cpu-[0-1]|None|1:02|train\n"
        "8|cpu|alice|b|high|PENDING|3||AssocGrpNodeLimit|0:00|big run\n"
        "9|cpu|root|(null)|(null)|PENDING|1||Priority|0:00|a|b\n"
        "squeue: error: a message\n"
        "10|cpu|root\n");
    CHECK(json_array_size(q) == 3, "three jobs read, a message and a short line passed over");
    json_t *j0 = json_array_get(q, 0), *j1 = json_array_get(q, 1), *j2 = json_array_get(q, 2);
    CHECK_STR(json_string_value(json_object_get(j0, "jobId")), "7", "the job id");
    CHECK_STR(json_string_value(json_object_get(j0, "nodes")), "ac-cpu-[0-1]",
              "a running job's node list");
    CHECK(json_integer_value(json_object_get(j0, "nodeCount")) == 2, "its node count");
    CHECK_STR(json_string_value(json_object_get(j0, "reason")), "",
              "a running job's reason None: empty");
    CHECK_STR(json_string_value(json_object_get(j0, "time")), "1:02", "its run time");
    CHECK_STR(json_string_value(json_object_get(j1, "user")), "alice", "a waiting job's user");
    CHECK_STR(json_string_value(json_object_get(j1, "account")), "b", "  its account");
    CHECK_STR(json_string_value(json_object_get(j1, "qos")), "high", "  its QoS");
    CHECK_STR(json_string_value(json_object_get(j1, "state")), "PENDING", "  its state");
    CHECK_STR(json_string_value(json_object_get(j1, "reason")), "AssocGrpNodeLimit",
              "  why it waits");
    CHECK(json_integer_value(json_object_get(j1, "nodeCount")) == 3 &&
              strcmp(json_string_value(json_object_get(j1, "nodes")), "") == 0,
          "  the nodes it asks for, none yet");
    CHECK_STR(json_string_value(json_object_get(j1, "name")), "big run", "  its name");
    CHECK_STR(json_string_value(json_object_get(j2, "account")), "",
              "no accounting: squeue's (null) account is empty");
    CHECK_STR(json_string_value(json_object_get(j2, "name")), "a|b", "a name keeps its '|'");
    json_decref(q);
    q = slurm_queue_parse("");
    CHECK(q && json_array_size(q) == 0, "an empty queue: an empty array");
    json_decref(q);
    /* slurmctld's log names the preemptor (Slurm 22.05's lines, LogTimeFormat iso8601_ms) */
    static const char ctld[] =
        "[2026-12-03T14:44:30.100] sched: Allocate JobId=5 NodeList=ac-a3m-[0-1] #CPUs=4\n"
        "[2026-12-03T14:44:34.673] preempted JobId=5 has been requeued to reclaim resources for "
        "JobId=6\n"
        "[2026-12-03T14:44:35.000] preempted JobId=51 has been requeued to reclaim resources for "
        "JobId=60\n"
        "[2026-12-03T14:50:00.000] setting 30 sec preemption grace time for JobId=5 to reclaim "
        "resources for JobId=9\n"
        "[2026-12-03T14:50:30.000] preempted JobId=5 has been requeued\n"
        "[2026-12-03T14:50:30.001] preempted JobId=5 has been requeued to reclaim resources for "
        "JobId=9\n"
        "[2026-12-03T15:00:00.000] preempted JobId=4_1(5) has been killed to reclaim resources "
        "for JobId=12\n";
    FILE *lf = fmemopen((void *)ctld, sizeof(ctld) - 1, "r");
    struct slurm_preemption pre[4];
    int np = slurm_preemptions_parse(lf, "5", pre, 4);
    fclose(lf);
    CHECK(np == 3, "job 5 was preempted 3 times (not job 51's line; a grace time and its "
                   "requeue: one): %d", np);
    CHECK_STR(pre[0].by, "6", "the first preemptor: job 6");
    struct tm ptm;
    time_t pt = (time_t)pre[0].time;
    localtime_r(&pt, &ptm);
    CHECK(ptm.tm_hour == 14 && ptm.tm_min == 44 && ptm.tm_sec == 34 &&
              fabs(pre[0].time - (double)pt - 0.673) < 1e-6,
          "its time: the line's (local time, milliseconds)");
    CHECK_STR(pre[1].by, "9", "a preemption with a grace time: at the grace line, by job 9");
    CHECK_STR(pre[2].by, "12", "an array task named by its job id: by job 12");
    lf = fmemopen((void *)ctld, sizeof(ctld) - 1, "r");
    CHECK(slurm_preemptions_parse(lf, "5", pre, 1) == 3 && strcmp(pre[0].by, "6") == 0,
          "more than max: counted, max filled");
    fclose(lf);
    /* without the log: sacct's attempts (-D) marked PREEMPTED, at their end, by whom not said */
    np = slurm_preempted_parse("PREEMPTED|2026-12-03T14:44:34\nCOMPLETED|2026-12-03T14:46:04\n"
                               "PREEMPTED|2026-12-03T15:00:00",
                               pre, 4);
    pt = (time_t)pre[0].time;
    localtime_r(&pt, &ptm);
    CHECK(np == 2 && ptm.tm_min == 44 && ptm.tm_sec == 34 && pre[0].by[0] == '\0' &&
              pre[1].time - pre[0].time == 926,
          "sacct: 2 PREEMPTED attempts, at their ends, the preemptor not known");
    CHECK(slurm_preempted_parse("", pre, 4) == 0 && slurm_preempted_parse(NULL, pre, 4) == 0,
          "sacct: none");
    mtc_error_t perr = {""};
    CHECK(slurm_job_preemptions("/nonexistent/slurm.conf", "5", pre, 4, &perr) < 0 &&
              strstr(perr.text, "SlurmctldLogFile"),
          "no slurm.conf: -1, said: %s", perr.text);
    test_cmd_cached();
    return check_done();
}
