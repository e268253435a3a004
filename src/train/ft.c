/* ft: the fine-tuning driver (--mode sft|dpo) — parses and checks the mode and its options,
 * creates the data sets (ft_data.c) and DPO's frozen reference, runs each step and
 * evaluation through the mode's batch (sft.c, dpo.c), and keeps the data position a
 * checkpoint saves. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/ft_internal.h"

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
    if (ft_set_load(&f->train, tpath, c->tok, per, (size_t)c->seq + 1, err) < 0)
        goto error;
    if (c->want_val && !mtc_path_exists(vpath)) {
        errprintf(err, "--eval-every needs validation examples in %s", vpath);
        goto error;
    }
    if (c->want_val && ft_set_load(&f->val, vpath, c->tok, per, (size_t)c->seq + 1, err) < 0)
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
    ft_set_release(&f->train);
    ft_set_release(&f->val);
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
