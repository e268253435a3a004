/* loop: `mtc-train` (train) — options, model/data/optimizer set-up, resume, the
 * step loop with gradient accumulation and data-parallel all-reduce, evaluation,
 * metrics, asynchronous checkpoints, and SIGTERM/SIGUSR1 → checkpoint + exit 75. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/train.h"

struct targs {
    const char *model, *config, *data, *ckpt_dir, *resume, *init, *log_dir, *tokenizer, *mode;
    int steps, batch, micro, seq, warmup, ckpt_every, keep, eval_every, eval_batches;
    int log_every, shuffle, seed;
    double lr, min_lr, wd, clip, dpo_beta;
    // --mode grpo
    const char *env, *env_cmd;
    int prompts, gens, max_new, inner, loo, std_norm, no_pack;
    double temperature, clip_low, clip_high, kl_beta;
};

enum otype { O_STR, O_INT, O_DBL, O_FLAG };
struct optdef {
    const char *name;
    enum otype type;
    size_t off;
    const char *help;
};

#define F(x) offsetof(struct targs, x)
static const struct optdef train_opts[] = {
    {"model", O_STR, F(model), "preset name (default tiny-gpt2)"},
    {"config", O_STR, F(config), "JSON object (or @file) of config overrides"},
    {"data", O_STR, F(data), "directory of train_*.bin / val_*.bin shards"},
    {"steps", O_INT, F(steps), "optimizer steps (default 100)"},
    {"batch", O_INT, F(batch), "global batch in sequences (default 8)"},
    {"micro-batch", O_INT, F(micro), "sequences per rank per micro-step (default batch/ranks)"},
    {"seq", O_INT, F(seq), "sequence length (default min(128, max_seq))"},
    {"lr", O_DBL, F(lr), "peak learning rate (3e-4)"},
    {"min-lr", O_DBL, F(min_lr), "final learning rate (lr/10)"},
    {"warmup", O_INT, F(warmup), "warmup steps (0)"},
    {"weight-decay", O_DBL, F(wd), "AdamW decoupled weight decay (0.1)"},
    {"grad-clip", O_DBL, F(clip), "global gradient norm clip, 0 = off (1.0)"},
    {"seed", O_INT, F(seed), "seed for init and shuffling (1337)"},
    {"shuffle", O_FLAG, F(shuffle), "shuffle windows within shards per epoch"},
    {"checkpoint-dir", O_STR, F(ckpt_dir), "where step_%08d/ checkpoints go"},
    {"checkpoint-every", O_INT, F(ckpt_every), "steps between checkpoints (0 = end only)"},
    {"keep", O_INT, F(keep), "complete checkpoints kept (3)"},
    {"resume", O_STR, F(resume), "auto | checkpoint path"},
    {"init", O_STR, F(init), "initial weights: checkpoint or HF safetensors dir"},
    {"log-dir", O_STR, F(log_dir), "metrics.jsonl + TensorBoard events (default checkpoint-dir)"},
    {"eval-every", O_INT, F(eval_every), "steps between validation passes (0 = never)"},
    {"eval-batches", O_INT, F(eval_batches), "validation batches per pass (4)"},
    {"log-every", O_INT, F(log_every), "steps between progress lines (10)"},
    {"tokenizer", O_STR, F(tokenizer), "tokenizer path recorded in checkpoints"},
    {"mode", O_STR, F(mode), "pretrain (also cpt) | sft | dpo | grpo: --data is JSONL"},
    {"dpo-beta", O_DBL, F(dpo_beta), "DPO beta (0.1)"},
    {"prompts-per-step", O_INT, F(prompts), "GRPO: prompts per step, all ranks (8)"},
    {"generations-per-prompt", O_INT, F(gens), "GRPO: completions per prompt, G (8)"},
    {"max-new-tokens", O_INT, F(max_new), "GRPO: generated tokens at most (16)"},
    {"temperature", O_DBL, F(temperature), "GRPO: sampling temperature (1.0)"},
    {"clip-low", O_DBL, F(clip_low), "GRPO: ratio clip epsilon below 1 (0.2)"},
    {"clip-high", O_DBL, F(clip_high), "GRPO: ratio clip epsilon above 1 (0.2)"},
    {"kl-beta", O_DBL, F(kl_beta), "GRPO: k3 KL penalty to the reference (0.01)"},
    {"leave-one-out", O_INT, F(loo), "GRPO: 1 leave-one-out baseline, 0 group mean (1)"},
    {"std-norm", O_INT, F(std_norm), "GRPO: 1 divide advantages by the group std (1)"},
    {"inner-steps", O_INT, F(inner), "GRPO: updates per batch of rollouts (1)"},
    {"env", O_STR, F(env), "GRPO: arithmetic | countdown | command (arithmetic)"},
    {"env-command", O_STR, F(env_cmd), "GRPO: the verifier of --env command (sh -c)"},
    {"no-pack", O_FLAG, F(no_pack),
     "GRPO: train one sequence per row padded to --seq (default: "
     "pack several per row)"},
};
#define NOPTS (int)(sizeof train_opts / sizeof train_opts[0])

static volatile sig_atomic_t g_stop;
static void on_stop(int sig)
{
    g_stop = sig;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mtc-train [train] [options]\n");
    for (int i = 0; i < NOPTS; i++)
        fprintf(f, "  --%-18s %s%s\n", train_opts[i].name,
                train_opts[i].type == O_FLAG ? "" : "X  ", train_opts[i].help);
}

static int parse_args(int argc, char **argv, struct targs *a)
{
    struct option lo[NOPTS + 2];
    for (int i = 0; i < NOPTS; i++)
        lo[i] = (struct option){train_opts[i].name,
                                train_opts[i].type == O_FLAG ? no_argument : required_argument,
                                NULL, 1000 + i};
    lo[NOPTS] = (struct option){"help", no_argument, NULL, 'h'};
    lo[NOPTS + 1] = (struct option){0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 1;
        }
        if (c < 1000) {
            usage(stderr);
            return -1;
        }
        const struct optdef *d = &train_opts[c - 1000];
        char *p = (char *)a + d->off, *end;
        switch (d->type) {
        case O_STR:
            *(const char **)p = optarg;
            break;
        case O_FLAG:
            *(int *)p = 1;
            break;
        case O_INT:
            errno = 0;
            *(int *)p = (int)strtol(optarg, &end, 10);
            if (errno || *end || end == optarg) {
                fprintf(stderr, "mtc-train: --%s wants an integer, got '%s'\n", d->name, optarg);
                return -1;
            }
            break;
        case O_DBL:
            *(double *)p = strtod(optarg, &end);
            if (*end || end == optarg) {
                fprintf(stderr, "mtc-train: --%s wants a number, got '%s'\n", d->name, optarg);
                return -1;
            }
            break;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mtc-train: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* "1 830" — thousands separated by spaces for the progress line. */
