/* data: a run's data and where it starts from — a recipe's dataset (or --data) resolved
 * for the job to prepare as its first step, the checks before submitting (the trainer's
 * `data check`, tokenizers), and --from-experiment's final checkpoint. */
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILTIN_TOKENIZER "builtin:tiny-corpus"

static char *absolute(const char *p)
{
    char buf[PATH_MAX], cwd[PATH_MAX], *out = NULL;
    if (realpath(p, buf))
        return strdup(buf);
    if (p[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        return strdup(p);
    return asprintf(&out, "%s/%s", cwd, p) < 0 ? NULL : out;
}

/* p as is when absolute or builtin:, else under base. Caller frees. */
static char *under(const char *base, const char *p)
{
    char *out = NULL;
    if (p[0] == '/' || !strncmp(p, "builtin:", 8) || !base)
        return strdup(p);
    return asprintf(&out, "%s/%s", base, p) < 0 ? NULL : out;
}

/* The dataset kind of a recipe task: pretraining text for pretrain and cpt. */
const char *recipe_task_kind(const char *task)
{
    int t = schema_enum_parse(&recipe_task_enum, task ? task : "", 0);
    return t == RECIPE_SFT ? "sft" : t == RECIPE_DPO ? "dpo" : t == RECIPE_GRPO ? "rl" : "pretrain";
}

json_t *recipe_resolve_data(const json_t *recipe, const struct recipe_run *run, mtc_error_t *err)
{
    char *base = NULL, *cache = NULL;
    if (run->data_dir)
        base = absolute(run->data_dir);
    else if (asprintf(&base, "%s/data", run->home) < 0)
        base = NULL;
    json_t *data = json_object_get(recipe, "data");
    const char *path = mtc_json_str(data, "path"), *ds = mtc_json_str(data, "dataset");
    char *tok = under(base, mtc_json_str(data, "tokenizer"));
    json_t *out;
    if (run->dataset) { /* a registered dataset's version: its prepared directory as it is */
        char *dtok = NULL;
        if (run->data)
            errprintf(err, "--data and --dataset: give one of them");
        else if (!run->dataset_path)
            errprintf(err, "dataset: %s is not resolved (mtcd or mtc looks it up)", run->dataset);
        else if (asprintf(&dtok, "%s/tokenizer.json", run->dataset_path) < 0)
            dtok = NULL;
        /* cacheDir: the one directory of the cache a container needs mounted */
        out = dtok ? json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?}", "path", run->dataset_path,
                               "tokenizer", dtok, "dataset", run->dataset, "cacheDir",
                               run->dataset_path, "dataDir", base ? base : "", "recipePath",
                               ds ? ds : path)
                   : NULL;
        free(dtok);
        free(base);
        free(tok);
        if (!out && !*err->text)
            errprintf(err, "out of memory");
        return out;
    }
    if (run->data || ds) {
        char *src = !run->data                           ? under(base, ds)
                    : !strncmp(run->data, "builtin:", 8) ? strdup(run->data)
                                                         : absolute(run->data);
        if (run->cache_dir)
            cache = absolute(run->cache_dir);
        else if (asprintf(&cache, "%s/cache", run->home) < 0)
            cache = NULL;
        out =
            json_pack("{s:b, s:s?, s:s, s:s?, s:s?, s:s, s:s?}", "prepare", 1, "source", src,
                      "kind", recipe_task_kind(mtc_json_str(recipe, "task")), "tokenizer", tok,
                      "cacheDir", cache, "dataDir", base ? base : "", "recipePath", ds ? ds : path);
        free(src);
    } else {
        char *p = under(base, path);
        out = json_pack("{s:s?, s:s?, s:s, s:s}", "path", p, "tokenizer", tok, "dataDir",
                        base ? base : "", "recipePath", path);
        free(p);
    }
    free(base);
    free(cache);
    free(tok);
    if (!out)
        errprintf(err, "out of memory");
    return out;
}

