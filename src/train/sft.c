/* sft: fine-tuning data and supervised fine-tuning — loads a JSONL data set (rendered by
 * chat.c, cut to --seq), hands each rank its slice of every global batch in a
 * deterministic, resumable order, and runs SFT steps with the loss on response tokens. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/ft_internal.h"
#include "train/rng.h"

static void set_release(struct ft_set *s)
{
    for (size_t i = 0; s->seq && i < s->n * (size_t)s->per; i++) {
        free(s->seq[i].ids);
        free(s->seq[i].train);
    }
    free(s->seq);
    memset(s, 0, sizeof *s);
}

/* The stored form of a rendered sequence (takes its buffers). */
static void take(struct ft_seq *d, struct chat_seq *s)
{
    d->ids = s->ids;
    d->train = s->train;
    d->n = (uint32_t)s->n;
    d->ntrain = 0;
    for (size_t t = 1; t < s->n; t++)
        d->ntrain += s->train[t];
    memset(s, 0, sizeof *s);
}

/* Read path's JSONL lines into set (per 1: SFT, 2: DPO), each cut to maxlen tokens. */
static int set_load(struct ft_set *set, const char *path, const struct tok *tk, int per,
                    size_t maxlen, mtc_error_t *err)
{
    size_t len;
    char *buf = mtc_read_file(path, &len);
    if (!buf)
        return errprintf(err, "%s: %s", path, strerror(errno));
    set->per = per;
    size_t cap = 0, lineno = 0;
    struct chat_seq cs[2] = {{0}};
    int rc = 0;
    for (char *p = buf, *end = buf + len; p < end && rc == 0;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        lineno++;
        char *q = p;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        char *line = p;
        p = nl ? nl + 1 : end;
        if (q == le)
            continue; // blank line
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)(le - line), JSON_REJECT_DUPLICATES, &je);
        if (!o) {
            rc = errprintf(err, "%s:%zu: not a JSON line: %s", path, lineno, je.text);
            break;
        }
        mtc_error_t e2 = {{0}};
        struct chat_seq *pp[2] = {&cs[0], &cs[1]};
        int bad = per == 1 ? chat_parse_sft(tk, o, &cs[0], &e2)
                           : chat_parse_dpo(tk, o, &cs[0], &cs[1], &e2);
        json_decref(o);
        if (bad || chat_truncate(pp, per, maxlen, &e2) < 0) {
            rc = errprintf(err, "%s:%zu: %s", path, lineno, e2.text);
            break;
        }
        if (set->n == cap) {
            cap = cap ? cap * 2 : 256;
            struct ft_seq *ns = realloc(set->seq, cap * per * sizeof *ns);
            if (!ns) {
                rc = errprintf(err, "out of memory");
                break;
            }
            set->seq = ns;
        }
        for (int k = 0; k < per; k++)
            take(&set->seq[set->n * per + k], &cs[k]);
        set->n++;
    }
    chat_seq_release(&cs[0]);
    chat_seq_release(&cs[1]);
    free(buf);
    if (rc == 0 && set->n == 0)
        rc = errprintf(err, "%s: no examples", path);
    return rc;
}

const struct ft_seq *ft_example(struct ft *f, const struct ft_set *set, uint64_t g, int k)
{
    uint64_t e = g / set->n, i = g % set->n;
    if (set == &f->train && f->c.shuffle) {
        if (e != f->perm_epoch) {
            // the same order on every rank and after resume
            train_epoch_perm(f->perm, set->n, f->c.seed, e);
            f->perm_epoch = e;
        }
        i = f->perm[i];
    }
    return &set->seq[i * (uint64_t)set->per + (uint64_t)k];
}

void ft_fill_row(const struct ft_seq *s, int T, int32_t *x, int32_t *y, float *w)
{
    for (int t = 0; t < T; t++) {
        int real = (uint32_t)t + 1 < s->n;
        x[t] = real ? s->ids[t] : 0;
        y[t] = real ? s->ids[t + 1] : -1;
        w[t] = real ? (float)s->train[t + 1] : 0.0f;
    }
}