static char *fmt_int(double v, char *buf, size_t len)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%.0f", v < 0 ? 0 : v);
    size_t n = strlen(raw), o = 0;
    for (size_t i = 0; i < n && o + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            buf[o++] = ' ';
        buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

static char *fmt_dur(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60)
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%lds", t);
    return buf;
}

/* Model config from --model and --config; *explicit says whether either was given. */
static int build_config(const struct targs *a, struct model_config *cfg, mtc_error_t *err)
{
    if (model_preset(a->model ? a->model : "tiny-gpt2", cfg, err) < 0)
        return -1;
    if (a->config) {
        json_error_t je;
        json_t *o = a->config[0] == '@' ? json_load_file(a->config + 1, JSON_REJECT_DUPLICATES, &je)
                                        : json_loads(a->config, JSON_REJECT_DUPLICATES, &je);
        if (!o || !json_is_object(o)) {
            json_decref(o);
            return errprintf(err, "--config: not a JSON object: %s", o ? "" : je.text);
        }
        int rc = model_config_apply_json(cfg, o, err);
        json_decref(o);
        if (rc < 0)
            return -1;
    }
    return model_config_check(cfg, err);
}

static json_t *args_json(const struct targs *a)
{
    json_t *o =
        json_pack("{s:i,s:i,s:i,s:i,s:f,s:f,s:i,s:f,s:f,s:i,s:b,s:s?,s:s?,s:f,s:s?}", "steps",
                  a->steps, "batch", a->batch, "micro_batch", a->micro, "seq", a->seq, "lr", a->lr,
                  "min_lr", a->min_lr, "warmup", a->warmup, "weight_decay", a->wd, "grad_clip",
                  a->clip, "seed", a->seed, "shuffle", a->shuffle, "data", a->data, "mode", a->mode,
                  "dpo_beta", a->dpo_beta, "init", a->init);
    if (o && a->mode && !strcmp(a->mode, "grpo")) {
        json_t *g = json_pack(
            "{s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:i,s:i,s:s,s:s?}", "prompts_per_step", a->prompts,
            "generations_per_prompt", a->gens, "max_new_tokens", a->max_new, "inner_steps",
            a->inner, "temperature", a->temperature, "clip_low", a->clip_low, "clip_high",
            a->clip_high, "kl_beta", a->kl_beta, "leave_one_out", a->loo, "std_norm", a->std_norm,
            "env", a->env ? a->env : "arithmetic", "env_command", a->env_cmd);
        json_object_update(o, g);
        json_decref(g);
    }
    return o;
}

