/* grpo: group relative policy optimisation (Shao et al. 2024, as NeMo-RL runs it) — each
 * step samples G completions of P prompts from the current policy with the KV-cache engine
 * (gen.c), scores them in an environment (grpo_env.c), turns rewards into per-group
 * advantages, and takes clipped policy-ratio updates with a k3 KL penalty to a frozen
 * reference, averaged over generated tokens only. The training pass packs the step's
 * sequences into as few rows of --seq as fit (model_forward_packed). docs/rl.md. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/gen.h"
#include "train/rng.h"
#include "train/train.h"

struct gprompt {
    char *prompt, *answer;
    int32_t *ids; // rendered chat prompt (nids)
    int nids;
};

/* Global sums of one step, all-reduced in one call (the order is the index). */
enum {
    S_SEQS,
    S_REWARD,
    S_REWARD2,
    S_CORRECT,
    S_GEN_TOK,
    S_NEGLP,
    S_KL,
    S_CLIPPED,
    S_TOKENS,
    S_GEN_S,
    S_TRAIN_S,
    S_TRAIN_TOK,
    S_LPERR,
    S_LOSS,
    S_ROWS,
    S_N
};

struct grpo {
    struct grpo_config c;
    int env;
    struct gprompt *p;
    size_t n;
    uint64_t pos; // prompts consumed (global)
    uint32_t *perm;
    uint64_t perm_epoch;
    struct model *ref; // frozen reference policy
    struct gen_engine *ge;
    int rows, ctx; // this rank's sequences per step (P/R * G); KV positions per sequence
    struct gen_seq *seqs;
    struct gen_seq **sp;
    char **text; // (rows) decoded completions
    const char **pr, **an;
    int32_t *x, *y, *tpos;             // (rows, T); tpos: positions when packing
    float *w, *advt, *lp_old, *lp_ref; // (rows, T); advt: the advantage of each token
    float *lp, *dlp;                   // (micro, T)
    float *adv, *reward;               // (rows)
    int *correct;                      // (rows)
    size_t *place;                     // (rows) first token of sequence i in x
    int *fill;                         // (rows) columns taken in each packed row
    int nrows, cols;  // the shape of x in use: fewer rows when packed, of cols <= --seq
    double s[S_N];    // last step's sums
    double ratio_dev; // max |ratio - 1| of the first update on this rank
    int has_met;
};

void grpo_config_default(struct grpo_config *c)
{
    memset(c, 0, sizeof *c);
    c->prompts = 8;
    c->gens = 8;
    c->max_new = 16;
    c->temperature = 1.0f;
    c->eps_low = 0.2f;
    c->eps_high = 0.2f;
    c->beta = 0.01f;
    c->kl_clamp = 10.0f;
    c->leave_one_out = 1;
    c->std_norm = 1;
    c->inner = 1;
    c->pack = 1;
}

/* ---- the loss ---- */

double grpo_token_loss(double lp, double lp_old, double lp_ref, double adv,
                       const struct grpo_config *c, double *dlp, int *clipped, double *kl)
{
    double ratio = exp(lp - lp_old);
    double lo = 1.0 - c->eps_low, hi = 1.0 + c->eps_high;
    double rc = ratio < lo ? lo : ratio > hi ? hi : ratio;
    double l1 = -adv * ratio, l2 = -adv * rc, pg, d;
    if (l2 > l1) { // the clipped branch is the max: constant in lp
        pg = l2;
        d = 0;
        *clipped = 1;
    } else {
        pg = l1;
        d = -adv * ratio;
        *clipped = 0;
    }
    // k3 (Schulman 2020): exp(x) - x - 1 with x = lp_ref - lp, its input clamped to ±20 and
    // its value to kl_clamp (NeMo-RL's kl_input/output clamps); clamped → no gradient
    double x = lp_ref - lp, dk = 0;
    if (x > 20)
        x = 20;
    else if (x < -20)
        x = -20;
    else
        dk = 1.0 - exp(x); // d/dlp of exp(x) - x - 1
    double k = exp(x) - x - 1.0;
    if (k > c->kl_clamp) {
        k = c->kl_clamp;
        dk = 0;
    }
    *kl = k;
    *dlp = d + c->beta * dk;
    return pg + c->beta * k;
}

