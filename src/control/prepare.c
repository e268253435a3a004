/* prepare: the operation that prepares a dataset — `mtc-train data prepare
 * --json` into mtcd's cache, its stderr as the operation's progress — and
 * records the result as the dataset's next version (or finds it is the
 * latest one again: the content and tokenizer did not change); and a stored
 * dataset as the API shows it. */
#include "control/internal.h"
#include "control/datasets.h"
#include "dataset/dataset.h"
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Progress lines go to the store at most every PROGRESS_MS (each is a
 * synchronous SQLite commit). */
#define PROGRESS_MS 250

/* The last non-empty line seen on the trainer's stderr, and the progress. */
struct lines {
    struct control *c;
    const char *op_id;
    int64_t last_ms;
    char last[256];
};

static void on_line(void *arg, const char *line)
{
    struct lines *l = arg;
    if (!*line)
        return;
    snprintf(l->last, sizeof(l->last), "%s", line);
    int64_t now = mtc_now_ms();
    if (now - l->last_ms >= PROGRESS_MS) {
        store_op_progress(l->c->st, l->op_id, l->last);
        l->last_ms = now;
    }
}

/* Whom the operation reads its files as (api/datasets.c chose): the token's
 * user when it was bound to one ("runAs"), nobody for a non-admin's unbound
 * token, root (NULL) for an admin's. */
static const struct mtc_user *reader(const json_t *req, int restricted, struct mtc_user *u)
{
    if (exp_run_as(req, u) == 0)
        return u;
    if (restricted) {
        mtc_user_nobody(u);
        return u;
    }
    return NULL;
}

/* A request's file (not a builtin) opened as `as`, beneath the roots when
 * restricted (dataset_open): the fd, or -1 with *code and err. */
static int open_file(struct control *c, const char *field, const char *value, int restricted,
                     const struct mtc_user *as, int *code, mtc_error_t *err)
{
    static const char *const none[] = {NULL}; /* no roots configured: nowhere */
    const char *const *roots = c->datasets.roots ? c->datasets.roots : none;
    int fd = dataset_open(field, value, restricted ? roots : NULL, as, err);
    if (fd < 0)
        *code = errno == EACCES || errno == EPERM ? RPC_PERMISSION_DENIED : RPC_INVALID_ARGUMENT;
    return fd;
}

/* Run the trainer on the source and tokenizer opened here, once, as whom the
 * request acts for: mtc-train (root: the cache is root's) reads them from
 * the descriptors it inherits, and a source directory's files beneath its
 * descriptor as that user (--read-as, no link followed). Its record (caller
 * owns) or NULL with err and *code. */
static json_t *run_prepare(struct control *c, const struct store_op *op, const char *name,
                           const json_t *spec, int restricted, int *code, mtc_error_t *err)
{
    const char *trainer = c->datasets.trainer;
    const char *source = json_string_value(json_object_get(spec, "source"));
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    const char *tokenizer = json_string_value(json_object_get(spec, "tokenizer"));
    if (!trainer || !c->datasets.cache_dir) {
        *code = RPC_FAILED_PRECONDITION;
        return errprintf(err, "mtcd has no mtc-train next to it: it cannot prepare datasets"), NULL;
    }
    if (!source || !kind) {
        *code = RPC_INVALID_ARGUMENT;
        return errprintf(err, "operation %s has no dataset source or kind", op->id), NULL;
    }
    struct mtc_user u;
    const struct mtc_user *as = reader(op->request, restricted, &u);
    int sfd = -1, tfd = -1, keep[3] = {-1, -1, -1}, nkeep = 0;
    char sfd_s[16], tfd_s[16];
    if ((!dataset_is_builtin(source) &&
         (sfd = open_file(c, "source", source, restricted, as, code, err)) < 0) ||
        (tokenizer && !dataset_is_builtin(tokenizer) &&
         (tfd = open_file(c, "tokenizer", tokenizer, restricted, as, code, err)) < 0)) {
        if (sfd >= 0)
            close(sfd);
        return NULL;
    }
    char *argv[24];
    int n = 0;
    argv[n++] = (char *)trainer;
    argv[n++] = "data";
    argv[n++] = "prepare";
    argv[n++] = "--source";
    argv[n++] = (char *)source;
    argv[n++] = "--kind";
    argv[n++] = (char *)kind;
    argv[n++] = "--cache-dir";
    argv[n++] = (char *)c->datasets.cache_dir;
    argv[n++] = "--name";
    argv[n++] = (char *)name;
    if (tokenizer) {
        argv[n++] = "--tokenizer";
        argv[n++] = (char *)tokenizer;
    }
    if (sfd >= 0) {
        snprintf(sfd_s, sizeof(sfd_s), "%d", sfd);
        argv[n++] = "--source-fd";
        argv[n++] = sfd_s;
        keep[nkeep++] = sfd;
    }
    if (tfd >= 0) {
        snprintf(tfd_s, sizeof(tfd_s), "%d", tfd);
        argv[n++] = "--tokenizer-fd";
        argv[n++] = tfd_s;
        keep[nkeep++] = tfd;
    }
    if (as) {
        argv[n++] = "--read-as";
        argv[n++] = (char *)as->name;
    }
    argv[n++] = "--json";
    argv[n] = NULL;

    struct lines l = {c, op->id, 0, ""};
    snprintf(l.last, sizeof(l.last), "preparing %.200s (%.16s)", source, kind);
    store_op_progress(c->st, op->id, l.last);
    struct mtc_io io = {.capture = MTC_IO_OUT | MTC_IO_ERR,
                        .err_line = on_line,
                        .err_line_arg = &l,
                        .keep_fds = keep};
    int status = mtc_run_io(argv, NULL, &io, 0);
    int e = errno;
    if (sfd >= 0)
        close(sfd);
    if (tfd >= 0)
        close(tfd);
    json_t *rec = NULL;
    if (status < 0) {
        errprintf(err, "cannot run %s: %s", trainer, strerror(e));
    } else if (status != 0) {
        /* bad input is exit 1 and one line naming it (mtc-train's contract) */
        *code = status == 1 ? RPC_INVALID_ARGUMENT : RPC_INTERNAL;
        if (status == 1 && strstr(l.last, "cannot read ") && strstr(l.last, " as user "))
            *code = RPC_PERMISSION_DENIED;
        errprintf(err, "%s", *l.last ? l.last : "mtc-train data prepare failed");
    } else if ((rec = dataset_prepared_parse(io.out, err)) != NULL &&
               strcmp(json_string_value(json_object_get(rec, "kind")), kind) != 0) {
        *code = RPC_INVALID_ARGUMENT;
        errprintf(err, "kind: mtc-train prepared %s as %s, not %s", source,
                  json_string_value(json_object_get(rec, "kind")), kind);
        json_decref(rec);
        rec = NULL;
    }
    free(io.out);
    free(io.err);
    return rec;
}

