/* ft_internal: state shared by the fine-tuning files (ft.c: the driver, mode and options,
 * positions; ft_data.c: the data sets and their order; sft.c: SFT steps; dpo.c: DPO steps
 * with the frozen reference model). Not an interface. */
#ifndef MTC_TRAIN_FT_INTERNAL_H
#define MTC_TRAIN_FT_INTERNAL_H

#include "train/train.h"

struct ft_seq {
    int32_t *ids;
    uint8_t *train;  // 1 where the token is trained (its log-prob counts)
    uint32_t n;      // tokens, <= seq + 1
    uint32_t ntrain; // trained targets: train[1..n)
};
struct ft_set {
    size_t n;           // examples
    int per;            // sequences per example: 1 (SFT) or 2 (DPO: chosen, rejected)
    struct ft_seq *seq; // (n * per)
};
struct ft {
    struct ft_config c;
    struct ft_set train, val;
    uint64_t pos;   // training examples consumed (global)
    uint32_t *perm; // (train.n) order of the epoch perm_epoch
    uint64_t perm_epoch;
    int32_t *x, *y;              // (rows, T), rows = micro * per
    float *w, *lp, *lpr, *dlogp; // (rows, T)
    struct model *ref;           // DPO reference, frozen
    double met[4];               // DPO: rewards chosen, rejected, accuracy, margin
    int has_met;
};

/* Read path's JSONL lines into set (per 1: SFT, 2: DPO), each cut to maxlen tokens.
 * 0, or -1 with err "path:line: why". Release with ft_set_release even on failure. */
int ft_set_load(struct ft_set *set, const char *path, const struct tok *tk, int per, size_t maxlen,
                mtc_error_t *err);
void ft_set_release(struct ft_set *s);
/* Sequence k (0 = chosen/only, 1 = rejected) of the example at global position g. */
const struct ft_seq *ft_example(struct ft *f, const struct ft_set *set, uint64_t g, int k);
/* Row of the batch for s: x = ids[t], y = ids[t+1], w = train[t+1]; padding after the
 * example has y = -1 (no target) and w = 0, so causal attention never lets a real
 * token see it. */
void ft_fill_row(const struct ft_seq *s, int T, int32_t *x, int32_t *y, float *w);
/* SFT over one global batch from g0 (this rank's share); *loss += its part of the loss.
 * backward adds gradients into m. 0/-1 with err. */
int sft_batch(struct ft *f, struct model *m, const struct ft_set *set, uint64_t g0, int backward,
              double *loss, mtc_error_t *err);
/* DPO over one global batch starting at example g0 (this rank's share); backward adds
 * gradients into m. sums[0] += this rank's share of the loss, sums[1..4] += rewards
 * chosen, rejected, accuracy, margin summed over its pairs. 0/-1 with err. */
int dpo_batch(struct ft *f, struct model *m, const struct ft_set *set, uint64_t g0, int backward,
              double sums[5], mtc_error_t *err);

#endif
