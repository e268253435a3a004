/* serve openai: the OpenAI-compatible routes — request tables (through the schema engine),
 * a request's life on the engine (text decoded as tokens arrive, stop strings, SSE chunks
 * in OpenAI's shape ending with "data: [DONE]"), replies with usage, errors
 * {"error":{"message","type","code"}}. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schema/schema.h"
#include "serve/internal.h"

#define MAX_STOP 4
#define STOP_LEN 128

/* ---- request tables ---- */

struct oa_request {
    char model[129];
    int max_tokens, max_completion_tokens, top_k, seed, n, stream;
    double temperature, top_p;
    int has_seed;
    char user[129];
};

/* prompt: a string, an array of one string, or an array of token ids. */
static int prompt_check(const struct schema_field *f, json_t **v, const char *path,
                        mtc_error_t *err)
{
    (void)f;
    if (json_is_string(*v))
        return 0;
    if (json_is_array(*v) && json_array_size(*v) == 1 && json_is_string(json_array_get(*v, 0)))
        return 0;
    size_t i, n = json_array_size(*v);
    json_t *e;
    if (!json_is_array(*v) || n == 0)
        return schema_error(err, path, "must be a string, or an array of one string or of token ids");
    json_array_foreach(*v, i, e) if (!json_is_integer(e)) return schema_error(
        err, path, "must be a string, or an array of one string or of token ids");
    return 0;
}

/* stop: a string or up to 4 strings, each 1..STOP_LEN-1 bytes. */
static int stop_check(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (json_is_string(*v)) {
        json_t *a = json_pack("[O]", *v);
        json_decref(*v);
        *v = a;
    }
    size_t i, n = json_array_size(*v);
    json_t *e;
    if (!json_is_array(*v) || n > MAX_STOP)
        return schema_error(err, path, "must be a string or an array of up to %d strings",
                            MAX_STOP);
    json_array_foreach(*v, i, e)
    {
        size_t len = json_string_length(e);
        if (!json_is_string(e) || len == 0 || len >= STOP_LEN)
            return schema_error(err, path, "each stop must be a string of 1 to %d bytes",
                                STOP_LEN - 1);
    }
    return 0;
}

static const struct schema_field stream_option_fields[] = {
    {.name = "include_usage", .kind = SCHEMA_BOOL},
    {.name = NULL},
};
static const struct schema stream_options_schema = {
    .fields = stream_option_fields, .flags = SCHEMA_EXACT | SCHEMA_PROTO3};

static const struct schema_field message_fields[] = {
    {.name = "role", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED},
    {.name = "content", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED},
    {.name = "name", .kind = SCHEMA_STR},
    {.name = NULL},
};
static const struct schema message_schema = {.fields = message_fields,
                                             .flags = SCHEMA_EXACT | SCHEMA_PROTO3};

#define M(f) SCHEMA_MEMBER(struct oa_request, f)
#define RANGE(a, b) .flags = SCHEMA_RANGE, .lo = (a), .hi = (b)
#define COMMON_FIELDS                                                                              \
    {.name = "model", .kind = SCHEMA_STR, .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY, M(model)},   \
        {.name = "max_tokens", .kind = SCHEMA_INT, RANGE(1, 1 << 24), M(max_tokens)},              \
        {.name = "temperature", .kind = SCHEMA_NUM, RANGE(0, 2), .dflt = "1", M(temperature)},     \
        {.name = "top_p", .kind = SCHEMA_NUM, RANGE(0, 1), .dflt = "1", M(top_p)},                 \
        {.name = "top_k", .kind = SCHEMA_INT, RANGE(-1, 1 << 24), M(top_k)},                       \
        {.name = "stop", .kind = SCHEMA_CUSTOM, .check = stop_check},                              \
        {.name = "seed", .kind = SCHEMA_INT, M(seed)},                                             \
        {.name = "n", .kind = SCHEMA_INT, RANGE(1, 1), M(n)},                                      \
        {.name = "stream", .kind = SCHEMA_BOOL, M(stream)},                                        \
        {.name = "stream_options", .kind = SCHEMA_OBJ, .obj = &stream_options_schema},             \
        {.name = "user", .kind = SCHEMA_STR, M(user)}

