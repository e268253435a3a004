/* test_train_grpo: GRPO's math and environments — the token loss's derivative and the
 * batch loss's parameter gradient against finite differences on a tiny model (clipped and
 * unclipped tokens, both signs of advantage, the KL term), group advantages (leave-one-out,
 * std normalization; identical rewards give exactly 0 and so a zero policy gradient),
 * on-policy ratio exactly 1, packed rows = padded rows, and the built-in and command
 * environments' rewards and failures. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train/train.h"

static struct model *tiny(uint64_t seed)
{
    struct model_config c;
    model_preset("tiny-llama", &c, NULL);
    c.vocab_size = 200;
    c.padded_vocab = 0;
    c.n_layer = 2;
    c.d_model = 32;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.d_ff = 64;
    c.max_seq = 32;
    struct model *m = model_create(&c, NULL);
    model_init_weights(m, seed);
    float *p = model_params(m);
    for (size_t i = 0; i < model_nparams(m); i++)
        p[i] *= 4.0f;
    return m;
}

static struct grpo_config cfg(float beta)
{
    struct grpo_config c;
    grpo_config_default(&c);
    c.beta = beta;
    return c;
}

static void token_derivative(void)
{
    struct grpo_config c = cfg(0.05f);
    // (lp, lp_old, lp_ref, adv): inside the clip range, clipped above with A > 0, clipped
    // below with A < 0, outside but unclipped (A < 0 above the range), a large KL
    const double cases[][4] = {{-1.0, -1.05, -0.7, 1.3},
                               {-1.0, -1.6, -1.2, 0.8},
                               {-2.0, -1.4, -2.5, -0.9},
                               {-1.0, -1.6, -0.4, -0.5},
                               {-3.0, -3.0, -0.2, 0.4}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double d, kl, dp, dm, h = 1e-6;
        int cl, cp;
        grpo_token_loss(cases[k][0], cases[k][1], cases[k][2], cases[k][3], &c, &d, &cl, &kl);
        double lp = grpo_token_loss(cases[k][0] + h, cases[k][1], cases[k][2], cases[k][3], &c, &dp,
                                    &cp, &kl);
        double lm = grpo_token_loss(cases[k][0] - h, cases[k][1], cases[k][2], cases[k][3], &c, &dm,
                                    &cp, &kl);
        double fd = (lp - lm) / (2 * h);
        CHECK(fabs(fd - d) < 1e-6, "token case %zu: d(loss)/d(lp) %.8f, finite difference %.8f", k,
              d, fd);
        CHECK(cl == (k == 1 || k == 2), "token case %zu: clipped %d", k, cl);
    }
}

/* The batch loss's gradient with respect to the model's parameters vs central differences
 * of the loss, at the 12 parameters with the largest gradients. */
static void batch_gradient(void)
{
    struct model *m = tiny(3);
    enum { B = 3, T = 10 };
    int32_t x[B * T], y[B * T];
    float w[B * T], lp0[B * T], old[B * T], ref[B * T], lp[B * T], dl[B * T];
    float advs[B] = {1.3f, -0.7f, 0.4f}, adv[B * T];
    uint64_t s = 11;
    for (int i = 0; i < B * T; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (int32_t)((s >> 33) % 200);
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int i = b * T + t;
            y[i] = t + 1 < T ? x[i + 1] : (int32_t)((b * 37 + 5) % 200);
            w[i] = t >= 4 && !(b == 2 && t == 9) ? 1.0f : 0.0f; // prompt, padding masked
            adv[i] = advs[b];
        }
    model_forward(m, x, y, NULL, 0, B, T);
    model_token_logprobs(m, lp0);
    for (int i = 0; i < B * T; i++) {
        // every third token far from the old policy (clipped for one sign of A), the rest
        // inside the range; the reference away from the policy (KL gradient)
        old[i] = lp0[i] + (i % 3 == 0 ? (i % 2 ? 0.6f : -0.6f) : 0.03f * (float)(i % 5 - 2));
        ref[i] = lp0[i] + 0.2f * (float)(i % 7 - 3);
    }
    struct grpo_config c = cfg(0.1f);
    double st[4] = {0};
    model_zero_grad(m);
    grpo_loss_batch(m, x, y, NULL, w, old, ref, adv, B, T, 17.0, &c, 1, lp, dl, st, NULL);
    CHECK(st[2] > 0, "some tokens are clipped (%.0f)", st[2]);
    size_t n = model_nparams(m);
    float *g = malloc(n * sizeof *g), *p = model_params(m);
    memcpy(g, model_grads(m), n * sizeof *g);
    int worst_ok = 1, checked = 0;
    for (int k = 0; k < 12; k++) {
        size_t best = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(g[i]) > fabsf(g[best]))
                best = i;
        float keep = p[best], h = 1e-2f * fmaxf(fabsf(keep), 0.05f);
        double sp[4] = {0}, sm[4] = {0};
        p[best] = keep + h;
        grpo_loss_batch(m, x, y, NULL, w, old, ref, adv, B, T, 17.0, &c, 0, lp, dl, sp, NULL);
        p[best] = keep - h;
        grpo_loss_batch(m, x, y, NULL, w, old, ref, adv, B, T, 17.0, &c, 0, lp, dl, sm, NULL);
        p[best] = keep;
        double fd = (sp[0] - sm[0]) / (2.0 * h);
        double rel = fabs(fd - g[best]) / fmax(fabs(g[best]), 1e-3);
        if (rel > 0.05) {
            worst_ok = 0;
            fprintf(stderr, "# param %zu: gradient %.6g, finite difference %.6g\n", best,
                    (double)g[best], fd);
        }
        checked++;
        g[best] = 0;
    }
    CHECK(worst_ok && checked == 12, "parameter gradient = finite differences (12 largest, 5%%)");
    free(g);
    model_destroy(m);
}

