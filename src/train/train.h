/* train: the training loop's interface — AdamW optimizer and schedule (opt_),
 * checkpoints with asynchronous writes and exact resume (ckpt_), data-parallel
 * MPI helpers (dist_), metrics (metrics_), HF/llm.c interop (interop_), sampling
 * and the training driver itself (train_). Model and data live in model.h/data.h. */
#ifndef MTC_TRAIN_H
#define MTC_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/common.h"
#include "train/data.h"
#include "train/model.h"

/* Checkpoints record each rank's loader position; more ranks than this is an error. */
#define TRAIN_MAX_RANKS 256

/* Exit status of mtc-train after SIGTERM/SIGUSR1: a checkpoint was written,
 * requeue the job and run it again with --resume auto (EX_TEMPFAIL). */
#define TRAIN_EXIT_REQUEUE 75

/* ---- optimizer (optim.c) ---- */

struct opt_config {
    float lr, min_lr;     // peak and final learning rate
    int64_t warmup;       // linear warmup steps (lr ramps from lr/warmup to lr)
    int64_t total_steps;  // cosine decays from lr at step `warmup` to min_lr at total_steps
    float beta1, beta2, eps;
    float weight_decay;   // decoupled (AdamW); only tensors with model_tensor.decay
    float grad_clip;      // global L2 norm; <= 0 disables
};
/* Defaults: lr 3e-4, min_lr 3e-5, warmup 0, beta 0.9/0.95, eps 1e-8, wd 0.1, clip 1.0. */
void opt_config_default(struct opt_config *c);

/* Learning rate at optimizer step `step` (0-based): warmup then cosine to min_lr. */
float opt_lr(const struct opt_config *c, int64_t step);

/* Global L2 norm of g[0..n), computed in double over fixed chunks so the result
 * does not depend on the number of threads. */
double opt_grad_norm(const float *g, size_t n);
/* Clip g in place to global norm max_norm (<= 0: no clipping). Returns the norm
 * before clipping. */
double opt_clip(float *g, size_t n, float max_norm);

/* AdamW moments. opt_init allocates zeroed m, v for n parameters (0/-1). */
struct opt_state {
    size_t n;
    float *m, *v;  // (n) first and second moments, layout of the parameters
    int64_t t;     // updates applied so far (bias correction uses t+1)
};
int opt_init(struct opt_state *s, size_t n, mtc_error_t *err);
void opt_release(struct opt_state *s);

/* One AdamW update of p[0..n) with gradients g at learning rate lr; weight
 * decay applied when decay != 0. Does not advance s->t (opt_step does). */
void opt_adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr,
                      const struct opt_config *c, int decay, int64_t t);
/* Update every tensor of the model from its gradients (per-tensor decay flag),
 * then s->t++. */
void opt_step(struct opt_state *s, const struct opt_config *c, struct model *m, float lr);

/* ---- distributed (dist.c) ---- */

/* Starts MPI when the process was launched by mpirun/srun (OMPI_*, PMIX_* or PMI_*
 * in the environment); a plain run is rank 0 of 1 without MPI. 0/-1. */
int dist_init(int *argc, char ***argv, mtc_error_t *err);
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);
/* Sum x[0..n) over ranks in place (buckets of <= 16M floats). No-op on 1 rank. */
int dist_allreduce_sum(float *x, size_t n);
/* Same for doubles (loss, flags). */
int dist_allreduce_sum_d(double *x, int n);
/* Broadcast from rank 0. */
int dist_bcast(void *buf, size_t nbytes);
/* Gather nbytes from each rank into out (dist_size()*nbytes) on rank 0. */
int dist_gather(const void *in, void *out, size_t nbytes);
void dist_barrier(void);
/* After an error on this rank: end every rank (they may wait in a collective). */
void dist_abort(int code);

/* ---- checkpoints (ckpt.c) ---- */

