/* ckpt: checkpoint directories step_%08d/ (params.bin fp32 master weights,
 * optim.bin AdamW moments, meta.json with step/RNG/loader positions/config/
 * checksums, config.json, DONE) written atomically, and an asynchronous writer
 * whose only cost to the step loop is one memcpy into a staging buffer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/train.h"

#define CKPT_FORMAT "mtc-checkpoint"
#define CKPT_VERSION 1

/* Streaming 64-bit FNV-style hash over 8-byte words in 4 independent lanes (so
 * the multiplies pipeline): catches truncation and bit rot, not an adversary.
 * Streaming so a checkpoint can be verified in chunks without holding it. */
struct hasher {
    uint64_t l[4];
    unsigned char buf[32];
    size_t nbuf;
    uint64_t total;
};
#define HASH_SEED 0xcbf29ce484222325ull

static void hs_init(struct hasher *hs)
{
    hs->l[0] = HASH_SEED;
    hs->l[1] = HASH_SEED ^ 0x9e3779b97f4a7c15ull;
    hs->l[2] = HASH_SEED ^ 0xbf58476d1ce4e5b9ull;
    hs->l[3] = HASH_SEED ^ 0x94d049bb133111ebull;
    hs->nbuf = 0;
    hs->total = 0;
}

static void hs_block(struct hasher *hs, const unsigned char *p)
{
    uint64_t w[4];
    memcpy(w, p, 32);
    for (int k = 0; k < 4; k++) {
        hs->l[k] = (hs->l[k] ^ w[k]) * 0x100000001b3ull;
        hs->l[k] ^= hs->l[k] >> 29;
    }
}

static void hs_update(struct hasher *hs, const void *data, size_t n)
{
    const unsigned char *p = data;
    hs->total += n;
    if (hs->nbuf) {
        size_t take = 32 - hs->nbuf < n ? 32 - hs->nbuf : n;
        memcpy(hs->buf + hs->nbuf, p, take);
        hs->nbuf += take;
        p += take;
        n -= take;
        if (hs->nbuf < 32)
            return;
        hs_block(hs, hs->buf);
        hs->nbuf = 0;
    }
    for (; n >= 32; p += 32, n -= 32)
        hs_block(hs, p);
    memcpy(hs->buf, p, n);
    hs->nbuf = n;
}