/* SFT over one global batch from g0 (this rank's share); *loss += its part of the loss. */
static int sft_batch(struct ft *f, struct model *m, const struct ft_set *set, uint64_t g0,
                     int backward, double *loss, mtc_error_t *err)
{
    int M = f->c.micro, T = f->c.seq, R = f->c.nranks;
    uint64_t G = (uint64_t)M * R * f->c.accum;
    // the response tokens of the whole global batch, counted before any forward: every
    // micro-step on every rank divides by it, so the summed gradient is the global mean
    double count = 0;
    for (uint64_t g = g0; g < g0 + G; g++)
        count += ft_example(f, set, g, 0)->ntrain;
    for (int k = 0; k < f->c.accum; k++) {
        uint64_t base = g0 + (uint64_t)k * M * R + (uint64_t)f->c.rank * M;
        for (int j = 0; j < M; j++)
            ft_fill_row(ft_example(f, set, base + j, 0), T, f->x + (size_t)j * T,
                        f->y + (size_t)j * T, f->w + (size_t)j * T);
        errno = 0;
        float l = model_forward(m, f->x, f->y, f->w, (float)count, M, T);
        if (isnan(l) && errno == EINVAL)
            return errprintf(err,
                             "model forward rejected the batch: token id >= vocab_size %d "
                             "(tokenizer does not match the model)",
                             model_cfg(m)->vocab_size);
        if (backward)
            model_backward(m, NULL);
        *loss += l;
    }
    return 0;
}

int ft_accumulate(struct ft *f, struct model *m, double *loss, mtc_error_t *err)
{
    uint64_t G = (uint64_t)f->c.micro * f->c.nranks * f->c.accum;
    *loss = 0;
    if (f->c.mode == FT_DPO) {
        double s[5] = {0};
        if (dpo_batch(f, m, &f->train, f->pos, 1, s, err) < 0)
            return -1;
        *loss = s[0];
        if (dist_allreduce_sum_d(s + 1, 4) < 0)
            return errprintf(err, "MPI all-reduce failed");
        for (int i = 0; i < 4; i++)
            f->met[i] = s[i + 1] / (double)G;
        f->has_met = 1;
    } else if (sft_batch(f, m, &f->train, f->pos, 1, loss, err) < 0) {
        return -1;
    }
    f->pos += G;
    return 0;
}

float ft_evaluate(struct ft *f, struct model *m, int nbatches, mtc_error_t *err)
{
    if (!f->val.n) {
        errprintf(err, "no validation examples");
        return NAN;
    }
    uint64_t G = (uint64_t)f->c.micro * f->c.nranks * f->c.accum;
    double sum = 0;
    for (int b = 0; b < nbatches; b++) {
        double s[5] = {0}, l = 0;
        int rc = f->c.mode == FT_DPO ? dpo_batch(f, m, &f->val, (uint64_t)b * G, 0, s, err)
                                     : sft_batch(f, m, &f->val, (uint64_t)b * G, 0, &l, err);
        if (rc < 0)
            return NAN;
        sum += f->c.mode == FT_DPO ? s[0] : l;
    }
    dist_allreduce_sum_d(&sum, 1);
    return (float)(sum / nbatches);
}

void ft_metrics(const struct ft *f, json_t *fields)
{
    static const char *const keys[] = {"rewards/chosen", "rewards/rejected", "rewards/accuracy",
                                       "rewards/margin"};
    if (!f || !f->has_met)
        return;
    for (int i = 0; i < 4; i++)
        json_object_set_new(fields, keys[i], json_real(f->met[i]));
}

void ft_get_pos(const struct ft *f, struct loader_pos *pos)
{
    memset(pos, 0, sizeof *pos);
    pos->epoch = f->pos / f->train.n;
    pos->offset = f->pos;
    pos->rng = f->c.seed;
}

int ft_set_pos(struct ft *f, const struct loader_pos *pos, mtc_error_t *err)
{
    if (pos->shard != 0 || pos->epoch != pos->offset / f->train.n)
        return errprintf(err,
                         "checkpoint's data position (epoch %llu, example %llu) does not fit "
                         "%zu examples: the data set changed",
                         (unsigned long long)pos->epoch, (unsigned long long)pos->offset,
                         f->train.n);
    f->pos = pos->offset;
    return 0;
}

int ft_mode_of(const char *mode, mtc_error_t *err)
{
    static const struct {
        const char *name;
        int mode;
    } modes[] = {{"pretrain", 0}, {"cpt", 0}, {"sft", FT_SFT}, {"dpo", FT_DPO}, {"grpo", FT_GRPO}};
    if (!mode)
        return 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(mode, modes[i].name))
            return modes[i].mode;
    return errprintf(err, "--mode %s: want pretrain, cpt, sft, dpo or grpo", mode);
}