/* Everything beyond the arrays that exact resume needs. */
struct ckpt_meta {
    int64_t step;            // optimizer steps completed
    int nranks;
    struct loader_pos loader[TRAIN_MAX_RANKS];  // per-rank train loader positions
    uint64_t seed;
    double tokens_seen;
    float last_loss;
    json_t *train;           // training hyper-parameters (owned by caller; borrowed)
    char tokenizer[1024];    // reference (path) given with --tokenizer, "" if none
};

/* Synchronous save into dir/step_%08d: files are written under a temporary name,
 * fsynced, renamed, then DONE is written. opt may be NULL (weights only). */
int ckpt_save(const char *dir, const struct model_config *cfg, const float *params,
              size_t nparams, const struct opt_state *opt, const struct ckpt_meta *meta, mtc_error_t *err);

/* Load a checkpoint directory (step_XXXXXXXX). cfg_out gets its model config;
 * params_out/opt may be NULL to skip; sizes are checked against nparams.
 * Checksums are verified; a corrupt checkpoint is an error naming the file. */
int ckpt_read_config(const char *ckdir, struct model_config *cfg_out, mtc_error_t *err);
int ckpt_load(const char *ckdir, float *params, size_t nparams, struct opt_state *opt,
              struct ckpt_meta *meta, mtc_error_t *err);
/* Newest complete (DONE, valid meta) step_ directory under dir into out.
 * Returns 1 found, 0 none, -1 error. Incomplete ones are skipped with a log line. */
int ckpt_find_latest(const char *dir, char *out, size_t outlen, mtc_error_t *err);
/* Read a checkpoint's files and check sizes and checksums (chunked; no model
 * needed). 0, or -1 with err naming the bad file. */
int ckpt_verify(const char *ckdir, mtc_error_t *err);
/* Like ckpt_find_latest, but also skips (with a warning) checkpoints that fail
 * ckpt_verify: what --resume auto uses, so a corrupted newest checkpoint falls
 * back to the previous one. */
int ckpt_find_latest_valid(const char *dir, char *out, size_t outlen, mtc_error_t *err);
/* Delete all but the newest `keep` complete checkpoints and stale temporaries. */
int ckpt_prune(const char *dir, int keep);

/* Asynchronous writer: ckpt_writer_snapshot copies params and moments into a
 * staging buffer (the only cost to the step loop) and a thread writes them.
 * A snapshot while a write is in flight waits for it first. */
struct ckpt_writer;
struct ckpt_writer *ckpt_writer_create(const char *dir, const struct model_config *cfg,
                                       size_t nparams, int keep, mtc_error_t *err);
int ckpt_writer_snapshot(struct ckpt_writer *w, const float *params, const struct opt_state *opt,
                         const struct ckpt_meta *meta, mtc_error_t *err);
/* Synchronous checkpoint through the same directory/keep policy: waits for a
 * pending write, then writes params/opt on the calling thread. 0/-1. */
int ckpt_writer_save_sync(struct ckpt_writer *w, const float *params, const struct opt_state *opt,
                          const struct ckpt_meta *meta, mtc_error_t *err);
/* Wait until the pending write (if any) is on disk. Returns -1 if it failed. */
int ckpt_writer_wait(struct ckpt_writer *w, mtc_error_t *err);
/* Seconds spent writing (thread and sync saves), by callers in snapshot (stall),
 * and the part of the stall spent waiting for the previous write; writes done.
 * Any pointer may be NULL. */
void ckpt_writer_stats(const struct ckpt_writer *w, double *write_s, double *stall_s,
                       double *wait_s, int *count);
void ckpt_writer_destroy(struct ckpt_writer *w);

/* ---- metrics (metrics.c) ---- */

struct metrics;
/* Opens log_dir/metrics.jsonl (appending) and a TensorBoard event file. When
 * resume_step >= 0 lines for later steps (written after that checkpoint by a run
 * that was interrupted) are dropped first. */
