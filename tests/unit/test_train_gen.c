/* test_train_gen: the KV-cache decode and the generation engine — cached logits equal a
 * full forward (GPT-2, Llama, Gemma 2 and Gemma 3 with an 8-token sliding window, soft-caps
 * and QK-norm, prompts read in chunks and tokens one at a time, two
 * sequences in one step), greedy and seeded generation equal mtc-train sample (no cache)
 * token for token, and a request's tokens do not depend on what else is in the batch. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/gen.h"
#include "train/train.h"

static struct model *tiny(enum model_family fam, uint64_t seed)
{
    static const char *const preset[] = {[MODEL_GPT2] = "tiny-gpt2", [MODEL_LLAMA] = "tiny-llama",
                                         [MODEL_GEMMA2] = "tiny-gemma2",
                                         [MODEL_GEMMA3] = "tiny-gemma3"};
    struct model_config c;
    model_preset(preset[fam], &c, NULL);
    c.vocab_size = 300;
    c.padded_vocab = 0;
    c.n_layer = 2;
    c.d_model = 64;
    c.d_ff = fam == MODEL_GPT2 ? 256 : 192;
    c.max_seq = 64;
    c.window = 8;       // Gemma: sequences here are longer than the window
    c.local_period = 2; // and one local, one global layer
    if (fam == MODEL_GEMMA2)
        c.attn_softcap = 1.0f, c.final_softcap = 5.0f; // both caps bend the numbers
    struct model *m = model_create(&c, NULL);
    model_init_weights(m, seed);
    float *p = model_params(m);
    for (size_t i = 0; i < model_nparams(m); i++) // sharper distributions than init's
        p[i] *= 3.0f;
    for (int t = 0; MODEL_IS_GEMMA(&c) && t < model_ntensors(m); t++) {
        const struct model_tensor *mt = model_tensor(m, t); // (1 + w) norms with w != 0
        for (size_t i = 0; mt->ndim == 1 && i < mt->numel; i++)
            p[mt->offset + i] = 0.3f * sinf((float)(i + 7 * t));
    }
    return m;
}

static void seq_tokens(int32_t *x, int n, uint64_t s)
{
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int32_t)((s >> 33) % 300);
    }
}

/* Sequence a in slot 0: its first 7 tokens in one call, then one per call; sequence b in
 * slot 1 joins at step 3, read in one call with a's token. Every logit vs model_forward. */
static void check_logits(enum model_family fam, const char *name)
{
    struct model *m = tiny(fam, 5), *ref = tiny(fam, 5);
    const struct model_config *c = model_cfg(m);
    int Vp = c->padded_vocab, T = 20;
    int32_t a[20], b[20];
    seq_tokens(a, T, 1);
    seq_tokens(b, T, 2);
    struct model_kv *kv = model_kv_create(m, 2, 32, NULL);
    float *lg = malloc(sizeof(float) * 2 * Vp);
    double worst = 0, big = 0;
    int ok = kv != NULL;
    int32_t tok[32], slot[32], pos[32];
    uint8_t want[32];
    int bdone = 0;
    for (int t = 6; t < T && ok; t++) {
        int n = 0, from = t == 6 ? 0 : t;
        for (int i = from; i <= t; i++)
            tok[n] = a[i], slot[n] = 0, pos[n] = i, want[n] = i == t, n++;
        int joined = t >= 9;
        if (joined) {
            int bt = t - 9 + 5; // b's last position this step
            for (int i = bdone ? bt : 0; i <= bt; i++)
                tok[n] = b[i], slot[n] = 1, pos[n] = i, want[n] = i == bt, n++;
            bdone = 1;
        }
        ok = model_decode(m, kv, tok, slot, pos, want, n, lg, NULL) == 0;
        for (int s = 0; s <= joined && ok; s++) {
            int len = s ? t - 9 + 6 : t + 1;
            model_forward(ref, s ? b : a, NULL, NULL, 0, 1, len);
            const float *full = model_last_logits(ref);
            for (int v = 0; v < c->vocab_size; v++) {
                double d = fabs(full[v] - lg[(size_t)s * Vp + v]);
                worst = d > worst ? d : worst;
                big = fabs(full[v]) > big ? fabs(full[v]) : big;
            }
        }
    }
    CHECK(ok && worst < 1e-4 && big > (fam == MODEL_GEMMA2 ? 0.5 : 1),
          "%s: KV-cache logits equal a full forward (max |diff| %.2g, max |logit| %.1f)", name,
          worst, big);
    free(lg);
    model_kv_destroy(kv);
    model_destroy(m);
    model_destroy(ref);
}

static void same_as_sample(enum model_family fam, const char *name, float temp, uint64_t seed)
{
    struct model *m = tiny(fam, 9);
    int32_t prompt[5];
    seq_tokens(prompt, 5, 3);
    size_t nref = 0;
    int32_t *want = sample_generate(m, prompt, 5, 30, temp, seed, -1, &nref, NULL);
    struct gen_engine *e = gen_create(m, 2, 64, NULL);
    struct gen_seq q = {.prompt = prompt, .nprompt = 5, .eot = -1,
                        .s = {.temperature = temp, .top_p = 1, .max_tokens = 30, .seed = seed}};
    struct gen_seq *qs[] = {&q};
    int rc = gen_run(e, qs, 1, NULL);
    CHECK(rc == 0 && want && (size_t)q.nout == nref &&
              !memcmp(q.out, want, nref * sizeof(int32_t)) && q.finish == GEN_LENGTH,
          "%s: %s generation equals mtc-train sample's token for token (%d tokens)", name,
          temp > 0 ? "seeded" : "greedy", q.nout);
    gen_seq_release(&q);
    free(want);
    gen_destroy(e);
    model_destroy(m);
}

