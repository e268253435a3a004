/* dset: the trainer's dataset cache — resolves the tokenizer (the built-in one trained once and
 * cached by content), keys a dataset by its source's and tokenizer's fingerprints, kind and
 * format, and prepares it under a temporary name renamed into <cache>/datasets/<key>. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train/dset_internal.h"
#include "train/train.h"

#define BUILTIN_TOKENIZER "builtin:tiny-corpus"
#define STALE_S (24 * 3600) /* another host's temporary older than this is abandoned */

static void progress(const struct dset_options *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const struct dset_options *o, const char *fmt, ...)
{
    if (o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("data: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int dset_tokenizer_fingerprint(const char *path, char out[72], mtc_error_t *err)
{
    size_t len;
    char *s = mtc_read_file(path, &len);
    if (!s)
        return errprintf(err, "tokenizer %s: %s", path, strerror(errno));
    dset_sha256(s, len, out);
    free(s);
    return 0;
}

/* The built-in tokenizer: a byte-level BPE of vocab_size trained on the tiny corpus, cached
 * in <cache>/tokenizers/ under the corpus's fingerprint. path gets its tokenizer.json. */
static int builtin_tokenizer(const struct dset_options *o, char *path, size_t plen,
                             mtc_error_t *err)
{
    size_t len;
    char *corpus = dset_generate("tiny-corpus", &len, err), fp[72], key[65], dir[3800];
    if (!corpus)
        return -1;
    dset_sha256(corpus, len, fp);
    char seed[160];
    snprintf(seed, sizeof seed, "mtc-tokenizer 1\nbpe\n%d\n%s\n", o->vocab_size, fp);
    mtc_sha256_hex(seed, key);
    snprintf(dir, sizeof dir, "%s/tokenizers/tiny-corpus-%d-%.16s", o->cache_dir, o->vocab_size,
             key);
    snprintf(path, plen, "%s/tokenizer.json", dir);
    if (mtc_path_exists(path)) {
        free(corpus);
        return 0;
    }
    char tmp[4400], host[128] = "";
    gethostname(host, sizeof host - 1); // a shared cache: pids repeat across hosts
    snprintf(tmp, sizeof tmp, "%s/.tmp-tokenizer-%s-%d.json", dir, host, (int)getpid());
    progress(o, "training the built-in tokenizer (BPE, vocab %d) on the tiny corpus (%zu bytes)",
             o->vocab_size, len);
    int rc = mtc_mkdir_p(dir, 0755) < 0 ? errprintf(err, "%s: %s", dir, strerror(errno))
             : tok_train(corpus, len, o->vocab_size, tmp, err) < 0 ? -1
             : rename(tmp, path) < 0 ? errprintf(err, "%s: %s", path, strerror(errno))
                                     : 0;
    if (rc < 0)
        unlink(tmp);
    free(corpus);
    return rc;
}

int dset_builtin_tokenizer_write(int vocab_size, const char *out, mtc_error_t *err)
{
    size_t len;
    char *corpus = dset_generate("tiny-corpus", &len, err);
    if (!corpus)
        return -1;
    int rc = tok_train(corpus, len, vocab_size, out, err);
    free(corpus);
    return rc;
}

/* The tokenizer's bytes, read once (caller frees): from o->tokenizer_fd, the file
 * o->tokenizer names, or the built-in one (cache_dir needed). NULL with err. */
static char *tokenizer_bytes(const struct dset_options *o, size_t *len, mtc_error_t *err)
{
    const char *t = o->tokenizer ? o->tokenizer : BUILTIN_TOKENIZER;
    char path[4096];
    struct stat st;
    char *s = NULL;
    if (o->tokenizer_fd > 2) {
        if (fstat(o->tokenizer_fd, &st) < 0 || !S_ISREG(st.st_mode))
            return errprintf(err, "tokenizer %s: not a regular file", t), NULL;
        s = mtc_read_fd(o->tokenizer_fd, len);
    } else if (!strcmp(t, BUILTIN_TOKENIZER)) {
        if (builtin_tokenizer(o, path, sizeof path, err) < 0)
            return NULL;
        s = mtc_read_file(path, len);
        t = path;
    } else if (!strncmp(t, "builtin:", 8)) {
        return errprintf(err, "unknown built-in tokenizer \"%s\" (the one built in is %s)", t,
                         BUILTIN_TOKENIZER),
               NULL;
    } else {
        int fd = open(t, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
            close(fd);
            return errprintf(err, "tokenizer %s: not a regular file", t), NULL;
        }
        s = fd < 0 ? NULL : mtc_read_fd(fd, len);
        if (fd >= 0)
            close(fd);
    }
    if (!s)
        errprintf(err, "tokenizer %s: %s", t, strerror(errno));
    return s;
}

/* key = <kind>-<16 hex of sha256(format, kind, source fp, tokenizer fp, split options)> */
static void make_key(const struct dset_options *o, const char *src_fp, const char *tok_fp,
                     char key[64])
{
    char seed[512], hex[65];
    snprintf(seed, sizeof seed, "mtc-dataset %d\n%s\n%s\n%s\n%.6g\n", DSET_FORMAT,
             schema_enum_name(&dset_kind_enum, (int)o->kind), src_fp, tok_fp, o->val_fraction);
    mtc_sha256_hex(seed, hex);
    snprintf(key, 64, "%s-%.16s", schema_enum_name(&dset_kind_enum, (int)o->kind), hex);
}

/* Every record of every part, validated; val gets the source's validation split, or every
 * record that val_fraction picks from a source without one; test the test split. */
struct splits {
    struct dset_records train, val, test;
};

static void splits_release(struct splits *s)
{
    dset_records_release(&s->train);
    dset_records_release(&s->val);
    dset_records_release(&s->test);
}

static int read_splits(const struct dset_source *src, const struct dset_options *o,
                       struct splits *sp, mtc_error_t *err)
{
    for (size_t i = 0; i < src->n; i++) {
        const struct dset_part *p = &src->parts[i];
        struct dset_records *to = !strcmp(p->role, "validation") ? &sp->val
                                  : !strcmp(p->role, "test")     ? &sp->test
                                                                 : &sp->train;
        size_t before = to->n;
        if (dset_part_records(p, o->kind, to, err) < 0)
            return -1;
        if (p->role[0] || o->kind == DSET_PRETRAIN || o->val_fraction <= 0)
            continue;
        // carve validation records out of a single source, evenly spread: record j goes to
        // val when floor((j+1)f) > floor(jf)
        size_t keep = before;
        for (size_t j = before; j < to->n; j++) {
            size_t k = j - before;
            int v = to->n - before > 1 &&
                    floor((double)(k + 1) * o->val_fraction) > floor((double)k * o->val_fraction);
            if (v) {
                if (sp->val.n == sp->val.cap) {
                    size_t cap = sp->val.cap ? sp->val.cap * 2 : 64;
                    json_t **nv = realloc(sp->val.v, cap * sizeof *nv);
                    if (!nv)
                        return errprintf(err, "out of memory");
                    sp->val.v = nv, sp->val.cap = cap;
                }
                sp->val.v[sp->val.n++] = to->v[j];
            } else {
                to->v[keep++] = to->v[j];
            }
        }
        to->n = keep;
    }
    return 0;
}

int dset_check(const struct dset_options *o, struct dset_result *r, mtc_error_t *err)
{
    struct dset_source src;
    struct splits sp;
    memset(&sp, 0, sizeof sp);
    memset(r, 0, sizeof *r);
    int rc = dset_source_load(o->source, o->source_fd, o->read_as, &src, err);
    if (rc == 0 && src.builtin && dset_generator_kind(src.builtin) != (int)o->kind)
        rc = errprintf(err, "%s is %s data, not %s", o->source,
                       schema_enum_name(&dset_kind_enum, dset_generator_kind(src.builtin)),
                       schema_enum_name(&dset_kind_enum, (int)o->kind));
    if (rc == 0)
        rc = read_splits(&src, o, &sp, err);
    if (rc == 0) {
        r->records = sp.train.n + sp.val.n + sp.test.n;
        r->bytes = src.bytes;
        snprintf(r->source_fp, sizeof r->source_fp, "%s", src.fp);
    }
    splits_release(&sp);
    dset_source_release(&src);
    return rc;
}

/* ---- writing a prepared dataset into a (temporary) directory ---- */

static int write_jsonl(const char *dir, const char *file, const struct dset_records *r,
                       mtc_error_t *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        return errprintf(err, "%s: %s", path, strerror(errno));
    for (size_t i = 0; i < r->n; i++)
        if (json_dumpf(r->v[i], f, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0 || fputc('\n', f) < 0)
            break;
    int bad = ferror(f) | (fflush(f) != 0) | (fsync(fileno(f)) != 0);
    if (fclose(f) != 0 || bad)
        return errprintf(err, "%s: %s", path, strerror(errno ? errno : EIO));
    return 0;
}

/* Tokens of a record set as the trainer renders them (SFT/DPO chat template; RL prompts). */
static int count_tokens(const struct tok *t, enum dset_kind kind, const struct dset_records *r,
                        const char *split, uint64_t *tokens, mtc_error_t *err)
{
    struct chat_seq a = {0}, b = {0};
    int rc = 0;
    for (size_t i = 0; i < r->n && rc == 0; i++) {
        mtc_error_t e2 = {{0}};
        size_t n = 0;
        if (kind == DSET_SFT) {
            rc = chat_parse_sft(t, r->v[i], &a, &e2);
            n = a.n;
        } else if (kind == DSET_DPO) {
            rc = chat_parse_dpo(t, r->v[i], &a, &b, &e2);
            n = a.n + b.n;
        } else { // RL: the prompts, what a policy is given
            int32_t *ids = NULL;
            const char *p = json_string_value(json_object_get(r->v[i], "prompt"));
            rc = tok_encode(t, p, strlen(p), &ids, &n, &e2);
            free(ids);
        }
        if (rc < 0)
            rc = errprintf(err, "%s split, record %zu: %s", split, i + 1, e2.text);
        *tokens += n;
    }
    chat_seq_release(&a);
    chat_seq_release(&b);
    return rc;
}

/* Pretrain records → one token stream per split (text parts as they are; JSONL/CSV records
 * as {"text"} JSONL, through prepare.c's encoder). */
static int encode_split(const struct tok *t, const struct dset_source *src, const struct splits *sp,
                        const struct dset_records *r, const char *split, struct prep_ids *out,
                        mtc_error_t *err)
{
    (void)sp;
    for (size_t i = 0; i < src->n; i++) {
        const struct dset_part *p = &src->parts[i];
        const char *role = p->role[0] ? p->role : "train";
        if (strcmp(role, split))
            continue;
        if (p->fmt == DSET_TXT) {
            if (prep_encode(t, p->name, p->data, p->len, PREP_TEXT, out, err) < 0)
                return -1;
            continue;
        }
        // the normalized records of this split as {"text"} JSONL
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        for (size_t j = 0; buf && j < r->n; j++) {
            char *line = json_dumps(r->v[j], JSON_COMPACT);
            size_t ll = line ? strlen(line) : 0;
            while (buf && n + ll + 2 > cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb)
                    free(buf);
                buf = nb;
            }
            if (buf && line)
                memcpy(buf + n, line, ll), n += ll, buf[n++] = '\n';
            free(line);
        }
        int rc = buf ? prep_encode(t, p->name, buf, n, PREP_JSONL, out, err)
                     : errprintf(err, "out of memory");
        free(buf);
        return rc; // a split's JSONL records were all gathered from this one part
    }
    return 0;
}

static int write_pretrain(const char *dir, const struct tok *t, const char *tokpath,
                          const struct dset_source *src, const struct splits *sp,
                          const struct dset_options *o, struct dset_result *r, mtc_error_t *err)
{
    struct prep_ids tr = {0}, va = {0}, te = {0};
    int width = tok_vocab_size(t) <= 65536 ? 2 : 4, rc = -1;
    const size_t per = 100000000;
    if (encode_split(t, src, sp, &sp->train, "train", &tr, err) < 0 ||
        encode_split(t, src, sp, &sp->val, "validation", &va, err) < 0 ||
        encode_split(t, src, sp, &sp->test, "test", &te, err) < 0)
        goto out;
    const int32_t *trv = tr.v, *vav = va.v;
    size_t trn = tr.n, van = va.n;
    if (!sp->val.n && o->val_fraction > 0) { // as mtc-train prepare: val is the first tokens
        van = (size_t)ceil(o->val_fraction * (double)tr.n);
        vav = tr.v, trv = tr.v + van, trn = tr.n - van;
    }
    if (prep_write_shards(dir, "val", vav, van, per, width, err) < 0 ||
        prep_write_shards(dir, "train", trv, trn, per, width, err) < 0 ||
        prep_write_shards(dir, "test", te.v, te.n, per, width, err) < 0 ||
        prep_write_meta(dir, tokpath, t, trn, van, err) < 0)
        goto out;
    r->train_tokens = trn, r->val_tokens = van;
    rc = 0;
out:
    prep_ids_release(&tr);
    prep_ids_release(&va);
    prep_ids_release(&te);
    return rc;
}

static json_t *manifest_json(const struct dset_options *o, const struct dset_result *r,
                             const struct splits *sp)
{
    char ts[40];
    json_t *m = dset_result_json(o, r);
    json_object_del(m, "cached");
    json_object_del(m, "path");
    json_object_set_new(m, "format", json_integer(DSET_FORMAT));
    json_object_set_new(m, "splits",
                        json_pack("{s:I,s:I,s:I}", "train", (json_int_t)sp->train.n, "val",
                                  (json_int_t)sp->val.n, "test", (json_int_t)sp->test.n));
    json_object_set_new(m, "created", json_string(mtc_time_rfc3339(mtc_now_ms(), ts, sizeof ts)));
    return m;
}

/* Remove temporaries of preparers that died: on this host a pid that is gone, from another
 * host (a shared cache) one untouched for STALE_S. */
static void sweep(const char *dsdir, const struct dset_options *o)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    DIR *d = opendir(dsdir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, ".tmp-", 5))
            continue;
        // .tmp-<key>-<host>-<pid>
        char path[4400], *dash = strrchr(e->d_name, '-');
        long pid = dash ? strtol(dash + 1, NULL, 10) : 0;
        size_t hl = strlen(host);
        int ours = dash && (size_t)(dash - e->d_name) > hl && dash[-(long)hl - 1] == '-' &&
                   !strncmp(dash - hl, host, hl);
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dsdir, e->d_name);
        if (lstat(path, &st) < 0)
            continue;
        int dead = ours ? pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH
                        : time(NULL) - st.st_mtime > STALE_S;
        if (dead) {
            progress(o, "removing %s, left by a preparation that did not finish", path);
            mtc_rm_rf(path);
        }
    }
    if (d)
        closedir(d);
}

