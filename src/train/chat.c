/* chat: the chat template of SFT/DPO examples (docs/trainer.md): Gemma's when the
 * tokenizer has <start_of_turn>/<end_of_turn>, Llama 3's when it has its header tokens,
 * else our plain one — renders a JSONL
 * example's messages to token ids with a per-token "trained" flag (assistant turns
 * only), and cuts over-long examples from the left of the prompt. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"

void chat_seq_release(struct chat_seq *s)
{
    if (!s)
        return;
    free(s->ids);
    free(s->train);
    memset(s, 0, sizeof *s);
}

static int push_ids(struct chat_seq *s, const int32_t *ids, size_t n, int train, mtc_error_t *err)
{
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap : 64;
        while (cap < s->n + n)
            cap *= 2;
        int32_t *ni = realloc(s->ids, cap * sizeof *ni);
        if (ni)
            s->ids = ni;
        uint8_t *nt = realloc(s->train, cap);
        if (nt)
            s->train = nt;
        if (!ni || !nt)
            return errprintf(err, "out of memory");
        s->cap = cap;
    }
    memcpy(s->ids + s->n, ids, n * sizeof *ids);
    memset(s->train + s->n, train ? 1 : 0, n);
    s->n += n;
    return 0;
}

static int push_id(struct chat_seq *s, int32_t id, int train, mtc_error_t *err)
{
    return push_ids(s, &id, 1, train, err);
}

static int push_text(const struct tok *t, struct chat_seq *s, const char *text, int train,
                     mtc_error_t *err)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (tok_encode(t, text, strlen(text), &ids, &n, err) < 0)
        return -1;
    int rc = push_ids(s, ids, n, train, err);
    free(ids);
    return rc;
}

/* The Llama 3 template when the tokenizer has its header and end-of-turn tokens. */
static int llama3_ids(const struct tok *t, int *sh, int *eh, int *eot)
{
    *sh = tok_special(t, "<|start_header_id|>");
    *eh = tok_special(t, "<|end_header_id|>");
    *eot = tok_special(t, "<|eot_id|>");
    return *sh >= 0 && *eh >= 0 && *eot >= 0;
}

/* The Gemma template when the tokenizer has its turn tokens. */
static int gemma_ids(const struct tok *t, int *sot, int *eot)
{
    *sot = tok_special(t, "<start_of_turn>");
    *eot = tok_special(t, "<end_of_turn>");
    return *sot >= 0 && *eot >= 0;
}

static const char *const roles[] = {"system", "user", "assistant"};

/* The messages after the begin token; flags an assistant turn trained when it is turn
 * last_asst, or any assistant turn when !last_only. */
