/* test_train_sft: the chat template (plain and Llama 3) and its training masks, input
 * errors, left truncation, SFT prompt masking (a prompt-only example has exactly zero
 * gradient) and normalisation over the accumulated batch, the DPO loss and gradient
 * against a hand computation on a model whose log-probs are known, and the frozen
 * reference model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "train/ft_internal.h"
#include "train/train.h"

static char dir[] = "/tmp/mtc-sft.XXXXXX";
static struct tok *tk;

static int near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (1 + fabs(b));
}

static void write_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    fputs(s, f);
    fclose(f);
}

/* Decode the ids of s, all of them or only the trained ones. */
static char *decode(const struct chat_seq *s, int trained_only)
{
    int32_t *v = malloc((s->n + 1) * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!trained_only || s->train[i])
            v[k++] = s->ids[i];
    char *out = tok_decode(tk, v, k);
    free(v);
    return out;
}

static json_t *J(const char *s)
{
    return json_loads(s, 0, NULL);
}

static void test_template(void)
{
    mtc_error_t err = {{0}};
    struct chat_seq s = {0};
    json_t *o = J("{\"prompt\":\"what is the cat?\",\"response\":\"the cat sat.\",\"id\":7}");
    CHECK(chat_parse_sft(tk, o, &s, &err) == 0, "prompt/response parses: %s", err.text);
    json_decref(o);
    char *all = decode(&s, 0), *tr = decode(&s, 1);
    CHECK_STR(all,
              "<|endoftext|><|user|>\nwhat is the cat?\n<|assistant|>\nthe cat sat.<|endoftext|>",
              "plain template renders the exchange");
    CHECK_STR(tr, "the cat sat.<|endoftext|>", "only the response and its end token are trained");
    size_t f = 0;
    while (f < s.n && !s.train[f])
        f++;
    int suffix = 1;
    for (size_t i = f; i < s.n; i++)
        suffix &= s.train[i];
    CHECK(f > 0 && suffix, "trained tokens are the suffix after the prompt (from %zu of %zu)", f,
          s.n);
    free(all);
    free(tr);

    o = J("{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
          "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"the cat\"},"
          "{\"role\":\"user\",\"content\":\"more\"},{\"role\":\"assistant\",\"content\":\"a "
          "dog\"}]}");
    CHECK(chat_parse_sft(tk, o, &s, &err) == 0, "messages parse: %s", err.text);
    all = decode(&s, 0);
    tr = decode(&s, 1);
    CHECK_STR(all,
              "<|endoftext|><|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\nthe cat<|endoftext|>"
              "<|user|>\nmore\n<|assistant|>\na dog<|endoftext|>",
              "multi-turn chat rendering");
    CHECK_STR(tr, "the cat<|endoftext|>a dog<|endoftext|>", "SFT trains every assistant turn");
    free(all);
    free(tr);
    CHECK(chat_render(tk, json_object_get(o, "messages"), 1, &s, &err) == 0, "last-only render");
    tr = decode(&s, 1);
    CHECK_STR(tr, "a dog<|endoftext|>",
              "last_only (DPO conversations) trains the last answer only");
    free(tr);
    json_decref(o);

    // bad input: each a clear reason
    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"prompt\":\"x\"}", "missing key \"response\""},
        {"{\"prompt\":\"x\",\"response\":\"\"}", "empty \"response\""},
        {"{\"prompt\":1,\"response\":\"y\"}", "\"prompt\" must be a string"},
        {"[1,2]", "not a JSON object"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "no assistant message"},
        {"{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", "no assistant message"},
        {"{\"messages\":[{\"role\":\"king\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
         "\"y\"}]}",
         "role \"king\""},
        {"{\"messages\":[]}", "non-empty array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = J(bad[i].json);
        int rc = chat_parse_sft(tk, o, &s, &err);
        CHECK(rc < 0 && strstr(err.text, bad[i].want), "bad SFT line %s: %s", bad[i].json,
              rc < 0 ? err.text : "accepted");
        json_decref(o);
    }
    struct chat_seq c = {0}, r = {0};
    o = J("{\"prompt\":\"x\",\"chosen\":\"the cat\"}");
    CHECK(chat_parse_dpo(tk, o, &c, &r, &err) < 0 && strstr(err.text, "\"rejected\""),
          "DPO line without rejected: %s", err.text);
    json_decref(o);
    o = J("{\"prompt\":\"x\",\"chosen\":\"the cat\",\"rejected\":\"a dog\"}");
    CHECK(chat_parse_dpo(tk, o, &c, &r, &err) == 0, "DPO line parses");
    char *dc = decode(&c, 1), *dr = decode(&r, 1);
    CHECK_STR(dc, "the cat<|endoftext|>", "chosen response trained");
    CHECK_STR(dr, "a dog<|endoftext|>", "rejected response trained");
    free(dc);
    free(dr);
    json_decref(o);
    chat_seq_release(&c);
    chat_seq_release(&r);
    chat_seq_release(&s);
}