/* <cache>/datasets/by-name/NAME -> ../KEY, replaced atomically. */
static int link_name(const struct dset_options *o, const char *dsdir, const char *key,
                     mtc_error_t *err)
{
    char dir[4200], tmp[4400], link[4400], target[128];
    snprintf(dir, sizeof dir, "%s/by-name", dsdir);
    snprintf(link, sizeof link, "%s/%s", dir, o->name);
    snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, o->name, (int)getpid());
    snprintf(target, sizeof target, "../%s", key);
    unlink(tmp);
    if (mtc_mkdir_p(dir, 0755) < 0 || symlink(target, tmp) < 0 || rename(tmp, link) < 0) {
        unlink(tmp);
        return errprintf(err, "%s: %s", link, strerror(errno));
    }
    return 0;
}

static int read_manifest(const char *path, struct dset_result *r)
{
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", path);
    json_t *m = json_load_file(mp, 0, NULL);
    if (!m)
        return -1;
    r->records = (size_t)json_integer_value(json_object_get(m, "records"));
    r->train_tokens = (uint64_t)json_integer_value(json_object_get(m, "trainTokens"));
    r->val_tokens = (uint64_t)json_integer_value(json_object_get(m, "valTokens"));
    r->bytes = (size_t)json_integer_value(json_object_get(m, "bytes"));
    json_decref(m);
    return 0;
}

