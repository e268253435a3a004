/* hosts: the "hosts" provider — one Slurm cluster across real servers over
 * ssh. This host is the controller (munged and slurmctld, configless, from
 * the cluster directory, as the local provider runs them); each node runs on
 * its own host (slurmd --conf-server, munged on the cluster's socket path,
 * mtc-agent reporting over TCP), everything under /run/mtc, /var/lib/mtc and
 * /etc/mtc/<uid> there. State in clusters/<id>/hosts.json (hosts_state.c). */
#include "provider/hosts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "slurm/slurm.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define REAL_NVML "libnvidia-ml.so.1"

void hosts_lc_socket(struct head *c, const struct hstate *s)
{
    snprintf(c->munge_socket, sizeof(c->munge_socket), SLURM_HOST_RUN "/munge/munge.socket.2",
             s->uid);
}

/* ---- mtcd's address for the agents ---- */

int hosts_api_url(const struct provider *p, const struct hstate *s, char *url, size_t len,
                  mtc_error_t *err)
{
    if (!p->listen)
        return errprintf(err, "mtcd does not listen on TCP, and agents on hosts report over TCP: "
                              "start mtcd with --listen ADDR:PORT");
    const char *colon = strrchr(p->listen, ':');
    char host[256];
    snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - p->listen) : 0, p->listen);
    if (!colon || !strncmp(host, "127.", 4) || !strcmp(host, "localhost") ||
        !strcmp(host, "[::1]") || !strcmp(host, "::1"))
        return errprintf(err,
                         "mtcd listens on %s only, which agents on hosts cannot reach: start "
                         "mtcd with --listen on an address they reach (e.g. 0.0.0.0:PORT)",
                         p->listen);
    int v6 = strchr(s->ctld_addr, ':') != NULL;
    snprintf(url, len, "%s://%s%s%s:%s", p->tls ? "https" : "http", v6 ? "[" : "", s->ctld_addr,
             v6 ? "]" : "", colon + 1);
    return 0;
}

/* ---- files ---- */

int hosts_fake_gpus(const json_t *spec, const struct hnode *n)
{
    const char *lib =
        json_string_value(json_object_get(json_object_get(spec, "healthPolicy"), "nvmlLibrary"));
    if (!lib || !*lib || !strcmp(lib, REAL_NVML))
        return -1;
    const json_t *pool = cluster_spec_pool(spec, n->pool);
    return (int)json_integer_value(
        json_object_get(json_object_get(pool, "machineSpec"), "acceleratorCount"));
}

/* The node's token file (0600) in its image, minted when missing; "" when
 * there is no identity to mint one. */
static int node_token(const struct provider *p, const struct head *c, const char *node,
                      const char *path, int fresh, mtc_error_t *err)
{
    if (fresh && unlink(path) < 0 && errno != ENOENT)
        return errprintf(err, "%s: %s", path, strerror(errno));
    if (mtc_path_exists(path) || !p->identity.node_token)
        return 0;
    char token[128];
    if (p->identity.node_token(p->identity.arg, c->id, node, token, sizeof(token)) < 0)
        return errprintf(err, "cannot mint a node token for %s", node);
    int rc = mtc_write_file_atomic(path, token, strlen(token), 0600);
    explicit_bzero(token, sizeof(token));
    return rc < 0 ? errprintf(err, "cannot write %s: %s", path, strerror(errno)) : 0;
}

/* The agent's config for node n on its host (paths there), or NULL + err. */
static json_t *agent_config(const struct provider *p, const struct head *c, const struct hstate *s,
                            const json_t *spec, const struct hnode *n, int have_token,
                            mtc_error_t *err)
{
    char url[512] = "", run[64], var[64], etc[64], klog[PLEN];
    snprintf(run, sizeof(run), SLURM_HOST_RUN, s->uid);
    snprintf(var, sizeof(var), SLURM_HOST_VAR, s->uid);
    snprintf(etc, sizeof(etc), SLURM_HOST_ETC, s->uid);
    char project[64] = "local", location[64] = "local";
    if (p->identity.parent && p->identity.parent(p->identity.arg, c->id, project, location) < 0) {
        errprintf(err, "cluster %s: unknown to mtcd's store", c->id);
        return NULL;
    }
    if (p->agent && hosts_api_url(p, s, url, sizeof(url), err) < 0)
        return NULL;
    const json_t *pol = json_object_get(spec, "healthPolicy");
    const char *lib = json_string_value(json_object_get(pol, "nvmlLibrary"));
    const char *kl = json_string_value(json_object_get(pol, "kernelLog"));
    if (kl && *kl)
        snprintf(klog, sizeof(klog), "%s", kl);
    else if (hosts_fake_gpus(spec, n) >= 0) /* an emulated node's, where XIDs are injected */
        snprintf(klog, sizeof(klog), "%s/hw/kernel.log", var);
    else
        snprintf(klog, sizeof(klog), "/dev/kmsg");
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:o}", "nodeId", n->name,
                            "clusterId", c->id, "project", project, "location", location, "url",
                            url, "nvmlLibrary", lib && *lib ? lib : REAL_NVML, "kernelLog", klog,
                            "expectedGpus", n->gpus, "slurmdPort", HOSTS_SLURMD_PORT,
                            "healthPolicy", pol ? json_deep_copy(pol) : json_object());
    if (!cfg) {
        errprintf(err, "out of memory");
        return NULL;
    }
    json_object_set_new(cfg, "localDir", json_sprintf("%s/tmp", run));
    json_object_set_new(cfg, "stateDir", json_sprintf("%s/agent", run));
    json_object_set_new(cfg, "slurmdPidFile", json_sprintf("%s/slurmd.pid", run));
    json_object_set_new(cfg, "mungeSocket", json_sprintf("%s/munge/munge.socket.2", run));
    json_object_set_new(cfg, "slurmConf", json_sprintf("%s/spool/conf-cache/slurm.conf", var));
    if (have_token)
        json_object_set_new(cfg, "tokenFile",
                            json_sprintf("%s/nodes/%s/agent.token", etc, n->name));
    if (p->tls && p->ca_file)
        json_object_set_new(cfg, "caFile", json_sprintf("%s/ca.pem", etc));
    /* storage.shared: the node's mounts and the experiment root's marker */
    char marker[PLEN], content[33];
    if (hosts_storage_marker(c, s, spec, marker, content, err) < 0) {
        json_decref(cfg);
        return NULL;
    }
    json_t *mounts = cluster_spec_mounts(spec, n->pool), *paths = json_array(), *e;
    size_t i;
    json_array_foreach(mounts, i, e) json_array_append(paths, json_object_get(e, "path"));
    json_decref(mounts);
    json_object_set_new(cfg, "mounts", paths);
    if (marker[0]) {
        json_object_set_new(cfg, "experimentRoot", json_string(hosts_experiment_root(spec)));
        json_object_set_new(cfg, "storageMarker", json_string(marker));
        json_object_set_new(cfg, "storageMarkerContent", json_string(content));
    }
    return cfg;
}