static void test_llama3_template(void)
{
    // the same tokenizer with Llama 3's chat tokens added
    char src[256], dst[256];
    snprintf(src, sizeof src, "%s/tok.json", dir);
    snprintf(dst, sizeof dst, "%s/tok3.json", dir);
    json_t *t = json_load_file(src, 0, NULL);
    json_t *added = json_object_get(t, "added_tokens");
    static const char *const names[] = {"<|begin_of_text|>", "<|start_header_id|>",
                                        "<|end_header_id|>", "<|eot_id|>"};
    int base = tok_vocab_size(tk);
    for (int i = 0; i < 4; i++)
        json_array_append_new(
            added, json_pack("{s:i,s:s,s:b}", "id", base + i, "content", names[i], "special", 1));
    json_dump_file(t, dst, 0);
    json_decref(t);
    mtc_error_t err = {{0}};
    struct tok *t3 = tok_load(dst, &err);
    CHECK(t3 != NULL, "tokenizer with Llama 3 chat tokens: %s", err.text);
    if (!t3)
        return;
    struct chat_seq s = {0};
    json_t *o = J("{\"prompt\":\"hi\",\"response\":\"the cat\"}");
    CHECK(chat_parse_sft(t3, o, &s, &err) == 0, "parse with the Llama 3 template");
    char *all = tok_decode(t3, s.ids, s.n);
    CHECK_STR(all,
              "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\nthe cat<|eot_id|>",
              "Llama 3 chat template");
    int ntrain = 0, last_ok = s.train[s.n - 1] && s.ids[s.n - 1] == base + 3;
    for (size_t i = 0; i < s.n; i++)
        ntrain += s.train[i];
    int32_t *ids;
    size_t n;
    tok_encode(t3, "the cat", 7, &ids, &n, &err);
    CHECK(last_ok && ntrain == (int)n + 1, "trained: the answer and <|eot_id|> (%d tokens)",
          ntrain);
    free(ids);
    free(all);
    json_decref(o);
    chat_seq_release(&s);
    tok_destroy(t3);
}