struct run {
    struct targs a;
    struct model_config cfg;
    struct model *m;
    struct opt_state opt;
    struct opt_config oc;
    struct loader *tl, *vl;
    struct ft *ft;     // --mode sft|dpo: JSONL data and the step (ft.c); NULL: pretrain
    struct grpo *grpo; // --mode grpo (grpo.c)
    struct loader_pos vl_start;
    struct ckpt_writer *cw;
    struct metrics *mt;
    struct tok *tk;
    int32_t *x, *y;
    int rank, nranks, accum;
    int64_t step;
    int64_t ckpt_step; // step of the newest checkpoint of this run (-1 none)
    double ckpt_s;     // the training loop's stall in checkpoints since the last metrics row
    double tokens_seen;
    float last_loss;
};

static void fill_meta(struct run *r, struct ckpt_meta *meta, json_t *train)
{
    memset(meta, 0, sizeof *meta);
    meta->step = r->step;
    meta->nranks = r->nranks;
    meta->seed = (uint64_t)r->a.seed;
    meta->tokens_seen = r->tokens_seen;
    meta->last_loss = r->last_loss;
    meta->train = train;
    snprintf(meta->tokenizer, sizeof meta->tokenizer, "%s", r->a.tokenizer ? r->a.tokenizer : "");
    struct loader_pos mine;
    if (r->ft)
        ft_get_pos(r->ft, &mine);
    else if (r->grpo)
        grpo_get_pos(r->grpo, &mine);
    else
        loader_get_pos(r->tl, &mine);
    dist_gather(&mine, meta->loader, sizeof mine);
}

/* Checkpoint the current state (all ranks call; rank 0 writes). sync waits for the disk. */
static int checkpoint(struct run *r, int sync, mtc_error_t *err)
{
    // a step's state is deterministic: one already checkpointed (periodic, then
    // SIGTERM or the end at the same step) is not rewritten
    if (!r->a.ckpt_dir || r->ckpt_step == r->step)
        return 0;
    r->ckpt_step = r->step;
    static struct ckpt_meta meta; // large (per-rank positions); one checkpoint at a time
    json_t *train = args_json(&r->a);
    fill_meta(r, &meta, train);
    int rc = 0;
    if (r->rank == 0) {
        double t0 = now_s();
        rc = sync ? ckpt_writer_save_sync(r->cw, model_params(r->m), &r->opt, &meta, err)
                  : ckpt_writer_snapshot(r->cw, model_params(r->m), &r->opt, &meta, err);
        r->ckpt_s += now_s() - t0;
    }
    json_decref(train);
    return rc;
}

static float evaluate(struct run *r, mtc_error_t *err)
{
    if (r->grpo) {
        errprintf(err, "--eval-every is not supported with --mode grpo");
        return NAN;
    }
    if (r->ft)
        return ft_evaluate(r->ft, r->m, r->a.eval_batches, err);
    if (!r->vl)
        return NAN;
    if (loader_set_pos(r->vl, &r->vl_start, err) < 0)
        return NAN;
    double sum = 0;
    for (int b = 0; b < r->a.eval_batches; b++) {
        if (loader_next(r->vl, r->x, r->y, err) < 0)
            return NAN;
        sum += model_forward(r->m, r->x, r->y, NULL, 0, r->a.micro, r->a.seq);
    }
    sum /= r->a.eval_batches;
    dist_allreduce_sum_d(&sum, 1);
    if (!isfinite(sum)) {
        errprintf(err, "validation loss is not finite at step %" PRId64, r->step);
        return NAN;
    }
    return (float)(sum / r->nranks);
}