static uint64_t hs_final(const struct hasher *hs)
{
    uint64_t h = hs->l[0] ^ (hs->l[1] * 3) ^ (hs->l[2] * 5) ^ (hs->l[3] * 7) ^ hs->total;
    for (size_t i = 0; i < hs->nbuf; i++)
        h = (h ^ hs->buf[i]) * 0x100000001b3ull;
    return h;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write parts into path, fsync. */
static int write_file(const char *path, const void *const *parts, const size_t *lens, int nparts,
                      mtc_error_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errprintf(err, "checkpoint: cannot create %s: %s", path, strerror(errno));
    for (int i = 0; i < nparts; i++)
        if (write_all(fd, parts[i], lens[i]) < 0)
            goto error;
    if (fsync(fd) < 0)
        goto error;
    if (close(fd) < 0) {
        fd = -1;
        goto error;
    }
    return 0;
error:
    errprintf(err, "checkpoint: write %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static json_t *meta_to_json(const struct model_config *cfg, size_t nparams,
                            const struct opt_state *opt, const struct ckpt_meta *meta, uint64_t hp,
                            uint64_t ho)
{
    char buf[32];
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string(CKPT_FORMAT));
    json_object_set_new(o, "version", json_integer(CKPT_VERSION));
    json_object_set_new(o, "step", json_integer(meta->step));
    json_object_set_new(o, "nparams", json_integer((json_int_t)nparams));
    json_object_set_new(o, "optimizer", opt ? json_integer(opt->t) : json_null());
    json_object_set_new(o, "nranks", json_integer(meta->nranks));
    snprintf(buf, sizeof buf, "%016" PRIx64, meta->seed);
    json_object_set_new(o, "seed", json_string(buf));
    json_object_set_new(o, "tokens_seen", json_real(meta->tokens_seen));
    json_object_set_new(o, "last_loss", json_real(meta->last_loss));
    json_t *ld = json_array();
    for (int r = 0; r < meta->nranks && r < TRAIN_MAX_RANKS; r++) {
        const struct loader_pos *p = &meta->loader[r];
        json_t *e = json_object();
        // uint64 values as decimal strings: JSON integers are signed 64-bit in jansson
        snprintf(buf, sizeof buf, "%" PRIu64, p->epoch);
        json_object_set_new(e, "epoch", json_string(buf));
        snprintf(buf, sizeof buf, "%" PRIu64, p->shard);
        json_object_set_new(e, "shard", json_string(buf));
        snprintf(buf, sizeof buf, "%" PRIu64, p->offset);
        json_object_set_new(e, "offset", json_string(buf));
        snprintf(buf, sizeof buf, "%" PRIu64, p->rng);
        json_object_set_new(e, "rng", json_string(buf));
        json_array_append_new(ld, e);
    }
    json_object_set_new(o, "loader", ld);
    json_object_set_new(o, "tokenizer", json_string(meta->tokenizer));
    json_object_set_new(o, "model", model_config_to_json(cfg));
    json_object_set_new(o, "train", meta->train ? json_deep_copy(meta->train) : json_object());
    snprintf(buf, sizeof buf, "%016" PRIx64, hp);
    json_object_set_new(o, "params_hash", json_string(buf));
    if (opt) {
        snprintf(buf, sizeof buf, "%016" PRIx64, ho);
        json_object_set_new(o, "optim_hash", json_string(buf));
    }
    char ts[40];
    json_object_set_new(o, "created", json_string(mtc_time_rfc3339(mtc_now_ms(), ts, sizeof ts)));
    return o;
}

int ckpt_save(const char *dir, const struct model_config *cfg, const float *params, size_t nparams,
              const struct opt_state *opt, const struct ckpt_meta *meta, mtc_error_t *err)
{
    char final[4096], tmp[4096], path[4200];
    snprintf(final, sizeof final, "%s/step_%08" PRId64, dir, meta->step);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step_%08" PRId64 ".%d", dir, meta->step, (int)getpid());
    if (mtc_mkdir_p(dir, 0755) < 0)
        return errprintf(err, "checkpoint: cannot create %s: %s", dir, strerror(errno));
    mtc_rm_rf(tmp);
    if (mkdir(tmp, 0755) < 0)
        return errprintf(err, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
    struct hasher hs;
    hs_init(&hs);
    hs_update(&hs, params, nparams * sizeof(float));
    uint64_t hp = hs_final(&hs), ho = 0;
    snprintf(path, sizeof path, "%s/params.bin", tmp);
    const void *pp[2] = {params};
    size_t pl[2] = {nparams * sizeof(float)};
    if (write_file(path, pp, pl, 1, err) < 0)
        goto error;
    if (opt) {
        hs_init(&hs);
        hs_update(&hs, opt->m, opt->n * sizeof(float));
        hs_update(&hs, opt->v, opt->n * sizeof(float));
        ho = hs_final(&hs);
        snprintf(path, sizeof path, "%s/optim.bin", tmp);
        const void *op[2] = {opt->m, opt->v};
        size_t ol[2] = {opt->n * sizeof(float), opt->n * sizeof(float)};
        if (write_file(path, op, ol, 2, err) < 0)
            goto error;
    }
    json_t *o = meta_to_json(cfg, nparams, opt, meta, hp, ho);
    char *js = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_t *mc = model_config_to_json(cfg);
    char *cs = json_dumps(mc, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(o);
    json_decref(mc);
    int rc = -1;
    if (js && cs) {
        snprintf(path, sizeof path, "%s/meta.json", tmp);
        const void *mp[1] = {js};
        size_t ml[1] = {strlen(js)};
        rc = write_file(path, mp, ml, 1, err);
        if (rc == 0) {
            snprintf(path, sizeof path, "%s/config.json", tmp);
            const void *cp[1] = {cs};
            size_t cl[1] = {strlen(cs)};
            rc = write_file(path, cp, cl, 1, err);
        }
    } else {
        errprintf(err, "checkpoint: cannot encode meta.json");
    }
    free(js);
    free(cs);
    if (rc < 0)
        goto error;
    if (fsync_dir(tmp) < 0) {
        errprintf(err, "checkpoint: fsync %s: %s", tmp, strerror(errno));
        goto error;
    }
    // A same-step directory can exist (a run that died before DONE, a re-import):
    // move it aside first and delete it only once the new one is in place.
    char old[4200] = "";
    if (mtc_path_exists(final)) {
        snprintf(old, sizeof old, "%s/.old-step_%08" PRId64 ".%d", dir, meta->step, (int)getpid());
        if (rename(final, old) < 0) {
            errprintf(err, "checkpoint: cannot move %s aside: %s", final, strerror(errno));
            goto error;
        }
    }
    if (rename(tmp, final) < 0) {
        errprintf(err, "checkpoint: rename to %s: %s", final, strerror(errno));
        goto error;
    }
    if (old[0])
        mtc_rm_rf(old);
    if (fsync_dir(dir) < 0)
        return errprintf(err, "checkpoint: fsync %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/DONE", final);
    const void *dp[1] = {"ok\n"};
    size_t dl[1] = {3};
    if (write_file(path, dp, dl, 1, err) < 0)
        return -1;
    if (fsync_dir(final) < 0)
        return errprintf(err, "checkpoint: fsync %s: %s", final, strerror(errno));
    return 0;
error:
    mtc_rm_rf(tmp);
    return -1;
}

static json_t *read_meta(const char *ckdir, mtc_error_t *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/DONE", ckdir);
    if (!mtc_path_exists(path))
        return errprintf(err, "checkpoint %s is incomplete (no DONE marker)", ckdir), NULL;
    snprintf(path, sizeof path, "%s/meta.json", ckdir);
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return errprintf(err, "checkpoint %s: bad meta.json: %s", ckdir, je.text), NULL;
    const char *fmt = json_string_value(json_object_get(o, "format"));
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0 ||
        json_integer_value(json_object_get(o, "version")) != CKPT_VERSION ||
        !json_is_integer(json_object_get(o, "step")) ||
        !json_is_integer(json_object_get(o, "nparams")) ||
        !json_is_object(json_object_get(o, "model"))) {
        json_decref(o);
        return errprintf(err, "checkpoint %s: meta.json is not an mtc checkpoint v%d", ckdir,
                         CKPT_VERSION),
               NULL;
    }
    return o;
}

int ckpt_read_config(const char *ckdir, struct model_config *cfg, mtc_error_t *err)
{
    json_t *o = read_meta(ckdir, err);
    if (!o)
        return -1;
    mtc_error_t e2;
    memset(cfg, 0, sizeof *cfg);
    // start from the family's preset so fields missing from older JSON have defaults
    const char *fam = json_string_value(json_object_get(json_object_get(o, "model"), "family"));
    char tiny[32];
    snprintf(tiny, sizeof tiny, "tiny-%s", fam ? fam : "gpt2");
    if (model_preset(tiny, cfg, &e2) < 0)
        model_preset("tiny-gpt2", cfg, &e2);
    int rc = model_config_apply_json(cfg, json_object_get(o, "model"), &e2);
    json_int_t n = json_integer_value(json_object_get(o, "nparams"));
    json_decref(o);
    if (rc < 0)
        return errprintf(err, "checkpoint %s: model config: %s", ckdir, e2.text);
    // a model is allocated from this config next: it must be the one params.bin holds
    size_t want = model_config_nparams(cfg), bytes;
    if (n < 0 || (size_t)n != want)
        return errprintf(err, "checkpoint %s: meta.json says %lld parameters, its model has %zu",
                         ckdir, (long long)n, want);
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/params.bin", ckdir);
    if (stat(path, &st) < 0)
        return errprintf(err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    if (mtc_size_mul(want, sizeof(float), &bytes) < 0 || (uint64_t)st.st_size != bytes)
        return errprintf(err, "checkpoint: %s has %lld bytes, expected %zu (corrupt or truncated)",
                         path, (long long)st.st_size, want * sizeof(float));
    return 0;
}

/* meta.json's parameter count and the bytes of its files (params.bin: n floats, optim.bin:
 * 2n): -1 with err when negative or when the sizes overflow. */
static int meta_sizes(json_t *o, const char *ckdir, size_t *n, size_t *pbytes, size_t *obytes,
                      mtc_error_t *err)
{
    json_int_t v = json_integer_value(json_object_get(o, "nparams"));
    if (v < 0 || mtc_size_mul((size_t)v, sizeof(float), pbytes) < 0 ||
        mtc_size_mul(*pbytes, 2, obytes) < 0)
        return errprintf(err, "checkpoint %s: meta.json nparams %lld is out of range", ckdir,
                         (long long)v);
    *n = (size_t)v;
    return 0;
}

static int read_exact(const char *path, void *const *bufs, const size_t *lens, int nb,
                      uint64_t *hash, mtc_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errprintf(err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    size_t total = 0;
    for (int i = 0; i < nb; i++)
        total += lens[i];
    if (fstat(fd, &st) < 0 || (size_t)st.st_size != total) {
        close(fd);
        return errprintf(err, "checkpoint: %s has %lld bytes, expected %zu (corrupt or truncated)",
                         path, (long long)st.st_size, total);
    }
    struct hasher hs;
    hs_init(&hs);
    for (int i = 0; i < nb; i++) {
        char *p = bufs[i];
        size_t left = lens[i];
        while (left > 0) {
            ssize_t r = read(fd, p, left > (1u << 30) ? (1u << 30) : left);
            if (r <= 0) {
                if (r < 0 && errno == EINTR)
                    continue;
                close(fd);
                return errprintf(err, "checkpoint: read %s: %s", path,
                                 r < 0 ? strerror(errno) : "short file");
            }
            p += r;
            left -= (size_t)r;
        }
        hs_update(&hs, bufs[i], lens[i]);
    }
    close(fd);
    *hash = hs_final(&hs);
    return 0;
}

static int check_hash(json_t *o, const char *key, uint64_t h, const char *path, mtc_error_t *err)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%016" PRIx64, h);
    const char *want = json_string_value(json_object_get(o, key));
    if (!want || strcmp(want, buf) != 0)
        return errprintf(err, "checkpoint: %s is corrupt (checksum mismatch)", path);
    return 0;
}

static uint64_t u64_field(json_t *e, const char *k)
{
    const char *s = json_string_value(json_object_get(e, k));
    return s ? strtoull(s, NULL, 10) : 0;
}

int ckpt_load(const char *ckdir, float *params, size_t nparams, struct opt_state *opt,
              struct ckpt_meta *meta, mtc_error_t *err)
{
    json_t *o = read_meta(ckdir, err);
    if (!o)
        return -1;
    char path[4200];
    uint64_t h;
    if ((size_t)json_integer_value(json_object_get(o, "nparams")) != nparams) {
        errprintf(err, "checkpoint %s has %lld parameters, the model has %zu (shape mismatch)",
                  ckdir, (long long)json_integer_value(json_object_get(o, "nparams")), nparams);
        goto error;
    }
    if (params) {
        snprintf(path, sizeof path, "%s/params.bin", ckdir);
        void *b[1] = {params};
        size_t l[1] = {nparams * sizeof(float)};
        if (read_exact(path, b, l, 1, &h, err) < 0 ||
            check_hash(o, "params_hash", h, path, err) < 0)
            goto error;
    }
    if (opt) {
        if (!json_is_integer(json_object_get(o, "optimizer"))) {
            errprintf(err, "checkpoint %s holds weights only (no optimizer state)", ckdir);
            goto error;
        }
        snprintf(path, sizeof path, "%s/optim.bin", ckdir);
        void *b[2] = {opt->m, opt->v};
        size_t l[2] = {nparams * sizeof(float), nparams * sizeof(float)};
        if (read_exact(path, b, l, 2, &h, err) < 0 || check_hash(o, "optim_hash", h, path, err) < 0)
            goto error;
        opt->t = json_integer_value(json_object_get(o, "optimizer"));
    }
    if (meta) {
        memset(meta, 0, sizeof *meta);
        meta->step = json_integer_value(json_object_get(o, "step"));
        meta->nranks = (int)json_integer_value(json_object_get(o, "nranks"));
        const char *seed = json_string_value(json_object_get(o, "seed"));
        meta->seed = seed ? strtoull(seed, NULL, 16) : 0;
        meta->tokens_seen = json_number_value(json_object_get(o, "tokens_seen"));
        meta->last_loss = (float)json_number_value(json_object_get(o, "last_loss"));
        json_t *ld = json_object_get(o, "loader");
        for (size_t r = 0; r < json_array_size(ld) && r < TRAIN_MAX_RANKS; r++) {
            json_t *e = json_array_get(ld, r);
            meta->loader[r].epoch = u64_field(e, "epoch");
            meta->loader[r].shard = u64_field(e, "shard");
            meta->loader[r].offset = u64_field(e, "offset");
            meta->loader[r].rng = u64_field(e, "rng");
        }
        const char *tk = json_string_value(json_object_get(o, "tokenizer"));
        snprintf(meta->tokenizer, sizeof meta->tokenizer, "%s", tk ? tk : "");
        meta->train = json_incref(json_object_get(o, "train")); // caller decrefs
    }
    json_decref(o);
    return 0;
error:
    json_decref(o);
    return -1;
}

static int step_of(const char *name, int64_t *step)
{
    char *end;
    if (strncmp(name, "step_", 5) != 0)
        return 0;
    long long v = strtoll(name + 5, &end, 10);
    if (*end || end == name + 5 || v < 0)
        return 0;
    *step = v;
    return 1;
}

/* Step numbers of step_ directories under dir, newest first. Caller frees. */
static int list_steps(const char *dir, int64_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    struct dirent *de;
    int cap = 0;
    while ((de = readdir(d))) {
        int64_t s;
        if (!step_of(de->d_name, &s))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *nb = realloc(*out, (size_t)cap * sizeof **out);
            if (!nb) {
                closedir(d);
                return -1;
            }
            *out = nb;
        }
        (*out)[(*n)++] = s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) // insertion sort, descending
        for (int j = i; j > 0 && (*out)[j] > (*out)[j - 1]; j--) {
            int64_t t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
    return 0;
}

/* A checkpoint whose meta.json reads back whole. 0, or -1 with err. */
static int meta_readable(const char *ckdir, mtc_error_t *err)
{
    json_t *o = read_meta(ckdir, err);
    if (!o)
        return -1;
    json_decref(o);
    return 0;
}

/* The newest step_ directory under dir that ok() accepts, into out; the others
 * are skipped with a log line. 1 found, 0 none, -1 error. */
static int find_newest(const char *dir, int (*ok)(const char *ckdir, mtc_error_t *err), char *out,
                       size_t outlen, mtc_error_t *err)
{
    int64_t *steps;
    int n;
    if (list_steps(dir, &steps, &n) < 0)
        return errprintf(err, "checkpoint dir %s: %s", dir, strerror(errno));
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        char ck[4096];
        snprintf(ck, sizeof ck, "%s/step_%08" PRId64, dir, steps[i]);
        mtc_error_t e2;
        if (ok(ck, &e2) < 0) {
            log_msg(LOG_WARNING, "skipping %s", e2.text);
            continue;
        }
        snprintf(out, outlen, "%s", ck);
        found = 1;
    }
    free(steps);
    return found;
}

int ckpt_find_latest(const char *dir, char *out, size_t outlen, mtc_error_t *err)
{
    return find_newest(dir, meta_readable, out, outlen, err);
}

/* Hash a whole file in chunks and compare with meta.json's value. */
static int verify_file(json_t *o, const char *ckdir, const char *file, const char *key,
                       size_t want_bytes, mtc_error_t *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", ckdir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errprintf(err, "checkpoint: cannot open %s: %s", path, strerror(errno));
    enum { CHUNK = 8 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return errprintf(err, "out of memory");
    }
    struct hasher hs;
    hs_init(&hs);
    size_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            errprintf(err, "checkpoint: read %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0)
            break;
        hs_update(&hs, buf, (size_t)r);
        total += (size_t)r;
    }
    free(buf);
    close(fd);
    if (total != want_bytes)
        return errprintf(err, "checkpoint: %s has %zu bytes, expected %zu (corrupt or truncated)",
                         path, total, want_bytes);
    return check_hash(o, key, hs_final(&hs), path, err);
}

int ckpt_verify(const char *ckdir, mtc_error_t *err)
{
    json_t *o = read_meta(ckdir, err);
    if (!o)
        return -1;
    size_t n, pbytes, obytes;
    int rc = meta_sizes(o, ckdir, &n, &pbytes, &obytes, err);
    if (rc == 0)
        rc = verify_file(o, ckdir, "params.bin", "params_hash", pbytes, err);
    if (rc == 0 && json_is_integer(json_object_get(o, "optimizer")))
        rc = verify_file(o, ckdir, "optim.bin", "optim_hash", obytes, err);
    json_decref(o);
    return rc;
}

int ckpt_find_latest_valid(const char *dir, char *out, size_t outlen, mtc_error_t *err)
{
    return find_newest(dir, ckpt_verify, out, outlen, err);
}

int ckpt_prune(const char *dir, int keep)
{
    int64_t *steps;
    int n, complete = 0;
    if (list_steps(dir, &steps, &n) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        char ck[4096], done[4200];
        snprintf(ck, sizeof ck, "%s/step_%08" PRId64, dir, steps[i]);
        snprintf(done, sizeof done, "%s/DONE", ck);
        if (mtc_path_exists(done) && ++complete <= keep)
            continue;
        if (keep > 0 && !mtc_path_exists(done) && complete == 0)
            continue; // newer than every complete one: may be being written by another process
        mtc_rm_rf(ck);
    }
    free(steps);
    // temporaries left by processes killed mid-write
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char mine[64];
        snprintf(mine, sizeof mine, ".%d", (int)getpid());
        while ((de = readdir(d))) {
            size_t l = strlen(de->d_name), ml = strlen(mine);
            if (strncmp(de->d_name, ".tmp-step_", 10) != 0 &&
                strncmp(de->d_name, ".old-step_", 10) != 0)
                continue;
            if (l > ml && strcmp(de->d_name + l - ml, mine) == 0)
                continue;
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
            mtc_rm_rf(p);
        }
        closedir(d);
    }
    return 0;
}

/* ---- asynchronous writer ---- */

struct ckpt_writer {
    char *dir;
    struct model_config cfg;
    size_t n;
    int keep;
    float *stage; // (3n): params, m, v
    struct opt_state sopt;
    struct ckpt_meta meta;
    int pending, has_opt, quit, failed;
    mtc_error_t err;
    double write_s, stall_s, wait_s;
    int count;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *writer_main(void *arg)
{
    struct ckpt_writer *w = arg;
    // Normal priority unless $MTC_CKPT_NICE says otherwise. Measured on the 2-core
    // VM (bench/train_ckpt.sh): at nice 19 the writer starved behind the OpenMP
    // team and the next snapshot waited for it (stall 40-130% of a sync write);
    // at nice 0 the stall was the snapshot copy alone (3-5%). Where OpenMP uses
    // every core and checkpoints are rare, nice 19 keeps the writer from
    // preempting a team thread (each parallel region waits for a preempted one).
    const char *nv = getenv("MTC_CKPT_NICE");
    if (nv && atoi(nv) != 0)
        setpriority(PRIO_PROCESS, (id_t)gettid(), atoi(nv));
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->pending && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->pending && w->quit)
            break;
        pthread_mutex_unlock(&w->mu);
        int64_t t0 = mtc_now_ms();
        mtc_error_t e;
        int rc =
            ckpt_save(w->dir, &w->cfg, w->stage, w->n, w->has_opt ? &w->sopt : NULL, &w->meta, &e);
        if (rc == 0)
            ckpt_prune(w->dir, w->keep);
        else
            log_msg(LOG_ERR, "%s", e.text);
        double dt = (double)(mtc_now_ms() - t0) / 1000.0;
        pthread_mutex_lock(&w->mu);
        if (rc < 0) {
            w->failed = 1;
            w->err = e;
        }
        w->write_s += dt;
        w->count++;
        json_decref(w->meta.train);
        w->meta.train = NULL;
        w->pending = 0;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

struct ckpt_writer *ckpt_writer_create(const char *dir, const struct model_config *cfg,
                                       size_t nparams, int keep, mtc_error_t *err)
{
    struct ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return errprintf(err, "out of memory"), NULL;
    w->dir = strdup(dir);
    w->cfg = *cfg;
    w->n = nparams;
    w->keep = keep > 0 ? keep : 1;
    w->stage = malloc(3 * nparams * sizeof(float) + 1);
    if (!w->dir || !w->stage) {
        free(w->dir);
        free(w->stage);
        free(w);
        return errprintf(err, "checkpoint: cannot allocate a %zu MB staging buffer",
                         3 * nparams * sizeof(float) >> 20),
               NULL;
    }
    // fault the staging pages in now, not inside the first snapshot's stall
    memset(w->stage, 0, 3 * nparams * sizeof(float));
    w->sopt.n = nparams;
    w->sopt.m = w->stage + nparams;
    w->sopt.v = w->stage + 2 * nparams;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thr, NULL, writer_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->dir);
        free(w->stage);
        free(w);
        return errprintf(err, "checkpoint: cannot start the writer thread"), NULL;
    }
    return w;
}