static void test_gemma_template(void)
{
    // the same tokenizer with Gemma's chat tokens added
    char src[256], dst[256];
    snprintf(src, sizeof src, "%s/tok.json", dir);
    snprintf(dst, sizeof dst, "%s/tokg.json", dir);
    json_t *t = json_load_file(src, 0, NULL);
    json_t *added = json_object_get(t, "added_tokens");
    static const char *const names[] = {"<bos>", "<start_of_turn>", "<end_of_turn>"};
    int base = tok_vocab_size(tk);
    for (int i = 0; i < 3; i++)
        json_array_append_new(
            added, json_pack("{s:i,s:s,s:b}", "id", base + i, "content", names[i], "special", 1));
    json_dump_file(t, dst, 0);
    json_decref(t);
    mtc_error_t err = {{0}};
    struct tok *tg = tok_load(dst, &err);
    CHECK(tg != NULL, "tokenizer with Gemma chat tokens: %s", err.text);
    if (!tg)
        return;
    struct chat_seq s = {0};
    json_t *o = J("{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                  "{\"role\":\"user\",\"content\":\"hi\"},"
                  "{\"role\":\"assistant\",\"content\":\"the cat\"}]}");
    CHECK(chat_parse_sft(tg, o, &s, &err) == 0, "parse with the Gemma template: %s", err.text);
    char *all = tok_decode(tg, s.ids, s.n);
    CHECK_STR(all,
              "<bos><start_of_turn>user\nbe brief\n\nhi<end_of_turn>\n"
              "<start_of_turn>model\nthe cat<end_of_turn>\n",
              "Gemma chat template (system text opens the user turn)");
    int32_t *ids;
    size_t n;
    tok_encode(tg, "the cat", 7, &ids, &n, &err);
    int ntrain = 0;
    for (size_t i = 0; i < s.n; i++)
        ntrain += s.train[i];
    CHECK(ntrain == (int)n + 1 && s.train[s.n - 2] && s.ids[s.n - 2] == base + 2,
          "trained: the answer and <end_of_turn> (%d tokens)", ntrain);
    free(ids);
    free(all);
    chat_seq_release(&s);
    json_t *msgs = json_object_get(o, "messages");
    CHECK(chat_render_prompt(tg, msgs, &s, &err) == 0, "Gemma generation prompt");
    all = tok_decode(tg, s.ids, s.n);
    const char *tail = "<start_of_turn>model\n";
    CHECK(all && strlen(all) > strlen(tail) && !strcmp(all + strlen(all) - strlen(tail), tail),
          "the prompt ends with <start_of_turn>model\\n");
    free(all);
    json_decref(o);
    chat_seq_release(&s);
    tok_destroy(tg);
}

static void test_truncate(void)
{
    mtc_error_t err = {{0}};
    struct chat_seq s = {0};
    json_t *o = J("{\"prompt\":\"the cat sat on the mat and the dog sat on the cat and\","
                  "\"response\":\"the end.\"}");
    chat_parse_sft(tk, o, &s, &err);
    size_t n0 = s.n, nt = 0;
    for (size_t i = 0; i < s.n; i++)
        nt += s.train[i];
    char *before = decode(&s, 1);
    int32_t last = s.ids[n0 - 1];
    struct chat_seq *pp = &s;
    CHECK(chat_truncate(&pp, 1, nt + 3, &err) == 0 && s.n == nt + 3, "cut to %zu tokens (from %zu)",
          nt + 3, n0);
    char *after = decode(&s, 1);
    CHECK_STR(after, before, "the response survives the cut");
    CHECK(s.ids[s.n - 1] == last && !s.train[0] && !s.train[2] && s.train[3],
          "the cut is on the left: 3 prompt tokens remain");
    CHECK(chat_truncate(&pp, 1, nt, &err) < 0 && strstr(err.text, "does not fit"),
          "no room for the response: %s", err.text);
    free(before);
    free(after);
    json_decref(o);
    chat_seq_release(&s);
}

static struct model *tiny_model(void)
{
    struct model_config c;
    mtc_error_t err;
    model_preset("tiny-gpt2", &c, &err);
    c.n_layer = 1;
    c.d_model = 32;
    c.n_head = 2;
    c.n_kv_head = 2;
    c.d_ff = 64;
    c.vocab_size = tok_vocab_size(tk);
    c.padded_vocab = 0;
    c.max_seq = 64;
    model_config_check(&c, &err);
    struct model *m = model_create(&c, &err);
    model_init_weights(m, 7);
    return m;
}

static int all_zero(const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g[i] != 0.0f)
            return 0;
    return 1;
}

static void test_prompt_mask(void)
{
    enum { T = 32 };
    mtc_error_t err = {{0}};
    struct chat_seq s = {0};
    json_t *o = J("{\"prompt\":\"what is the cat?\",\"response\":\"the cat sat.\"}");
    chat_parse_sft(tk, o, &s, &err);
    json_decref(o);
    struct model *m = tiny_model();
    int32_t x[T], y[T];
    float w[T];
    struct ft_seq fs = {s.ids, s.train, (uint32_t)s.n, 0};
    ft_fill_row(&fs, T, x, y, w);
    int pad_ok = 1;
    for (int t = (int)s.n - 1; t < T; t++)
        pad_ok &= y[t] == -1 && w[t] == 0;
    CHECK(pad_ok, "padding after the example has no target and no weight");
    model_zero_grad(m);
    model_forward(m, x, y, w, 1.0f, 1, T);
    model_backward(m, NULL);
    CHECK(!all_zero(model_grads(m), model_nparams(m)), "an example with a response has a gradient");
    memset(s.train, 0, s.n); // prompt only: nothing trained
    ft_fill_row(&fs, T, x, y, w);
    model_zero_grad(m);
    float l = model_forward(m, x, y, w, 1.0f, 1, T);
    model_backward(m, NULL);
    CHECK(l == 0.0f && all_zero(model_grads(m), model_nparams(m)),
          "a prompt-only example has exactly zero loss and gradient");
    model_destroy(m);
    chat_seq_release(&s);
}