/* Which checkpoint to resume from into resume[len] ("" none): rank 0 decides and
 * every rank gets the same path; a leading '!' carries rank 0's error so that
 * every rank stops together. 0, or -1 with err. */
static int choose_resume(struct run *r, char *resume, size_t len, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    if (a->resume && strcmp(a->resume, "auto") == 0 && !a->ckpt_dir)
        return errprintf(err, "--resume auto needs --checkpoint-dir");
    if (a->resume && r->rank == 0) {
        char meta[4200];
        snprintf(meta, sizeof meta, "%s/meta.json", a->resume);
        if (strcmp(a->resume, "auto") == 0) {
            if (ckpt_find_latest_valid(a->ckpt_dir, resume, len, err) < 0)
                snprintf(resume, len, "!%s", err->text);
        } else if (mtc_path_exists(meta)) {
            snprintf(resume, len, "%s", a->resume);
        } else if (ckpt_find_latest(a->resume, resume, len, err) != 1) {
            // a checkpoint root given as PATH resumes from its newest complete checkpoint
            snprintf(resume, len, "!--resume %s: no complete checkpoint there", a->resume);
        }
    }
    dist_bcast(resume, len);
    if (resume[0] == '!')
        return errprintf(err, "%s", resume + 1);
    return 0;
}

/* The model config: --model/--config, or the checkpoint's when resuming (which
 * must then equal any --model/--config given). */
static int resolve_config(struct run *r, const char *resume, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    struct model_config want;
    if (build_config(a, &want, err) < 0)
        return -1;
    r->cfg = want;
    if (resume[0]) {
        if (ckpt_read_config(resume, &r->cfg, err) < 0)
            return -1;
        char d[160];
        if ((a->model || a->config) && !model_config_equal(&r->cfg, &want))
            return errprintf(
                err, "--resume %s: the checkpoint's model differs from --model/--config (%s)",
                resume, interop_config_diff(&r->cfg, &want, d, sizeof d));
    }
    return 0;
}

/* --seq and --micro-batch (defaults from the model and the rank count) and the
 * gradient accumulation steps that make up --batch. */
static int resolve_shapes(struct run *r, mtc_error_t *err)
{
    struct targs *a = &r->a;
    if (a->seq <= 0)
        a->seq = r->cfg.max_seq < 128 ? r->cfg.max_seq : 128;
    if (a->seq > r->cfg.max_seq)
        return errprintf(err, "--seq %d exceeds the model's max_seq %d", a->seq, r->cfg.max_seq);
    if (a->micro <= 0)
        a->micro = a->batch / r->nranks;
    if (a->micro <= 0 || a->batch % (a->micro * r->nranks) != 0)
        return errprintf(err, "--batch %d must be a multiple of --micro-batch %d x %d ranks",
                         a->batch, a->micro, r->nranks);
    r->accum = a->batch / (a->micro * r->nranks);
    return 0;
}

/* The tokenizer, the training data (pretraining shards, or SFT/DPO JSONL by
 * --mode: *ftm, 0 for pretraining) and the validation shards. */
static int open_data(struct run *r, int *ftm, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    if (a->tokenizer) {
        r->tk = tok_load(a->tokenizer, err);
        if (!r->tk)
            return -1;
        if (tok_vocab_size(r->tk) > r->cfg.vocab_size)
            return errprintf(err, "tokenizer %s has %d ids but the model's vocab_size is %d",
                             a->tokenizer, tok_vocab_size(r->tk), r->cfg.vocab_size);
    }
    int mode = ft_mode_of(a->mode, err);
    if (mode < 0)
        return -1;
    *ftm = mode;
    if (mode == FT_GRPO) {
        return 0; // grpo_create once the model exists (its generation engine runs it)
    } else if (mode > 0) {
        struct ft_config fc = {.mode = (enum ft_mode)mode,
                               .data = a->data,
                               .tok = r->tk,
                               .micro = a->micro,
                               .accum = r->accum,
                               .seq = a->seq,
                               .rank = r->rank,
                               .nranks = r->nranks,
                               .seed = (uint64_t)a->seed,
                               .shuffle = a->shuffle,
                               .want_val = a->eval_every > 0,
                               .beta = (float)a->dpo_beta,
                               .init = a->init};
        r->ft = ft_create(&fc, &r->cfg, err);
        if (!r->ft)
            return -1;
    } else if (!(r->tl = loader_create(a->data, "train", a->micro, a->seq, r->rank, r->nranks,
                                       (uint64_t)a->seed, a->shuffle, err))) {
        return -1;
    }
    if (a->eval_every > 0 && !r->ft) {
        mtc_error_t e2;
        r->vl = loader_create(a->data, "val", a->micro, a->seq, r->rank, r->nranks, 0, 0, &e2);
        if (!r->vl)
            return errprintf(err, "--eval-every needs validation shards: %s", e2.text);
        loader_get_pos(r->vl, &r->vl_start);
    }
    return 0;
}

