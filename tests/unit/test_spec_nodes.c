/* test_spec_nodes: the cluster spec's nodes — node pools on hosts (host
 * names, spares, a host in one pool only, the hosts-only sections), shared
 * storage (filestores, the experiment root), elastic pools' power-saving
 * fields, the sim section — and the by-name node index. The spec's other
 * rules: test_spec.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cluster/cluster.h"
#include "health/health.h"
#include "provider/provider.h"
#include "spec_fixture.h"

/* A cluster on hosts: two pools, a spare, the hosts-only sections. HOSTS_SPEC
 * takes the text added at the top level and the node pools. */
#define HOSTS_SPEC(top, pools)                                                                     \
    "{" top "\"nodePools\":[" pools "],\"orchestratorSpec\":{\"slurmSpec\":{"                      \
    "\"loginNodePoolId\":\"login\",\"partitions\":[{\"id\":\"gpu\",\"nodePoolIds\":[\"gpu\"]}]}}}"
#define LOGIN_POOL                                                                                 \
    "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},\"hosts\":[\"login.lab\"]}"
#define GPU_POOL(hosts, min, extra)                                                                \
    "{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},\"scalingSpec\":{"                 \
    "\"minNodeCount\":" min "},\"hosts\":[" hosts "]" extra "}"
/* The login pool and the gpu pool. */
#define LOGIN_GPU(top, hosts, min, extra)                                                          \
    HOSTS_SPEC(top, LOGIN_POOL "," GPU_POOL(hosts, min, extra))
/* The gpu pool's one node on a.lab, the top level patched with top. */
#define ON_A_LAB(top) LOGIN_GPU(top, "\"a.lab\"", "1", "")
#define WANT_HOST "(want an IPv4 or IPv6 address or a DNS name)"
/* A case: the gpu pool on h (a quoted JSON string), which is no host name. */
#define BAD_HOST(h)                                                                                \
    LOGIN_GPU("", h, "1", ""), "nodePools[1].hosts[0]: invalid host " h " " WANT_HOST