static struct ft *make_ft(const char *data, enum ft_mode mode, int micro, int accum, float beta,
                          const char *init, mtc_error_t *err)
{
    struct model *m = tiny_model();
    struct ft_config fc = {.mode = mode,
                           .data = data,
                           .tok = tk,
                           .micro = micro,
                           .accum = accum,
                           .seq = 32,
                           .rank = 0,
                           .nranks = 1,
                           .seed = 7,
                           .beta = beta,
                           .init = init};
    struct ft *f = ft_create(&fc, model_cfg(m), err);
    model_destroy(m);
    return f;
}

static void test_normalisation(void)
{
    char data[256];
    snprintf(data, sizeof data, "%s/sft.jsonl", dir);
    // responses of very different lengths: a per-micro-batch mean would weight them wrongly
    write_file(data, "{\"prompt\":\"the cat\",\"response\":\"a dog.\"}\n"
                     "\n"
                     "{\"prompt\":\"the dog\",\"response\":\"the cat sat on the mat and the dog "
                     "sat on the cat.\"}\n"
                     "{\"prompt\":\"a\",\"response\":\"b\"}\n"
                     "{\"prompt\":\"x y\",\"response\":\"the mat.\"}\n");
    mtc_error_t err = {{0}};
    struct ft *two = make_ft(data, FT_SFT, 1, 2, 0, NULL, &err);
    CHECK(two != NULL, "SFT data loads: %s", err.text);
    struct ft *one = make_ft(data, FT_SFT, 2, 1, 0, NULL, &err);
    if (!two || !one)
        return;
    CHECK(ft_size(two) == 4, "4 examples (blank line skipped)");
    struct model *ma = tiny_model(), *mb = tiny_model();
    double la, lb;
    model_zero_grad(ma);
    model_zero_grad(mb);
    CHECK(ft_accumulate(two, ma, &la, &err) == 0 && ft_accumulate(one, mb, &lb, &err) == 0,
          "accumulate: %s", err.text);
    size_t n = model_nparams(ma);
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)model_grads(ma)[i] - model_grads(mb)[i]);
        worst = d > worst ? d : worst;
        gmax = fabs(model_grads(mb)[i]) > gmax ? fabs(model_grads(mb)[i]) : gmax;
    }
    CHECK(near(la, lb, 1e-5) && worst <= 1e-5 * gmax,
          "2 micro-steps == 1 step of 2: loss %.7f vs %.7f, max grad diff %.2e (max %.2e)", la, lb,
          worst, gmax);
    // the loss is the mean over the response tokens of both examples together
    double sum = 0, cnt = 0;
    for (int e = 0; e < 2; e++) {
        const struct ft_seq *s = ft_example(two, &two->train, (uint64_t)e, 0);
        int32_t x[32], y[32];
        float w[32];
        ft_fill_row(s, 32, x, y, w);
        float l = model_forward(ma, x, y, w, 0, 1, 32); // its own mean
        sum += (double)l * s->ntrain;
        cnt += s->ntrain;
    }
    CHECK(near(la, sum / cnt, 1e-5), "loss %.6f = token mean over the accumulated batch %.6f", la,
          sum / cnt);
    struct loader_pos p;
    ft_get_pos(two, &p);
    CHECK(p.offset == 2 && p.epoch == 0, "position after one step: example 2");
    model_destroy(ma);
    model_destroy(mb);
    ft_destroy(one);
    ft_destroy(two);

    // bad files: file:line and why
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"prompt\":\"a\",\"response\":\"b\"}\nnot json\n", "sft.jsonl:2: not a JSON line"},
        {"{\"prompt\":\"a\",\"response\":\"b\"}\n\n{\"prompt\":\"a\"}\n",
         "sft.jsonl:3: missing key \"response\""},
        {"{\"prompt\":\"a\",\"response\":\"\"}\n", "sft.jsonl:1: empty \"response\""},
        {"{\"prompt\":\"a\",\"response\":\"the cat sat on the mat and the dog sat on the cat and "
         "the cat sat on the mat and the dog sat on the cat and the cat sat on the mat.\"}\n",
         "sft.jsonl:1: example of"},
        {"", "no examples"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(data, bad[i].text);
        struct ft *f = make_ft(data, FT_SFT, 1, 1, 0, NULL, &err);
        CHECK(!f && strstr(err.text, bad[i].want), "bad data %zu: %s", i, err.text);
        ft_destroy(f);
    }
}