/* The model with fresh weights and activations for micro x seq, the optimizer
 * state and schedule, and the batch buffers x, y (micro, seq). */
static int create_model(struct run *r, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    r->m = model_create(&r->cfg, err);
    if (!r->m)
        return -1;
    if (model_reserve(r->m, a->micro, a->seq, err) < 0)
        return -1;
    model_init_weights(r->m, (uint64_t)a->seed);
    if (opt_init(&r->opt, model_nparams(r->m), err) < 0)
        return -1;
    r->x = malloc(sizeof(int32_t) * (size_t)a->micro * (size_t)a->seq);
    r->y = malloc(sizeof(int32_t) * (size_t)a->micro * (size_t)a->seq);
    if (!r->x || !r->y)
        return errprintf(err, "out of memory");

    opt_config_default(&r->oc);
    r->oc.lr = (float)a->lr;
    r->oc.min_lr = (float)a->min_lr;
    r->oc.warmup = a->warmup;
    r->oc.total_steps = a->steps;
    r->oc.weight_decay = (float)a->wd;
    r->oc.grad_clip = (float)a->clip;
    return 0;
}

/* An exact resume needs the checkpoint's batch shape, fine-tuning mode and rank count. */
static int check_resume_meta(const struct run *r, const struct ckpt_meta *meta, int ftm,
                             const char *resume, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    // the loader position counts batches of micro x ranks windows of seq
    // tokens: another shape would resume on other data
    static const char *const shape_keys[] = {"micro_batch", "seq", "batch"};
    int cur[] = {a->micro, a->seq, a->batch};
    for (int k = 0; k < 3; k++) {
        json_t *v = json_object_get(meta->train, shape_keys[k]);
        if (json_is_integer(v) && json_integer_value(v) != cur[k])
            return errprintf(err,
                             "checkpoint %s was trained with %s %lld, this run has %d "
                             "(exact resume needs the same --batch/--micro-batch/--seq)",
                             resume, shape_keys[k], (long long)json_integer_value(v), cur[k]);
    }
    if (ft_resume_check(meta->train, ftm, a->init, resume, err) < 0)
        return -1;
    if (meta->nranks != r->nranks)
        return errprintf(err,
                         "checkpoint %s was written by %d ranks, this run has %d "
                         "(exact resume needs the same count)",
                         resume, meta->nranks, r->nranks);
    return 0;
}

/* Weights, optimizer moments, data position and counters from the checkpoint
 * being resumed, else initial weights from --init, if any. */
static int restore_state(struct run *r, const char *resume, int ftm, mtc_error_t *err)
{
    r->step = 0;
    r->ckpt_step = -1;
    if (!resume[0])
        return r->a.init ? interop_load_weights(r->m, r->a.init, err) : 0;
    static struct ckpt_meta meta;
    if (ckpt_load(resume, model_params(r->m), model_nparams(r->m), &r->opt, &meta, err) < 0)
        return -1;
    int rc = check_resume_meta(r, &meta, ftm, resume, err);
    json_decref(meta.train);
    if (rc < 0)
        return -1;
    if ((r->ft     ? ft_set_pos(r->ft, &meta.loader[r->rank], err)
         : r->grpo ? grpo_set_pos(r->grpo, &meta.loader[r->rank], err)
                   : loader_set_pos(r->tl, &meta.loader[r->rank], err)) < 0)
        return -1;
    r->step = r->ckpt_step = meta.step;
    r->tokens_seen = meta.tokens_seen;
    r->last_loss = meta.last_loss;
    if (r->rank == 0)
        fprintf(stderr, "mtc-train: resuming from %s (step %" PRId64 ")\n", resume, r->step);
    return 0;
}

