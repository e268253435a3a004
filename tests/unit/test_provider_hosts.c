/* test_provider_hosts: the hosts provider's pure parts — placing a spec's
 * nodes on hosts (node i on hosts[i], a replaced node staying on its spare, a
 * quarantined host's node taking the next free spare, hosts no node uses any
 * more marked for cleaning), the state file round trip, the node's mounts
 * file and storage marker, elastic nodes (a pool's min..max-1: marked in
 * the plan and the state file, off until marked on), and the mtc-host script
 * (syntax, and its read-only `facts` run here). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "provider/hosts.h"

static json_t *spec_of(const char *gpu_hosts, int n, const char *spares)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"nodePools\":[{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},"
             "\"hosts\":[\"l1\"]},{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},"
             "\"scalingSpec\":{\"minNodeCount\":%d},\"hosts\":[%s],\"spareHosts\":[%s]}],"
             "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\"}}}",
             n, gpu_hosts, spares);
    json_error_t je;
    mtc_error_t err = {""};
    json_t *in = json_loads(text, 0, &je), *out = in ? cluster_spec_normalize(in, &err) : NULL;
    if (!out)
        printf("# spec rejected: %s %s\n", je.text, err.text);
    json_decref(in);
    return out;
}

static const char *host_of(struct hstate *s, const char *node)
{
    struct hnode *n = hosts_node_find(s, node);
    return n ? n->host : "(none)";
}

static const char *role_of(struct hstate *s, const char *host)
{
    static const char *const names[] = {"node", "spare", "quarantined", "touched"};
    struct hhost *h = hosts_host_find(s, host);
    return h ? names[h->role] : "(none)";
}

static void test_plan(void)
{
    struct hstate *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    mtc_error_t err = {""};
    json_t *spec = spec_of("\"g1\",\"g2\"", 2, "\"s1\",\"s2\"");
    CHECK(spec && hosts_plan("c", spec, NULL, a, &err) == 0, "plan a new cluster (%s)", err.text);
    CHECK(a->nnodes == 3, "one node per host, login included (%zu)", a->nnodes);
    CHECK_STR(a->nodes[0].name, "c-login-0", "login node first (spec order)");
    CHECK(a->nodes[0].login && !a->nodes[1].login, "the login node is marked");
    CHECK_STR(host_of(a, "c-gpu-0"), "g1", "node i runs on hosts[i]");
    CHECK_STR(host_of(a, "c-gpu-1"), "g2", "node 1 on hosts[1]");
    CHECK_STR(role_of(a, "s1"), "spare", "spares recorded");
    CHECK_STR(hosts_free_spare(a, "gpu"), "s1", "the first free spare");
    CHECK(hosts_free_spare(a, "login") == NULL, "the login pool has no spare");

    /* replace: gpu-1 moves to s1, g2 is quarantined */
    hosts_host_set(a, "g2", "gpu", HOST_QUARANTINED, "c-gpu-1 replaced by s1");
    snprintf(hosts_node_find(a, "c-gpu-1")->host, sizeof(a->nodes[0].host), "s1");
    CHECK_STR(hosts_free_spare(a, "gpu"), "s2", "a spare in use is not free");
    CHECK(hosts_plan("c", spec, a, b, &err) == 0, "plan again after the replace (%s)", err.text);
    CHECK_STR(host_of(b, "c-gpu-1"), "s1", "a replaced node stays on its spare");
    CHECK_STR(role_of(b, "g2"), "quarantined", "the quarantine is kept while the host is listed");
    CHECK_STR(host_of(b, "c-gpu-0"), "g1", "other nodes stay");

    /* the spare is dropped from the spec: the node goes back to hosts[1],
     * which is quarantined, so it takes the next free spare */
    json_decref(spec);
    spec = spec_of("\"g1\",\"g2\"", 2, "\"s2\"");
    memset(a, 0, sizeof(*a));
    CHECK(hosts_plan("c", spec, b, a, &err) == 0, "plan without s1 (%s)", err.text);
    CHECK_STR(host_of(a, "c-gpu-1"), "s2", "quarantined hosts[1]: the next free spare");
    CHECK_STR(role_of(a, "s1"), "touched", "the host no node uses any more is to be cleaned");

    /* no spare left for a quarantined host: one line naming it */
    json_decref(spec);
    spec = spec_of("\"g1\",\"g2\"", 2, "");
    memset(b, 0, sizeof(*b));
    memset(&err, 0, sizeof(err));
    hosts_host_set(a, "s2", "gpu", HOST_TOUCHED, NULL); /* s2 left the spec */
    CHECK(hosts_plan("c", spec, a, b, &err) < 0, "no spare for a quarantined host: refused");
    CHECK_STR(err.text,
              "nodePools[1].hosts[1]: host g2 is quarantined (c-gpu-1 replaced by s1) and node "
              "pool gpu has no free spare host; add one to spareHosts or remove the host from "
              "the pool",
              "the message names the field, the host and what to do");

    /* the quarantined host leaves the spec: its quarantine ends, it is cleaned */
    json_decref(spec);
    spec = spec_of("\"g1\"", 1, "");
    memset(b, 0, sizeof(*b));
    CHECK(hosts_plan("c", spec, a, b, &err) == 0, "shrink the pool (%s)", err.text);
    CHECK(b->nnodes == 2 && !hosts_node_find(b, "c-gpu-1"), "the removed node is gone");
    CHECK_STR(role_of(b, "g2"), "touched", "the removed quarantined host is to be cleaned");
    CHECK_STR(role_of(b, "s2"), "touched", "so is the host the removed node ran on");
    CHECK(!hosts_in_use(b, "s2"), "no node on it");
    char names[256];
    hosts_node_names(b, names, sizeof(names));
    CHECK_STR(names, "c-login-0,c-gpu-0", "node names in order");
    json_decref(spec);
    free(a);
    free(b);
}