struct metrics *metrics_create(const char *log_dir, int64_t resume_step, mtc_error_t *err);
/* One JSON object per line; every numeric field also goes to TensorBoard as
 * "train/<key>" (or "val/<key>" for val_*). */
int metrics_log(struct metrics *mt, int64_t step, json_t *fields);
void metrics_destroy(struct metrics *mt);

/* ---- interop (interop.c) ---- */

/* Write model.safetensors + config.json (HF names, GPT-2 Conv1D transposed). */
int interop_export_hf(const struct model *m, const char *outdir, mtc_error_t *err);
/* Read an HF directory (config.json + model.safetensors) into a new model. When
 * want is non-NULL its shape must match (error otherwise). Caller destroys. */
struct model *interop_import_hf(const char *dir, const struct model_config *want,
                                mtc_error_t *err);
/* Write m as an llm.c GPT-2 model file (header 20240326, version 3, fp32) at
 * path (via path.tmp + rename): the inverse of interop_import_llmc. A model
 * llm.c cannot hold (Llama, other GPT-2 variants) is an error naming the
 * difference. 0/-1 + err. */
int interop_export_llmc(const struct model *m, const char *path, mtc_error_t *err);
/* Read an llm.c GPT-2 model file (header 20240326, fp32). */
struct model *interop_import_llmc(const char *path, const struct model_config *want,
                                  mtc_error_t *err);
/* Model with the weights of a checkpoint (a step_ dir, or a root: its newest complete
 * one; the chosen dir goes to dir). Caller destroys. */
struct model *interop_load_checkpoint(const char *arg, char *dir, size_t dlen, mtc_error_t *err);
/* Load weights into m from a checkpoint (dir or root), an HF dir (config.json +
 * model.safetensors) or an llm.c model file; shapes must match m (for --init). */
int interop_load_weights(struct model *m, const char *path, mtc_error_t *err);

/* Human text naming the fields where got and want differ ("family gpt2 vs llama,
 * n_layer 2 vs 4") into buf; returns buf. */
char *interop_config_diff(const struct model_config *got, const struct model_config *want,
                          char *buf, size_t len);

/* ---- sampling (sample.c) ---- */

/* Generate up to ntok tokens after prompt ids (temperature 0 = greedy). Returns
 * the new ids (caller frees) and their count in *nout. */
int32_t *sample_generate(struct model *m, const int32_t *prompt, size_t nprompt, int ntok,
                         float temperature, uint64_t seed, int eot, size_t *nout,
                         mtc_error_t *err);

/* ---- fine-tuning: SFT and DPO on JSONL (chat.c, ft.c, sft.c, dpo.c; docs/trainer.md) ---- */

/* A rendered example: ids (n) and per-token flags, 1 where the token belongs to a
 * trained assistant turn (its log-prob counts), else 0. Caller-owned; release frees. */
struct chat_seq {
    int32_t *ids;
    uint8_t *train;
    size_t n, cap;
};
void chat_seq_release(struct chat_seq *s);
/* Render messages [{"role":"system"|"user"|"assistant","content":"..."}...] with the chat
 * template (Llama 3 headers when the tokenizer has <|start_header_id|>, <|end_header_id|>
 * and <|eot_id|>, else plain "<|role|>\n" text markers and <|endoftext|> after each
 * assistant turn). Trains every assistant turn, or only the last one when last_only.
 * s is reset first. 0, or -1 with err. */
int chat_render(const struct tok *t, const json_t *messages, int last_only, struct chat_seq *s,
                mtc_error_t *err);
/* The prompt of a conversation to continue (mtc-serve's chat completions): the messages
 * with the same template (no assistant turn needed; nothing is flagged trained), then the
 * header of the assistant's turn. 0, or -1 with err. */
int chat_render_prompt(const struct tok *t, const json_t *messages, struct chat_seq *s,
                       mtc_error_t *err);