static void advantages(void)
{
    float r[8] = {1, 0, 0, 1, 0.5f, 0.5f, 0.5f, 0.5f}, a[8];
    grpo_advantages(r, 8, 4, 0, 1, a);
    double sd = sqrt(1.0 / 3.0);
    CHECK(fabs(a[0] - 0.5 / sd) < 1e-6 && fabs(a[1] + 0.5 / sd) < 1e-6,
          "group mean baseline / sample std: %g %g", a[0], a[1]);
    grpo_advantages(r, 8, 4, 1, 1, a);
    CHECK(fabs(a[0] - (1 - 1.0 / 3) / sd) < 1e-6 && fabs(a[1] - (0 - 2.0 / 3) / sd) < 1e-6,
          "leave-one-out baseline: %g %g", a[0], a[1]);
    grpo_advantages(r, 8, 4, 1, 0, a);
    CHECK(fabs(a[0] - 2.0 / 3) < 1e-6, "no std normalization: %g", a[0]);
    int zero = 1;
    for (int lo = 0; lo < 2; lo++)
        for (int sn = 0; sn < 2; sn++) {
            grpo_advantages(r, 8, 4, lo, sn, a);
            for (int i = 4; i < 8; i++)
                zero &= a[i] == 0.0f;
        }
    CHECK(zero, "identical rewards in a group: advantage exactly 0");
}

/* One group of identical rewards on the policy itself (old = ref = current): the ratio is
 * exactly 1 and every gradient is exactly 0. */
static void zero_and_on_policy(void)
{
    struct model *m = tiny(4);
    enum { B = 4, T = 8 };
    int32_t x[B * T], y[B * T];
    float w[B * T], old[B * T], lp[B * T], dl[B * T], advs[B], adv[B * T], rw[B] = {1, 1, 1, 1};
    for (int i = 0; i < B * T; i++) {
        x[i] = (i * 7 + 3) % 200;
        y[i] = (i * 11 + 1) % 200;
        w[i] = i % T >= 3;
    }
    grpo_advantages(rw, B, B, 1, 1, advs);
    for (int i = 0; i < B * T; i++)
        adv[i] = advs[i / T];
    model_forward(m, x, y, NULL, 0, B, T);
    model_token_logprobs(m, old);
    struct grpo_config c = cfg(0.04f);
    double st[4] = {0};
    model_zero_grad(m);
    grpo_loss_batch(m, x, y, NULL, w, old, old, adv, B, T, 20.0, &c, 1, lp, dl, st, NULL);
    CHECK(st[3] == 0.0, "on-policy: ratio exactly 1 (max |r-1| = %g)", st[3]);
    CHECK(st[1] == 0.0 && st[2] == 0.0, "on-policy: KL 0, nothing clipped");
    const float *g = model_grads(m);
    size_t nz = 0;
    for (size_t i = 0; i < model_nparams(m); i++)
        nz += g[i] != 0.0f;
    CHECK(nz == 0, "identical rewards: policy gradient exactly 0 (%zu nonzero)", nz);
    // a differing reward makes it nonzero
    float rw2[B] = {1, 0, 1, 1};
    grpo_advantages(rw2, B, B, 1, 1, advs);
    for (int i = 0; i < B * T; i++)
        adv[i] = advs[i / T];
    model_zero_grad(m);
    grpo_loss_batch(m, x, y, NULL, w, old, old, adv, B, T, 20.0, &c, 1, lp, dl, st, NULL);
    nz = 0;
    for (size_t i = 0; i < model_nparams(m); i++)
        nz += g[i] != 0.0f;
    CHECK(nz > 0, "differing rewards: a nonzero policy gradient");
    model_destroy(m);
}