/* Cluster "c" in a fresh temp dir (dir: a mkdtemp template, filled in). */
static void temp_cluster(struct head *c, char *dir)
{
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "c");
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
}

static void test_state_file(void)
{
    char dir[] = "/tmp/mtc-hstate.XXXXXX";
    struct head c;
    temp_cluster(&c, dir);
    struct hstate *s = calloc(1, sizeof(*s)), *t = calloc(1, sizeof(*t));
    mtc_error_t err = {""};
    json_t *spec = spec_of("\"g1\",\"g2\"", 2, "\"s1\"");
    hosts_plan("c", spec, NULL, s, &err);
    snprintf(s->uid, sizeof(s->uid), "0123456789ab");
    s->ctld_port = 6817;
    snprintf(s->ctld_addr, sizeof(s->ctld_addr), "10.0.0.1");
    snprintf(s->ssh_user, sizeof(s->ssh_user), "root");
    s->ssh_port = 2222;
    snprintf(s->nodes[1].hostname, sizeof(s->nodes[1].hostname), "gpu-a");
    s->nodes[1].cpus = 8;
    s->nodes[1].memory_mb = 1000;
    hosts_host_set(s, "g9", "gpu", HOST_QUARANTINED, "bad GPU");
    hosts_host_find(s, "g9")->stop_pending = 1;
    CHECK(hosts_state_save(&c, s, &err) == 0, "state saved (%s)", err.text);
    CHECK(hosts_state_load(&c, t) == 0, "state loaded");
    CHECK_STR(t->uid, "0123456789ab", "uid kept");
    CHECK(t->ctld_port == 6817 && t->ssh_port == 2222 && !strcmp(t->ctld_addr, "10.0.0.1"),
          "ports and controller address kept");
    CHECK(t->nnodes == 3 && !strcmp(t->nodes[1].hostname, "gpu-a") && t->nodes[1].cpus == 8 &&
              t->nodes[1].memory_mb == 1000 && t->nodes[0].login,
          "nodes kept with their sizes");
    struct hhost *q = hosts_host_find(t, "g9");
    CHECK(q && q->role == HOST_QUARANTINED && q->stop_pending && !strcmp(q->reason, "bad GPU") &&
              q->since_ms > 0,
          "quarantine kept with its reason, time and pending stop");
    char path[300];
    snprintf(path, sizeof(path), "%s/hosts.json", dir);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "hosts.json is 0600");
    json_decref(spec);
    free(s);
    free(t);
    mtc_rm_rf(dir);
}