/* The same template in Jinja, as Hugging Face's tokenizer_config.json keeps it
 * (chat_template): malloc'd (caller frees), NULL when the tokenizer has none (no
 * end-of-text token for the plain template). */
char *chat_template_jinja(const struct tok *t);
/* One SFT line: {"prompt","response"} or {"messages":[...]} (other keys ignored). */
int chat_parse_sft(const struct tok *t, const json_t *obj, struct chat_seq *s, mtc_error_t *err);
/* One DPO line: {"prompt","chosen","rejected"}; chosen/rejected are strings (answers to
 * the prompt) or messages arrays (whole conversations; the last assistant turn counts). */
int chat_parse_dpo(const struct tok *t, const json_t *obj, struct chat_seq *chosen,
                   struct chat_seq *rejected, mtc_error_t *err);
/* Cut the same number of tokens from the left of every seq so that none is longer than
 * maxlen; -1 with err when a response would lose its first token or its context. */
int chat_truncate(struct chat_seq **seqs, int nseq, size_t maxlen, mtc_error_t *err);

enum ft_mode { FT_SFT = 1, FT_DPO = 2, FT_GRPO = 3 };
struct ft_config {
    enum ft_mode mode;
    const char *data;       // a JSONL file, or a directory with train.jsonl (+ val.jsonl)
    const struct tok *tok;  // borrowed for ft_create only
    int micro, accum, seq;  // examples per rank per micro-step, micro-steps per step, T
    int rank, nranks;
    uint64_t seed;
    int shuffle;            // permute the examples per epoch from seed
    int want_val;           // load the validation file (error when missing)
    float beta;             // DPO β
    const char *init;       // DPO reference weights (checkpoint/HF dir); NULL: init from seed
};
struct ft;
/* --mode: NULL, "pretrain" or "cpt" → 0 (token shards; cpt is pretraining from --init),
 * "sft" → FT_SFT, "dpo" → FT_DPO, "grpo" → FT_GRPO (grpo.c); anything else -1 with err. */
int ft_mode_of(const char *mode, mtc_error_t *err);
/* On resume: the checkpoint's recorded options (meta "train") must have the same mode
 * and, for DPO, the same --init (the reference model). 0, or -1 with err naming ckdir. */
int ft_resume_check(const json_t *train, int mode, const char *init, const char *ckdir,
                    mtc_error_t *err);
/* Load and tokenize the whole data set (every rank holds all of it); for DPO also build
 * the frozen reference model (config mc) from c->init. c is copied (its strings are
 * borrowed and must outlive f). Caller destroys with ft_destroy. NULL with err
 * ("file:line: why" for bad input). */
struct ft *ft_create(const struct ft_config *c, const struct model_config *mc, mtc_error_t *err);
void ft_destroy(struct ft *f);
/* One optimizer step's forward/backward over this rank's share of the next global batch
 * (accum micro-steps), ACCUMULATING into m's gradients. *loss gets this rank's part of the
 * global loss (the sum over ranks is the loss): SFT divides by the response tokens of the
 * whole global batch; DPO averages over its pairs. 0, or -1 with err. */
int ft_accumulate(struct ft *f, struct model *m, double *loss, mtc_error_t *err);
/* Mean validation loss over nbatches global batches from the start of val (all ranks
 * call; all-reduced). NAN with err. */
float ft_evaluate(struct ft *f, struct model *m, int nbatches, mtc_error_t *err);
/* Add the last step's mode metrics to fields (DPO: rewards/chosen, rewards/rejected,
 * rewards/accuracy, rewards/margin — means over the global batch). */