/* A failed preparation: a dataset that never got a version goes (its CREATE
 * failed), one that has versions is READY with them as they were. */
static void settle_failure(struct control *c, const struct store_op *op, const char *name)
{
    int n = 0;
    struct store_dataset_version *v =
        store_dataset_versions(c->st, op->project, op->location, name, &n);
    store_dataset_versions_free(v, n);
    if (n == 0)
        store_dataset_delete(c->st, op->project, op->location, name, op->id, NULL, NULL);
    else
        store_dataset_set_state(c->st, op->project, op->location, name,
                                schema_enum_name(&dataset_state_enum, DATASET_READY));
}

int control_run_dataset(struct control *c, struct store_op *op, json_t **response, int *code,
                        mtc_error_t *err)
{
    const char *name = op->target + strlen("datasets/");
    const json_t *spec = json_object_get(op->request, "spec");
    int restricted = json_is_true(json_object_get(op->request, "restricted"));
    *code = RPC_INTERNAL;
    if (!dataset_name_valid(name)) {
        *code = RPC_INVALID_ARGUMENT;
        return dataset_name_error(name, err);
    }
    json_t *rec = run_prepare(c, op, name, spec, restricted, code, err);
    int version = 0, added = 0;
    if (rec && store_dataset_record(c->st, op->project, op->location, name, spec,
                                    json_string_value(json_object_get(rec, "key")), rec, &version,
                                    &added) < 0) {
        errprintf(err, "dataset %s: cannot record the prepared version: %s", name,
                  errno == ENOENT ? "the dataset was deleted meanwhile" : strerror(errno));
        json_decref(rec);
        rec = NULL;
    }
    if (!rec) {
        settle_failure(c, op, name);
        return -1;
    }
    *response = json_pack(
        "{s:o, s:o, s:b, s:b}", "dataset",
        json_sprintf("projects/%s/locations/%s/datasets/%s", op->project, op->location, name),
        "version", dataset_version_json(version, rec, mtc_now_ms()), "newVersion", added, "cached",
        json_is_true(json_object_get(rec, "cached")));
    /* the version's createTime is the stored one when it already existed */
    if (!added) {
        int n = 0;
        struct store_dataset_version *v =
            store_dataset_versions(c->st, op->project, op->location, name, &n);
        for (int i = 0; i < n; i++)
            if (v[i].version == version)
                json_object_set_new(*response, "version",
                                    dataset_version_json(version, v[i].record, v[i].create_ms));
        store_dataset_versions_free(v, n);
    }
    log_msg(LOG_NOTICE, "dataset %s: %s version %d (key %s%s)", name, added ? "new" : "unchanged,",
            version, json_string_value(json_object_get(rec, "key")),
            json_is_true(json_object_get(rec, "cached")) ? ", cached" : "");
    json_decref(rec);
    return 0;
}