static void test_hosts(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {LOGIN_GPU("\"ssh\":{\"user\":\"root\",\"port\":2222},\"controller\":{\"address\":"
                   "\"10.20.0.1\"},\"installPackages\":true,\"hostRemediation\":{"
                   "\"rebootCommand\":\"systemctl reboot\",\"bootTimeoutSeconds\":60},",
                   "\"10.20.0.3\",\"fe80::1\"", "2", ",\"spareHosts\":[\"n5.lab\"]"),
         ""},
        {LOGIN_GPU("", "\"10.20.0.3\"", "2", ""),
         "nodePools[1].hosts: lists 1 host(s) and maxNodeCount is 2: a pool on hosts lists one "
         "host per node (the first minNodeCount static, the rest elastic)"},
        {LOGIN_GPU("", "", "0", ""), "nodePools[1].hosts: at least one host is required"},
        {HOSTS_SPEC("", LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"local\"}}"),
         "nodePools[1]: node pool \"gpu\" lists no hosts; a cluster runs either on hosts (every "
         "node pool lists its hosts) or locally (none does)"},
        {BAD_HOST("\"10.20.0.3;reboot\"")},
        {BAD_HOST("\"-oProxyCommand=x\"")},
        {BAD_HOST("\"10.20.0.300\"")},
        {LOGIN_GPU("", "\"a.lab\",\"LOGIN.lab\"", "2", ""),
         "nodePools[1].hosts[1]: host \"LOGIN.lab\" is also nodePools[0].hosts[0] (one node "
         "per host)"},
        {LOGIN_GPU("", "\"a.lab\"", "1", ",\"spareHosts\":[\"a.lab\"]"),
         "nodePools[1].spareHosts[0]: host \"a.lab\" is also nodePools[1].hosts[0] (one node "
         "per host)"},
        {HOSTS_SPEC("", LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"local\"},"
                                   "\"hosts\":[\"a.lab\"]}"),
         "nodePools[1].machineSpec.machineType: machine type \"local\" emulates nodes on the "
         "mtcd host; a pool on hosts uses \"host\" (whatever the host has) or a catalog type"},
        {ON_A_LAB("\"ssh\":{\"user\":\"root; id\"},"),
         "ssh.user: invalid user \"root; id\" (want ^[a-z_][a-z0-9_.-]{0,31}$)"},
        {ON_A_LAB("\"ssh\":{\"keyFile\":\"id_rsa\"},"),
         "ssh.keyFile: must be an absolute path of up to 255 of [A-Za-z0-9/._+-]"},
        {ON_A_LAB("\"ssh\":{\"port\":0},"), "ssh.port: must be an integer from 1 to 65535"},
        {ON_A_LAB("\"controller\":{\"address\":\"a b\"},"),
         "controller.address: invalid host \"a b\" " WANT_HOST},
        /* Slurm's backup controller: a static node's host, not the
         * controller, with storage for the state */
        {ON_A_LAB("\"experimentRoot\":\"/shared/x\",\"controller\":{\"address\":\"10.0.0.1\","
                  "\"backupHost\":\"login.lab\",\"failoverSeconds\":10},"),
         ""},
        {ON_A_LAB("\"controller\":{\"backupHost\":\"a.lab\",\"stateSaveLocation\":\"/s/x\"},"), ""},
        {ON_A_LAB("\"controller\":{\"address\":\"login.lab\",\"backupHost\":\"LOGIN.lab\","
                  "\"stateSaveLocation\":\"/s/x\"},"),
         "controller.backupHost: \"LOGIN.lab\" is the controller itself; the backup controller "
         "runs on another host"},
        {ON_A_LAB("\"controller\":{\"backupHost\":\"z.lab\",\"stateSaveLocation\":\"/s/x\"},"),
         ""}, /* a host in no pool: munged and slurmctld only */
        {LOGIN_GPU("\"controller\":{\"backupHost\":\"s.lab\",\"stateSaveLocation\":\"/s/x\"},",
                   "\"a.lab\"", "1", ",\"spareHosts\":[\"s.lab\"]"),
         "controller.backupHost: \"s.lab\" is a spare host, which a replacement may take; the "
         "backup controller needs a host of its own or a static node's"},
        {ON_A_LAB("\"controller\":{\"backupHost\":\"login.lab\"},"),
         "controller.backupHost: needs storage both controllers see: set "
         "controller.stateSaveLocation or experimentRoot"},
        {LOGIN_GPU("\"controller\":{\"backupHost\":\"b.lab\",\"stateSaveLocation\":\"/s/x\"},",
                   "\"a.lab\",\"b.lab\"", "1,\"maxNodeCount\":2", ""),
         "controller.backupHost: \"b.lab\" runs an elastic node, powered down when idle; the "
         "backup controller needs a host that stays up (the login host)"},
        {ON_A_LAB("\"controller\":{\"failoverSeconds\":2},"),
         "controller.failoverSeconds: must be an integer from 5 to 3600"},
        {ON_A_LAB("\"controller\":{\"stateSaveLocation\":\"/\"},"),
         "controller.stateSaveLocation: \"/\" is not a directory of its own"},
        {ON_A_LAB("\"controller\":{\"stateSaveLocation\":\"/a/..\"},"),
         "controller.stateSaveLocation: \"/a/..\" is not a directory of its own"},
        {ON_A_LAB("\"controller\":{\"stateSaveLocation\":\"state\"},"),
         "controller.stateSaveLocation: must be an absolute path of up to 255 of [A-Za-z0-9/._+-]"},
        {ON_A_LAB("\"hostRemediation\":{\"rebootCommand\":\"\"},"),
         "hostRemediation.rebootCommand: must be a non-empty string"},
        {ON_A_LAB("\"hostRemediation\":{\"reimageCommand\":\"a\\nb\"},"),
         "hostRemediation.reimageCommand: must not contain a newline"},
        {ON_A_LAB("\"hostRemediation\":{\"powerOnCommand\":\"a\\nb\"},"),
         "hostRemediation.powerOnCommand: must not contain a newline"},
        {ON_A_LAB("\"hostRemediation\":{\"powerOffCommand\":\"\"},"),
         "hostRemediation.powerOffCommand: must be a non-empty string"},
        /* elastic: one host per node up to max; the login pool never */
        {HOSTS_SPEC("\"hostRemediation\":{\"powerOnCommand\":\"wake {host}\"},",
                    LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},"
                               "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":2},"
                               "\"hosts\":[\"a.lab\",\"b.lab\"]}"),
         ""},
        {HOSTS_SPEC("", "{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},"
                        "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":2},"
                        "\"hosts\":[\"login.lab\",\"l2.lab\"]}," GPU_POOL("\"a.lab\"", "1", "")),
         "nodePools[0].scalingSpec.maxNodeCount: the login pool is not elastic: maxNodeCount "
         "must equal minNodeCount (1)"},
        /* a local cluster may not carry the hosts-only sections */
        {"{\"ssh\":{\"user\":\"root\"},\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{"
         "\"machineType\":\"local\"}}]}",
         "ssh: only a cluster on hosts (nodePools[].hosts) uses this field"},
        {"{\"installPackages\":false,\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{"
         "\"machineType\":\"local\"}}]}",
         "installPackages: only a cluster on hosts (nodePools[].hosts) uses this field"},
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"
         "\"spareHosts\":[\"b.lab\"]}]}",
         "nodePools[0].spareHosts: only a node pool with hosts has spare hosts"},
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"host\"}}]}",
         "nodePools[0].machineSpec.machineType: machine type \"host\" describes the pool's "
         "hosts, and the pool lists none"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "hosts rule %zu", i);

    static const char *const good[] = {"10.0.0.1",       "::1", "fe80::1", "node-1",
                                       "n1.lab.example", "a"};
    static const char *const bad[] = {"",          "-a",        "a b", "a;b",   "a..b", "a-.b",
                                      "1.2.3.4.5", "999.1.1.1", "a_b", "$(id)", "a/b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        CHECK(cluster_host_valid(good[i]), "host \"%s\" valid", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!cluster_host_valid(bad[i]), "host \"%s\" rejected", bad[i]);

    mtc_error_t err;
    json_t *in = parse(LOGIN_GPU("\"ssh\":{\"key_file\":\"/root/k\"},", "\"a.lab\"", "1",
                                 ",\"spare_hosts\":[\"b\"]"));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(out && cluster_spec_on_hosts(out), "snake_case hosts spec accepted, on hosts");
    const json_t *gp = out ? cluster_spec_pool(out, "gpu") : NULL;
    CHECK(gp && json_array_size(json_object_get(gp, "spareHosts")) == 1 &&
              !strcmp(json_string_value(json_object_get(json_object_get(out, "ssh"), "keyFile")),
                      "/root/k"),
          "spare_hosts and key_file emitted camelCase");
    CHECK(out && !json_object_get(json_object_get(out, "ssh"), "user") &&
              !json_object_get(out, "hostRemediation"),
          "no defaults filled in for the hosts sections (the provider has them)");
    json_decref(out);
}