/* Rank 0 writes the checkpoints and the metrics (continuing after a resumed step). */
static int open_outputs(struct run *r, const char *resume, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    if (r->rank == 0 && a->ckpt_dir) {
        r->cw = ckpt_writer_create(a->ckpt_dir, &r->cfg, model_nparams(r->m), a->keep, err);
        if (!r->cw)
            return -1;
    }
    if (r->rank == 0 && a->log_dir) {
        r->mt = metrics_create(a->log_dir, resume[0] ? r->step : -1, err);
        if (!r->mt)
            return -1;
    }
    return 0;
}

/* --mode grpo: prompts, environment, reference model and generation engine. */
static int create_grpo(struct run *r, mtc_error_t *err)
{
    const struct targs *a = &r->a;
    if (a->eval_every > 0)
        return errprintf(err, "--eval-every is not supported with --mode grpo");
    struct grpo_config c;
    grpo_config_default(&c);
    c.data = a->data;
    c.tok = r->tk;
    c.prompts = a->prompts;
    c.gens = a->gens;
    c.micro = a->micro;
    c.seq = a->seq;
    c.max_new = a->max_new;
    c.inner = a->inner;
    c.rank = r->rank;
    c.nranks = r->nranks;
    c.seed = (uint64_t)a->seed;
    c.shuffle = a->shuffle;
    c.temperature = (float)a->temperature;
    c.eps_low = (float)a->clip_low;
    c.eps_high = (float)a->clip_high;
    c.beta = (float)a->kl_beta;
    c.leave_one_out = a->loo;
    c.std_norm = a->std_norm;
    c.env = a->env;
    c.env_cmd = a->env_cmd;
    c.pack = !a->no_pack;
    r->grpo = grpo_create(&c, r->m, err);
    return r->grpo ? 0 : -1;
}

/* Set-up: config, model, data, optimizer, resume. 0, or -1 with err. */
static int setup(struct run *r, mtc_error_t *err)
{
    struct targs *a = &r->a;
    r->rank = dist_rank();
    r->nranks = dist_size();
    if (r->nranks > TRAIN_MAX_RANKS)
        return errprintf(err, "at most %d ranks", TRAIN_MAX_RANKS);
    if (!a->data)
        return errprintf(err, "--data DIR is required (shards from `mtc-train prepare`)");
    if (!a->log_dir)
        a->log_dir = a->ckpt_dir;
    char resume[4096] = "";
    int ftm = 0;
    if (a->mode && !strcmp(a->mode, "grpo"))
        a->batch = a->prompts * a->gens; // the sequences of a step, all ranks
    if (choose_resume(r, resume, sizeof resume, err) < 0 || resolve_config(r, resume, err) < 0 ||
        resolve_shapes(r, err) < 0 || open_data(r, &ftm, err) < 0 || create_model(r, err) < 0 ||
        (ftm == FT_GRPO && create_grpo(r, err) < 0) || restore_state(r, resume, ftm, err) < 0 ||
        (r->grpo && grpo_reference_init(r->grpo, r->m, resume, a->ckpt_dir, r->rank, err) < 0))
        return -1;
    return open_outputs(r, resume, err);
}

static void teardown(struct run *r)
{
    ckpt_writer_destroy(r->cw);
    metrics_destroy(r->mt);
    loader_destroy(r->tl);
    ft_destroy(r->ft);
    grpo_destroy(r->grpo);
    loader_destroy(r->vl);
    opt_release(&r->opt);
    model_destroy(r->m);
    tok_destroy(r->tk);
    free(r->x);
    free(r->y);
}