/* The forward of rows x, y (B,T) (packed when pos is given); -1 with err when refused. */
static int forward(struct model *m, const int32_t *x, const int32_t *y, const int32_t *pos, int B,
                   int T, mtc_error_t *err)
{
    errno = 0;
    float l = model_forward_packed(m, x, y, NULL, 0, pos, B, T);
    if (isnan(l) && errno == EINVAL)
        return errprintf(err, "model forward rejected the batch: token id >= vocab_size %d",
                         model_cfg(m)->vocab_size);
    return 0;
}

int grpo_loss_batch(struct model *m, const int32_t *x, const int32_t *y, const int32_t *pos,
                    const float *w, const float *lp_old, const float *lp_ref, const float *adv,
                    int B, int T, double norm, const struct grpo_config *c, int backward, float *lp,
                    float *dlogp, double st[4], mtc_error_t *err)
{
    if (forward(m, x, y, pos, B, T, err) < 0)
        return -1;
    model_token_logprobs(m, lp);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            dlogp[i] = 0;
            if (w[i] == 0)
                continue;
            double d, kl;
            int clipped;
            double v = grpo_token_loss(lp[i], lp_old[i], lp_ref[i], adv[i], c, &d, &clipped, &kl);
            st[0] += v / norm;
            st[1] += kl;
            st[2] += clipped;
            double dev = fabs(exp((double)lp[i] - lp_old[i]) - 1.0);
            if (dev > st[3])
                st[3] = dev;
            dlogp[i] = (float)(d / norm);
        }
    if (backward)
        model_backward(m, dlogp);
    return 0;
}

void grpo_advantages(const float *reward, int n, int G, int leave_one_out, int std_norm, float *adv)
{
    for (int g0 = 0; g0 + G <= n; g0 += G) {
        double sum = 0, sq = 0;
        for (int j = 0; j < G; j++)
            sum += reward[g0 + j];
        double mean = sum / G;
        for (int j = 0; j < G; j++)
            sq += (reward[g0 + j] - mean) * (reward[g0 + j] - mean);
        double sd = G > 1 ? sqrt(sq / (G - 1)) : 0; // sample std, as torch.std
        for (int j = 0; j < G; j++) {
            double base = leave_one_out && G > 1 ? (sum - reward[g0 + j]) / (G - 1) : mean;
            double a = reward[g0 + j] - base;
            // identical rewards: exactly 0 (no rounding residue from the mean)
            if (sq == 0)
                a = 0;
            else if (std_norm && sd > 0)
                a /= sd;
            adv[g0 + j] = (float)a;
        }
    }
}

/* ---- prompts ---- */

static int load_prompts(struct grpo *g, const char *path, mtc_error_t *err)
{
    size_t len, cap = 0, lineno = 0;
    char *buf = mtc_read_file(path, &len);
    if (!buf)
        return errprintf(err, "%s: %s", path, strerror(errno));
    struct chat_seq cs = {0};
    int rc = 0;
    for (char *p = buf, *end = buf + len; p < end && rc == 0;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end, *line = p;
        p = nl ? nl + 1 : end;
        lineno++;
        if (le == line)
            continue;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)(le - line), JSON_REJECT_DUPLICATES, &je);
        const char *pr = json_string_value(json_object_get(o, "prompt"));
        const char *an = json_string_value(json_object_get(o, "answer"));
        if (!o)
            rc = errprintf(err, "%s:%zu: not a JSON line: %s", path, lineno, je.text);
        else if (!pr || !an)
            rc = errprintf(err, "%s:%zu: want string fields \"prompt\" and \"answer\"", path,
                           lineno);
        if (rc == 0) {
            json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", pr);
            mtc_error_t e2 = {{0}};
            if (chat_render_prompt(g->c.tok, msgs, &cs, &e2) < 0)
                rc = errprintf(err, "%s:%zu: %s", path, lineno, e2.text);
            else if ((int)cs.n >= g->ctx)
                rc = errprintf(err,
                               "%s:%zu: the prompt has %zu tokens, no room to generate in --seq "
                               "%d",
                               path, lineno, cs.n, g->c.seq);
            json_decref(msgs);
        }
        if (rc == 0 && g->n == cap) {
            cap = cap ? 2 * cap : 256;
            struct gprompt *np = realloc(g->p, cap * sizeof *np);
            if (!np)
                rc = errprintf(err, "out of memory");
            else
                g->p = np;
        }
        if (rc == 0) {
            struct gprompt *q = &g->p[g->n++];
            q->prompt = strdup(pr);
            q->answer = strdup(an);
            q->ids = cs.ids;
            q->nids = (int)cs.n;
            free(cs.train); // the prompt's mask is not kept
            memset(&cs, 0, sizeof cs);
        }
        json_decref(o);
    }
    chat_seq_release(&cs);
    free(buf);
    if (rc == 0 && g->n == 0)
        rc = errprintf(err, "%s: no prompts", path);
    return rc;
}