/* The sim section (a simulated cluster): validated by the table, defaults
 * filled, never with hosts; and a simulated node's results. */
#define SIM_SPEC(sim)                                                                              \
    "{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"                   \
    "\"scalingSpec\":{\"minNodeCount\":4}}],\"sim\":" sim "}"
static void test_sim(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {SIM_SPEC("{\"rebootSeconds\":-1}"), "sim.rebootSeconds: must be a number from 0 to 86400"},
        {SIM_SPEC("{\"actionFailurePercent\":101}"),
         "sim.actionFailurePercent: must be a number from 0 to 100"},
        {SIM_SPEC("{\"rebootMinutes\":1}"), "sim: unknown field \"rebootMinutes\""},
        {ON_A_LAB("\"sim\":{},"),
         "sim: a simulated cluster runs on no hosts (drop nodePools[].hosts)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "sim rule %zu", i);
    mtc_error_t err;
    json_t *in = parse(SIM_SPEC("{\"reboot_seconds\":2.5}"));
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    const json_t *sim = json_object_get(out, "sim");
    CHECK(out && cluster_spec_simulated(out) && !cluster_spec_simulated(json_object_get(out, "x")),
          "a spec with a sim section is simulated");
    CHECK(json_number_value(json_object_get(sim, "rebootSeconds")) == 2.5 &&
              json_number_value(json_object_get(sim, "replaceSeconds")) == 1800 &&
              json_number_value(json_object_get(sim, "actionFailurePercent")) == 0,
          "sim: snake_case accepted, defaults filled (replace 1800 s, no failures)");

    json_t *r = provider_sim_results(json_object_get(out, "healthPolicy"), NULL, NULL, &err);
    struct health_result res[HEALTH_MAX_CHECKS];
    int n = r ? health_results_parse(r, res, HEALTH_MAX_CHECKS, &err) : -1;
    CHECK(n > 3 && health_worst(res, n, NULL) == HEALTH_PASS,
          "a simulated node's results parse as mtcd parses a report, all PASS (%d)", n);
    json_decref(r);
    r = provider_sim_results(json_object_get(out, "healthPolicy"), "disk", "full", &err);
    int sev = 0;
    n = r ? health_results_parse(r, res, HEALTH_MAX_CHECKS, &err) : -1;
    CHECK(n > 3 && health_worst(res, n, &sev) == HEALTH_FAIL && sev == HEALTH_SEV_REIMAGE,
          "a failing disk check FAILs with its table severity (REIMAGE)");
    json_decref(r);
    CHECK(!provider_sim_results(NULL, "gpu.nope", NULL, &err) &&
              strstr(err.text, "unknown check \"gpu.nope\""),
          "an unknown failing check is refused: %s", err.text);
    json_decref(out);
}

/* Shared storage: NFS and Lustre sources, mount paths and options, the
 * experiment root, on hosts and locally; the mounts a node gets. */
#define FS(pool_extra) LOGIN_GPU("", "\"a.lab\"", "1", ",\"filestores\":[" pool_extra "]")
static void test_storage(void)
{
    struct {
        const char *spec, *want;
    } cases[] = {
        {FS("{\"filestore\":\"10.0.0.2:/vol1\",\"mountPath\":\"/shared\","
            "\"mountOptions\":\"vers=4.1,nconnect=8\"}"),
         ""},
        {FS("{\"filestore\":\"nfs.lab:/\",\"mount_path\":\"/data/x\"}"), ""},
        {FS("{\"filestore\":\"[fd00::2]:/v\",\"mountPath\":\"/d\"}"), ""},
        {FS("{\"filestore\":\"10.0.0.2:vol1\",\"mountPath\":\"/shared\"}"),
         "nodePools[1].filestores[0].filestore: must be an NFS export ADDRESS:/share "
         "(10.0.0.2:/home, "
         "nfs.example.com:/vol1) or a Filestore instance name "
         "(projects/P/locations/L/instances/I), "
         "got \"10.0.0.2:vol1\""},
        {FS("{\"filestore\":\"a;b:/x\",\"mountPath\":\"/shared\"}"),
         "nodePools[1].filestores[0].filestore: must be an NFS export ADDRESS:/share "
         "(10.0.0.2:/home, "
         "nfs.example.com:/vol1) or a Filestore instance name "
         "(projects/P/locations/L/instances/I), "
         "got \"a;b:/x\""},
        {FS("{\"filestore\":\"10.0.0.2:/v\"}"),
         "nodePools[1].filestores[0].mountPath: required field missing"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/etc/x\"}"),
         "nodePools[1].filestores[0].mountPath: \"/etc/x\" is a system directory (or mtc's own on "
         "a host)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/a/../etc\"}"),
         "nodePools[1].filestores[0].mountPath: must be an absolute path of up to 255 of "
         "[A-Za-z0-9/._+-] (no \"..\", no trailing /)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"helper=/tmp/x\"}"),
         "nodePools[1].filestores[0].mountOptions: option \"helper=/tmp/x\": only [A-Za-z0-9_.=-]"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"vers=3,suid\"}"),
         "nodePools[1].filestores[0].mountOptions: option \"suid\" is refused (mtc mounts "
         "nosuid,nodev and passes no helper, file or user option)"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\",\"mountOptions\":"
            "\"ro,,soft\"}"),
         "nodePools[1].filestores[0].mountOptions: empty option (a comma list: "
         "\"vers=4.1,nconnect=8\")"},
        {FS("{\"filestore\":\"10.0.0.2:/v\",\"mountPath\":\"/d\"},"
            "{\"filestore\":\"10.0.0.3:/w\",\"mountPath\":\"/d\"}"),
         "nodePools[1].filestores[1].mountPath: \"/d\" is mounted twice on the pool's nodes"},
        {FS("{\"filestore\":\"projects/p/locations/l/instances/i\",\"mountPath\":\"/d\"}"),
         "nodePools[1].filestores[0].filestore: a cluster on hosts mounts an NFS export "
         "ADDRESS:/share; \"projects/p/locations/l/instances/i\" names a cloud instance"},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"10.0.0.5@tcp:/lfs\",\"mountPath\":\"/lustre\"},"
                   "{\"lustre\":\"mgs1@o2ib1,mgs1b@tcp:mgs2@tcp:/scr_1\",\"mountPath\":"
                   "\"/scratch\",\"mountOptions\":\"flock\"}]"),
         ""},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"10.0.0.5:/lfs\",\"mountPath\":\"/l\"}]"),
         "nodePools[1].lustres[0].lustre: must be a Lustre target MGS@NET:/fsname "
         "(10.0.0.5@tcp:/lfs, "
         "fsname up to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name, got "
         "\"10.0.0.5:/lfs\""},
        {LOGIN_GPU("", "\"a.lab\"", "1",
                   ",\"lustres\":[{\"lustre\":\"m@tcp:/toolongname\",\"mountPath\":\"/l\"}]"),
         "nodePools[1].lustres[0].lustre: must be a Lustre target MGS@NET:/fsname "
         "(10.0.0.5@tcp:/lfs, "
         "fsname up to 8 of [A-Za-z0-9_-]) or a Managed Lustre instance name, got "
         "\"m@tcp:/toolongname\""},
        {ON_A_LAB("\"experimentRoot\":\"/shared/exp\","), ""},
        {ON_A_LAB("\"experiment_root\":\"shared\","),
         "experimentRoot: must be an absolute path of up to 255 of [A-Za-z0-9/._+-] (no \"..\", "
         "no trailing /)"},
        {ON_A_LAB("\"experimentRoot\":\"/var/lib/mtc/x\","),
         "experimentRoot: \"/var/lib/mtc/x\" is a system directory (or mtc's own on a host)"},
        /* the home storage: cloud names are kept locally, refused on hosts */
        {"{\"nodePools\":[{\"id\":\"a\",\"machineSpec\":{\"machineType\":\"local\"},"
         "\"filestores\":[{\"filestore\":\"projects/p/locations/l/instances/i\",\"mountPath\":"
         "\"/d\"}]}],\"orchestratorSpec\":{\"slurmSpec\":{\"homeDirectoryStorage\":"
         "\"projects/p/locations/l/instances/h\"}}}",
         ""},
        {"{\"nodePools\":[" LOGIN_POOL "],\"orchestratorSpec\":{\"slurmSpec\":{"
         "\"homeDirectoryStorage\":\"projects/p/locations/l/instances/h\"}}}",
         "orchestratorSpec.slurmSpec.homeDirectoryStorage: a cluster on hosts mounts an NFS export "
         "ADDRESS:/share at /home; \"projects/p/locations/l/instances/h\" names a cloud instance"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_STR(norm_err(cases[i].spec), cases[i].want, "storage rule %zu", i);

    /* what each node mounts, in order, with nosuid,nodev first */
    mtc_error_t err;
    json_t *in =
        parse("{\"nodePools\":[" LOGIN_POOL ",{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":"
              "\"host\"},\"hosts\":[\"a.lab\"],\"lustres\":[{\"lustre\":\"m@tcp:/l\","
              "\"mountPath\":\"/l\"}],\"filestores\":[{\"filestore\":\"n:/d\",\"mountPath\":"
              "\"/d\",\"mountOptions\":\"vers=4.1\"}]}],\"orchestratorSpec\":{\"slurmSpec\":{"
              "\"loginNodePoolId\":\"login\",\"homeDirectoryStorage\":\"n:/home\","
              "\"home_directory_mount_options\":\"nconnect=4\"}}}");
    json_t *out = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(out != NULL, "storage spec normalizes (%s)", out ? "" : err.text);
    json_t *m = out ? cluster_spec_mounts(out, "gpu") : NULL,
           *l = out ? cluster_spec_mounts(out, "login") : NULL;
    char *ms = m ? json_dumps(m, JSON_COMPACT) : NULL, *ls = l ? json_dumps(l, JSON_COMPACT) : NULL;
    CHECK_STR(ms ? ms : "",
              "[{\"type\":\"nfs\",\"source\":\"n:/home\",\"path\":\"/home\",\"options\":"
              "\"nosuid,nodev,nconnect=4\"},{\"type\":\"nfs\",\"source\":\"n:/d\",\"path\":"
              "\"/d\",\"options\":\"nosuid,nodev,vers=4.1\"},{\"type\":\"lustre\",\"source\":"
              "\"m@tcp:/l\",\"path\":\"/l\",\"options\":\"nosuid,nodev\"}]",
              "a compute node mounts home, then filestores, then lustres");
    CHECK_STR(ls ? ls : "",
              "[{\"type\":\"nfs\",\"source\":\"n:/home\",\"path\":\"/home\",\"options\":"
              "\"nosuid,nodev,nconnect=4\"}]",
              "the login node mounts home only");
    free(ms);
    free(ls);
    json_decref(m);
    json_decref(l);
    json_decref(out);
}