void ft_metrics(const struct ft *f, json_t *fields);
/* Data position (offset = examples consumed, the same on every rank). */
void ft_get_pos(const struct ft *f, struct loader_pos *pos);
int ft_set_pos(struct ft *f, const struct loader_pos *pos, mtc_error_t *err);
/* Examples in the training set; the DPO reference model (NULL for SFT), owned by f. */
size_t ft_size(const struct ft *f);
const struct model *ft_reference(const struct ft *f);
/* DPO loss for one pair from summed response log-probs (policy chosen/rejected,
 * reference chosen/rejected): -log σ(β((pc-rc)-(pr-rr))); *dz gets dL/dz where
 * z = β((pc-rc)-(pr-rr)). */
double dpo_pair_loss(double beta, double pc, double pr, double rc, double rr, double *dz);

/* ---- GRPO: group relative policy optimisation (grpo.c, grpo_env.c; docs/rl.md) ---- */

#define GRPO_ENV_COMMAND 100 /* grpo_env_of("command"): the user's verifier, a command */
struct grpo_config {
    const char *data;      // prompts: a JSONL file, or a directory with train.jsonl, of
                           // {"prompt","answer"} (other keys ignored)
    const struct tok *tok; // borrowed; renders prompts as chat, decodes completions
    int prompts, gens;     // num_prompts_per_step (global), num_generations_per_prompt (G)
    int micro, seq;        // training rows per micro-step; T (prompt + completion <= T+1)
    int max_new;           // generated tokens at most
    int inner;             // optimizer updates per batch of rollouts (1: on-policy)
    int rank, nranks;
    uint64_t seed;
    int shuffle;
    float temperature;
    float eps_low, eps_high; // ratio clipped to [1-eps_low, 1+eps_high]
    float beta, kl_clamp;    // β of the k3 KL penalty; its value clamped to kl_clamp
    int leave_one_out;       // baseline: mean of the other G-1 rewards (else the group mean)
    int std_norm;            // divide advantages by the group's std when it is > 0
    const char *env;         // "arithmetic" | "countdown" | "command"
    const char *env_cmd;     // the command (sh -c) of env "command"
    int pack;                // 1: training rows hold several sequences (first fit into --seq);
                             // 0 (--no-pack): one sequence per row, padded to --seq
};
/* NeMo-RL's defaults where they apply (docs/rl.md): G 8 (NeMo-RL 16), P 8 (32), β 0.01,
 * ε 0.2/0.2, leave-one-out and std normalization on, temperature 1, 16 new tokens; packing
 * on. */
void grpo_config_default(struct grpo_config *c);
struct grpo;
/* Load and render the prompts, the frozen reference model and a generation engine over
 * policy (borrowed; must outlive g). c is copied (strings borrowed). NULL with err. */
struct grpo *grpo_create(const struct grpo_config *c, struct model *policy, mtc_error_t *err);
void grpo_destroy(struct grpo *g);
/* The reference weights: on resume those saved next to the resumed checkpoint
 * (<root>/reference/), else a copy of policy's (after --init) which rank 0 writes to
 * <ckpt_dir>/reference/ for later resumes. 0, or -1 with err. */
int grpo_reference_init(struct grpo *g, struct model *policy, const char *resume,
                        const char *ckpt_dir, int rank, mtc_error_t *err);
/* One GRPO step: rollouts, rewards, advantages, then c.inner clipped updates of m with
 * AdamW (gradients all-reduced, clipped to oc->grad_clip). *loss = the global loss of the
 * first update. 0, or -1 with err (an environment failing on any rank fails every rank). */
int grpo_step(struct grpo *g, struct model *m, struct opt_state *opt, const struct opt_config *oc,
              int64_t step, double *loss, double *gnorm, float *lr, mtc_error_t *err);
/* The last step's metrics (reward_mean, reward_std, accuracy, kl, clip_fraction,
 * response_length, entropy, gen_tokens_per_s, train_tokens_per_s, ...) into f; a short
 * " | reward … | acc …" for the progress line; completion i of the last step (borrowed). */
