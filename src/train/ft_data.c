/* ft_data: the fine-tuning data sets (SFT and DPO) — loads a JSONL data set (rendered by
 * chat.c, cut to --seq) and hands each rank its slice of every global batch in a
 * deterministic, resumable order, one batch row per example sequence. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "train/ft_internal.h"
#include "train/rng.h"

void ft_set_release(struct ft_set *s)
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

int ft_set_load(struct ft_set *set, const char *path, const struct tok *tk, int per, size_t maxlen,
                mtc_error_t *err)
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