static void test_elastic(void)
{
    char dir[] = "/tmp/mtc-hel.XXXXXX", run[64];
    struct head c;
    temp_cluster(&c, dir);
    snprintf(run, sizeof(run), "%s/run", dir);
    mtc_mkdir_p(run, 0755);
    struct hstate *s = calloc(1, sizeof(*s)), *t = calloc(1, sizeof(*t));
    mtc_error_t err = {""};
    json_error_t je;
    json_t *in = json_loads(
        "{\"nodePools\":[{\"id\":\"login\",\"machineSpec\":{\"machineType\":\"host\"},"
        "\"hosts\":[\"l1\"]},{\"id\":\"gpu\",\"machineSpec\":{\"machineType\":\"host\"},"
        "\"scalingSpec\":{\"minNodeCount\":1,\"maxNodeCount\":3},\"hosts\":[\"g1\",\"g2\","
        "\"g3\"]}],\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\"}}}",
        0, &je);
    json_t *spec = in ? cluster_spec_normalize(in, &err) : NULL;
    CHECK(spec && hosts_plan("c", spec, NULL, s, &err) == 0, "plan an elastic pool (%s)", err.text);
    CHECK(s->nnodes == 4 && !s->nodes[0].cloud && !s->nodes[1].cloud && s->nodes[2].cloud &&
              s->nodes[3].cloud,
          "nodes min..max-1 of the pool are elastic, the login node and node 0 static");
    CHECK_STR(host_of(s, "c-gpu-2"), "g3", "an elastic node on its own host too");
    char names[256];
    hosts_node_names(s, names, sizeof(names));
    CHECK_STR(names, "c-login-0,c-gpu-0,c-gpu-1~,c-gpu-2~",
              "elastic nodes named with ~ (slurmctld restarts when that changes)");
    snprintf(s->uid, sizeof(s->uid), "0123456789ab");
    CHECK(hosts_state_save(&c, s, &err) == 0 && hosts_state_load(&c, t) == 0,
          "state saved and loaded (%s)", err.text);
    CHECK(t->nodes[2].cloud && !t->nodes[1].cloud, "elastic kept in hosts.json");
    CHECK(hosts_node_off(&c, &t->nodes[2]) && !hosts_node_off(&c, &t->nodes[1]),
          "an elastic node is off until marked on; a static one never");
    CHECK(head_power_mark(&c, t->nodes[2].name, 1, &err) == 0 && !hosts_node_off(&c, &t->nodes[2]),
          "marked on: on (%s)", err.text);
    CHECK(head_power_mark(&c, t->nodes[2].name, 0, &err) == 0 && hosts_node_off(&c, &t->nodes[2]),
          "marked off: off again");
    json_decref(in);
    json_decref(spec);
    free(s);
    free(t);
    mtc_rm_rf(dir);
}

static void test_script(void)
{
    const char *sh = hosts_script();
    struct mtc_io io = {.in = sh, .in_len = strlen(sh), .capture = MTC_IO_OUT | MTC_IO_ERR};
    char *syntax[] = {"sh", "-n", "-s", NULL};
    CHECK(mtc_run_io(syntax, NULL, &io, 10000) == 0, "mtc-host parses (sh -n): %s",
          io.err ? io.err : "");
    free(io.out);
    free(io.err);
    /* facts only reads: safe to run here */
    struct mtc_io io2 = {.in = sh, .in_len = strlen(sh), .capture = MTC_IO_OUT | MTC_IO_ERR};
    char *facts[] = {"sh", "-s", "--", "facts", "0123456789ab", NULL};
    int rc = mtc_run_io(facts, NULL, &io2, 20000);
    CHECK(rc == 0 && io2.out && strstr(io2.out, "kernel=Linux\n") && strstr(io2.out, "\narch=") &&
              strstr(io2.out, "\nslurmd=slurm") && strstr(io2.out, "\nmunged=munge-") &&
              strstr(io2.out, "\nresources=NodeName=") && strstr(io2.out, "\nport="),
          "mtc-host facts prints what the preflight judges");
    if (rc != 0 || !io2.out)
        printf("# %s %s\n", io2.out ? io2.out : "", io2.err ? io2.err : "");
    free(io2.out);
    free(io2.err);
}