void grpo_metrics(const struct grpo *g, json_t *f);
void grpo_summary(const struct grpo *g, char *buf, size_t len);
const char *grpo_completion(const struct grpo *g, int i);
/* Data position: prompts consumed (offset). */
void grpo_get_pos(const struct grpo *g, struct loader_pos *pos);
int grpo_set_pos(struct grpo *g, const struct loader_pos *pos, mtc_error_t *err);
/* The loss of one generated token: max(-A·r, -A·clip(r, 1-ε_lo, 1+ε_hi)) + β·k3, r =
 * exp(lp - lp_old), k3 = exp(x) - x - 1, x = lp_ref - lp. *dlp = d(loss)/d(lp); *clipped
 * when the clipped branch was taken; *kl the (clamped) k3. */
double grpo_token_loss(double lp, double lp_old, double lp_ref, double adv,
                       const struct grpo_config *c, double *dlp, int *clipped, double *kl);
/* Forward rows x,y (B,T) with mask w (1 on generated targets) through m — packed rows
 * when pos (B,T) gives each token's position in its sequence (model_forward_packed), else
 * NULL; adv (B,T) is each token's advantage (its sequence's); st[0] += sum of token losses
 * / norm, st[1] += k3, st[2] += clipped tokens, st[3] = max |ratio - 1|; with backward, the
 * gradient is ACCUMULATED into m's. lp, dlogp: (B,T) scratch. 0/-1. */
int grpo_loss_batch(struct model *m, const int32_t *x, const int32_t *y, const int32_t *pos,
                    const float *w, const float *lp_old, const float *lp_ref, const float *adv,
                    int B, int T, double norm, const struct grpo_config *c, int backward, float *lp,
                    float *dlogp, double st[4], mtc_error_t *err);
/* Advantages of n rewards in groups of G (n a multiple of G). Identical rewards in a
 * group give exactly 0. */
void grpo_advantages(const float *reward, int n, int G, int leave_one_out, int std_norm,
                     float *adv);
/* Environments: index of a built-in by name, GRPO_ENV_COMMAND for "command", or -1 with
 * err. grpo_env_rewards scores n completions (reward[i], correct[i]); for the command env,
 * cmd gets JSONL {"prompt","answer","completion"} on stdin and must print n lines
 * {"reward": number[, "correct": bool]} and exit 0, else -1 with one line in err. */
int grpo_env_of(const char *name, mtc_error_t *err);
int grpo_env_rewards(int env, const char *cmd, int n, const char *const *prompt,
                     const char *const *answer, const char *const *completion, float *reward,
                     int *correct, mtc_error_t *err);

/* ---- driver (loop.c) ---- */

/* Subcommand mains (argv[0] is the subcommand name). Return the process exit status.
 * The usages as data.h says of its subcommands'. */
extern const char train_export_usage[], train_import_usage[], train_sample_usage[];
int train_main(int argc, char **argv);
int train_export_main(int argc, char **argv);
int train_import_main(int argc, char **argv);
int train_sample_main(int argc, char **argv);

/* ---- MFU (mfu.c) ---- */

/* Peak FLOP/s per rank for MFU: $MTC_PEAK_FLOPS when set, else the best rate of sgemm calls
 * through the model's matmul path (OpenMP blocks, the threads training uses), for at least
 * 0.1 s and 3 calls per shape: a 512^3 cube and, when m, n, k > 0, the model's own product
 * (m tokens of a micro-batch, n = d_ff, k = d_model; fewer rows when one call is big). The
 * higher of the two; 1e11 when nothing could be measured. An estimate: train_mfu raises it. */
double train_peak_flops(int m, int n, int k);
/* The MFU of a step that achieved `achieved` FLOP/s per rank, against *peak (FLOP/s per
 * rank): a step faster than *peak shows the peak was underestimated (measured while the
 * machine was busy), so *peak is raised to the achieved rate and that step's MFU is 1 —
 * never more. 0 when achieved or *peak is not positive. */
double train_mfu(double achieved, double *peak);

#endif