/* One optimizer step: accumulate, all-reduce, clip, update. Returns the loss (NaN on error). */
static float train_step(struct run *r, double *gnorm, float *lr, mtc_error_t *err)
{
    struct targs *a = &r->a;
    if (r->grpo) {
        double l = 0;
        return grpo_step(r->grpo, r->m, &r->opt, &r->oc, r->step, &l, gnorm, lr, err) < 0
                   ? NAN
                   : (float)l;
    }
    model_zero_grad(r->m);
    // every micro-batch's loss is divided by the tokens of the whole global batch,
    // so summing gradients over micro-steps and ranks gives the global mean
    float norm = (float)a->batch * (float)a->seq;
    double loss = 0;
    if (r->ft && ft_accumulate(r->ft, r->m, &loss, err) < 0)
        return NAN;
    for (int k = 0; !r->ft && k < r->accum; k++) {
        if (loader_next(r->tl, r->x, r->y, err) < 0)
            return NAN;
        errno = 0;
        float l = model_forward(r->m, r->x, r->y, NULL, norm, a->micro, a->seq);
        if (isnan(l) && errno == EINVAL) {
            errprintf(
                err,
                "model forward rejected the batch: token id >= vocab_size %d or seq > max_seq "
                "(tokenizer/data do not match the model)",
                r->cfg.vocab_size);
            return NAN;
        }
        model_backward(r->m, NULL);
        loss += l;
    }
    if (dist_allreduce_sum(model_grads(r->m), model_nparams(r->m)) < 0 ||
        dist_allreduce_sum_d(&loss, 1) < 0) {
        errprintf(err, "MPI all-reduce failed");
        return NAN;
    }
    if (!isfinite(loss)) {
        errprintf(err, "loss is not finite at step %" PRId64 " (lower --lr?)", r->step + 1);
        return NAN;
    }
    *gnorm = opt_clip(model_grads(r->m), model_nparams(r->m), r->oc.grad_clip);
    *lr = opt_lr(&r->oc, r->step);
    opt_step(&r->opt, &r->oc, r->m, *lr);
    return (float)loss;
}

static int run_loop(struct run *r, mtc_error_t *err)
{
    struct targs *a = &r->a;
    double peak = 0;
    if (r->rank == 0) // at the model's widest product: a micro-batch's tokens x d_ff x d_model
        peak = train_peak_flops(a->micro * a->seq, model_cfg(r->m)->d_ff,
                                model_cfg(r->m)->d_model);
    dist_bcast(&peak, sizeof peak);
    double fpt = model_flops_per_token(r->m, a->seq);
    double t_start = now_s(), t_last = t_start;
    int64_t first = r->step, last_logged = r->step;
    double tok_per_step = (double)a->batch * a->seq;
    while (r->step < a->steps) {
        double gnorm = 0;
        float lr = 0;
        float loss = train_step(r, &gnorm, &lr, err);
        if (isnan(loss))
            return -1;
        r->step++;
        r->tokens_seen += tok_per_step;
        r->last_loss = loss;
        double t = now_s();
        double tps = tok_per_step / (t - t_last > 1e-9 ? t - t_last : 1e-9);
        t_last = t;
        double mfu = train_mfu(tps * fpt / r->nranks, &peak); // <= 1: raises a low peak
        json_t *f = json_pack("{s:f,s:f,s:f,s:f,s:f}", "loss", (double)loss, "lr", (double)lr,
                              "grad_norm", gnorm, "tokens_per_s", tps, "mfu", mfu);
        /* the wall clock and the checkpoints' stall: goodput's breakdown (experiment/breakdown.c) */
        json_object_set_new(f, "time", json_real((double)mtc_now_ms() / 1000.0));
        if (r->ckpt_s > 0)
            json_object_set_new(f, "checkpoint_s", json_real(r->ckpt_s));
        r->ckpt_s = 0;
        ft_metrics(r->ft, f);
        grpo_metrics(r->grpo, f);
        if (a->eval_every > 0 && (r->step % a->eval_every == 0 || r->step == a->steps)) {
            float vl = evaluate(r, err);
            if (isnan(vl)) {
                json_decref(f);
                return -1;
            }
            json_object_set_new(f, "val_loss", json_real(vl));
        }
        if (r->mt && metrics_log(r->mt, r->step, f) < 0)
            log_msg(LOG_WARNING, "cannot write metrics: %s", strerror(errno));
        json_decref(f);
        if (r->rank == 0 && (r->step - last_logged >= a->log_every || r->step == a->steps ||
                             r->step == first + 1)) {
            char b1[32], b2[32], gs[96] = "";
            double per = (t - t_start) / (double)(r->step - first);
            if (r->grpo)
                grpo_summary(r->grpo, gs, sizeof gs);
            fprintf(stdout,
                    "step %" PRId64
                    "/%d | loss %.4f%s | lr %.1e | %s tok/s | MFU %.0f%% | ETA %s\n",
                    r->step, a->steps, loss, gs, lr, fmt_int(tps, b1, sizeof b1), mfu * 100,
                    fmt_dur(per * (double)(a->steps - r->step), b2, sizeof b2));
            last_logged = r->step;
            fflush(stdout);
        }
        // every rank must see the signal to checkpoint together
        double stop = g_stop ? 1 : 0;
        dist_allreduce_sum_d(&stop, 1);
        if (stop > 0) {
            if (r->rank == 0)
                fprintf(stderr,
                        "mtc-train: signal received, checkpointing at step %" PRId64
                        " and exiting %d (requeue)\n",
                        r->step, TRAIN_EXIT_REQUEUE);
            if (checkpoint(r, 1, err) < 0)
                return -1;
            return TRAIN_EXIT_REQUEUE;
        }
        if (a->ckpt_every > 0 && r->step % a->ckpt_every == 0 && r->step < a->steps &&
            checkpoint(r, 0, err) < 0)
            return -1;
    }
    // the async checkpoints' stall so far, then the final one written synchronously:
    // the two figures bench/train_ckpt.sh compares
    double ws0 = 0, ss0 = 0, wt0 = 0;
    int n0 = 0;
    if (r->rank == 0 && r->cw && ckpt_writer_wait(r->cw, err) == 0)
        ckpt_writer_stats(r->cw, &ws0, &ss0, &wt0, &n0);
    double t0 = now_s();
    if (checkpoint(r, 1, err) < 0)
        return -1;
    double sync_s = now_s() - t0;
    if (r->rank == 0)
        fprintf(stderr, "mtc-train: done, %" PRId64 " steps, final loss %.4f\n", r->step,
                r->last_loss);
    if (r->rank == 0 && r->cw && n0 > 0) {
        double mb = 3.0 * (double)model_nparams(r->m) * sizeof(float) / 1e6;
        fprintf(stderr,
                "mtc-train: checkpoints: %d async, stall %.4f s each (snapshot copy %.4f s, "
                "waiting for the previous write %.4f s; %.2f s written in the background); "
                "final synchronous write %.3f s (%.1f MB, %.0f MB/s)\n",
                n0, ss0 / n0, (ss0 - wt0) / n0, wt0 / n0, ws0, sync_s, mb,
                mb / (sync_s > 0 ? sync_s : 1e-9));
    }
    return 0;
}

