/* hosts files: what the hosts provider writes for a cluster and its hosts —
 * mtcd's address for the agents, each node's files (the agent's config and
 * token), the bundle copied to every host, slurm.conf and plugstack.conf,
 * a node's sizes from its host's facts — and which nodes are powered off. */
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

/* The backup controller's copy of what slurmctld reads (slurm.conf and
 * gres.conf, as the controller's) in the image's etc/mtc/<uid>/ctld, with
 * the backup's own name (ctld/host): every host gets it with the bundle
 * (configless slurmds are served the same text), the host of that name
 * runs slurmctld -f on it, any other stops one it ran. Without a backup,
 * none. */
static int ctld_copy(const struct head *c, const struct hstate *s, mtc_error_t *err)
{
    static const char *const files[] = {"slurm.conf", "gres.conf"};
    char dir[PLEN], path[PLEN], from[PLEN];
    head_path(c, dir, "image/etc/mtc/%s/ctld", s->uid);
    struct hbackup bk;
    if (!hosts_backup_of(s, &bk)) {
        mtc_rm_rf(dir);
        return 0;
    }
    char name[300];
    snprintf(name, sizeof(name), "%s\n", bk.hostname);
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "mkdir %s: %s", dir, strerror(errno));
    if (mtc_write_if_changed((snprintf(path, sizeof(path), "%s/host", dir), path), name, err) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t len = 0;
        char *text = mtc_read_file(head_path(c, from, "%s", files[i]), &len);
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        int rc = text ? mtc_write_if_changed(path, text, err)
                      : errprintf(err, "cannot read %s: %s", from, strerror(errno));
        free(text);
        if (rc < 0)
            return -1;
    }
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
                              .ctld_addr = s->ctld_addr,
                              .state_dir = s->state_dir[0] ? s->state_dir : NULL,
                              .ctld_timeout = s->failover_s};
    struct hbackup bk;
    if (hosts_backup_of(s, &bk)) { /* Slurm's backup controller */
        sl.backup_host = bk.hostname;
        sl.backup_addr = bk.host;
    }
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
    if (rc == 0)
        rc = ctld_copy(c, s, err);
    free(sizes);
    return rc;
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