/* The same four sequences (advantages of both signs, prompts masked, old and reference
 * log-probs off the policy) padded one per row and packed two per row (positions restart,
 * a padding column at each row's end): equal losses, KL, clip counts and gradients. */
static void packed_equals_padded(void)
{
    struct model *m = tiny(5);
    enum { S = 4, TP = 10, TK = 16 };
    static const int len[S] = {6, 9, 5, 10}, row[S] = {0, 0, 1, 1}, col[S] = {0, 6, 0, 5};
    const float advs[S] = {1.1f, -0.6f, 0.3f, -1.4f};
    int32_t xp[S * TP], yp[S * TP], xk[2 * TK], yk[2 * TK], pk[2 * TK];
    float wp[S * TP], ap[S * TP], wk[2 * TK], ak[2 * TK], lp[S * TP], oldp[S * TP], refp[S * TP];
    float oldk[2 * TK], refk[2 * TK], dl[S * TP];
    for (int i = 0; i < S * TP; i++)
        xp[i] = 0, yp[i] = -1, wp[i] = 0, ap[i] = 0;
    for (int i = 0; i < 2 * TK; i++)
        xk[i] = 0, yk[i] = -1, wk[i] = 0, ak[i] = 0, pk[i] = i % TK == TK - 1 ? 0 : -1;
    for (int s = 0; s < S; s++)
        for (int t = 0; t < len[s]; t++) {
            int i = s * TP + t, k = row[s] * TK + col[s] + t;
            xp[i] = xk[k] = (s * 31 + t * 17 + 3) % 200;
            yp[i] = yk[k] = (s * 13 + t * 29 + 8) % 200;
            wp[i] = wk[k] = t >= 3;
            ap[i] = ak[k] = advs[s];
            pk[k] = t;
        }
    model_forward(m, xp, yp, NULL, 0, S, TP);
    model_token_logprobs(m, lp);
    for (int s = 0; s < S; s++)
        for (int t = 0; t < len[s]; t++) {
            int i = s * TP + t, k = row[s] * TK + col[s] + t;
            oldp[i] = oldk[k] = lp[i] + (t % 3 == 0 ? 0.5f : -0.05f * (float)(t % 4));
            refp[i] = refk[k] = lp[i] + 0.1f * (float)(t % 5 - 2);
        }
    struct grpo_config c = cfg(0.1f);
    size_t n = model_nparams(m);
    float *g1 = malloc(n * sizeof *g1);
    double sp[4] = {0}, sk[4] = {0};
    model_zero_grad(m);
    int r1 =
        grpo_loss_batch(m, xp, yp, NULL, wp, oldp, refp, ap, S, TP, 23.0, &c, 1, lp, dl, sp, NULL);
    memcpy(g1, model_grads(m), n * sizeof *g1);
    model_zero_grad(m);
    int r2 =
        grpo_loss_batch(m, xk, yk, pk, wk, oldk, refk, ak, 2, TK, 23.0, &c, 1, lp, dl, sk, NULL);
    const float *g2 = model_grads(m);
    double eg = 0, mg = 0;
    for (size_t i = 0; i < n; i++) {
        eg = fmax(eg, fabs(g1[i] - g2[i]));
        mg = fmax(mg, fabs(g1[i]));
    }
    CHECK(r1 == 0 && r2 == 0 && fabs(sp[0] - sk[0]) < 1e-5 && fabs(sp[1] - sk[1]) < 1e-5 &&
              sp[2] == sk[2] && sp[2] > 0,
          "packed = padded: loss %.8f vs %.8f, KL %.6f vs %.6f, clipped %.0f vs %.0f", sp[0], sk[0],
          sp[1], sk[1], sp[2], sk[2]);
    CHECK(eg < 1e-5 * mg, "packed = padded: gradients (max difference %.2g of %.2g)", eg, mg);
    free(g1);
    model_destroy(m);
}