static int valid_options(const struct dset_options *o, mtc_error_t *err)
{
    if (!o->cache_dir || !*o->cache_dir)
        return errprintf(err, "no cache directory given");
    if (strlen(o->cache_dir) > 3000)
        return errprintf(err, "cache directory path too long");
    if (o->name && !mtc_name_valid(o->name, 63))
        return errprintf(err,
                         "invalid dataset name \"%s\" (lowercase letters, digits and '-', "
                         "a letter first, at most 63)",
                         o->name);
    if (o->vocab_size < 257 || o->vocab_size > 65536)
        return errprintf(err, "--vocab-size %d is out of range (257..65536)", o->vocab_size);
    if (!(o->val_fraction >= 0 && o->val_fraction < 1))
        return errprintf(err, "--val-fraction must be in [0, 1)");
    return 0;
}

int dset_prepare(const struct dset_options *o, struct dset_result *r, mtc_error_t *err)
{
    struct dset_source src;
    struct splits sp;
    memset(&sp, 0, sizeof sp);
    struct tok *t = NULL;
    char dsdir[3800], tmp[4400] = "", host[256] = "", *tokbytes = NULL;
    size_t toklen = 0;
    int rc = -1;
    memset(r, 0, sizeof *r);
    memset(&src, 0, sizeof src);
    if (valid_options(o, err) < 0)
        return -1;
    if (dset_source_load(o->source, o->source_fd, o->read_as, &src, err) < 0)
        goto out;
    if (src.builtin && dset_generator_kind(src.builtin) != (int)o->kind) {
        errprintf(err, "%s is %s data, not %s", o->source,
                  schema_enum_name(&dset_kind_enum, dset_generator_kind(src.builtin)),
                  schema_enum_name(&dset_kind_enum, (int)o->kind));
        goto out;
    }
    // validate everything before anything is said, trained, tokenized or written: bad input
    // is one line
    if (read_splits(&src, o, &sp, err) < 0)
        goto out;
    r->records = sp.train.n + sp.val.n + sp.test.n;
    if (src.builtin)
        progress(o, "generated %s: %zu records, %zu bytes", o->source, r->records, src.bytes);
    r->bytes = src.bytes;
    snprintf(r->source_fp, sizeof r->source_fp, "%s", src.fp);
    /* read once: what is fingerprinted is what is copied and tokenized with */
    if (!(tokbytes = tokenizer_bytes(o, &toklen, err)))
        goto out;
    dset_sha256(tokbytes, toklen, r->tokenizer_fp);
    make_key(o, r->source_fp, r->tokenizer_fp, r->key);
    snprintf(dsdir, sizeof dsdir, "%s/datasets", o->cache_dir);
    char *abs = mtc_mkdir_p(dsdir, 0755) == 0 ? realpath(dsdir, NULL) : NULL;
    if (!abs || strlen(abs) >= sizeof dsdir) {
        errprintf(err, "%s: %s", dsdir, abs ? "path too long" : strerror(errno));
        free(abs);
        goto out;
    }
    snprintf(dsdir, sizeof dsdir, "%s", abs);
    free(abs);
    snprintf(r->path, sizeof r->path, "%s/%s", dsdir, r->key);
    snprintf(r->tokenizer_path, sizeof r->tokenizer_path, "%s/tokenizer.json", r->path);
    if (read_manifest(r->path, r) == 0) {
        r->cached = 1;
        progress(o, "%s is prepared already (cached): %s", o->source, r->path);
        rc = o->name ? link_name(o, dsdir, r->key, err) : 0;
        goto out;
    }
    sweep(dsdir, o);
    gethostname(host, sizeof host - 1);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%s-%d", dsdir, r->key, host, (int)getpid());
    mtc_rm_rf(tmp);
    if (mkdir(tmp, 0755) < 0) {
        errprintf(err, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    progress(o, "preparing %s (%s, %zu records, %zu bytes) into %s", o->source,
             schema_enum_name(&dset_kind_enum, (int)o->kind), r->records, r->bytes, r->path);
    char tk2[4500];
    snprintf(tk2, sizeof tk2, "%s/tokenizer.json", tmp);
    if (mtc_write_file_atomic(tk2, tokbytes, toklen, 0644) < 0) {
        errprintf(err, "%s: %s", tk2, strerror(errno));
        goto out;
    }
    if (!(t = tok_load(tk2, err)))
        goto out;
    if (o->kind == DSET_PRETRAIN) {
        if (write_pretrain(tmp, t, "tokenizer.json", &src, &sp, o, r, err) < 0)
            goto out;
    } else if (count_tokens(t, o->kind, &sp.train, "train", &r->train_tokens, err) < 0 ||
               count_tokens(t, o->kind, &sp.val, "validation", &r->val_tokens, err) < 0 ||
               write_jsonl(tmp, "train.jsonl", &sp.train, err) < 0 ||
               (sp.val.n && write_jsonl(tmp, "val.jsonl", &sp.val, err) < 0) ||
               (sp.test.n && write_jsonl(tmp, "test.jsonl", &sp.test, err) < 0)) {
        goto out;
    }
    json_t *m = manifest_json(o, r, &sp);
    char mp[4500], *ms = m ? json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(m);
    snprintf(mp, sizeof mp, "%s/manifest.json", tmp);
    if (!ms || mtc_write_file_atomic(mp, ms, strlen(ms), 0644) < 0) {
        free(ms);
        errprintf(err, "%s: %s", mp, strerror(errno));
        goto out;
    }
    free(ms);
    if (rename(tmp, r->path) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
            errprintf(err, "%s: %s", r->path, strerror(errno));
            goto out;
        }
        // another preparer of the same content finished first: theirs is the same
        progress(o, "%s was prepared meanwhile by another process", r->path);
        r->cached = read_manifest(r->path, r) == 0;
    } else {
        tmp[0] = 0;
    }
    progress(o, "prepared %s: %zu records, %llu train + %llu val tokens in %s", r->key, r->records,
             (unsigned long long)r->train_tokens, (unsigned long long)r->val_tokens, r->path);
    rc = o->name ? link_name(o, dsdir, r->key, err) : 0;
out:
    if (tmp[0])
        mtc_rm_rf(tmp);
    tok_destroy(t);
    free(tokbytes);
    splits_release(&sp);
    dset_source_release(&src);
    return rc;
}

json_t *dset_result_json(const struct dset_options *o, const struct dset_result *r)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:b}", "key", r->key, "path",
                     r->path, "kind", schema_enum_name(&dset_kind_enum, (int)o->kind), "source",
                     o->source ? o->source : "", "sourceFingerprint", r->source_fp, "tokenizer",
                     o->tokenizer ? o->tokenizer : BUILTIN_TOKENIZER, "tokenizerFingerprint",
                     r->tokenizer_fp, "records", (json_int_t)r->records, "trainTokens",
                     (json_int_t)r->train_tokens, "valTokens", (json_int_t)r->val_tokens, "bytes",
                     (json_int_t)r->bytes, "cached", r->cached);
}