/* The newest step_NNNNNNNN checkpoint under dir into out. 0, or -1 when there is none. */
static int newest_checkpoint(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        if (strncmp(e->d_name, "step_", 5) != 0)
            continue;
        long n = strtol(e->d_name + 5, &end, 10);
        char meta[PATH_MAX + 300];
        snprintf(meta, sizeof(meta), "%s/%s/meta.json", dir, e->d_name);
        if (!*end && n > best && mtc_path_exists(meta))
            best = n;
    }
    closedir(d);
    if (best < 0)
        return -1;
    snprintf(out, len, "%s/step_%08ld", dir, best);
    return 0;
}

int recipe_resolve_chain(const struct recipe_run *run, json_t *ck, mtc_error_t *err)
{
    const char *name = run->from_experiment;
    if (!name)
        return 0;
    if (run->from_checkpoint)
        return errprintf(err, "--from-experiment and --from-checkpoint: give one of them");
    mtc_error_t e2 = {""};
    json_t *prev = exp_find(run->home, name, &e2);
    if (!prev)
        return errprintf(err, "--from-experiment %s: %s", name, e2.text);
    char state[64], ckpt[PATH_MAX + 32];
    exp_job_state(prev, state, sizeof(state));
    const char *dir = mtc_json_str(json_object_get(prev, "checkpoint"), "dir");
    int rc = 0;
    if (strcmp(state, "COMPLETED") != 0)
        rc = errprintf(err,
                       "--from-experiment %s: its newest run %s is %s, not COMPLETED; there is "
                       "no final checkpoint to start from",
                       name, mtc_json_str(prev, "runId"), state);
    else if (!dir || newest_checkpoint(dir, ckpt, sizeof(ckpt)) < 0)
        rc = errprintf(err, "--from-experiment %s: run %s has no checkpoint in %s", name,
                       mtc_json_str(prev, "runId"), dir ? dir : "(none recorded)");
    if (rc == 0) {
        json_object_set_new(ck, "init", json_string(ckpt));
        json_object_set_new(ck, "fromExperiment", json_string(mtc_json_str(prev, "runId")));
    }
    json_decref(prev);
    return rc;
}

int recipe_run_as_ids(const json_t *cfg, char *uid, char *gid, size_t len)
{
    const json_t *a = json_object_get(cfg, "runAs");
    const json_t *u = json_object_get(a, "uid"), *g = json_object_get(a, "gid");
    if (!json_is_integer(u) || !json_is_integer(g) || json_integer_value(u) <= 0 ||
        json_integer_value(g) < 0)
        return -1;
    snprintf(uid, len, "%lld", (long long)json_integer_value(u));
    snprintf(gid, len, "%lld", (long long)json_integer_value(g));
    return 0;
}

/* The trainer's `data check` on the run's source: the kind and every record. */
static int trainer_check(const json_t *cfg, const json_t *data, mtc_error_t *err)
{
    const char *trainer = mtc_json_str(cfg, "trainer");
    if (!trainer || trainer[0] != '/') // an image's trainer: check with the one here, if any
        trainer = "mtc-train";
    char uid[24], gid[24];
    char *argv[] = {"setpriv",  "--reuid",
                    uid,        "--regid",
                    gid,        "--init-groups",
                    "--",       (char *)trainer,
                    "data",     "check",
                    "--source", (char *)mtc_json_str(data, "source"),
                    "--kind",   (char *)mtc_json_str(data, "kind"),
                    NULL};
    /* the source is the request's path: read as whom the job runs as (the
     * thread's file ids end at exec, so the trainer is started as that
     * user by setpriv), never as root for a user */
    int as = recipe_run_as_ids(cfg, uid, gid, sizeof(uid)) == 0 && geteuid() == 0;
    struct mtc_io io = {.capture = MTC_IO_OUT | MTC_IO_ERR};
    int rc = mtc_run_io(as ? argv : argv + 7, NULL, &io, 120000);
    if (rc != 0) {
        const char *why = io.err && *io.err ? io.err : NULL;
        const char *prefix = "mtc-train data check: ";
        if (why && !strncmp(why, prefix, strlen(prefix)))
            why += strlen(prefix);
        char line[200];
        snprintf(line, sizeof(line), "%s", why ? why : "");
        line[strcspn(line, "\n")] = 0;
        if (rc < 0 || rc == 127 || !*line)
            errprintf(err, "data: cannot check %s with %s (exit %d)", mtc_json_str(data, "source"),
                      trainer, rc);
        else // the trainer's line names the file (and line) already
            errprintf(err, "dataset: %s", line);
    }
    free(io.out);
    free(io.err);
    return rc == 0 ? 0 : -1;
}