static int render_msgs(const struct tok *t, const json_t *msgs, int last_only, size_t last_asst,
                       struct chat_seq *s, mtc_error_t *err)
{
    int sh, eh, eot3, l3 = llama3_ids(t, &sh, &eh, &eot3);
    int eot = tok_eot(t), gsot, geot, gemma = gemma_ids(t, &gsot, &geot);
    const char *sys = NULL; // Gemma has no system turn: its text opens the next turn
    size_t n = json_array_size(msgs);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        const char *content = json_string_value(json_object_get(m, "content"));
        if (!json_is_object(m) || !role || !content)
            return errprintf(err, "messages[%zu] needs string \"role\" and \"content\"", i);
        size_t r = 0;
        while (r < sizeof roles / sizeof roles[0] && strcmp(role, roles[r]))
            r++;
        if (r == sizeof roles / sizeof roles[0])
            return errprintf(err, "messages[%zu]: role \"%s\" is not system, user or assistant", i,
                             role);
        int asst = r == 2, train = asst && (!last_only || i == last_asst);
        if (train && !content[0])
            return errprintf(err, "messages[%zu]: empty assistant content", i);
        int rc;
        if (gemma && r == 0) {
            sys = content;
            continue;
        }
        if (gemma) {
            // <start_of_turn>user|model\n[SYSTEM\n\n]CONTENT<end_of_turn>\n
            rc = push_id(s, gsot, 0, err) || push_text(t, s, asst ? "model\n" : "user\n", 0, err) ||
                 (sys && (push_text(t, s, sys, 0, err) || push_text(t, s, "\n\n", 0, err))) ||
                 push_text(t, s, content, train, err) || push_id(s, geot, train, err) ||
                 push_text(t, s, "\n", 0, err);
            sys = NULL;
        } else if (l3) {
            // <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
            rc = push_id(s, sh, 0, err) || push_text(t, s, role, 0, err) ||
                 push_id(s, eh, 0, err) || push_text(t, s, "\n\n", 0, err) ||
                 push_text(t, s, content, train, err) || push_id(s, eot3, train, err);
        } else {
            // <|ROLE|>\nCONTENT then <|endoftext|> after an assistant turn, else \n
            char hdr[32];
            snprintf(hdr, sizeof hdr, "<|%s|>\n", role);
            rc = push_text(t, s, hdr, 0, err) || push_text(t, s, content, train, err) ||
                 (asst ? push_id(s, eot, train, err) : push_text(t, s, "\n", 0, err));
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* The begin token of the template: <|begin_of_text|> (Llama 3) or <|endoftext|>. */
static int push_begin(const struct tok *t, struct chat_seq *s, mtc_error_t *err)
{
    int sh, eh, eot3, l3 = llama3_ids(t, &sh, &eh, &eot3), gsot, geot;
    if (gemma_ids(t, &gsot, &geot)) { // <bos> when the tokenizer has one
        int bos = tok_special(t, "<bos>");
        return bos >= 0 ? push_id(s, bos, 0, err) : 0;
    }
    if (!l3 && tok_eot(t) < 0)
        return errprintf(err, "the tokenizer has no end-of-text token for the chat template");
    int bos = l3 ? tok_special(t, "<|begin_of_text|>") : tok_eot(t);
    return bos >= 0 ? push_id(s, bos, 0, err) : 0;
}

int chat_render(const struct tok *t, const json_t *msgs, int last_only, struct chat_seq *s,
                mtc_error_t *err)
{
    s->n = 0;
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return errprintf(err, "\"messages\" must be a non-empty array");
    size_t n = json_array_size(msgs), last_asst = n;
    for (size_t i = 0; i < n; i++) {
        const char *role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        if (role && !strcmp(role, "assistant"))
            last_asst = i;
    }
    if (last_asst == n)
        return errprintf(err, "no assistant message to train on");
    if (push_begin(t, s, err) < 0)
        return -1;
    return render_msgs(t, msgs, last_only, last_asst, s, err);
}

int chat_render_prompt(const struct tok *t, const json_t *msgs, struct chat_seq *s,
                       mtc_error_t *err)
{
    s->n = 0;
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return errprintf(err, "\"messages\" must be a non-empty array");
    if (push_begin(t, s, err) < 0 || render_msgs(t, msgs, 1, SIZE_MAX, s, err) < 0)
        return -1;
    int sh, eh, eot3;
    if (gemma_ids(t, &sh, &eot3))
        return push_id(s, sh, 0, err) || push_text(t, s, "model\n", 0, err) ? -1 : 0;
    if (llama3_ids(t, &sh, &eh, &eot3))
        return push_id(s, sh, 0, err) || push_text(t, s, "assistant", 0, err) ||
                       push_id(s, eh, 0, err) || push_text(t, s, "\n\n", 0, err)
                   ? -1
                   : 0;
    return push_text(t, s, "<|assistant|>\n", 0, err);
}

/* [{"role":"user","content":prompt},{"role":"assistant","content":response}] */
static json_t *pair_msgs(json_t *prompt, json_t *response)
{
    return json_pack("[{s:s,s:O},{s:s,s:O}]", "role", "user", "content", prompt, "role",
                     "assistant", "content", response);
}

static int need_string(const json_t *o, const char *key, mtc_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return errprintf(err, "missing key \"%s\"", key);
    if (!json_is_string(v))
        return errprintf(err, "\"%s\" must be a string", key);
    return 0;
}

int chat_parse_sft(const struct tok *t, const json_t *o, struct chat_seq *s, mtc_error_t *err)
{
    if (!json_is_object(o))
        return errprintf(err, "not a JSON object");
    json_t *msgs = json_object_get(o, "messages");
    if (msgs)
        return chat_render(t, msgs, 0, s, err);
    if (need_string(o, "prompt", err) < 0 || need_string(o, "response", err) < 0) {
        char why[sizeof err->text];
        snprintf(why, sizeof why, "%s", err->text);
        return errprintf(err, "%s (want {\"prompt\",\"response\"} or {\"messages\":[...]})", why);
    }
    json_t *resp = json_object_get(o, "response");
    if (!json_string_length(resp))
        return errprintf(err, "empty \"response\"");
    json_t *m = pair_msgs(json_object_get(o, "prompt"), resp);
    int rc = m ? chat_render(t, m, 0, s, err) : errprintf(err, "out of memory");
    json_decref(m);
    return rc;
}

/* chosen/rejected: a string (the answer to "prompt") or a whole conversation whose
 * last assistant message is the one compared. */
static int dpo_side(const struct tok *t, const json_t *o, const char *key, struct chat_seq *s,
                    mtc_error_t *err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return errprintf(err, "missing key \"%s\"", key);
    if (json_is_array(v)) {
        if (chat_render(t, v, 1, s, err) < 0) {
            char why[sizeof err->text];
            snprintf(why, sizeof why, "%s", err->text);
            return errprintf(err, "\"%s\": %s", key, why);
        }
        return 0;
    }
    if (!json_is_string(v))
        return errprintf(err, "\"%s\" must be a string or a messages array", key);
    if (!json_string_length(v))
        return errprintf(err, "empty \"%s\"", key);
    if (need_string(o, "prompt", err) < 0)
        return -1;
    json_t *m = pair_msgs(json_object_get(o, "prompt"), v);
    int rc = m ? chat_render(t, m, 1, s, err) : errprintf(err, "out of memory");
    json_decref(m);
    return rc;
}

int chat_parse_dpo(const struct tok *t, const json_t *o, struct chat_seq *chosen,
                   struct chat_seq *rejected, mtc_error_t *err)
{
    if (!json_is_object(o))
        return errprintf(err, "not a JSON object");
    if (!json_object_get(o, "chosen") && !json_object_get(o, "rejected"))
        return errprintf(err, "missing keys \"chosen\" and \"rejected\" (want "
                              "{\"prompt\",\"chosen\",\"rejected\"})");
    return dpo_side(t, o, "chosen", chosen, err) < 0 ||
                   dpo_side(t, o, "rejected", rejected, err) < 0
               ? -1
               : 0;
}

static size_t first_trained(const struct chat_seq *s)
{
    size_t f = 0;
    while (f < s->n && !s->train[f])
        f++;
    return f;
}

int chat_truncate(struct chat_seq **seqs, int nseq, size_t maxlen, mtc_error_t *err)
{
    // one cut for all: the chosen and rejected answers keep the same prompt
    size_t cut = 0;
    for (int i = 0; i < nseq; i++)
        if (seqs[i]->n > maxlen && seqs[i]->n - maxlen > cut)
            cut = seqs[i]->n - maxlen;
    if (!cut)
        return 0;
    for (int i = 0; i < nseq; i++) {
        // the first trained token needs one token before it to be predicted from
        if (first_trained(seqs[i]) < cut + 1)
            return errprintf(err,
                             "example of %zu tokens does not fit --seq %zu even without "
                             "its prompt (the response alone is too long)",
                             seqs[i]->n, maxlen - 1);
    }
    for (int i = 0; i < nseq; i++) {
        struct chat_seq *s = seqs[i];
        memmove(s->ids, s->ids + cut, (s->n - cut) * sizeof *s->ids);
        memmove(s->train, s->train + cut, s->n - cut);
        s->n -= cut;
    }
    return 0;
}

/* The templates of render_msgs/push_begin/chat_render_prompt in Jinja, as Hugging Face's
 * tokenizer_config.json keeps them (rendered with trim_blocks and lstrip_blocks: no text
 * may start with a newline right after a {% %} tag, so those newlines are '\n'
 * expressions). The tokenizer's own bos/eos texts are spliced in. */
static const char gemma_body[] =
    "{% for m in messages %}{% if m['role'] == 'system' %}{% set ns.sys = m['content'] %}"
    "{% else %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{% if ns.sys %}{{ ns.sys }}\n\n{% set ns.sys = '' %}{% endif %}"
    "{{ m['content'] }}<end_of_turn>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
static const char llama3_tpl[] =
    "<|begin_of_text|>{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";
static const char plain_body[] =
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{{ eos_token if m['role'] == 'assistant' else '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

char *chat_template_jinja(const struct tok *t)
{
    int a, b, c;
    char *out = NULL;
    const char *eot = tok_eot_text(t);
    if (gemma_ids(t, &a, &b)) {
        if (asprintf(&out, "{%% set ns = namespace(sys='') %%}%s%s",
                     tok_special(t, "<bos>") >= 0 ? "<bos>" : "", gemma_body) < 0)
            out = NULL;
    } else if (llama3_ids(t, &a, &b, &c)) {
        out = strdup(llama3_tpl);
    } else if (eot && asprintf(&out, "%s%s", eot, plain_body) < 0) {
        out = NULL;
    }
    return out;
}