/* The node's mounts file (what mtc-host mounts, in order) and the marker of
 * the experiment root (its path per cluster, its content made once and kept). */
static void test_storage(void)
{
    char dir[] = "/tmp/mtc-hstore.XXXXXX";
    struct head c;
    temp_cluster(&c, dir);
    struct hstate *s = calloc(1, sizeof(*s));
    mtc_error_t err = {""};
    const char *text =
        "{\"experimentRoot\":\"/shared/exp\",\"nodePools\":[{\"id\":\"login\",\"machineSpec\":"
        "{\"machineType\":\"host\"},\"hosts\":[\"l1\"]},{\"id\":\"gpu\",\"machineSpec\":{"
        "\"machineType\":\"host\"},\"hosts\":[\"g1\"],\"filestores\":[{\"filestore\":"
        "\"10.0.0.2:/v\",\"mountPath\":\"/shared\",\"mountOptions\":\"vers=4.1\"}]}],"
        "\"orchestratorSpec\":{\"slurmSpec\":{\"loginNodePoolId\":\"login\","
        "\"homeDirectoryStorage\":\"10.0.0.2:/home\"}}}";
    json_t *in = json_loads(text, 0, NULL), *spec = cluster_spec_normalize(in, &err);
    json_decref(in);
    CHECK(spec != NULL, "storage spec (%s)", err.text);
    hosts_plan("c", spec, NULL, s, &err);
    snprintf(s->uid, sizeof(s->uid), "0123456789ab");
    char path[PLEN], want[64], path2[PLEN], want2[64], file[PLEN];
    CHECK(hosts_node_mounts(&c, s, spec, &s->nodes[0], &err) == 0 &&
              hosts_node_mounts(&c, s, spec, &s->nodes[1], &err) == 0,
          "mounts files written (%s)", err.text);
    snprintf(file, sizeof(file), "%s/nodes/c-gpu-0/image/etc/mtc/0123456789ab/nodes/c-gpu-0/mounts",
             dir);
    char *m = mtc_read_file(file, NULL);
    CHECK_STR(m ? m : "",
              "nfs 10.0.0.2:/home /home nosuid,nodev\n"
              "nfs 10.0.0.2:/v /shared nosuid,nodev,vers=4.1\n",
              "a compute node mounts home, then its pool's filestore");
    free(m);
    snprintf(file, sizeof(file),
             "%s/nodes/c-login-0/image/etc/mtc/0123456789ab/nodes/c-login-0/mounts", dir);
    m = mtc_read_file(file, NULL);
    CHECK_STR(m ? m : "", "nfs 10.0.0.2:/home /home nosuid,nodev\n", "the login node: home only");
    free(m);
    CHECK(hosts_storage_marker(&c, s, spec, path, want, &err) == 0 &&
              hosts_storage_marker(&c, s, spec, path2, want2, &err) == 0,
          "marker (%s)", err.text);
    CHECK_STR(path, "/shared/exp/.mtc/c-0123456789ab.marker", "marker path in the experiment root");
    CHECK(strlen(want) == 32 && !strcmp(want, want2) && !strcmp(path, path2),
          "marker content made once and kept (%s)", want);
    json_object_del(spec, "experimentRoot");
    CHECK(hosts_storage_marker(&c, s, spec, path, want, &err) == 0 && !path[0],
          "no experimentRoot: no marker");
    json_decref(spec);
    free(s);
    mtc_rm_rf(dir);
}

int main(void)
{
    test_plan();
    test_state_file();
    test_elastic();
    test_storage();
    test_script();
    return check_done();
}