/* Logits that do not depend on the context: every weight zero except ln_f's bias
 * (e_0) and column 0 of wte (a_v), so logit_v = a_v at every position. */
static void set_const_logits(struct model *m, double (*a)(int))
{
    memset(model_params(m), 0, model_nparams(m) * sizeof(float));
    const struct model_tensor *wte =
        model_tensor(m, model_find_tensor(m, "transformer.wte.weight"));
    const struct model_tensor *b = model_tensor(m, model_find_tensor(m, "transformer.ln_f.bias"));
    int C = model_cfg(m)->d_model;
    for (int v = 0; v < model_cfg(m)->vocab_size; v++)
        model_params(m)[wte->offset + (size_t)v * C] = (float)a(v);
    model_params(m)[b->offset] = 1.0f;
}
static double a_ref(int v)
{
    return 0.3 * (v % 7) - 0.5;
}
static double a_pol(int v)
{
    return 0.2 * (v % 5) - 0.1 * (v % 3);
}
static double bump_v = -1, bump_h;
static double a_pol_bumped(int v)
{
    return a_pol(v) + (v == bump_v ? bump_h : 0);
}

/* Sum of log-softmax(a)[id] over ids, in double. */
static double seq_logp(double (*a)(int), const int32_t *ids, size_t n)
{
    int V = tok_vocab_size(tk);
    double mx = -1e300, s = 0;
    for (int v = 0; v < V; v++)
        mx = a(v) > mx ? a(v) : mx;
    for (int v = 0; v < V; v++)
        s += exp(a(v) - mx);
    double lse = mx + log(s), out = 0;
    for (size_t i = 0; i < n; i++)
        out += a(ids[i]) - lse;
    return out;
}

static double hand_dpo(double beta, double (*pol)(int), const int32_t *c, size_t nc,
                       const int32_t *r, size_t nr)
{
    double z = beta * ((seq_logp(pol, c, nc) - seq_logp(a_ref, c, nc)) -
                       (seq_logp(pol, r, nr) - seq_logp(a_ref, r, nr)));
    return log1p(exp(-z));
}

