/* submit: a trainingJobs request checked and submitted to its cluster's
 * Slurm — the cluster's Slurm and trainer (its environment), the recipe with
 * its overrides, the container image, the registered dataset, the model it
 * starts from, where its final checkpoint registers (on hosts: mtcd's TCP
 * listener with a registrar token), and a run directory of its own.
 * Everything is checked before anything is submitted, and a failed
 * submission leaves nothing behind. jobs_from_model and jobs_resolve are
 * the steps `mtc run -e local` and --dry-run take too. */
#include "experiment/experiment.h"
#include "jobs/jobs.h"
#include "cluster/cluster.h"
#include "dataset/dataset.h"
#include "image/image.h"
#include "provider/provider.h"
#include "recipes/recipes.h"
#include "registry/registry.h"
#include "slurm/slurm.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How old an `srun --help` that knew --container-image may be. */
#define SRUN_HELP_MAX_AGE_MS 60000

/* -1 + err with errno e. */
static int fail(int e, mtc_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(int e, mtc_error_t *err, const char *fmt, ...)
{
    char msg[sizeof(err->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    errprintf(err, "%s", msg);
    errno = e;
    return -1;
}

/* The cluster's Slurm for a job: its slurm.conf, and on hosts the trainer
 * mtc copied there, the MPI network, and for the job's registration the mtc
 * copied there and mtcd's URL (and CA) as the hosts reach it. */
struct target {
    char conf[PATH_MAX], trainer[PATH_MAX], mpi[64];
    char hosts_mtc[PATH_MAX], hosts_url[512], hosts_ca[PATH_MAX];
};

/* A run's account and QoS exist in the cluster's accounting database, and a
 * job run as a user names one of that user's accounts — said in one line
 * before anything is made or submitted (sbatch's own refusal would come
 * after the run's directory). 0, or -1 + err (EINVAL). */
static int charge_check(const struct target *t, const char *cluster, const struct recipe_run *run,
                        const char *user, mtc_error_t *err)
{
    if (!run->account && !run->qos)
        return 0;
    mtc_error_t e2 = {""};
    json_t *accounts = run->account ? slurm_accounts(t->conf, cluster, &e2) : json_array();
    json_t *qos = accounts && run->qos ? slurm_qos_list(t->conf, &e2) : json_array();
    if (!accounts || !qos) {
        json_decref(accounts), json_decref(qos);
        return fail(EINVAL, err, "account/qos: cluster %s has no accounting to check them in (%s)",
                    cluster, e2.text);
    }
    int have_a = !run->account || strcmp(run->account, "root") == 0, have_q = !run->qos;
    int member = !user || have_a; /* root's members are Slurm's to check */
    size_t i, k;
    json_t *x, *u;
    json_array_foreach(accounts, i, x)
    {
        if (strcmp(mtc_json_str(x, "name"), run->account) != 0)
            continue;
        have_a = 1;
        json_array_foreach(json_object_get(x, "users"), k, u) member |=
            user && strcmp(json_string_value(u), user) == 0;
    }
    json_array_foreach(qos, i, x) have_q |= strcmp(mtc_json_str(x, "name"), run->qos) == 0;
    json_decref(accounts), json_decref(qos);
    if (!have_a)
        return fail(EINVAL, err, "account %s: no such account in cluster %s (mtc accounts list %s)",
                    run->account, cluster, cluster);
    if (!member)
        return fail(EINVAL, err,
                    "account %s: user %s is not in it (mtc users add %s --account %s %s)",
                    run->account, user, cluster, run->account, user);
    if (!have_q)
        return fail(EINVAL, err, "qos %s: no such qos in cluster %s (mtc qos list %s)", run->qos,
                    cluster, cluster);
    return 0;
}

static int cluster_target(const struct jobs_ops *ops, const char *id, struct target *t,
                          mtc_error_t *err)
{
    mtc_error_t e2 = {""};
    char *env = provider_env(ops->prov, id, &e2);
    if (!env)
        return fail(EINVAL, err, "precondition: cluster %s: %s", id, e2.text);
    int rc = provider_env_get(env, "SLURM_CONF", t->conf, sizeof(t->conf));
    if (provider_env_get(env, "MTC_TRAINER", t->trainer, sizeof(t->trainer)) < 0) {
        /* the trainer built beside mtcd, as `mtc run` finds it beside mtc */
        char self[PATH_MAX] = "";
        mtc_exe_dir(self, sizeof(self));
        snprintf(t->trainer, sizeof(t->trainer), "%.4000s/mtc-train", self);
        if (access(t->trainer, X_OK) < 0)
            rc = -1, snprintf(e2.text, sizeof(e2.text), "mtc-train is not installed beside mtcd");
    }
    if (provider_env_get(env, "MTC_MPI_NETWORK", t->mpi, sizeof(t->mpi)) < 0)
        t->mpi[0] = '\0';
    if (provider_env_get(env, "MTC_HOSTS_MTC", t->hosts_mtc, sizeof(t->hosts_mtc)) < 0 ||
        provider_env_get(env, "MTC_HOSTS_URL", t->hosts_url, sizeof(t->hosts_url)) < 0)
        t->hosts_mtc[0] = t->hosts_url[0] = '\0';
    if (provider_env_get(env, "MTC_HOSTS_CA", t->hosts_ca, sizeof(t->hosts_ca)) < 0)
        t->hosts_ca[0] = '\0';
    free(env);
    if (rc < 0)
        return fail(EIO, err, "cluster %s: %s", id,
                    *e2.text ? e2.text : "no slurm.conf in its environment");
    return 0;
}

/* Objects merged member by member (overrides into a recipe); anything else replaced. */
static void merge(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v)
    {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(d) && json_is_object(v))
            merge(d, v);
        else
            json_object_set(dst, k, v);
    }
}

json_t *jobs_recipe(const json_t *req, mtc_error_t *err)
{
    mtc_error_t e2 = {""};
    json_t *given = json_object_get(req, "recipe"), *recipe;
    if (json_is_string(given)) {
        recipe = recipe_load_catalog(json_string_value(given), NULL, 0, &e2);
        if (!recipe)
            return fail(EINVAL, err, "recipe: %s", e2.text), NULL;
    } else {
        recipe = json_deep_copy(given);
        if (!json_object_get(recipe, "name"))
            json_object_set_new(recipe, "name", json_string("custom"));
    }
    json_t *ov = json_object_get(req, "overrides");
    if (ov)
        merge(recipe, ov);
    /* canonical, as a catalog file is loaded: table names, defaults filled */
    json_t *canon = recipe_normalize(recipe, &e2);
    json_decref(recipe);
    if (!canon)
        return fail(EINVAL, err, "%s: %s", ov ? "overrides" : "recipe", e2.text), NULL;
    return canon;
}

int jobs_image_path(const char *image, const struct mtc_user *as, struct jobs_paths *p,
                    mtc_error_t *err)
{
    /* a registry image (docker://…, REGISTRY#IMAGE:TAG, ubuntu:24.04): each
     * node's container plugin pulls it, as the job's user, into the cluster's
     * image cache; here it is only checked */
    if (!image_ref_is_path(image)) { /* pyxis's rule, as the plugin's */
        struct image_ref ref;
        mtc_error_t e2;
        if (image_ref_parse(image, &ref, &e2) < 0)
            return fail(EINVAL, err, "containerImage: %s", e2.text);
        if (strlen(image) >= sizeof(p->image))
            return fail(EINVAL, err, "containerImage: %.200s: too long", image);
        snprintf(p->image, sizeof(p->image), "%s", image);
        return 0;
    }
    /* opened as whom the job runs as: what that user cannot read gets one
     * answer, missing, forbidden or not an image alike, so root's view of
     * the file tells the caller nothing (as mtcd's own user: the reason) */
    struct mtc_fsid id;
    mtc_fsid_enter(as, &id);
    int fd = mtc_open_as_user(image, 0);
    mtc_fsid_leave(&id);
    if (fd < 0 && as)
        return fail(EINVAL, err, "containerImage: cannot read %.200s as user %s", image,
                    as->name);
    if (fd < 0 && errno != EINVAL)
        return fail(EINVAL, err, "containerImage: %.200s: %s", image, strerror(errno));
    char magic[4], self[40], buf[PATH_MAX];
    int squash = fd >= 0 && pread(fd, magic, 4, 0) == 4 && memcmp(magic, "hsqs", 4) == 0;
    /* the path of the file opened, as the nodes will open it (as the user) */
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    ssize_t n = fd < 0 ? -1 : readlink(self, buf, sizeof(buf) - 1);
    if (fd >= 0)
        close(fd);
    if (!squash) /* a FIFO or a device too: no image */
        return fail(EINVAL, err,
                    "containerImage: %.200s: not a squashfs image (make one with mtc image "
                    "import)",
                    image);
    if (n <= 0 || buf[0] != '/' || (size_t)n >= sizeof(p->image))
        return fail(EINVAL, err, "containerImage: %.200s: its path cannot be read back", image);
    buf[n] = '\0';
    if (strpbrk(buf, ",:"))
        return fail(EINVAL, err,
                    "containerImage: %.200s: the path cannot be passed to srun (',' or ':' in it)",
                    image);
    snprintf(p->image, sizeof(p->image), "%s", buf);
    return 0;
}

int jobs_check_image(const char *conf, const char *image, const struct mtc_user *as,
                     struct jobs_paths *p, mtc_error_t *err)
{
    if (jobs_image_path(image, as, p, err) < 0)
        return -1;
    /* srun's options change with the cluster's plugstack only: a yes of the
     * last minute is kept (slurm_cmd_cached), a no is asked again */
    char *argv[] = {"srun", "--help", NULL};
    int ok = 0;
    for (int age = SRUN_HELP_MAX_AGE_MS; !ok && age >= 0; age -= SRUN_HELP_MAX_AGE_MS) {
        char *o = NULL;
        mtc_error_t e2 = {""};
        ok = slurm_cmd_cached(conf, argv, age, &o, "srun --help", &e2) == 0 && o &&
             strstr(o, "--container-image");
        free(o);
    }
    if (!ok)
        return fail(EINVAL, err,
                    "containerImage: %.200s: this cluster's srun has no --container-image (no "
                    "container plugin in its plugstack.conf)",
                    image);
    return 0;
}

/* dataset NAME[@VERSION]: the registered dataset's version (in the job's
 * project and location) whose prepared data the run reads, of the recipe's
 * kind, into p->dataset; on a cluster on hosts it must lie under the
 * experiment root, the storage every host shares. 0/-1 + err (EINVAL). */
static int resolve_dataset(const struct jobs_request *q, const json_t *recipe, const char *ref,
                           struct jobs_paths *p, mtc_error_t *err)
{
    char name[DATASET_NAME_MAX + 1];
    int version;
    mtc_error_t e2 = {""};
    struct store_dataset d;
    if (dataset_ref_parse("dataset", ref, name, &version, &e2) < 0)
        return fail(EINVAL, err, "%s", e2.text);
    if (store_dataset_get(q->st, q->cl->project, q->cl->location, name, &d) < 0)
        return fail(EINVAL, err, "dataset: dataset %s not found (mtc data list)", name);
    json_t *ds = dataset_json(q->st, &d, 1);
    store_dataset_release(&d);
    const char *kind = recipe_task_kind(json_string_value(json_object_get(recipe, "task")));
    int rc = dataset_pick("dataset", ds, ref, kind, p->dataset, sizeof(p->dataset), &e2);
    json_decref(ds);
    if (rc < 0)
        return fail(EINVAL, err, "%s", e2.text);
    const char *root = mtc_json_str(q->cl->spec, "experimentRoot");
    size_t n = root ? strlen(root) : 0;
    if (cluster_spec_on_hosts(q->cl->spec) &&
        (!n || strncmp(p->dataset, root, n) != 0 || (p->dataset[n] != '/' && root[n - 1] != '/')))
        return fail(EINVAL, err,
                    "dataset: %s's data %.120s is not on the storage cluster %s's hosts share "
                    "(its experimentRoot); start mtcd with --cache-dir under it and prepare the "
                    "dataset again",
                    name, p->dataset, q->cl->id);
    return 0;
}

int jobs_from_model(const struct jobs_where *w, struct recipe_run *run, struct jobs_paths *p,
                    mtc_error_t *err)
{
    if (!run->from_model)
        return 0;
    if (registry_resolve(w->home, w->project, w->location, run->from_model, -1, w->convert_trainer,
                         p->init, sizeof(p->init), err) < 0)
        return -1; /* errno ENOENT: no such model, version or alias */
    run->from_checkpoint = p->init;
    return 0;
}

json_t *jobs_resolve(const struct jobs_where *w, const json_t *recipe, const struct recipe_run *run,
                     int on_hosts, mtc_error_t *err)
{
    /* the request's paths (workDir, logDir, dataDir, data, fromCheckpoint)
     * and --from-experiment's runs, under the user's run directory, are
     * looked at as the user: root follows none of its links */
    struct mtc_fsid id;
    mtc_fsid_enter(w->as, &id);
    json_t *cfg = recipe_resolve(recipe, run, err);
    mtc_fsid_leave(&id);
    if (!cfg) {
        errno = EINVAL;
        return NULL;
    }
    int fv = 0;
    if (run->from_model &&
        registry_resolve_version(w->home, w->project, w->location, run->from_model, &fv, NULL) == 0)
        exp_set_from_model_version(cfg, run->from_model, fv);
    exp_register_where(cfg, on_hosts ? NULL : w->home, w->project, w->location);
    if (w->slurm_conf && *w->slurm_conf)
        exp_set_recorded_conf(cfg, w->slurm_conf);
    return cfg;
}

/* A user's own place under the experiment root, <base>/users/NAME (owned
 * by the user, 0700: users of one primary group read nothing of each
 * other's runs), its path into out: root makes it by descriptor under
 * directories only root can change, and fchowns and fchmods (one made
 * 0750 by an older mtcd) what it opened itself.
 * 0, or -1 + err (EIO; EPERM: NAME there is someone else's). */
static int user_dir(const char *base, const struct mtc_user *u, char *out, size_t len,
                    mtc_error_t *err)
{
    mtc_error_t e2 = {""};
    int bfd = mtc_dir_open_trusted(base, 1, 0755, &e2);
    int ufd = bfd < 0 ? -1 : mtc_dir_at(bfd, "users", 1, 0755, &e2);
    if (ufd < 0) {
        if (bfd >= 0)
            close(bfd);
        return fail(EIO, err, "experiments for user %s: %s", u->name, e2.text);
    }
    close(bfd);
    if (mkdirat(ufd, u->name, 0700) < 0 && errno != EEXIST) {
        int e = errno;
        close(ufd);
        return fail(EIO, err, "experiments for user %s: %s/users/%s: %s", u->name, base, u->name,
                    strerror(e));
    }
    int fd = openat(ufd, u->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(ufd);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != u->uid) ||
        (st.st_uid == 0 && fchown(fd, u->uid, u->gid) < 0) ||
        ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)) {
        int e = fd < 0 ? errno : st.st_uid != 0 && st.st_uid != u->uid ? EPERM : errno;
        if (fd >= 0)
            close(fd);
        return fail(e == EPERM ? EPERM : EIO, err, "experiments for user %s: %s/users/%s: %s",
                    u->name, base, u->name,
                    e == EPERM ? "owned by another user" : strerror(e));
    }
    close(fd);
    snprintf(out, len, "%s/users/%s", base, u->name);
    return 0;
}