/* The tokenizer file a run will use, when it can be named before the job runs: a path, or
 * the built-in one already trained in the cache. NULL when unknown. Caller frees. */
static char *tokenizer_file(const json_t *data)
{
    const char *tok = mtc_json_str(data, "tokenizer");
    if (!tok)
        return NULL;
    if (strcmp(tok, BUILTIN_TOKENIZER) != 0)
        return strdup(tok);
    char dir[PATH_MAX + 16], *found = NULL;
    snprintf(dir, sizeof(dir), "%s/tokenizers", mtc_json_str_or(data, "cacheDir", ""));
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) && !found)
        if (!strncmp(e->d_name, "tiny-corpus-1024-", 17) &&
            asprintf(&found, "%s/%s/tokenizer.json", dir, e->d_name) < 0)
            found = NULL;
    if (d)
        closedir(d);
    if (found && !mtc_path_exists(found)) {
        free(found);
        found = NULL;
    }
    return found;
}

/* path opened as this thread's user (mtcd: the job's) with mtc_open_as_user:
 * a regular file or nothing, so a FIFO planted there is an error at once,
 * never a wait for a writer. The fd, or -1: with err (what of `what`) when
 * the file is there but no regular file; errno ENOENT or EACCES, err unset,
 * when it is missing or the user may not read it. */
static int open_regular(const char *what, const char *path, mtc_error_t *err)
{
    int fd = mtc_open_as_user(path, 0);
    if (fd < 0 && (errno == EINVAL || errno == EPERM))
        return errprintf(err, "%s: %.200s: not a regular file (mtcd reads no FIFO, device or "
                              "kernel file for a job)",
                         what, path);
    return fd;
}

/* sha256 of path's content read as open_regular reads it: 0, 1 when it
 * cannot be read (no answer), or -1 with err. */
static int sha256_of(const char *what, const char *path, char out[72], mtc_error_t *err)
{
    mtc_error_t e = {""};
    int fd = open_regular(what, path, &e);
    if (fd < 0)
        return e.text[0] ? errprintf(err, "%s", e.text) : 1;
    int rc = mtc_sha256_fd(fd, out);
    close(fd);
    return rc < 0 ? 1 : 0;
}

/* An init checkpoint (ours: meta.json names its tokenizer) must speak the run's tokens. */
static int check_init_tokenizer(const json_t *cfg, const json_t *data, mtc_error_t *err)
{
    const json_t *ck = json_object_get(cfg, "checkpoint");
    const char *init = mtc_json_str(ck, "init");
    if (!init)
        return 0;
    char meta[PATH_MAX + 16];
    snprintf(meta, sizeof(meta), "%s/meta.json", init);
    mtc_error_t e = {""};
    int fd = open_regular("checkpoint.init", meta, &e);
    if (fd < 0 && e.text[0])
        return errprintf(err, "%s", e.text);
    json_t *m = fd < 0 ? NULL : json_loadfd(fd, 0, NULL);
    if (fd >= 0)
        close(fd);
    const char *ctok = mtc_json_str(m, "tokenizer");
    char *mine = ctok && *ctok && mtc_path_exists(ctok) ? tokenizer_file(data) : NULL;
    int rc = 0;
    if (mine) {
        char a[72], b[72];
        int ra = sha256_of("checkpoint.init's tokenizer", ctok, a, err);
        int rb = ra ? ra : sha256_of("data.tokenizer", mine, b, err);
        if (ra < 0 || rb < 0)
            rc = -1;
        else if (ra == 0 && rb == 0 && strcmp(a, b) != 0)
            rc = errprintf(err,
                           "tokenizer mismatch: checkpoint %s%s%s was trained with another "
                           "tokenizer than the data's %.100s",
                           strrchr(init, '/') ? strrchr(init, '/') + 1 : init,
                           mtc_json_str(ck, "fromExperiment") ? " of " : "",
                           mtc_json_str_or(ck, "fromExperiment", ""),
                           mtc_json_str(data, "tokenizer"));
    }
    free(mine);
    json_decref(m);
    return rc;
}