int train_main(int argc, char **argv)
{
    static struct run r; // zeroed; large
    struct targs *a = &r.a;
    a->steps = 100;
    a->batch = 8;
    a->lr = 3e-4;
    a->min_lr = -1;
    a->wd = 0.1;
    a->clip = 1.0;
    a->seed = 1337;
    a->keep = 3;
    a->eval_batches = 4;
    a->log_every = 10;
    a->dpo_beta = 0.1;
    struct grpo_config gd;
    grpo_config_default(&gd);
    a->prompts = gd.prompts;
    a->gens = gd.gens;
    a->max_new = gd.max_new;
    a->inner = gd.inner;
    a->temperature = gd.temperature;
    a->clip_low = gd.eps_low;
    a->clip_high = gd.eps_high;
    a->kl_beta = gd.beta;
    a->loo = gd.leave_one_out;
    a->std_norm = gd.std_norm;
    int pa = parse_args(argc, argv, a);
    if (pa != 0)
        return pa < 0 ? 2 : 0;
    if (a->min_lr < 0)
        a->min_lr = a->lr / 10;
    mtc_error_t err = {{0}};
    if (dist_init(&argc, &argv, &err) < 0) {
        fprintf(stderr, "mtc-train: %s\n", err.text);
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    int rc = setup(&r, &err);
    // set-up failures on any rank stop every rank
    double bad = rc < 0 ? 1 : 0;
    dist_allreduce_sum_d(&bad, 1);
    if (rc == 0 && bad > 0) {
        rc = -1;
        snprintf(err.text, sizeof err.text, "set-up failed on another rank");
    }
    if (rc == 0) {
        rc = run_loop(&r, &err);
        // the other ranks may be inside a collective waiting for this one
        if (rc < 0 && dist_size() > 1) {
            fprintf(stderr, "mtc-train: rank %d: %s\n", dist_rank(), err.text);
            dist_abort(1);
        }
    }
    if (rc < 0)
        fprintf(stderr, "mtc-train: %s\n", err.text);
    teardown(&r);
    dist_finalize();
    return rc < 0 ? 1 : rc;
}