/* The prompt at global position q: epoch order from (seed, epoch) when shuffling. */
static const struct gprompt *prompt_at(struct grpo *g, uint64_t q)
{
    uint64_t e = q / g->n, i = q % g->n;
    if (g->c.shuffle) {
        if (e != g->perm_epoch) {
            train_epoch_perm(g->perm, g->n, g->c.seed, e);
            g->perm_epoch = e;
        }
        i = g->perm[i];
    }
    return &g->p[i];
}

/* ---- set-up ---- */

struct grpo *grpo_create(const struct grpo_config *c, struct model *policy, mtc_error_t *err)
{
    const struct model_config *mc = model_cfg(policy);
    if (!c->tok)
        return errprintf(err, "--mode grpo needs --tokenizer (prompts are rendered as chat)"), NULL;
    if (c->prompts <= 0 || c->gens <= 0 || c->max_new <= 0 || c->inner <= 0)
        return errprintf(err, "--prompts-per-step, --generations-per-prompt, --max-new-tokens "
                              "and --inner-steps must be positive"),
               NULL;
    if (c->prompts % c->nranks)
        return errprintf(err, "--prompts-per-step %d must be a multiple of the %d ranks",
                         c->prompts, c->nranks),
               NULL;
    int rows = c->prompts / c->nranks * c->gens;
    if (rows % c->micro)
        return errprintf(err,
                         "--micro-batch %d must divide this rank's %d sequences per step "
                         "(prompts x generations / ranks)",
                         c->micro, rows),
               NULL;
    if (!(c->temperature > 0) || !(c->eps_low >= 0 && c->eps_low < 1) || !(c->eps_high >= 0) ||
        !(c->beta >= 0) || !(c->kl_clamp > 0))
        return errprintf(err, "--temperature must be > 0, --clip-low in [0,1), --clip-high, "
                              "--kl-beta >= 0"),
               NULL;
    struct grpo *g = calloc(1, sizeof *g);
    if (!g)
        return errprintf(err, "out of memory"), NULL;
    g->c = *c;
    g->rows = rows;
    g->ctx = c->seq + 1 < mc->max_seq ? c->seq + 1 : mc->max_seq;
    g->perm_epoch = UINT64_MAX;
    if ((g->env = grpo_env_of(c->env ? c->env : "arithmetic", err)) < 0)
        goto error;
    if (g->env == GRPO_ENV_COMMAND && !c->env_cmd) {
        errprintf(err, "--env command needs --env-command CMD");
        goto error;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/train.jsonl", c->data);
    if (load_prompts(g, mtc_path_exists(path) ? path : c->data, err) < 0)
        goto error;
    size_t RT = (size_t)rows * c->seq;
    g->perm = malloc(g->n * sizeof *g->perm);
    g->seqs = calloc(rows, sizeof *g->seqs);
    g->sp = calloc(rows, sizeof *g->sp);
    g->text = calloc(rows, sizeof *g->text);
    g->pr = calloc(rows, sizeof *g->pr);
    g->an = calloc(rows, sizeof *g->an);
    g->x = malloc(RT * sizeof *g->x);
    g->y = malloc(RT * sizeof *g->y);
    g->tpos = malloc(RT * sizeof *g->tpos);
    g->w = malloc(RT * sizeof *g->w);
    g->advt = malloc(RT * sizeof(float));
    g->place = malloc(rows * sizeof *g->place);
    g->fill = malloc(rows * sizeof *g->fill);
    g->lp_old = malloc(RT * sizeof(float));
    g->lp_ref = malloc(RT * sizeof(float));
    g->lp = malloc((size_t)c->micro * c->seq * sizeof(float));
    g->dlp = malloc((size_t)c->micro * c->seq * sizeof(float));
    g->adv = malloc(rows * sizeof(float));
    g->reward = malloc(rows * sizeof(float));
    g->correct = malloc(rows * sizeof(int));
    if (!g->perm || !g->seqs || !g->sp || !g->text || !g->pr || !g->an || !g->x || !g->y ||
        !g->tpos || !g->w || !g->advt || !g->place || !g->fill || !g->lp_old || !g->lp_ref ||
        !g->lp || !g->dlp || !g->adv || !g->reward || !g->correct) {
        errprintf(err, "out of memory");
        goto error;
    }
    if (!(g->ref = model_create(mc, err)) || model_reserve(g->ref, c->micro, c->seq, err) < 0)
        goto error;
    if (!(g->ge = gen_create(policy, rows < 64 ? rows : 64, g->ctx, err)))
        goto error;
    return g;
error:
    grpo_destroy(g);
    return NULL;
}

void grpo_destroy(struct grpo *g)
{
    if (!g)
        return;
    int e = errno;
    gen_destroy(g->ge);
    model_destroy(g->ref);
    for (size_t i = 0; i < g->n; i++) {
        free(g->p[i].prompt);
        free(g->p[i].answer);
        free(g->p[i].ids);
    }
    for (int i = 0; g->seqs && i < g->rows; i++)
        gen_seq_release(&g->seqs[i]);
    for (int i = 0; g->text && i < g->rows; i++)
        free(g->text[i]);
    free(g->p);
    free(g->perm);
    free(g->seqs);
    free(g->sp);
    free(g->text);
    free(g->pr);
    free(g->an);
    free(g->x);
    free(g->y);
    free(g->tpos);
    free(g->w);
    free(g->advt);
    free(g->place);
    free(g->fill);
    free(g->lp_old);
    free(g->lp_ref);
    free(g->lp);
    free(g->dlp);
    free(g->adv);
    free(g->reward);
    free(g->correct);
    free(g);
    errno = e;
}

int grpo_reference_init(struct grpo *g, struct model *policy, const char *resume,
                        const char *ckpt_dir, int rank, mtc_error_t *err)
{
    char root[4200], found[4400];
    size_t np = model_nparams(policy);
    if (resume && resume[0]) {
        // the reference written next to the checkpoints when the run began
        snprintf(root, sizeof root, "%s", resume);
        for (size_t n = strlen(root); n > 1 && root[n - 1] == '/'; n--)
            root[n - 1] = 0; // "…/step_00000005/" names the same checkpoint
        char *slash = strrchr(root, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(root, sizeof root, ".");
        strncat(root, "/reference", sizeof root - strlen(root) - 1);
        mtc_error_t e2;
        if (ckpt_find_latest(root, found, sizeof found, &e2) != 1)
            return errprintf(err, "--resume %s: no GRPO reference model in %s", resume, root);
        return ckpt_load(found, model_params(g->ref), np, NULL, NULL, err);
    }
    memcpy(model_params(g->ref), model_params(policy), np * sizeof(float));
    if (rank != 0 || !ckpt_dir)
        return 0;
    snprintf(root, sizeof root, "%s/reference", ckpt_dir);
    struct ckpt_meta *meta = calloc(1, sizeof *meta);
    if (!meta)
        return errprintf(err, "out of memory");
    meta->nranks = g->c.nranks;
    meta->seed = g->c.seed;
    int rc = ckpt_save(root, model_cfg(policy), model_params(g->ref), np, NULL, meta, err);
    free(meta);
    return rc;
}

/* ---- one step ---- */

/* Sample this rank's rows: prompt q = pos + rank*P/R + i/G, generation i%G; each
 * sequence's seed depends only on (seed, step, its global index), so the rollouts do not
 * depend on the rank count. */
static int rollout(struct grpo *g, int64_t step, mtc_error_t *err)
{
    int G = g->c.gens, per = g->c.prompts / g->c.nranks;
    uint64_t q0 = g->pos + (uint64_t)g->c.rank * per;
    for (int i = 0; i < g->rows; i++) {
        const struct gprompt *p = prompt_at(g, q0 + (uint64_t)(i / G));
        struct gen_seq *q = &g->seqs[i];
        gen_seq_release(q);
        memset(q, 0, sizeof *q);
        uint64_t s =
            g->c.seed * 0x9e3779b97f4a7c15ull + (uint64_t)step * 0xbf58476d1ce4e5b9ull +
            ((q0 + (uint64_t)(i / G)) * (uint64_t)G + (uint64_t)(i % G)) * 0x94d049bb133111ebull;
        int room = g->ctx - p->nids;
        q->prompt = p->ids;
        q->nprompt = p->nids;
        q->s = (struct gen_sampling){.temperature = g->c.temperature,
                                     .top_p = 1.0f,
                                     .top_k = 0,
                                     .max_tokens = g->c.max_new < room ? g->c.max_new : room,
                                     .seed = train_splitmix64(&s)};
        q->eot = tok_eot(g->c.tok);
        g->sp[i] = q;
        g->pr[i] = p->prompt;
        g->an[i] = p->answer;
    }
    return gen_run(g->ge, g->sp, g->rows, err);
}

/* Token t of sequence q (prompt, then completion). */
static int32_t seq_tok(const struct gen_seq *q, int t)
{
    return t < q->nprompt ? q->prompt[t] : q->out[t - q->nprompt];
}

/* Training columns of sequence i: its tokens but the last (each predicts the next); at most
 * --seq since a sequence has at most --seq + 1 positions. */
static int seq_cols(const struct grpo *g, int i)
{
    int n = g->seqs[i].nprompt + g->seqs[i].nout - 1;
    return n < g->c.seq ? n : g->c.seq;
}

/* Where each sequence goes (place) and the rows' shape (nrows, cols): padded, sequence i
 * alone in row i of --seq; packed, first fit into as few rows of --seq as hold them, in
 * sequence order, the rows then cut to the longest one's columns. */
static void place_rows(struct grpo *g)
{
    int T = g->c.seq, *used = g->fill;
    g->nrows = g->c.pack ? 0 : g->rows;
    g->cols = g->c.pack ? 1 : T;
    for (int i = 0; i < g->rows; i++) {
        if (!g->c.pack) {
            g->place[i] = (size_t)i * T;
            continue;
        }
        int n = seq_cols(g, i), r = 0;
        while (r < g->nrows && used[r] + n > T)
            r++;
        if (r == g->nrows)
            used[g->nrows++] = 0;
        g->place[i] = (size_t)r * T + used[r]; // row r, column used[r] (rows of T for now)
        used[r] += n;
        g->cols = used[r] > g->cols ? used[r] : g->cols;
    }
    if (g->c.pack)
        for (int i = 0; i < g->rows; i++)
            g->place[i] = g->place[i] / T * g->cols + g->place[i] % T;
}

/* Rows (x, y, mask over generated targets, each token's advantage, positions) of the sampled
 * sequences as place_rows laid them out. Free columns are padding: no target, weight 0; packed,
 * the padding at a row's end is a sequence of its own (positions from 0). */
static void fill_rows(struct grpo *g)
{
    place_rows(g);
    int T = g->cols;
    size_t RT = (size_t)g->nrows * T;
    for (size_t k = 0; k < RT; k++) {
        g->x[k] = 0;
        g->y[k] = -1;
        g->w[k] = 0;
        g->advt[k] = 0;
        g->tpos[k] = -1;
    }
    for (int i = 0; i < g->rows; i++) {
        const struct gen_seq *q = &g->seqs[i];
        for (int t = 0, n = seq_cols(g, i); t < n; t++) {
            size_t k = g->place[i] + (size_t)t;
            g->x[k] = seq_tok(q, t);
            g->y[k] = seq_tok(q, t + 1);
            g->w[k] = t + 1 >= q->nprompt ? 1.0f : 0.0f;
            g->advt[k] = g->adv[i];
            g->tpos[k] = t;
        }
    }
    for (size_t k = 0, pad = 0; k < RT; k++) { // pad: the previous column is padding
        if (k % T == 0)
            pad = 0;
        if (g->tpos[k] >= 0)
            pad = 0;
        else
            g->tpos[k] = pad++ ? g->tpos[k - 1] + 1 : 0;
    }
}

/* Log-probs of every row under m into out, in the micro-batches training uses (so that the
 * first update's ratio is exactly 1). */
static int logprobs(struct grpo *g, struct model *m, float *out, mtc_error_t *err)
{
    int M = g->c.micro, T = g->cols;
    for (int r0 = 0; r0 < g->nrows; r0 += M) {
        size_t o = (size_t)r0 * T;
        if (forward(m, g->x + o, g->y + o, g->c.pack ? g->tpos + o : NULL,
                    g->nrows - r0 < M ? g->nrows - r0 : M, T, err) < 0)
            return -1;
        model_token_logprobs(m, out + o);
    }
    return 0;
}

static int score(struct grpo *g, mtc_error_t *err)
{
    for (int i = 0; i < g->rows; i++) {
        const struct gen_seq *q = &g->seqs[i];
        int n = q->nout > 0 && q->out[q->nout - 1] == q->eot ? q->nout - 1 : q->nout;
        free(g->text[i]);
        g->text[i] = tok_decode(g->c.tok, q->out, (size_t)n);
        if (!g->text[i])
            return errprintf(err, "out of memory");
    }
    return grpo_env_rewards(g->env, g->c.env_cmd, g->rows, g->pr, g->an,
                            (const char *const *)g->text, g->reward, g->correct, err);
}

int grpo_step(struct grpo *g, struct model *m, struct opt_state *opt, const struct opt_config *oc,
              int64_t step, double *loss, double *gnorm, float *lr, mtc_error_t *err)
{
    double *s = g->s;
    memset(s, 0, sizeof g->s);
    double t0 = gen_now();
    if (rollout(g, step, err) < 0)
        return -1;
    s[S_GEN_S] = gen_now() - t0;
    // the environment may fail on one rank: every rank stops with the step
    int rc = score(g, err);
    double bad = rc < 0 ? 1 : 0;
    dist_allreduce_sum_d(&bad, 1);
    if (rc < 0)
        return -1;
    if (bad > 0)
        return errprintf(err, "the environment failed on another rank");
    grpo_advantages(g->reward, g->rows, g->c.gens, g->c.leave_one_out, g->c.std_norm, g->adv);
    double t1 = gen_now();
    fill_rows(g);
    if (logprobs(g, m, g->lp_old, err) < 0 || logprobs(g, g->ref, g->lp_ref, err) < 0)
        return -1;
    int T = g->cols, M = g->c.micro;
    double ntok = 0;
    for (int i = 0; i < g->rows; i++) {
        const struct gen_seq *q = &g->seqs[i];
        s[S_SEQS] += 1;
        s[S_REWARD] += g->reward[i];
        s[S_REWARD2] += (double)g->reward[i] * g->reward[i];
        s[S_CORRECT] += g->correct[i];
        s[S_GEN_TOK] += q->nout;
        s[S_TRAIN_TOK] += q->nprompt + q->nout - 1;
        for (int t = 0; t < q->nout; t++)
            s[S_NEGLP] -= q->logprob[t];
        for (int t = 0, n = seq_cols(g, i); t < n; t++)
            if (g->w[g->place[i] + t] != 0) {
                ntok += 1;
                // the sampler's log-prob (KV cache) vs the training forward's
                s[S_LPERR] +=
                    fabs((double)q->logprob[t + 1 - q->nprompt] - g->lp_old[g->place[i] + t]);
            }
    }
    s[S_ROWS] = g->nrows;
    // every token of the global batch counts once: the summed gradient is the global mean
    double N = ntok;
    dist_allreduce_sum_d(&N, 1);
    if (N == 0)
        N = 1;
    double maxdev = 0;
    for (int k = 0; k < g->c.inner; k++) {
        model_zero_grad(m);
        double st[4] = {0};
        for (int r0 = 0; r0 < g->nrows; r0 += M) {
            size_t o = (size_t)r0 * T;
            if (grpo_loss_batch(m, g->x + o, g->y + o, g->c.pack ? g->tpos + o : NULL, g->w + o,
                                g->lp_old + o, g->lp_ref + o, g->advt + o,
                                g->nrows - r0 < M ? g->nrows - r0 : M, T, N, &g->c, 1, g->lp,
                                g->dlp, st, err) < 0)
                return -1;
        }
        if (k == 0) {
            s[S_LOSS] = st[0];
            s[S_KL] = st[1];
            maxdev = st[3];
        }
        s[S_CLIPPED] += st[2];
        s[S_TOKENS] += ntok;
        double l = st[0];
        if (dist_allreduce_sum(model_grads(m), model_nparams(m)) < 0 ||
            dist_allreduce_sum_d(&l, 1) < 0)
            return errprintf(err, "MPI all-reduce failed");
        if (!isfinite(l))
            return errprintf(err, "GRPO loss is not finite at step %" PRId64 " (lower --lr?)",
                             step + 1);
        *gnorm = opt_clip(model_grads(m), model_nparams(m), oc->grad_clip);
        *lr = opt_lr(oc, step);
        opt_step(opt, oc, m, *lr);
    }
    s[S_TRAIN_S] = gen_now() - t1;
    s[S_TRAIN_TOK] *= g->c.inner;
    if (dist_allreduce_sum_d(s, S_N) < 0)
        return errprintf(err, "MPI all-reduce failed");
    g->has_met = 1;
    g->ratio_dev = maxdev;
    *loss = s[S_LOSS];
    g->pos += (uint64_t)g->c.prompts;
    return 0;
}

void grpo_metrics(const struct grpo *g, json_t *f)
{
    if (!g || !g->has_met)
        return;
    const double *s = g->s;
    double n = s[S_SEQS] > 0 ? s[S_SEQS] : 1, R = g->c.nranks;
    double mean = s[S_REWARD] / n, var = s[S_REWARD2] / n - mean * mean;
    double gt = s[S_GEN_TOK] > 0 ? s[S_GEN_TOK] : 1, tok = s[S_TOKENS] > 0 ? s[S_TOKENS] : 1;
    // tokens of all ranks over the mean time of a rank
    double gs = s[S_GEN_S] / R, ts = s[S_TRAIN_S] / R;
    json_object_set_new(f, "reward_mean", json_real(mean));
    json_object_set_new(f, "reward_std", json_real(var > 0 ? sqrt(var) : 0));
    json_object_set_new(f, "accuracy", json_real(s[S_CORRECT] / n));
    json_object_set_new(f, "kl", json_real(s[S_KL] / (tok / g->c.inner)));
    json_object_set_new(f, "clip_fraction", json_real(s[S_CLIPPED] / tok));
    json_object_set_new(f, "response_length", json_real(s[S_GEN_TOK] / n));
    json_object_set_new(f, "entropy", json_real(s[S_NEGLP] / gt));
    json_object_set_new(f, "gen_logprob_error", json_real(s[S_LPERR] / (tok / g->c.inner)));
    json_object_set_new(f, "gen_tokens_per_s", json_real(gs > 0 ? s[S_GEN_TOK] / gs : 0));
    json_object_set_new(f, "train_tokens_per_s", json_real(ts > 0 ? s[S_TRAIN_TOK] / ts : 0));
    json_object_set_new(f, "ratio_max_deviation", json_real(g->ratio_dev));
    json_object_set_new(f, "gen_s", json_real(gs));
    json_object_set_new(f, "train_s", json_real(ts));
    json_object_set_new(f, "train_rows", json_real(s[S_ROWS]));
}

void grpo_summary(const struct grpo *g, char *buf, size_t len)
{
    const double *s = g->s;
    double n = s[S_SEQS] > 0 ? s[S_SEQS] : 1;
    snprintf(buf, len, " | reward %.3f | acc %.2f | len %.1f", s[S_REWARD] / n, s[S_CORRECT] / n,
             s[S_GEN_TOK] / n);
}

const char *grpo_completion(const struct grpo *g, int i)
{
    return i >= 0 && i < g->rows ? g->text[i] : NULL;
}

void grpo_get_pos(const struct grpo *g, struct loader_pos *pos)
{
    memset(pos, 0, sizeof *pos);
    pos->offset = g->pos;
}

int grpo_set_pos(struct grpo *g, const struct loader_pos *pos, mtc_error_t *err)
{
    (void)err;
    g->pos = pos->offset;
    return 0;
}