static float one(int env, const char *prompt, const char *answer, const char *completion,
                 int *correct)
{
    float r = -1;
    grpo_env_rewards(env, NULL, 1, &prompt, &answer, &completion, &r, correct, NULL);
    return r;
}

static void environments(void)
{
    mtc_error_t err;
    int ar = grpo_env_of("arithmetic", &err), cd = grpo_env_of("countdown", &err), ok;
    CHECK(ar >= 0 && cd >= 0 && grpo_env_of("command", &err) == GRPO_ENV_COMMAND,
          "environments by name");
    CHECK(grpo_env_of("chess", &err) < 0 && strstr(err.text, "--env chess"), "unknown: %s",
          err.text);
    CHECK(one(ar, "What is 40 + 2?", "42", " 42 ", &ok) == 1.0f && ok, "arithmetic: 42");
    CHECK(one(ar, "What is 40 + 2?", "42", "42.0", &ok) == 1.0f, "arithmetic: numeric 42.0");
    CHECK(one(ar, "What is 40 + 2?", "42", "402", &ok) == 0.0f && !ok, "arithmetic: 402 wrong");
    CHECK(one(ar, "What is 40 + 2?", "42", "42 apples", &ok) == 0.0f, "arithmetic: extra words");
    const char *p = "Using the numbers [3, 5, 7], make 22.";
    CHECK(one(cd, p, "22", "3*5+7", &ok) == 1.0f && ok, "countdown: 3*5+7 = 22");
    CHECK(one(cd, p, "22", "(7 + 5) * 3 - 14", &ok) == 0.0f, "countdown: a number not given");
    CHECK(one(cd, p, "22", "7+5+3", &ok) == 0.1f && !ok, "countdown: format only");
    CHECK(one(cd, p, "22", "3*5", &ok) == 0.0f, "countdown: a number unused");
    CHECK(one(cd, p, "22", "3*5+7+", &ok) == 0.0f, "countdown: malformed");
    CHECK(one(cd, p, "22", "5*5-3", &ok) == 0.0f, "countdown: a number used twice");

    const char *pr[2] = {"a", "b"}, *an[2] = {"1", "2"}, *co[2] = {"x", "y\"z"};
    float rw[2];
    int cr[2];
    int c = GRPO_ENV_COMMAND;
    CHECK(grpo_env_rewards(c, "while read l; do echo '{\"reward\": 0.5}'; done", 2, pr, an, co, rw,
                           cr, &err) == 0 &&
              rw[0] == 0.5f && rw[1] == 0.5f && !cr[0],
          "command: two rewards");
    CHECK(grpo_env_rewards(c,
                           "grep -q '\"completion\":\"y\\\\\"z\"' && printf '{\"reward\":1}\\n"
                           "{\"reward\":2,\"correct\":false}\\n'",
                           2, pr, an, co, rw, cr, &err) == 0 &&
              rw[1] == 2.0f && cr[0] && !cr[1],
          "command: gets JSONL prompt/answer/completion; correct flag");
    const char *cut = "1\xe2\x82"; // a completion that ends inside a character
    CHECK(grpo_env_rewards(c, "grep -q \"1$(printf '\\357\\277\\275')\" && echo '{\"reward\": 1}'",
                           1, pr, an, &cut, rw, cr, &err) == 0 &&
              rw[0] == 1.0f,
          "command: a cut multi-byte character reaches it as U+FFFD (valid JSON)");
    CHECK(grpo_env_rewards(c, "cat >/dev/null; exit 3", 2, pr, an, co, rw, cr, &err) < 0 &&
              strstr(err.text, "exited with status 3") && !strchr(err.text, '\n'),
          "command exits 3: %s", err.text);
    CHECK(grpo_env_rewards(c, "echo '{\"reward\": 1}'", 2, pr, an, co, rw, cr, &err) < 0 &&
              strstr(err.text, "wrote 1 rewards for 2 completions"),
          "command: too few: %s", err.text);
    CHECK(grpo_env_rewards(c, "echo '{\"reward\": 1}'; echo oops", 2, pr, an, co, rw, cr, &err) <
                  0 &&
              strstr(err.text, "output line 2"),
          "command: bad line: %s", err.text);
    CHECK(grpo_env_rewards(c, "kill -9 $$", 2, pr, an, co, rw, cr, &err) < 0 &&
              strstr(err.text, "signal 9"),
          "command killed: %s", err.text);
}

int main(void)
{
    token_derivative();
    batch_gradient();
    advantages();
    zero_and_on_policy();
    packed_equals_padded();
    environments();
    return check_done();
}