int hosts_node_files(const struct provider *p, const struct head *c, const struct hstate *s,
                     const json_t *spec, const struct hnode *n, int fresh, mtc_error_t *err)
{
    char dir[PLEN], path[PLEN], var[64];
    snprintf(var, sizeof(var), SLURM_HOST_VAR, s->uid);
    head_path(c, dir, "nodes/%s/image/etc/mtc/%s/nodes/%s", n->name, s->uid, n->name);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/agent.token", dir);
    if (node_token(p, c, n->name, path, fresh, err) < 0)
        return -1;
    json_t *cfg = agent_config(p, c, s, spec, n, mtc_path_exists(path), err);
    if (!cfg)
        return -1;
    snprintf(path, sizeof(path), "%s/agent.json", dir);
    if (head_json_write_if_changed(path, cfg, err) < 0 || hosts_node_mounts(c, s, spec, n, err) < 0)
        return -1;
    /* the environment of every mtc-agent run on the node (the Slurm hooks source it) */
    char env[2 * PLEN], conf[128], nvml[128], containers[128];
    snprintf(conf, sizeof(conf), "%s/spool/conf-cache/slurm.conf", var);
    snprintf(containers, sizeof(containers), "%s/containers", var);
    snprintf(nvml, sizeof(nvml), "%s/hw/nvml.state", var);
    head_agent_env(env, sizeof(env), n->name, conf, containers,
                   hosts_fake_gpus(spec, n) >= 0 ? nvml : NULL);
    snprintf(path, sizeof(path), "%s/agent.env", dir);
    if (mtc_write_if_changed(path, env, err) < 0)
        return -1;
    /* an elastic node's slurmd starts "booted now" (mtc-host's start_slurmd) */
    snprintf(path, sizeof(path), "%s/elastic", dir);
    if (n->cloud ? mtc_write_if_changed(path, "1\n", err) < 0 : unlink(path) < 0 && errno != ENOENT)
        return errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

/* A copy of src at dst (mode) when its content differs; sha of the content. */
static int copy_file(const char *src, const char *dst, mode_t mode, char sha[65], mtc_error_t *err)
{
    size_t len = 0, olen = 0;
    char *data = mtc_read_file(src, &len);
    if (!data)
        return errprintf(err, "cannot read %s: %s", src, strerror(errno));
    char *old = mtc_read_file(dst, &olen);
    int same = old && olen == len && memcmp(old, data, len) == 0;
    free(old);
    if (sha)
        hosts_sha256(data, len, sha);
    int rc = same ? 0 : mtc_write_file_atomic(dst, data, len, mode);
    free(data);
    return rc < 0 ? errprintf(err, "cannot write %s: %s", dst, strerror(errno)) : 0;
}

int hosts_bundle(const struct provider *p, const struct head *c, const struct hstate *s,
                 const json_t *spec, struct hbundle *b, mtc_error_t *err)
{
    char etc[PLEN], bin[PLEN], path[PLEN], key[PLEN], run_etc[64], agent[128];
    memset(b, 0, sizeof(*b));
    head_path(c, b->image, "image");
    snprintf(etc, sizeof(etc), "%s/etc/mtc/%s", b->image, s->uid);
    snprintf(bin, sizeof(bin), "%s/var/lib/mtc/%s/bin", b->image, s->uid);
    snprintf(run_etc, sizeof(run_etc), SLURM_HOST_ETC, s->uid);
    snprintf(agent, sizeof(agent), SLURM_HOST_VAR "/bin/mtc-agent", s->uid);
    if (mtc_mkdir_p(etc, 0755) < 0 || mtc_mkdir_p(bin, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", b->image, strerror(errno));
    /* the munge key: the controller's own file, linked (one key, never copied around) */
    snprintf(path, sizeof(path), "%s/munge.key", etc);
    unlink(path);
    if (link(head_path(c, key, "munge/key"), path) < 0)
        return errprintf(err, "cannot link the munge key into %s: %s", etc, strerror(errno));
    /* Slurm's scripts, naming the paths on the hosts */
    const json_t *ss = json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec");
    char *hp = provider_hook_expand(p->hook_prolog, c->id, run_etc, agent);
    char *he = provider_hook_expand(p->hook_epilog, c->id, run_etc, agent);
    char *hh = provider_hook_expand(p->hook_health, c->id, run_etc, agent);
    int rc = slurm_scripts_write_at(etc, run_etc, "prolog", hp,
                                    json_object_get(ss, "prologBashScripts"), err) < 0 ||
                     slurm_scripts_write_at(etc, run_etc, "epilog", he,
                                            json_object_get(ss, "epilogBashScripts"), err) < 0 ||
                     slurm_health_write(etc, hh, err) < 0
                 ? -1
                 : 0;
    free(hp);
    free(he);
    free(hh);
    if (rc < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/ca.pem", etc);
    unlink(path);
    if (p->tls && p->ca_file && copy_file(p->ca_file, path, 0644, NULL, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/mtc-host", bin);
    if (mtc_write_if_changed(path, hosts_script(), err) < 0)
        return -1;
    /* the programs: the agent and the trainer from beside mtcd's mtc-agent,
     * the container plugin mtcd found beside itself */
    for (int k = 0; k < HOSTS_NBIN; k++) {
        char src[PLEN] = "";
        const char *slash = p->agent ? strrchr(p->agent, '/') : NULL;
        if (k == HOSTS_BIN_SPANK && p->spank)
            snprintf(src, sizeof(src), "%s", p->spank);
        else if (k != HOSTS_BIN_SPANK && p->agent)
            snprintf(src, sizeof(src), "%.*s%s", slash ? (int)(slash - p->agent + 1) : 0, p->agent,
                     strrchr(hosts_bin_names[k], '/') + 1);
        snprintf(path, sizeof(path), "%s/var/lib/mtc/%s/%s", b->image, s->uid, hosts_bin_names[k]);
        if (!src[0] ||
            (k != HOSTS_BIN_AGENT && access(src, k == HOSTS_BIN_SPANK ? R_OK : X_OK) < 0)) {
            unlink(path); /* not built: recipes then need their own copy on the hosts */
            continue;
        }
        char *slash2 = strrchr(path, '/');
        *slash2 = '\0';
        int made = mtc_mkdir_p(path, 0755);
        *slash2 = '/';
        if (made < 0)
            return errprintf(err, "mkdir %s: %s", path, strerror(errno));
        if (copy_file(src, path, 0755, b->sha[k], err) < 0)
            return -1;
    }
    /* enroot (docs/containers.md, "The enroot command"): mtc under that name
     * in the host's /var/lib/mtc/<uid>/path, which the container plugin
     * (plugstack.conf's path=) appends to the PATH of a step that finds no
     * enroot of its own */
    char pdir[PLEN], link_path[PLEN + 8];
    snprintf(pdir, sizeof(pdir), "%s/var/lib/mtc/%s/path", b->image, s->uid);
    snprintf(link_path, sizeof(link_path), "%s/enroot", pdir);
    snprintf(path, sizeof(path), "%s/var/lib/mtc/%s/%s", b->image, s->uid,
             hosts_bin_names[HOSTS_BIN_MTC]);
    mtc_rm_rf(pdir);
    if (mtc_path_exists(path) &&
        (mtc_mkdir_p(pdir, 0755) < 0 || symlink("../bin/mtc", link_path) < 0))
        return errprintf(err, "cannot link %s: %s", link_path, strerror(errno));
    char host[256];
    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    for (char *h = host; *h; h++) /* it lands in single quotes on a command line */
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-", *h))
            *h = '_';
    snprintf(b->owner, sizeof(b->owner), "uid=%s cluster=%s controller=%s home=%.300s", s->uid,
             c->id, host, p->home);
    return 0;
}

/* s's nodes as Slurm sees them into sizes; 1 when any node's GPUs are emulated. */
static int conf_nodes(const json_t *spec, const struct hstate *s, struct slurm_node *sizes)
{
    int fake = 0;
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        struct slurm_node *z = &sizes[i];
        snprintf(z->name, sizeof(z->name), "%s", n->name);
        snprintf(z->pool, sizeof(z->pool), "%s", n->pool);
        snprintf(z->hostname, sizeof(z->hostname), "%s", n->hostname);
        snprintf(z->addr, sizeof(z->addr), "%s", n->host);
        z->cpus = n->cpus;
        z->memory_mb = n->memory_mb;
        z->gpus = n->gpus;
        z->cloud = n->cloud;
        struct cluster_machine_type mt;
        const json_t *pool = cluster_spec_pool(spec, n->pool);
        const char *type =
            json_string_value(json_object_get(json_object_get(pool, "machineSpec"), "machineType"));
        int known = cluster_machine_type_lookup(type, &mt, NULL) == 0 && mt.gres_type[0];
        snprintf(z->gres_type, sizeof(z->gres_type), "%s", known ? mt.gres_type : "gpu");
        fake |= hosts_fake_gpus(spec, n) >= 0;
    }
    return fake;
}

/* PlugStackConfig names /etc/mtc/<uid>/etc/plugstack.conf, read where each
 * Slurm program runs: on the hosts (slurmd, slurmstepd, srun in a batch
 * script) the image's copy, loading the plugin copied to the host; here
 * (srun, sbatch, salloc with the cluster's SLURM_CONF) a link to the copy
 * head_conf_write made, loading mtcd's. Without a plugin neither exists
 * (a missing file is an empty plugin stack to Slurm). img_etc: the image's
 * etc/mtc/<uid>/etc. 0/-1 + err. */
static int plugstack_write(const struct head *c, const struct hstate *s,
                           const struct slurm_layout *sl, const char *img_etc, mtc_error_t *err)
{
    char img[PLEN], here[128], dir[128], local[PLEN], so[128];
    snprintf(img, sizeof(img), "%s/plugstack.conf", img_etc);
    snprintf(dir, sizeof(dir), SLURM_HOST_ETC "/etc", s->uid);
    snprintf(here, sizeof(here), "%s/plugstack.conf", dir);
    head_path(c, local, "etc/plugstack.conf");
    if (!sl->spank) {
        unlink(img);
        unlink(here);
        return 0;
    }
    struct slurm_layout on_host = *sl;
    snprintf(so, sizeof(so), SLURM_HOST_VAR "/%s", s->uid, hosts_bin_names[HOSTS_BIN_SPANK]);
    on_host.spank = so;
    char *text = slurm_plugstack_render(&on_host, err);
    if (!text)
        return -1;
    int rc = mtc_mkdir_p(img_etc, 0755) < 0
                 ? errprintf(err, "mkdir %s: %s", img_etc, strerror(errno))
                 : mtc_write_if_changed(img, text, err);
    free(text);
    if (rc < 0)
        return -1;
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s (the controller needs /etc/mtc writable)", dir,
                         strerror(errno));
    char cur[PLEN];
    ssize_t n = readlink(here, cur, sizeof(cur) - 1);
    if (n > 0 && (size_t)n == strlen(local) && memcmp(cur, local, (size_t)n) == 0)
        return 0;
    unlink(here);
    if (symlink(local, here) < 0)
        return errprintf(err, "cannot link %s to %s: %s", here, local, strerror(errno));
    return 0;
}

int hosts_write_conf(const struct provider *p, const struct head *c, const struct hstate *s,
                     const json_t *spec, char sha[65], mtc_error_t *err)
{
    struct slurm_node *sizes = calloc(s->nnodes ? s->nnodes : 1, sizeof(*sizes));
    char ctl_host[256], path[PLEN], etc[PLEN];
    if (!sizes)
        return errprintf(err, "out of memory");
    mtc_short_hostname(ctl_host, sizeof(ctl_host));
    head_path(c, etc, "image/etc/mtc/%s/etc", s->uid);
    struct slurm_layout sl = {.cluster = c->id,
                              .dir = c->dir,
                              .hostname = ctl_host,
                              .ctld_port = s->ctld_port,
                              .slurmd_port = HOSTS_SLURMD_PORT,
                              .nodes = sizes,
                              .nnodes = s->nnodes,
                              .fake_gpus = conf_nodes(spec, s, sizes),
                              .uid = s->uid,
                              .ctld_addr = s->ctld_addr};
    /* the scripts hosts_bundle wrote */
    sl.prolog = mtc_path_exists((snprintf(path, sizeof(path), "%s/prolog.sh", etc), path));
    sl.epilog = mtc_path_exists((snprintf(path, sizeof(path), "%s/epilog.sh", etc), path));
    if (mtc_path_exists((snprintf(path, sizeof(path), "%s/health.sh", etc), path)))
        sl.health_interval = head_health_interval(spec, p->hook_health_interval);
    /* the container plugin: srun and sbatch here load mtcd's own copy (the
     * controller's plugstack.conf, <dir>/etc/plugstack.conf), slurmd and
     * slurmstepd on the hosts theirs */
    sl.spank = p->spank;
    sl.image_cache_gb =
        json_number_value(json_object_get(json_object_get(spec, "containers"), "cacheMaxGb"));
    /* registry images: one cache on the experiment root (storage every host
     * shares: N hosts pull an image once) when every directory from / to it
     * is root's and no one else's to change — root writes there; else each
     * host's own /var/lib/mtc/<uid>/images */
    char shared_cache[4096];
    const char *er = hosts_experiment_root(spec);
    mtc_error_t te = {""};
    int efd = er ? mtc_dir_open_trusted(er, 0, 0, &te) : -1;
    if (efd >= 0) {
        close(efd);
        if (snprintf(shared_cache, sizeof(shared_cache), "%s/.mtc-images", er) <
            (int)sizeof(shared_cache))
            sl.image_cache = shared_cache;
    }
    /* elastic nodes: slurmctld runs here, so Slurm's power programs run here
     * (mtc-power beside mtcd, power.json, the token). Slurm keeps a
     * suspended node idle% this long; a resume that comes while mtc still
     * powers the node off waits for it (the node's lock) */
    int rc = head_power_setup(p, c, spec, HOSTS_SUSPEND_TIMEOUT_S, &sl, err);
    if (rc ==
        0) /* slurmdbd runs here too: the hosts' clients reach it at the controller's address */
        rc = head_acct_setup(c, spec, s->ctld_addr, &sl.acct, err);
    if (rc == 0)
        rc = head_conf_write(c, spec, &sl, sha, err);
    if (rc == 0)
        rc = plugstack_write(c, s, &sl, etc, err);
    free(sizes);
    return rc;
}

int hosts_node_off(const struct head *c, const struct hnode *n)
{
    return n->cloud && !head_power_is_on(c, n->name);
}

int hosts_wait_registered(const struct head *c, const struct hstate *s, mtc_error_t *err)
{
    const char *names[HOSTS_MAX], *hosts[HOSTS_MAX];
    size_t k = 0;
    for (size_t i = 0; i < s->nnodes; i++)
        if (!hosts_node_off(c, &s->nodes[i]))
            names[k] = s->nodes[i].name, hosts[k++] = s->nodes[i].host;
    return head_wait_registered(c, names, hosts, k, err);
}

/* ---- per-host work, in parallel ---- */

struct host_work {
    struct provider *p;
    const struct head *c;
    struct hstate *s;
    const json_t *spec;
    const struct hcontroller *ctl;
    const struct hbundle *b;
    const char *hosts[2 * HOSTS_MAX]; /* clean: these hosts */
    struct hfacts facts[HOSTS_MAX];
    char *out[HOSTS_MAX];
    const char *op;
    int install, close_ssh;
    /* per node: a powered-down elastic node (no bring-up), and one whose
     * host is left alone altogether (known already: no preflight either) */
    unsigned char off[HOSTS_MAX], skip[HOSTS_MAX];
};

static int t_preflight(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    if (j->skip[i])
        return 0;
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, j->s->nodes[i].host, err);
    char users[CLUSTER_USERS_MAX * 64];
    if (cluster_users_args(j->spec, users, sizeof(users)) < 0)
        *users = '\0'; /* the spec's check keeps the list short */
    int rc = ssh ? hosts_preflight(ssh, j->s, j->ctl, j->install, users, &j->facts[i], err) : -1;
    ssh_free(ssh);
    return rc;
}

static int t_up(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    const struct hnode *n = &j->s->nodes[i];
    if (j->off[i])
        return 0; /* powered down: Slurm's resume brings it up (hosts_power) */
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, n->host, err);
    int rc = ssh ? hosts_remote_up(ssh, j->c, j->s, j->b, n, hosts_bins_stale(j->b, &j->facts[i]),
                                   hosts_fake_gpus(j->spec, n), err)
                 : -1;
    ssh_free(ssh);
    return rc;
}

/* j->op ("stop", "clean") on j->hosts[i]. */
static int t_op(void *arg, size_t i, mtc_error_t *err)
{
    struct host_work *j = arg;
    struct ssh_conn *ssh = hosts_ssh(j->p, j->s, j->hosts[i], err);
    int rc = ssh ? hosts_remote_op(ssh, j->s, j->op, "", -1, NULL, 30000, err) : -1;
    if (j->close_ssh)
        ssh_destroy(ssh);
    else
        ssh_free(ssh);
    return rc == 0 ? 0 : -1;
}

/* Every host s knows but no node uses (touched, or all with every_host): cleaned
 * (its record dropped) or, when unreachable, kept for the next time. */
static void clean_unused(struct provider *p, const struct head *c, struct hstate *s, int every_host,
                         provider_progress_fn progress, void *arg)
{
    struct host_work *j = calloc(1, sizeof(*j));
    mtc_error_t *errs = calloc(2 * HOSTS_MAX + HOSTS_MAX, sizeof(*errs));
    size_t n = 0;
    if (!j || !errs)
        goto out;
    j->p = p, j->c = c, j->s = s, j->op = "clean", j->close_ssh = every_host;
    for (size_t i = 0; i < s->nhosts; i++)
        if (every_host || (s->hosts[i].role == HOST_TOUCHED && !hosts_in_use(s, s->hosts[i].host)))
            j->hosts[n++] = s->hosts[i].host;
    for (size_t i = 0; every_host && i < s->nnodes; i++) /* powered down: cleaned then */
        if (!hosts_host_find(s, s->nodes[i].host) && !hosts_node_off(c, &s->nodes[i]))
            j->hosts[n++] = s->nodes[i].host;
    if (n == 0)
        goto out;
    head_say(progress, arg, "cleaning %zu host(s)", n);
    hosts_parallel(n, t_op, j, errs);
    for (size_t i = 0; i < n; i++) {
        if (errs[i].text[0]) {
            log_msg(LOG_WARNING, "cluster %s: could not clean %s: %s", c->id, j->hosts[i],
                    errs[i].text);
            continue;
        }
        if (!every_host)
            hosts_host_forget(s, j->hosts[i]);
    }
out:
    free(j);
    free(errs);
}

/* ---- apply ---- */

/* Fill node n's sizes from its host's facts and check the machine type. */
int hosts_size_node(const json_t *spec, struct hnode *n, const struct hfacts *f, mtc_error_t *err)
{
    const json_t *ms = json_object_get(cluster_spec_pool(spec, n->pool), "machineSpec");
    const char *type = json_string_value(json_object_get(ms, "machineType"));
    struct cluster_machine_type mt;
    if (cluster_machine_type_lookup(type, &mt, err) < 0)
        return -1;
    int fake = hosts_fake_gpus(spec, n);
    int gpus = fake >= 0 ? fake : f->gpus;
    snprintf(n->hostname, sizeof(n->hostname), "%s", f->hostname);
    if (mt.host_sized) { /* "host": whatever it has */
        n->cpus = f->cpus;
        n->memory_mb = f->memory_mb;
        n->gpus = gpus;
        return 0;
    }
    int want_gpus = (int)json_integer_value(json_object_get(ms, "acceleratorCount"));
    /* a catalog type: the host must have what it promises (a little less memory
     * than the catalog's is the kernel's share) */
    if (f->cpus < mt.vcpus || f->memory_mb < mt.memory_mb * 9 / 10 || gpus < want_gpus)
        return errprintf(err,
                         "host %s does not match machine type %s: it has %d CPUs, %ld MiB, %d "
                         "GPUs; %s has %d CPUs, %ld MiB, %d GPUs (use machineType \"host\" to "
                         "take what the host has)",
                         n->host, type, f->cpus, f->memory_mb, gpus, type, mt.vcpus, mt.memory_mb,
                         want_gpus);
    n->cpus = mt.vcpus;
    n->memory_mb = mt.memory_mb < f->memory_mb ? mt.memory_mb : f->memory_mb;
    n->gpus = want_gpus;
    return 0;
}

/* The spec's ssh settings and controller address into s. */
static int settings(const json_t *spec, const struct hstate *old, struct hstate *s,
                    mtc_error_t *err)
{
    const json_t *ssh = json_object_get(spec, "ssh");
    snprintf(s->ssh_user, sizeof(s->ssh_user), "%s",
             json_string_value(json_object_get(ssh, "user")) ?: "root");
    s->ssh_port = (int)json_integer_value(json_object_get(ssh, "port"));
    if (!s->ssh_port)
        s->ssh_port = 22;
    snprintf(s->ssh_key, sizeof(s->ssh_key), "%s",
             json_string_value(json_object_get(ssh, "keyFile")) ?: "");
    const char *addr =
        json_string_value(json_object_get(json_object_get(spec, "controller"), "address"));
    if (addr) {
        snprintf(s->ctld_addr, sizeof(s->ctld_addr), "%s", addr);
        return 0;
    }
    if (old && old->ctld_addr[0]) {
        snprintf(s->ctld_addr, sizeof(s->ctld_addr), "%s", old->ctld_addr);
        return 0;
    }
    /* the address this host uses towards the first host */
    return hosts_route_source(s->nnodes ? s->nodes[0].host : "", s->ctld_addr, sizeof(s->ctld_addr),
                              err);
}

/* Controller: munged on /run/mtc/<uid>/..., slurmctld with the new conf. */
static int controller_up(const struct head *c, struct hstate *s, const char *sha,
                         provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    char names[PLEN], dir[PLEN];
    snprintf(dir, sizeof(dir), SLURM_HOST_RUN "/munge", s->uid);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s (the controller needs /run/mtc writable)", dir,
                         strerror(errno));
    hosts_node_names(s, names, sizeof(names));
    /* slurmds that ran an earlier config fetch the new one */
    return head_controller_converge(c, &s->applied, sha, names, s->applied.sha[0] != 0, progress,
                                    arg, err);
}

/* Nodes that moved host: tell slurmctld their new address (with the rewritten
 * slurm.conf this survives a restart). */
static void move_nodes(const struct head *c, const struct hstate *old, const struct hstate *s)
{
    for (size_t i = 0; old && i < s->nnodes; i++) {
        const struct hnode *n = &s->nodes[i];
        for (size_t k = 0; k < old->nnodes; k++) {
            if (strcmp(old->nodes[k].name, n->name) || !strcmp(old->nodes[k].host, n->host))
                continue;
            char a1[96], a2[300], a3[300], *out = NULL;
            snprintf(a1, sizeof(a1), "NodeName=%s", n->name);
            snprintf(a2, sizeof(a2), "NodeAddr=%s", n->host);
            snprintf(a3, sizeof(a3), "NodeHostname=%s", n->hostname);
            char *argv[] = {"scontrol", "update", a1, a2, a3, NULL};
            if (slurm_cmd(c->conf, argv, &out, 0) != 0)
                log_msg(LOG_WARNING, "cluster %s: scontrol update %s %s: %s", c->id, a1, a2,
                        out ? out : "");
            free(out);
        }
    }
}

/* Stop everything of the cluster: jobs, the hosts' daemons and files, the
 * controller's daemons and directory. Best effort on unreachable hosts. */
static void teardown(struct provider *p, struct head *c, struct hstate *s)
{
    if (head_ctld_running(c))
        slurm_cancel_all(c->conf, 10000);
    clean_unused(p, c, s, 1, NULL, NULL);
    head_stop_pidfile(c, "slurmctld", head_ctld_running(c));
    head_acct_stop(c);
    head_stop_pidfile(c, "munged", head_munged_running(c));
    hosts_storage_forget(c);
    char run[64], etc[64];
    snprintf(run, sizeof(run), SLURM_HOST_RUN, s->uid);
    snprintf(etc, sizeof(etc), SLURM_HOST_ETC, s->uid);
    if (s->uid[0]) {
        mtc_rm_rf(run);
        mtc_rm_rf(etc); /* the plugstack.conf link (plugstack_write); /etc/mtc itself stays */
    }
}

/* Preflight every node's host in parallel, size the nodes, and record the
 * hosts before anything is written to them. 0/-1 + err. */
static int check_hosts(struct host_work *j, const json_t *spec, mtc_error_t *errs,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct hstate *s = j->s;
    size_t n = 0;
    /* an elastic host is checked and sized when it joins the cluster (it
     * must be on then) and at each power-on; while powered down, never */
    for (size_t i = 0; i < s->nnodes; i++) {
        j->off[i] = (unsigned char)hosts_node_off(j->c, &s->nodes[i]);
        j->skip[i] = j->off[i] && s->nodes[i].cpus > 0;
        n += !j->skip[i];
    }
    head_say(progress, arg, "checking %zu host(s)", n);
    long bad = hosts_parallel(s->nnodes, t_preflight, j, errs);
    if (bad >= 0)
        return errprintf(err, "%s", errs[bad].text);
    for (size_t i = 0; i < s->nnodes; i++)
        if (!j->skip[i] && hosts_size_node(spec, &s->nodes[i], &j->facts[i], err) < 0)
            return -1;
    for (size_t i = 0; i < s->nnodes; i++)
        if (!hosts_host_find(s, s->nodes[i].host))
            hosts_host_set(s, s->nodes[i].host, s->nodes[i].pool, HOST_TOUCHED, NULL);
    return hosts_state_save(j->c, s, err);
}

/* The controller's files: node files, munge key (munged), the image, the
 * experiment root's marker, slurm.conf. */
static int write_files(struct host_work *j, struct hbundle *b, char sha[65], mtc_error_t *err)
{
    char dir[PLEN];
    for (size_t i = 0; i < j->s->nnodes; i++)
        if (hosts_node_files(j->p, j->c, j->s, j->spec, &j->s->nodes[i], 0, err) < 0)
            return -1;
    snprintf(dir, sizeof(dir), SLURM_HOST_RUN "/munge", j->s->uid);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s (the controller needs /run/mtc writable)", dir,
                         strerror(errno));
    if (!head_munged_running(j->c) && head_munged_start(j->c, err) < 0) /* makes the key */
        return -1;
    if (hosts_bundle(j->p, j->c, j->s, j->spec, b, err) < 0 ||
        hosts_storage_write(j->c, j->s, j->spec, err) < 0)
        return -1;
    return hosts_write_conf(j->p, j->c, j->s, j->spec, sha, err);
}