int ft_resume_check(const json_t *train, int mode, const char *init, const char *ckdir,
                    mtc_error_t *err)
{
    static const char *const names[] = {"pretrain", "sft", "dpo", "grpo"};
    const char *m = json_string_value(json_object_get(train, "mode"));
    mtc_error_t e2;
    int was = ft_mode_of(m, &e2);
    if (was != mode)
        return errprintf(err, "checkpoint %s was trained with --mode %s, this run has --mode %s",
                         ckdir, was < 0 ? m : names[was], names[mode]);
    const char *i0 = json_string_value(json_object_get(train, "init"));
    if (mode == FT_DPO && strcmp(i0 ? i0 : "", init ? init : ""))
        return errprintf(err,
                         "checkpoint %s was trained with --init %s (the DPO reference), this "
                         "run has %s",
                         ckdir, i0 ? i0 : "(none)", init ? init : "(none)");
    return 0;
}

size_t ft_size(const struct ft *f)
{
    return f->train.n;
}

const struct model *ft_reference(const struct ft *f)
{
    return f->ref;
}

struct ft *ft_create(const struct ft_config *c, const struct model_config *mc, mtc_error_t *err)
{
    if (!c->tok) {
        errprintf(err, "--mode %s needs --tokenizer (to render the JSONL examples)",
                  c->mode == FT_DPO ? "dpo" : "sft");
        return NULL;
    }
    if (c->mode == FT_DPO && !(c->beta > 0)) {
        errprintf(err, "--dpo-beta must be > 0");
        return NULL;
    }
    struct ft *f = calloc(1, sizeof *f);
    if (!f) {
        errprintf(err, "out of memory");
        return NULL;
    }
    f->c = *c;
    f->c.tok = NULL;
    f->perm_epoch = UINT64_MAX;
    int per = c->mode == FT_DPO ? 2 : 1;
    char tpath[4200], vpath[4200];
    struct stat st;
    if (stat(c->data, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(tpath, sizeof tpath, "%s/train.jsonl", c->data);
        snprintf(vpath, sizeof vpath, "%s/val.jsonl", c->data);
    } else {
        snprintf(tpath, sizeof tpath, "%s", c->data);
        const char *sl = strrchr(c->data, '/');
        snprintf(vpath, sizeof vpath, "%.*s%sval.jsonl", sl ? (int)(sl - c->data) : 0, c->data,
                 sl ? "/" : "");
    }
    size_t rows = (size_t)c->micro * per, nt = rows * (size_t)c->seq;
    if (set_load(&f->train, tpath, c->tok, per, (size_t)c->seq + 1, err) < 0)
        goto error;
    if (c->want_val && !mtc_path_exists(vpath)) {
        errprintf(err, "--eval-every needs validation examples in %s", vpath);
        goto error;
    }
    if (c->want_val && set_load(&f->val, vpath, c->tok, per, (size_t)c->seq + 1, err) < 0)
        goto error;
    f->perm = malloc(f->train.n * sizeof *f->perm);
    f->x = malloc(nt * sizeof *f->x);
    f->y = malloc(nt * sizeof *f->y);
    f->w = malloc(nt * sizeof *f->w);
    f->lp = malloc(nt * sizeof *f->lp);
    f->lpr = malloc(nt * sizeof *f->lpr);
    f->dlogp = malloc(nt * sizeof *f->dlogp);
    if (!f->perm || !f->x || !f->y || !f->w || !f->lp || !f->lpr || !f->dlogp) {
        errprintf(err, "out of memory");
        goto error;
    }
    if (c->mode == FT_DPO) {
        // the reference is the policy's starting point: the --init weights, or the
        // same seeded initialisation the policy got
        f->ref = model_create(mc, err);
        if (!f->ref || model_reserve(f->ref, (int)rows, c->seq, err) < 0)
            goto error;
        if (c->init) {
            if (interop_load_weights(f->ref, c->init, err) < 0)
                goto error;
        } else {
            model_init_weights(f->ref, c->seed);
        }
    }
    return f;
error:
    ft_destroy(f);
    return NULL;
}

void ft_destroy(struct ft *f)
{
    if (!f)
        return;
    int e = errno;
    set_release(&f->train);
    set_release(&f->val);
    free(f->perm);
    free(f->x);
    free(f->y);
    free(f->w);
    free(f->lp);
    free(f->lpr);
    free(f->dlogp);
    model_destroy(f->ref);
    free(f);
    errno = e;
}