/* What a job run as u needs to reach, checked as u: the cluster's
 * slurm.conf (its srun reads it) and its experiment directory's parent.
 * 0, or -1 + err (EINVAL) naming what the user cannot reach. */
static int user_reaches(const struct mtc_user *u, const char *conf, const char *home,
                        mtc_error_t *err)
{
    struct mtc_fsid id;
    const char *bad = NULL;
    int e = 0;
    mtc_fsid_enter(u, &id);
    int fd = open(conf, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bad = conf, e = errno;
    else
        close(fd);
    if (!bad && (fd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        bad = home, e = errno;
    else if (!bad)
        close(fd);
    mtc_fsid_leave(&id);
    if (bad)
        return fail(EINVAL, err,
                    "user %s cannot reach %.200s (%s): its job could not run; the cluster's "
                    "directories (mtcd's home, or the spec's experimentRoot) must be "
                    "searchable by the cluster's users",
                    u->name, bad, strerror(e));
    return 0;
}

/* One attempt of jobs_submit's: resolve the run (its timestamp names the
 * run directory), render and submit. 0, or -1 + err (errno EEXIST: that run
 * directory is another run's). */
static int resolve_submit(const struct jobs_request *q, const struct jobs_where *w,
                          const struct recipe_run *run, const json_t *recipe,
                          const struct target *t, json_t **cfg, mtc_error_t *err)
{
    const char *url = *t->hosts_url ? t->hosts_url : NULL;
    *cfg = jobs_resolve(w, recipe, run, url != NULL, err);
    if (!*cfg)
        return -1;
    if (q->as)
        exp_set_run_as(*cfg, q->as);
    struct exp_run r; /* what it registers, if anything */
    exp_run_of(*cfg, &r);
    json_t *env = json_deep_copy(json_object_get(q->req, "secretEnv"));
    char tok[80] = "", tok_id[24] = "";
    if (r.reg.model && url) {
        /* on hosts: mtcd's TCP listener, with a token for this run's model
         * and the one directory it registers (its checkpoints, or what a
         * custom task's program wrote) only */
        if (jobs_registrar_mint(q->st, q->cl->id, w->project, w->location, r.reg.model,
                                r.task_dir, r.reg.dir ? r.reg.dir : "", tok, tok_id, err) < 0) {
            json_decref(env);
            json_decref(*cfg);
            *cfg = NULL;
            errno = EINVAL;
            return -1;
        }
        exp_register_via(*cfg, url, *t->hosts_ca ? t->hosts_ca : NULL);
        if (!env)
            env = json_object();
        json_object_set_new(env, "MTC_REGISTER_TOKEN", json_string(tok));
        explicit_bzero(tok, sizeof(tok));
    }
    char *script = recipe_render_sbatch(*cfg, err);
    int rc = script ? recipe_submit(*cfg, script, t->conf, env, q->as, err) : -1;
    int e = script ? errno : EINVAL;
    free(script);
    if (env && json_object_get(env, "MTC_REGISTER_TOKEN")) /* no copy of it stays here */
        json_object_set_new(env, "MTC_REGISTER_TOKEN", json_string(""));
    json_decref(env);
    if (rc < 0 && *tok_id)
        store_token_revoke(q->st, tok_id);
    if (rc < 0) {
        json_decref(*cfg);
        *cfg = NULL;
        errno = e;
    }
    return rc;
}

int jobs_submit(const struct jobs_request *q, struct recipe_run *run, struct jobs_paths *p,
                json_t **cfg, mtc_error_t *err)
{
    struct target t;
    if (cluster_target(q->ops, q->cl->id, &t, err) < 0 ||
        charge_check(&t, q->cl->id, run, q->as ? q->as->name : NULL, err) < 0)
        return -1;
    json_t *recipe = jobs_recipe(q->req, err);
    if (!recipe)
        return -1;
    const char *limage = mtc_json_str(json_object_get(recipe, "launch"), "image");
    if (!run->image && limage) /* a custom task's image, unless the request names one */
        run->image = limage;
    if ((run->image && jobs_check_image(t.conf, run->image, q->as, p, err) < 0) ||
        (run->dataset && resolve_dataset(q, recipe, run->dataset, p, err) < 0)) {
        json_decref(recipe);
        return -1;
    }
    run->dataset_path = run->dataset ? p->dataset : NULL;
    const char *root = mtc_json_str(q->cl->spec, "experimentRoot");
    if ((!root || !*root) && !q->home) {
        json_decref(recipe);
        return fail(EIO, err, "mtcd has no home for experiments");
    }
    run->executor = "slurm";
    run->home = root && *root ? root : q->home;
    char uhome[PATH_MAX];
    if (q->as && (user_dir(run->home, q->as, uhome, sizeof(uhome), err) < 0 ||
                  user_reaches(q->as, t.conf, uhome, err) < 0)) {
        json_decref(recipe);
        return -1;
    }
    if (q->as)
        run->home = uhome;
    run->trainer = run->image ? "mtc-train" : t.trainer; /* the image's own, from its PATH */
    run->image = run->image ? p->image : NULL;
    run->mpi_network = *t.mpi ? t.mpi : NULL;
    run->timestamp = (int64_t)time(NULL);
    /* fromModel: a registered version's files are the initial weights */
    struct jobs_where w = {.home = q->home,
                           .project = q->cl->project,
                           .location = q->cl->location,
                           .convert_trainer = q->ops->trainer,
                           .slurm_conf = t.conf,
                           .as = q->as};
    mtc_error_t e2 = {""};
    if (run->from_model && (run->from_checkpoint || run->from_experiment)) {
        json_decref(recipe);
        return fail(EINVAL, err, "fromModel and from%s: give one of them",
                    run->from_checkpoint ? "Checkpoint" : "Experiment");
    }
    if (jobs_from_model(&w, run, p, &e2) < 0) {
        int e = errno;
        json_decref(recipe);
        return fail(e == ENOENT ? ENOENT : EINVAL, err, "fromModel: %s", e2.text);
    }
    /* the job's last step registers the final checkpoint with mtc next to
     * mtcd, on hosts with the copy mtc put there (over TCP) */
    if (q->as) {
        /* registering reads the run's files as root, by path, in directories
         * the user controls: not done for a user's job (docs/accounting.md) */
        run->registrar = NULL;
    } else if (*t.hosts_url && *t.hosts_mtc) {
        snprintf(p->registrar, sizeof(p->registrar), "%s", t.hosts_mtc);
        run->registrar = p->registrar;
    } else if (mtc_exe_dir(p->registrar, sizeof(p->registrar) - 8) == 0) {
        strcat(p->registrar, "/mtc");
        if (access(p->registrar, X_OK) == 0)
            run->registrar = p->registrar;
    }
    /* a run directory is claimed, never shared: another run of this
     * experiment in the same second takes the next second's name */
    int rc = -1;
    int64_t base = run->timestamp;
    for (int i = 0; i < 60; i++) {
        run->timestamp = base + i;
        if ((rc = resolve_submit(q, &w, run, recipe, &t, cfg, &e2)) == 0 || errno != EEXIST)
            break;
    }
    json_decref(recipe);
    if (rc < 0)
        return fail(EINVAL, err, "%s", e2.text);
    return 0;
}