/* Elastic pools: power-saving defaults only when max > min, snake_case,
 * range checks with one-line errors naming the field. */
static void test_elastic(void)
{
    mtc_error_t err = {""};
    json_t *in = parse(BASE);
    json_t *out = cluster_spec_normalize(in, &err);
    const json_t *sc = json_object_get(pool(out, 0), "scalingSpec");
    CHECK(json_integer_value(json_object_get(sc, "suspendTimeSeconds")) ==
                  CLUSTER_SUSPEND_TIME_DEFAULT &&
              json_integer_value(json_object_get(sc, "resumeTimeoutSeconds")) ==
                  CLUSTER_RESUME_TIMEOUT_DEFAULT,
          "an elastic pool (min 2, max 4) gets the power-saving defaults");
    CHECK(!json_object_get(json_object_get(pool(out, 1), "scalingSpec"), "suspendTimeSeconds"),
          "a fixed pool gets none");
    json_decref(out);
    json_object_set_new(json_object_get(pool(in, 0), "scalingSpec"), "suspend_time_seconds",
                        json_integer(-1));
    out = cluster_spec_normalize(in, &err);
    CHECK(out && json_integer_value(json_object_get(json_object_get(pool(out, 0), "scalingSpec"),
                                                    "suspendTimeSeconds")) == -1,
          "suspend_time_seconds -1 (never) accepted (%s)", err.text);
    json_decref(out);
    json_decref(in);
    static const struct {
        const char *key;
        int v;
        const char *want;
    } bad[] = {
        {"suspendTimeSeconds", 0,
         "nodePools[0].scalingSpec: suspendTimeSeconds must be -1 (never) or 1..604800"},
        {"suspendTimeSeconds", -2,
         "nodePools[0].scalingSpec.suspendTimeSeconds: must be an integer from -1 to 604800"},
        {"resumeTimeoutSeconds", 1,
         "nodePools[0].scalingSpec.resumeTimeoutSeconds: must be an integer from 5 to 3600"},
        {"resumeTimeoutSeconds", 7200,
         "nodePools[0].scalingSpec.resumeTimeoutSeconds: must be an integer from 5 to 3600"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = parse(BASE);
        json_object_set_new(json_object_get(pool(in, 0), "scalingSpec"), bad[i].key,
                            json_integer(bad[i].v));
        CHECK_STR(normalize_err(in), bad[i].want, "%s %d refused", bad[i].key, bad[i].v);
    }
}

/* The by-name node index: every named node found (in any order of the
 * array), unnamed ones skipped, the first of two equal names, NULL for the
 * unknown and for an empty array; 1000 nodes, each found. */
static void test_node_index(void)
{
    json_t *nodes = json_loads("[{\"instanceName\":\"c-b-1\",\"n\":0},{\"nodePoolId\":\"x\"},"
                               "{\"instanceName\":\"c-a-0\",\"n\":2},"
                               "{\"instanceName\":\"c-b-1\",\"n\":3},"
                               "{\"instanceName\":\"c-b-10\",\"n\":4}]",
                               0, NULL);
    struct cluster_node_index *ix = cluster_node_index_create(nodes);
    CHECK(ix && cluster_node_index_get(ix, "c-a-0") == json_array_get(nodes, 2) &&
              cluster_node_index_get(ix, "c-b-10") == json_array_get(nodes, 4),
          "node index: each name finds its object");
    CHECK(cluster_node_index_get(ix, "c-b-1") == json_array_get(nodes, 0),
          "node index: the first of two equal names");
    CHECK(!cluster_node_index_get(ix, "c-b-2") && !cluster_node_index_get(ix, "") &&
              !cluster_node_index_get(ix, NULL),
          "node index: an unknown name finds nothing");
    cluster_node_index_destroy(ix);
    json_decref(nodes);
    json_t *none = json_array();
    ix = cluster_node_index_create(none);
    CHECK(ix && !cluster_node_index_get(ix, "c-a-0"), "node index: empty array");
    cluster_node_index_destroy(ix);
    json_decref(none);
    nodes = json_array();
    for (int i = 999; i >= 0; i--) { /* backwards: the index sorts */
        char name[16];
        snprintf(name, sizeof(name), "c-p-%d", i);
        json_array_append_new(nodes, json_pack("{s:s, s:i}", "instanceName", name, "i", i));
    }
    ix = cluster_node_index_create(nodes);
    int found = 0;
    for (int i = 0; i < 1000; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c-p-%d", i);
        json_t *o = cluster_node_index_get(ix, name);
        found += o && json_integer_value(json_object_get(o, "i")) == i;
    }
    CHECK(found == 1000, "node index: 1000 nodes, each found (%d)", found);
    cluster_node_index_destroy(ix);
    json_decref(nodes);
}

int main(void)
{
    test_node_index();
    test_elastic();
    test_hosts();
    test_sim();
    test_storage();
    return check_done();
}