/* Before an update: a powered-up elastic node leaves the cluster (a lowered
 * maxNodeCount) only once Slurm has powered it down (its host, cleaned then,
 * is not cleaned again), a static node becomes elastic (a lowered
 * minNodeCount) only when it runs no job (EBUSY); static nodes carry no
 * power mark. old NULL: a create. 0/-1 + err. */
static int power_plan(const struct head *c, struct hstate *old, struct hstate *s, mtc_error_t *err)
{
    struct head_power_change *ch = calloc((old ? old->nnodes : 0) + s->nnodes + 1, sizeof(*ch));
    if (!ch)
        return errprintf(err, "out of memory");
    size_t k = 0;
    for (size_t i = 0; old && i < old->nnodes; i++) {
        const struct hnode *o = &old->nodes[i], *n = hosts_node_find(s, o->name);
        ch[k++] = (struct head_power_change){o->name, o->cloud, n && n->cloud, 1, n != NULL};
    }
    for (size_t i = 0; i < s->nnodes; i++)
        if (!old || !hosts_node_find(old, s->nodes[i].name))
            ch[k++] = (struct head_power_change){s->nodes[i].name, 0, s->nodes[i].cloud, 0, 1};
    int rc = head_power_refuse(c, ch, k, err);
    free(ch);
    if (rc < 0)
        return -1;
    /* a powered-down node that leaves: its host holds nothing to clean */
    for (size_t i = 0; old && i < old->nnodes; i++) {
        const struct hnode *o = &old->nodes[i];
        if (hosts_node_find(s, o->name))
            continue;
        const struct hhost *h = hosts_host_find(s, o->host);
        if (hosts_node_off(c, o) && h && h->role == HOST_TOUCHED && !hosts_in_use(s, o->host))
            hosts_host_forget(s, o->host);
        if (head_power_mark(c, o->name, 0, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < s->nnodes; i++)
        if (!s->nodes[i].cloud && head_power_mark(c, s->nodes[i].name, 0, err) < 0)
            return -1; /* a static node is always on: no marker */
    return 0;
}

/* The body of apply, with the cluster locked; *touched tells whether hosts were written to. */
static int apply_locked(struct provider *p, struct head *c, const json_t *spec, struct hstate *old,
                        int have_old, struct hstate *s, int *touched, provider_progress_fn progress,
                        void *arg, mtc_error_t *err)
{
    struct hcontroller ctl;
    struct hbundle b;
    char sha[65], url[512];
    mtc_error_t *errs = calloc(HOSTS_MAX, sizeof(*errs));
    struct host_work *j = calloc(1, sizeof(*j));
    int rc = -1;
    if (!errs || !j) {
        errprintf(err, "out of memory");
        goto out;
    }
    if (hosts_plan(c->id, spec, have_old ? old : NULL, s, err) < 0 ||
        settings(spec, have_old ? old : NULL, s, err) < 0 ||
        hosts_controller_facts(&ctl, err) < 0 ||
        (p->agent && hosts_api_url(p, s, url, sizeof(url), err) < 0))
        goto out;
    hosts_lc_socket(c, s);
    /* elastic nodes that become static (a raised minNodeCount) while powered
     * down: their hosts powered on for the preflight and bring-up below */
    unsigned char wake[HOSTS_MAX] = {0};
    for (size_t i = 0; have_old && i < s->nnodes; i++) {
        const struct hnode *o = hosts_node_find(old, s->nodes[i].name);
        wake[i] = !s->nodes[i].cloud && o && hosts_node_off(c, o) &&
                  !strcasecmp(o->host, s->nodes[i].host);
    }
    if (power_plan(c, have_old ? old : NULL, s, err) < 0)
        goto out;
    for (size_t i = 0; i < s->nnodes; i++) {
        if (!wake[i])
            continue;
        head_say(progress, arg, "powering up %s (now static)", s->nodes[i].name);
        if (hosts_power_wake(p, c, s, spec, &s->nodes[i], err) < 0)
            goto out;
    }
    *j = (struct host_work){.p = p,
                            .c = c,
                            .s = s,
                            .spec = spec,
                            .ctl = &ctl,
                            .b = &b,
                            .install = json_is_true(json_object_get(spec, "installPackages"))};
    if (check_hosts(j, spec, errs, progress, arg, err) < 0)
        goto out;
    *touched = 1;
    if (write_files(j, &b, sha, err) < 0)
        goto out;
    clean_unused(p, c, s, 0, progress, arg); /* nodes leave old hosts before starting on new ones */
    if (controller_up(c, s, sha, progress, arg, err) < 0)
        goto out;
    move_nodes(c, have_old ? old : NULL, s);
    head_say(progress, arg, "starting %zu node(s) on their hosts", s->nnodes);
    long bad = hosts_parallel(s->nnodes, t_up, j, errs);
    if (bad >= 0) {
        errprintf(err, "%s", errs[bad].text);
        goto out;
    }
    head_say(progress, arg, "waiting for %zu node(s) to register", s->nnodes);
    if (hosts_wait_registered(c, s, err) < 0)
        goto out;
    /* elastic hosts that just joined (checked on) or a static node that
     * became elastic: powered down now; Slurm resumes them for jobs */
    for (size_t i = 0; i < s->nnodes; i++) {
        struct hnode *n = &s->nodes[i];
        const struct hnode *o = have_old ? hosts_node_find(old, n->name) : NULL;
        if (!j->off[i] || (j->skip[i] && (!o || o->cloud)))
            continue;
        head_say(progress, arg, "powering down %s (elastic)", n->name);
        if (hosts_power_node(p, c, s, spec, n, 0, err) < 0)
            goto out;
    }
    if (hosts_experiment_root(spec)) {
        head_say(progress, arg, "checking that every host sees the experiment root");
        if (hosts_storage_verify(p, c, s, spec, err) < 0)
            goto out;
    }
    for (size_t i = 0; i < s->nhosts;) /* hosts in use need no cleaning record */
        if (s->hosts[i].role == HOST_TOUCHED && hosts_in_use(s, s->hosts[i].host))
            hosts_host_forget(s, s->hosts[i].host);
        else
            i++;
    rc = hosts_state_save(c, s, err);
out:
    free(errs);
    free(j);
    return rc;
}

static int hosts_apply(struct provider *p, const char *id, const json_t *spec_in,
                       provider_progress_fn progress, void *arg, mtc_error_t *err)
{
    struct head c;
    char path[PLEN];
    if (head_init(&c, p, id, err) < 0)
        return -1;
    json_t *spec = cluster_spec_normalize(spec_in, err);
    if (!spec)
        return -1;
    struct hstate *old = calloc(1, sizeof(*old)), *s = calloc(1, sizeof(*s));
    int rc = -1, touched = 0, locked = 0, have_old = 0;
    if (!old || !s) {
        errprintf(err, "out of memory");
        goto out;
    }
    if (head_make_dirs(&c, err) < 0 ||
        mtc_write_if_changed(head_path(&c, path, "provider"), "hosts\n", err) < 0)
        goto out;
    if (head_lock(&c, 1) < 0) {
        errprintf(err, "cannot lock %s: %s", c.dir, strerror(errno));
        goto out;
    }
    locked = 1;
    have_old = hosts_state_load(&c, old) == 0;
    if (have_old) {
        snprintf(s->uid, sizeof(s->uid), "%s", old->uid);
        s->ctld_port = old->ctld_port;
        snprintf(s->applied.sha, sizeof(s->applied.sha), "%s", old->applied.sha);
        snprintf(s->applied.nodes, sizeof(s->applied.nodes), "%s", old->applied.nodes);
    } else if (mtc_random_hex(s->uid, 6) < 0 || !(s->ctld_port = mtc_free_port())) {
        errprintf(err, "cannot pick a cluster uid and port");
        goto out;
    }
    head_say(progress, arg, "%s cluster %s on hosts (uid %s)", have_old ? "updating" : "creating",
             id, s->uid);
    rc = apply_locked(p, &c, spec, old, have_old, s, &touched, progress, arg, err);
    if (rc == 0) {
        head_say(progress, arg, "cluster %s is ready", id);
    } else if (!have_old || !old->applied.sha[0]) {
        /* a create that failed leaves nothing behind, here or on any host */
        log_msg(LOG_WARNING, "cluster %s: create failed (%s); removing what was started", id,
                err->text);
        if (touched || have_old)
            teardown(p, &c, s);
        head_unlock(&c);
        locked = 0;
        mtc_rm_rf(c.dir);
    }
out:
    if (locked)
        head_unlock(&c);
    free(old);
    free(s);
    json_decref(spec);
    return rc;
}

/* ---- delete ---- */

/* Delete, under the lock: what runs on the hosts and here stopped (teardown). */
static int delete_stop(struct provider *p, struct head *c, mtc_error_t *err)
{
    struct hstate *s = calloc(1, sizeof(*s));
    if (!s)
        return errprintf(err, "out of memory");
    if (hosts_state_load(c, s) == 0) {
        hosts_lc_socket(c, s);
        teardown(p, c, s);
    }
    free(s);
    return 0;
}

static int hosts_delete(struct provider *p, const char *id, mtc_error_t *err)
{
    int rc = head_delete_with(p, id, delete_stop, err);
    struct head c;
    mtc_error_t e2;
    if (head_init(&c, p, id, &e2) == 0)
        hosts_checks_forget(c.dir);
    return rc;
}

const struct provider_ops provider_hosts_ops = {
    .kind = "hosts",
    .apply = hosts_apply,
    .delete_ = hosts_delete,
    .nodes = hosts_nodes,
    .supervise = hosts_supervise,
    .supervised_at = hosts_supervised_at,
    .env = hosts_env,
    .node_action = hosts_node_action,
    .node_check = hosts_node_check,
    .hosts = hosts_hosts,
    .login = hosts_login,
    .check_storage = hosts_check_storage,
    .power = hosts_power,
    .node_fault = hosts_node_fault,
};