int recipe_check_data(const json_t *cfg, mtc_error_t *err)
{
    const json_t *data = json_object_get(cfg, "data");
    if (!json_is_true(json_object_get(data, "prepare")))
        return check_init_tokenizer(cfg, data, err);
    const char *tok = mtc_json_str(data, "tokenizer");
    if (!strncmp(tok, "builtin:", 8) && strcmp(tok, BUILTIN_TOKENIZER) != 0)
        return errprintf(err,
                         "data.tokenizer: unknown built-in tokenizer \"%s\" (the one built in "
                         "is %s)",
                         tok, BUILTIN_TOKENIZER);
    struct stat st;
    if (strncmp(tok, "builtin:", 8) != 0 && (stat(tok, &st) < 0 || !S_ISREG(st.st_mode)))
        return errprintf(err, "data.tokenizer: %s does not exist", tok);
    if (trainer_check(cfg, data, err) < 0)
        return -1;
    return check_init_tokenizer(cfg, data, err);
}

int recipe_put_prepare(FILE *f, const json_t *cfg)
{
    const json_t *data = json_object_get(cfg, "data");
    if (!json_is_true(json_object_get(data, "prepare")))
        return 0;
    const char *image = mtc_json_str(cfg, "image");
    fprintf(f, "\n# data: the run's dataset prepared into the cache as the job's first step\n"
               "# (found there already, nothing is tokenized again); MTC_DATA is its directory\n");
    fprintf(f, "PREPARE=(");
    recipe_put_quoted(f, image ? "mtc-train" : mtc_json_str(cfg, "trainer"));
    const char *args[][2] = {{"--source", mtc_json_str(data, "source")},
                             {"--kind", mtc_json_str(data, "kind")},
                             {"--cache-dir", mtc_json_str(data, "cacheDir")},
                             {"--tokenizer", mtc_json_str(data, "tokenizer")}};
    fprintf(f, " data prepare");
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        fprintf(f, " %s ", args[i][0]);
        recipe_put_quoted(f, args[i][1]);
    }
    fprintf(f, ")\necho \"mtc: data: preparing %s (%s) in %s\"\n", "${PREPARE[4]}", "${PREPARE[6]}",
            "${PREPARE[8]}");
    if (image) { // the image's trainer, in the image, with the cache mounted
        fprintf(f, "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n    MTC_DATA=$(srun --nodes=1 "
                   "--ntasks=1 --container-image=");
        recipe_put_quoted(f, image);
        fprintf(f, " --container-mounts=");
        recipe_put_quoted(f, mtc_json_str(data, "cacheDir"));
        fputc(':', f);
        recipe_put_quoted(f, mtc_json_str(data, "cacheDir"));
        fprintf(f, " \"${PREPARE[@]}\")\nelse\n    MTC_DATA=$(\"${PREPARE[@]}\")\nfi\n");
    } else {
        fprintf(f, "MTC_DATA=$(\"${PREPARE[@]}\")\n");
    }
    fprintf(f, "rc=$?\nMTC_DATA=${MTC_DATA#* }\n"
               "if [ $rc -eq 0 ] && [ -d \"$MTC_DATA\" ]; then\n"
               "    echo \"mtc: data: $MTC_DATA\"\n"
               "else\n"
               "    echo \"mtc: data preparation failed (exit $rc); not training\"\n"
               "    [ $rc -eq 0 ] && rc=1\n"
               "fi\n");
    return 1;
}