#define NREQ 7
static void batch_independent(enum model_family fam, const char *name)
{
    struct model *m = tiny(fam, 11);
    int32_t prompts[NREQ][12];
    struct gen_seq alone[NREQ], many[NREQ];
    struct gen_seq *pm[NREQ];
    int ok = 1;
    for (int i = 0; i < NREQ; i++) {
        seq_tokens(prompts[i], 12, 100 + i);
        struct gen_seq q = {.prompt = prompts[i], .nprompt = 3 + i, .eot = -1,
                            .s = {.temperature = 0.7f + 0.1f * i, .top_p = i % 2 ? 0.9f : 1,
                                  .top_k = i % 3 ? 0 : 20, .max_tokens = 10 + 3 * i,
                                  .seed = 1000 + i}};
        alone[i] = many[i] = q;
        pm[i] = &many[i];
        struct gen_engine *e1 = gen_create(m, 1, 64, NULL);
        struct gen_seq *one = &alone[i];
        ok &= gen_run(e1, &one, 1, NULL) == 0;
        gen_destroy(e1);
    }
    // 3 slots for 7 requests: some wait in the queue and join as others finish
    struct gen_engine *e = gen_create(m, 3, 64, NULL);
    ok &= gen_run(e, pm, NREQ, NULL) == 0;
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        same += alone[i].nout == many[i].nout &&
                !memcmp(alone[i].out, many[i].out, alone[i].nout * sizeof(int32_t));
        gen_seq_release(&alone[i]);
        gen_seq_release(&many[i]);
    }
    CHECK(ok && same == NREQ, "%s: batched outputs equal single-request outputs (%d of %d)", name,
          same, NREQ);
    struct gen_stats st;
    gen_get_stats(e, &st);
    CHECK(st.running == 0 && st.queued == 0 && st.positions_used == 0 && st.generated_tokens > 0,
          "%s: slots and positions all given back (%ld)", name, st.positions_used);
    gen_destroy(e);
    model_destroy(m);
}

static void bad_requests(void)
{
    struct model *m = tiny(MODEL_LLAMA, 1);
    struct gen_engine *e = gen_create(m, 1, 16, NULL);
    int32_t p[20] = {0};
    mtc_error_t err;
    struct gen_seq q = {.prompt = p, .nprompt = 16, .eot = -1,
                        .s = {.temperature = 1, .top_p = 1, .max_tokens = 1}};
    CHECK(gen_submit(e, &q, &err) < 0 && strstr(err.text, "context"),
          "a prompt as long as the context is refused: %s", err.text);
    q.nprompt = 4;
    q.s.max_tokens = 0;
    CHECK(gen_submit(e, &q, &err) < 0 && strstr(err.text, "max_tokens"),
          "max_tokens 0 is refused: %s", err.text);
    q.s.max_tokens = 13;
    CHECK(gen_submit(e, &q, &err) < 0, "prompt + max_tokens beyond the context is refused: %s",
          err.text);
    q.s.max_tokens = 2;
    p[1] = 300;
    CHECK(gen_submit(e, &q, &err) < 0 && strstr(err.text, "vocabulary"),
          "a token outside the vocabulary is refused: %s", err.text);
    p[1] = 1;
    CHECK(gen_submit(e, &q, &err) == 0 && gen_step(e, &err) == 1 && (gen_cancel(e, &q), 1) &&
              gen_step(e, &err) == 0 && q.finish == GEN_CANCELLED,
          "a cancelled request leaves its slot");
    gen_seq_release(&q);
    gen_destroy(e);
    model_destroy(m);
}

/* top_k 1 is greedy whatever the temperature. */
static void top_k_one(void)
{
    float lg[6] = {0.1f, 2.0f, 1.9f, -1, 0, 1.95f}, scratch[12], lp;
    struct gen_sampling s = {.temperature = 5, .top_p = 1, .top_k = 1, .max_tokens = 1};
    int all = 1;
    for (uint64_t seed = 0; seed < 50; seed++) {
        uint64_t r = seed;
        all &= gen_sample(lg, 6, &s, &r, scratch, &lp) == 1;
    }
    s.top_k = 0;
    s.top_p = 0.3f;
    for (uint64_t seed = 0; seed < 50; seed++) {
        uint64_t r = seed;
        int t = gen_sample(lg, 6, &s, &r, scratch, &lp);
        all &= t == 1 || t == 5 || t == 2;
    }
    CHECK(all, "top_k 1 picks the largest logit; top_p keeps only the nucleus");
}

int main(void)
{
    check_logits(MODEL_GPT2, "gpt2");
    check_logits(MODEL_LLAMA, "llama");
    same_as_sample(MODEL_GPT2, "gpt2", 0, 1);
    same_as_sample(MODEL_LLAMA, "llama", 0, 1);
    same_as_sample(MODEL_GPT2, "gpt2", 0.9f, 42);
    same_as_sample(MODEL_LLAMA, "llama", 0.9f, 42);
    batch_independent(MODEL_GPT2, "gpt2");
    batch_independent(MODEL_LLAMA, "llama");
    check_logits(MODEL_GEMMA2, "gemma2");
    check_logits(MODEL_GEMMA3, "gemma3");
    same_as_sample(MODEL_GEMMA2, "gemma2", 0, 1);
    same_as_sample(MODEL_GEMMA3, "gemma3", 0.9f, 42);
    batch_independent(MODEL_GEMMA3, "gemma3");
    bad_requests();
    top_k_one();
    return check_done();
}