int ckpt_writer_wait(struct ckpt_writer *w, mtc_error_t *err)
{
    pthread_mutex_lock(&w->mu);
    while (w->pending)
        pthread_cond_wait(&w->cv, &w->mu);
    int failed = w->failed;
    if (failed && err)
        *err = w->err;
    w->failed = 0;
    pthread_mutex_unlock(&w->mu);
    return failed ? -1 : 0;
}

/* The snapshot is the whole stall: copy with every thread (memory bandwidth of
 * one core is well below the socket's). */
static void par_copy(float *dst, const float *src, size_t n)
{
    const size_t chunk = 1u << 18; // 1 MiB of floats
    long nchunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunks; c++) {
        size_t lo = (size_t)c * chunk, len = lo + chunk > n ? n - lo : chunk;
        memcpy(dst + lo, src + lo, len * sizeof(float));
    }
}

int ckpt_writer_snapshot(struct ckpt_writer *w, const float *params, const struct opt_state *opt,
                         const struct ckpt_meta *meta, mtc_error_t *err)
{
    int64_t t0 = mtc_now_ms();
    if (ckpt_writer_wait(w, err) < 0)
        return -1;
    int64_t t1 = mtc_now_ms();
    par_copy(w->stage, params, w->n);
    if (opt) {
        par_copy(w->sopt.m, opt->m, w->n);
        par_copy(w->sopt.v, opt->v, w->n);
        w->sopt.t = opt->t;
    }
    pthread_mutex_lock(&w->mu);
    w->has_opt = opt != NULL;
    w->meta = *meta;
    w->meta.train = meta->train ? json_deep_copy(meta->train) : NULL;
    w->pending = 1;
    w->stall_s += (double)(mtc_now_ms() - t0) / 1000.0;
    w->wait_s += (double)(t1 - t0) / 1000.0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

int ckpt_writer_save_sync(struct ckpt_writer *w, const float *params, const struct opt_state *opt,
                          const struct ckpt_meta *meta, mtc_error_t *err)
{
    if (ckpt_writer_wait(w, err) < 0)
        return -1;
    // on the caller's thread: full priority, and no staging copy is needed
    int64_t t0 = mtc_now_ms();
    int rc = ckpt_save(w->dir, &w->cfg, params, w->n, opt, meta, err);
    if (rc == 0)
        ckpt_prune(w->dir, w->keep);
    pthread_mutex_lock(&w->mu);
    w->write_s += (double)(mtc_now_ms() - t0) / 1000.0;
    w->count++;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void ckpt_writer_stats(const struct ckpt_writer *w, double *write_s, double *stall_s,
                       double *wait_s, int *count)
{
    struct ckpt_writer *mw = (struct ckpt_writer *)w;
    pthread_mutex_lock(&mw->mu);
    if (write_s)
        *write_s = w->write_s;
    if (stall_s)
        *stall_s = w->stall_s;
    if (wait_s)
        *wait_s = w->wait_s;
    if (count)
        *count = w->count;
    pthread_mutex_unlock(&mw->mu);
}

void ckpt_writer_destroy(struct ckpt_writer *w)
{
    if (!w)
        return;
    int e = errno;
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->dir);
    free(w->stage);
    free(w);
    errno = e;
}