static const struct schema_field completion_fields[] = {
    COMMON_FIELDS,
    {.name = "prompt", .kind = SCHEMA_CUSTOM, .flags = SCHEMA_REQUIRED, .check = prompt_check},
    {.name = NULL},
};
static const struct schema completion_schema = {.fields = completion_fields,
                                                .flags = SCHEMA_EXACT | SCHEMA_PROTO3};

static const struct schema_field chat_fields[] = {
    COMMON_FIELDS,
    {.name = "max_completion_tokens", .kind = SCHEMA_INT, RANGE(1, 1 << 24),
     M(max_completion_tokens)},
    {.name = "messages", .kind = SCHEMA_OBJS, .flags = SCHEMA_REQUIRED, .obj = &message_schema},
    {.name = NULL},
};
static const struct schema chat_schema = {.fields = chat_fields,
                                          .flags = SCHEMA_EXACT | SCHEMA_PROTO3};
#undef RANGE
#undef M

void serve_error(struct serve_reply *r, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type = status == 404   ? "not_found_error"
                       : status == 503 ? "service_unavailable"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    r->status = status;
    r->body = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", msg, "type", type, "code",
                        status);
}

/* ---- UTF-8 ---- */

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 when invalid or cut short.
 * Strict as Jansson is (a string it refuses makes no reply): no overlong forms, no
 * surrogates, nothing above U+10FFFF. */
static int utf8_seq(const unsigned char *s, size_t n)
{
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                              : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Bytes of s[0..n) before a trailing sequence that more bytes could still complete. */
static size_t utf8_complete(const char *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80)
            continue; // continuation byte: look further back
        int want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return want > (int)back ? n - back : n;
    }
    return n;
}

/* A JSON string of s[0..n) with invalid bytes replaced by U+FFFD. */
static json_t *json_text(const char *s, size_t n)
{
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n;) {
        int l = utf8_seq((const unsigned char *)s + i, n - i);
        if (l) {
            memcpy(o + k, s + i, l);
            k += l, i += l;
        } else {
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3, i++;
        }
    }
    json_t *j = json_stringn(o, k);
    free(o);
    return j;
}

/* ---- a request on the engine ---- */

struct serve_stream {
    struct serve *s;
    struct gen_seq q;
    int32_t *ids;
    size_t nids;
    int chat, stream, include_usage, nstop;
    char stop[MAX_STOP][STOP_LEN];
    char id[48];
    long created;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    char *text;     // decoded generated text (cut at a stop string)
    size_t tlen;    // its length
    size_t emitted; // bytes of text already sent (streams)
    char *sse;      // SSE bytes not yet read by HTTP
    size_t sse_len, sse_off;
};

static void sse_put(struct serve_stream *r, json_t *chunk)
{
    char *js = chunk ? json_dumps(chunk, JSON_COMPACT) : NULL;
    json_decref(chunk);
    if (!js)
        return;
    size_t n = strlen(js), need = r->sse_len + n + 8;
    char *b = realloc(r->sse, need + 1);
    if (b) {
        r->sse = b;
        r->sse_len += sprintf(b + r->sse_len, "data: %s\n\n", js);
    }
    free(js);
}

static json_t *chunk_of(struct serve_stream *r, json_t *choice)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", r->id, "object",
                     r->chat ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)r->created, "model", r->s->name, "choices", choice);
}

static void emit_delta(struct serve_stream *r, const char *text, size_t n, const char *finish)
{
    json_t *t = json_text(text, n), *choice;
    if (r->chat && n == 0 && finish) { // OpenAI's last chat chunk: an empty delta
        json_decref(t);
        choice = json_pack("{s:i,s:{},s:s}", "index", 0, "delta", "finish_reason", finish);
    } else if (r->chat)
        choice = json_pack("{s:i,s:{s:o},s:s?}", "index", 0, "delta", "content", t,
                           "finish_reason", finish);
    else
        choice = json_pack("{s:i,s:o,s:n,s:s?}", "index", 0, "text", t, "logprobs",
                           "finish_reason", finish);
    if (choice && finish == NULL) // finish_reason null while running
        json_object_set_new(choice, "finish_reason", json_null());
    sse_put(r, chunk_of(r, choice));
}