static void test_dpo(void)
{
    double dz;
    double l = dpo_pair_loss(0.1, -10, -12, -11, -11, &dz);
    CHECK(near(l, log1p(exp(-0.2)), 1e-12) && near(dz, -1 / (1 + exp(0.2)), 1e-12),
          "dpo_pair_loss: z = 0.2 → %.9f", l);
    CHECK(near(dpo_pair_loss(1, -1000, 0, 0, 0, NULL), 1000, 1e-12),
          "no overflow for a large negative z");

    mtc_error_t err = {{0}};
    char data[256], ck[256];
    snprintf(data, sizeof data, "%s/dpo.jsonl", dir);
    snprintf(ck, sizeof ck, "%s/ref", dir);
    write_file(
        data,
        "{\"prompt\":\"what is the cat?\",\"chosen\":\"the cat sat.\",\"rejected\":\"a dog\"}\n");
    struct model *ref = tiny_model();
    set_const_logits(ref, a_ref);
    static struct ckpt_meta meta;
    meta.nranks = 1;
    CHECK(ckpt_save(ck, model_cfg(ref), model_params(ref), model_nparams(ref), NULL, &meta, &err) ==
              0,
          "reference checkpoint: %s", err.text);
    char init[300];
    snprintf(init, sizeof init, "%s/step_00000000", ck);
    const double beta = 0.5;
    struct ft *f = make_ft(data, FT_DPO, 1, 1, (float)beta, init, &err);
    CHECK(f != NULL, "DPO data and reference load: %s", err.text);
    if (!f) {
        model_destroy(ref);
        return;
    }
    CHECK(memcmp(model_params((struct model *)ft_reference(f)), model_params(ref),
                 model_nparams(ref) * sizeof(float)) == 0,
          "reference model = the init checkpoint");
    struct model *pol = tiny_model();
    set_const_logits(pol, a_pol);
    // the response ids "by hand": the answer's tokens then the end token
    int32_t *c, *r;
    size_t nc, nr;
    tok_encode(tk, "the cat sat.<|endoftext|>", 25, &c, &nc, &err);
    tok_encode(tk, "a dog<|endoftext|>", 18, &r, &nr, &err);
    double want = hand_dpo(beta, a_pol, c, nc, r, nr);
    double loss;
    model_zero_grad(pol);
    CHECK(ft_accumulate(f, pol, &loss, &err) == 0, "DPO step: %s", err.text);
    CHECK(near(loss, want, 1e-5), "DPO loss %.7f = hand-computed %.7f", loss, want);
    json_t *fields = json_object();
    ft_metrics(f, fields);
    double rc = beta * (seq_logp(a_pol, c, nc) - seq_logp(a_ref, c, nc));
    double rr = beta * (seq_logp(a_pol, r, nr) - seq_logp(a_ref, r, nr));
    CHECK(near(json_real_value(json_object_get(fields, "rewards/chosen")), rc, 1e-5) &&
              near(json_real_value(json_object_get(fields, "rewards/rejected")), rr, 1e-5) &&
              near(json_real_value(json_object_get(fields, "rewards/margin")), rc - rr, 1e-5) &&
              json_real_value(json_object_get(fields, "rewards/accuracy")) == (rc > rr ? 1.0 : 0.0),
          "rewards/chosen %.5f, rejected %.5f, margin, accuracy match the hand values", rc, rr);
    json_decref(fields);
    // gradient w.r.t. a_v (wte[v][0], through the tied lm_head) against central differences
    const struct model_tensor *wte =
        model_tensor(pol, model_find_tensor(pol, "transformer.wte.weight"));
    int C = model_cfg(pol)->d_model, gok = 1;
    int probe[] = {(int)c[0], (int)r[0], (int)c[nc - 1], 5};
    for (int i = 0; i < 4; i++) {
        bump_v = probe[i];
        bump_h = 1e-4;
        double up = hand_dpo(beta, a_pol_bumped, c, nc, r, nr);
        bump_h = -1e-4;
        double dn = hand_dpo(beta, a_pol_bumped, c, nc, r, nr);
        double num = (up - dn) / 2e-4, got = model_grads(pol)[wte->offset + (size_t)probe[i] * C];
        if (fabs(got - num) > 1e-4 + 1e-3 * fabs(num)) {
            gok = 0;
            printf("#   d/da[%d]: got %.6g want %.6g\n", probe[i], got, num);
        }
    }
    CHECK(gok, "DPO gradient matches finite differences of the hand-computed loss");
    // training moves the policy, never the reference
    struct opt_state o;
    struct opt_config oc;
    opt_config_default(&oc);
    opt_init(&o, model_nparams(pol), &err);
    for (int s = 0; s < 3; s++) {
        opt_step(&o, &oc, pol, 1e-2f);
        model_zero_grad(pol);
        ft_accumulate(f, pol, &loss, &err);
    }
    CHECK(memcmp(model_params((struct model *)ft_reference(f)), model_params(ref),
                 model_nparams(ref) * sizeof(float)) == 0,
          "the reference model is unchanged after training steps");
    CHECK(loss < want, "the DPO loss falls (%.5f < %.5f)", loss, want);
    opt_release(&o);
    free(c);
    free(r);
    model_destroy(pol);
    model_destroy(ref);
    ft_destroy(f);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    char corpus[256], tok[256];
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    snprintf(tok, sizeof tok, "%s/tok.json", dir);
    const char *text = "the cat sat on the mat. a dog sat on the cat. what is the cat? the end. ";
    char big[8192] = "";
    for (int i = 0; i < 40; i++)
        strcat(big, text);
    mtc_error_t err = {{0}};
    CHECK(tok_train(big, strlen(big), 300, tok, &err) == 0, "tiny tokenizer: %s", err.text);
    tk = tok_load(tok, &err);
    if (!tk)
        return check_done();
    test_template();
    test_llama3_template();
    test_gemma_template();
    test_truncate();
    test_prompt_mask();
    test_normalisation();
    test_dpo();
    tok_destroy(tk);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        return 1;
    return check_done();
}