/* Generated ids that make text: all but a final end-of-text. */
static int text_ids(const struct serve_stream *r)
{
    int n = r->q.nout;
    return n > 0 && r->q.out[n - 1] == r->q.eot ? n - 1 : n;
}

static int on_token(struct gen_seq *q, int32_t tok, float lp)
{
    struct serve_stream *r = q->ctx;
    (void)lp;
    if (tok == q->eot)
        return 0; // the engine ends the sequence
    pthread_mutex_lock(&r->mu);
    free(r->text);
    r->text = tok_decode(r->s->tk, q->out, text_ids(r));
    r->tlen = r->text ? strlen(r->text) : 0;
    int stop = 0;
    size_t safe = r->tlen;
    for (int i = 0; i < r->nstop && r->text; i++) {
        char *at = strstr(r->text, r->stop[i]);
        if (at && (size_t)(at - r->text) <= safe)
            safe = at - r->text, stop = 1;
    }
    if (stop) {
        r->tlen = safe;
        r->text[safe] = 0;
    } else if (r->text) { // hold back what may still become a stop string or a character
        safe = utf8_complete(r->text, r->tlen);
        size_t hold = 0;
        for (int i = 0; i < r->nstop; i++)
            for (size_t l = strlen(r->stop[i]) - 1; l > hold; l--)
                if (l <= safe && !memcmp(r->text + safe - l, r->stop[i], l)) {
                    hold = l;
                    break;
                }
        safe -= hold;
    }
    if (r->stream && safe > r->emitted) {
        emit_delta(r, r->text + r->emitted, safe - r->emitted, NULL);
        r->emitted = safe;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static json_t *usage_of(const struct serve_stream *r)
{
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", r->q.nprompt, "completion_tokens",
                     r->q.nout, "total_tokens", r->q.nprompt + r->q.nout);
}

static const char *finish_name(enum gen_finish f)
{
    return f == GEN_LENGTH ? "length" : "stop";
}

static void on_done(struct gen_seq *q)
{
    struct serve_stream *r = q->ctx;
    pthread_mutex_lock(&r->mu);
    if (q->finish != GEN_CANCELLED) {
        if (!r->text) {
            r->text = strdup("");
            r->tlen = 0;
        }
        if (r->stream) {
            emit_delta(r, r->text + r->emitted, r->tlen - r->emitted, finish_name(q->finish));
            r->emitted = r->tlen;
            if (r->include_usage) {
                sse_put(r, json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", r->id, "object",
                                     r->chat ? "chat.completion.chunk" : "text_completion",
                                     "created", (json_int_t)r->created, "model", r->s->name,
                                     "choices", "usage", usage_of(r)));
            }
            const char *end = "data: [DONE]\n\n";
            char *b = realloc(r->sse, r->sse_len + strlen(end) + 1);
            if (b) {
                r->sse = b;
                r->sse_len += sprintf(b + r->sse_len, "%s", end);
            }
        }
        serve_metrics_request(r->s->mt, q->t_done - q->t_submit,
                              q->nout ? q->t_first - q->t_submit : -1);
    }
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void stream_destroy(struct serve_stream *r)
{
    if (!r)
        return;
    gen_seq_release(&r->q);
    free(r->ids);
    free(r->text);
    free(r->sse);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* Wait for the engine to finish r (cancelling it first when asked). */
static void wait_done(struct serve_stream *r, int cancel)
{
    if (cancel)
        gen_cancel(r->s->e, &r->q);
    pthread_mutex_lock(&r->mu);
    while (!r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

size_t serve_stream_read(struct serve_stream *r, char *buf, size_t max)
{
    // an SSE comment when nothing came for a third of the idle timeout (a long prompt, a
    // queue): the connection stays alive and clients ignore it
    static const char keepalive[] = ": keep-alive\n\n";
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += r->s->cfg.idle_timeout / 3 > 0 ? r->s->cfg.idle_timeout / 3 : 1;
    pthread_mutex_lock(&r->mu);
    while (r->sse_off == r->sse_len && !r->done)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT &&
            r->sse_off == r->sse_len && !r->done && max >= sizeof keepalive) {
            pthread_mutex_unlock(&r->mu);
            memcpy(buf, keepalive, sizeof keepalive - 1);
            return sizeof keepalive - 1;
        }
    size_t n = r->sse_len - r->sse_off;
    n = n < max ? n : max;
    memcpy(buf, r->sse + r->sse_off, n);
    r->sse_off += n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void serve_stream_free(struct serve_stream *r)
{
    if (!r)
        return;
    wait_done(r, 1);
    stream_destroy(r);
}

/* ---- the two completion routes ---- */

/* Parse the body into a new request (NULL with the error reply made). */
static struct serve_stream *start(struct serve *s, const json_t *body, int chat,
                                  struct serve_reply *rep)
{
    mtc_error_t err;
    if (!json_is_object(body)) {
        serve_error(rep, 400, "the body must be a JSON object");
        return NULL;
    }
    json_t *canon = schema_normalize(body, chat ? &chat_schema : &completion_schema, "", &err);
    if (!canon) {
        serve_error(rep, 400, "%s", err.text);
        return NULL;
    }
    struct oa_request o = {0};
    schema_fill(canon, chat ? &chat_schema : &completion_schema, &o);
    if (!serve_model_known(s, o.model)) {
        json_t *ids = serve_model_ids(s);
        char *list = json_dumps(ids, JSON_COMPACT);
        serve_error(rep, 404, "model \"%.128s\" does not exist (this server serves %s)", o.model,
                    list ? list : s->name);
        free(list);
        json_decref(ids);
        json_decref(canon);
        return NULL;
    }
    struct serve_stream *r = calloc(1, sizeof *r);
    if (!r) {
        serve_error(rep, 500, "out of memory");
        json_decref(canon);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->s = s;
    r->chat = chat;
    r->stream = o.stream;
    r->include_usage =
        json_is_true(json_object_get(json_object_get(canon, "stream_options"), "include_usage"));
    json_t *stop = json_object_get(canon, "stop"), *e;
    size_t i;
    json_array_foreach(stop, i, e) snprintf(r->stop[r->nstop++], STOP_LEN, "%s",
                                            json_string_value(e));
    int rc = 0;
    if (chat) {
        struct chat_seq cs = {0};
        rc = chat_render_prompt(s->tk, json_object_get(canon, "messages"), &cs, &err);
        r->ids = cs.ids;
        r->nids = cs.n;
        free(cs.train);
    } else {
        json_t *p = json_object_get(canon, "prompt");
        if (json_is_array(p) && json_is_integer(json_array_get(p, 0))) {
            r->nids = json_array_size(p);
            r->ids = malloc(sizeof(int32_t) * r->nids);
            if (!r->ids)
                r->nids = 0, rc = errprintf(&err, "out of memory");
            else
                json_array_foreach(p, i, e)
            {
                json_int_t v = json_integer_value(e);
                r->ids[i] = v < 0 || v > INT32_MAX ? -1 : (int32_t)v;
            }
        } else {
            const char *text = json_string_value(json_is_array(p) ? json_array_get(p, 0) : p);
            rc = tok_encode(s->tk, text, strlen(text), &r->ids, &r->nids, &err);
        }
        if (rc == 0 && r->nids == 0 && tok_eot(s->tk) >= 0) { // as mtc-train sample does
            int32_t *one = realloc(r->ids, sizeof(int32_t));
            if (one) {
                r->ids = one;
                r->ids[0] = tok_eot(s->tk);
                r->nids = 1;
            }
        }
    }
    json_decref(canon);
    if (rc < 0) {
        serve_error(rep, 400, "%s", err.text);
        stream_destroy(r);
        return NULL;
    }
    int max = chat && o.max_completion_tokens ? o.max_completion_tokens : o.max_tokens;
    if (!max) // OpenAI's default for completions is 16; chat's is "what fits"
        max = chat ? s->ctx - (int)r->nids : 16;
    if (max < 1)
        max = 1; // the prompt alone fills the context: gen_submit says so
    static unsigned long seed_ctr;
    r->q = (struct gen_seq){
        .prompt = r->ids, .nprompt = (int)r->nids, .eot = tok_eot(s->tk), .on_token = on_token,
        .on_done = on_done, .ctx = r,
        .s = {.temperature = (float)o.temperature, .top_p = (float)o.top_p,
              .top_k = o.top_k > 0 ? o.top_k : 0, .max_tokens = max,
              .seed = json_object_get(body, "seed") && !json_is_null(json_object_get(body, "seed"))
                          ? (uint64_t)(int64_t)o.seed
                          : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull +
                                __atomic_add_fetch(&seed_ctr, 1, __ATOMIC_RELAXED)}};
    if (r->q.s.top_p <= 0) {
        serve_error(rep, 400, "top_p: must be greater than 0");
        stream_destroy(r);
        return NULL;
    }
    pthread_mutex_lock(&s->id_mu);
    unsigned long id = ++s->next_id;
    pthread_mutex_unlock(&s->id_mu);
    snprintf(r->id, sizeof r->id, "%s-%lu", chat ? "chatcmpl" : "cmpl", id);
    r->created = (long)time(NULL);
    // a chat stream opens as OpenAI's does: a chunk with the role and no text yet (before
    // gen_submit, so no engine thread touches r->sse)
    if (r->stream && chat)
        sse_put(r, chunk_of(r, json_pack("{s:i,s:{s:s,s:s},s:n}", "index", 0, "delta", "role",
                                         "assistant", "content", "", "finish_reason")));
    if (gen_submit(s->e, &r->q, &err) < 0) {
        serve_error(rep, 400, "%s", err.text);
        stream_destroy(r);
        return NULL;
    }
    return r;
}

static void complete(struct serve *s, const json_t *body, int chat, struct serve_reply *rep)
{
    struct serve_stream *r = start(s, body, chat, rep);
    if (!r)
        return;
    if (r->stream) {
        rep->status = 200;
        rep->stream = r;
        return;
    }
    wait_done(r, 0);
    json_t *text = json_text(r->text ? r->text : "", r->tlen), *choice;
    if (chat)
        choice = json_pack("{s:i,s:{s:s,s:o},s:s}", "index", 0, "message", "role", "assistant",
                           "content", text, "finish_reason", finish_name(r->q.finish));
    else
        choice = json_pack("{s:i,s:o,s:n,s:s}", "index", 0, "text", text, "logprobs",
                           "finish_reason", finish_name(r->q.finish));
    rep->status = 200;
    rep->body = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", r->id, "object",
                          chat ? "chat.completion" : "text_completion", "created",
                          (json_int_t)r->created, "model", s->name, "choices", choice, "usage",
                          usage_of(r));
    stream_destroy(r);
}

void serve_completions(struct serve *s, const json_t *body, struct serve_reply *r)
{
    complete(s, body, 0, r);
}

void serve_chat(struct serve *s, const json_t *body, struct serve_reply *r)
{
    complete(s, body, 1, r);
}

/* Every name this server answers to, one entry each; "root" is the canonical
 * id (NAME@N for a registered version, else the served name). */
void serve_models(struct serve *s, struct serve_reply *r)
{
    json_t *ids = serve_model_ids(s), *data = json_array(), *id;
    const char *root = json_string_value(json_array_get(ids, s->reg_version > 0 ? 1 : 0));
    size_t i;
    json_array_foreach(ids, i, id)
    {
        json_array_append_new(data, json_pack("{s:O,s:s,s:I,s:s,s:s,s:i,s:s}", "id", id, "object",
                                              "model", "created", (json_int_t)0, "owned_by", "mtc",
                                              "root", root, "max_model_len", s->ctx, "dtype",
                                              cpu_dtype_name(model_decode_dtype(s->m))));
    }
    json_decref(ids);
    r->status = 200;
    r->body = json_pack("{s:s,s:o}", "object", "list", "data", data);
}
