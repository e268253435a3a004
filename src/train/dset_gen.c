/* dset_gen: the built-in tiny datasets, generated locally and deterministically — a
 * pretraining corpus (the machine's license texts), chat SFT, DPO preference pairs and RL
 * prompts with verifiable answers, all from templated arithmetic and string tasks. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/data.h"
#include "train/rng.h"

/* Debian base-files' license texts: every Debian machine has them (scripts/quickstart). */
#define CORPUS_DIR "/usr/share/common-licenses"

struct buf {
    char *s;
    size_t n, cap;
};

static int put(struct buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns)
            return -1;
        b->s = ns, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of CORPUS_DIR (links followed) in byte order of their names, concatenated. */
static char *gen_corpus(size_t *len, mtc_error_t *err)
{
    DIR *d = opendir(CORPUS_DIR);
    if (!d)
        return errprintf(err, "builtin:tiny-corpus: %s: %s", CORPUS_DIR, strerror(errno)), NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 32) * sizeof *nn);
            if (!nn)
                break;
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    struct buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        size_t fl;
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, names[i]);
        char *f = mtc_read_file(path, &fl);
        if (!f)
            rc = errprintf(err, "builtin:tiny-corpus: %s: %s", path, strerror(errno));
        else if (put(&b, f, fl) < 0)
            rc = errprintf(err, "builtin:tiny-corpus: out of memory");
        free(f);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc == 0 && b.n == 0)
        rc = errprintf(err, "builtin:tiny-corpus: %s has no texts", CORPUS_DIR);
    if (rc < 0) {
        free(b.s);
        return NULL;
    }
    *len = b.n;
    return b.s;
}

/* ---- templated tasks ---- */

static int pick(uint64_t *s, int n)
{
    return (int)(train_splitmix64(s) % (uint64_t)n);
}

static const char *const words[] = {
    "apple",  "river",  "stone",  "garden", "window", "silver", "planet", "forest", "candle",
    "bridge", "market", "pencil", "rocket", "winter", "summer", "yellow", "orange", "purple",
    "castle", "dragon", "island", "mirror", "button", "coffee", "turtle", "rabbit", "spider",
    "cloud",  "ocean",  "tiger",  "lemon",  "honey",  "music",  "paper",  "light",  "green",
    "table",  "chair",  "house",  "water",  "bread",  "horse",  "train",  "clock",  "smile",
    "storm",  "brick",  "flute",  "grape",  "mango",  "piano",  "robot",  "sugar",  "zebra",
    "cat",    "dog",    "sun",    "moon",   "star",   "tree",   "fish",   "bird",   "book",
};
#define NWORDS (int)(sizeof words / sizeof words[0])

/* One task: the prompt, the correct answer and a wrong one. The wrong answers echo the
 * question instead of answering it (the numbers run together, the word unchanged), a
 * failure small models make and can learn to avoid from a few hundred pairs.
 * The arithmetic's size: sums and differences of 0..top-1, products of 1..ptop (the
 * successor task keeps 0..99); top 100 and ptop 12 draw what they did before the bounds. */
struct task {
    char prompt[160], answer[64], wrong[64];
};

static void make_task(uint64_t *s, struct task *t, int arithmetic_only, int top, int ptop)
{
    int kind = arithmetic_only ? pick(s, 3) : pick(s, 8);
    int a = pick(s, 100), b = pick(s, 100);
    if (kind <= 1)
        a %= top, b %= top;
    const char *w = words[pick(s, NWORDS)];
    size_t wl = strlen(w);
    switch (kind) {
    case 0:
        snprintf(t->prompt, sizeof t->prompt, "What is %d + %d?", a, b);
        snprintf(t->answer, sizeof t->answer, "%d", a + b);
        snprintf(t->wrong, sizeof t->wrong, "%d%d", a, b);
        break;
    case 1:
        if (a < b) {
            int x = a;
            a = b, b = x;
        }
        snprintf(t->prompt, sizeof t->prompt, "What is %d - %d?", a, b);
        snprintf(t->answer, sizeof t->answer, "%d", a - b);
        snprintf(t->wrong, sizeof t->wrong, "%d%d", a, b);
        break;
    case 2:
        a = 1 + a % ptop, b = 1 + b % ptop;
        snprintf(t->prompt, sizeof t->prompt, "What is %d times %d?", a, b);
        snprintf(t->answer, sizeof t->answer, "%d", a * b);
        snprintf(t->wrong, sizeof t->wrong, "%d%d", a, b);
        break;
    case 3:
        snprintf(t->prompt, sizeof t->prompt, "Reverse the word \"%s\".", w);
        for (size_t i = 0; i < wl; i++)
            t->answer[i] = w[wl - 1 - i];
        t->answer[wl] = 0;
        snprintf(t->wrong, sizeof t->wrong, "%s", w); /* copied, not reversed */
        break;
    case 4:
        snprintf(t->prompt, sizeof t->prompt, "Write \"%s\" in capital letters.", w);
        for (size_t i = 0; i <= wl; i++)
            t->answer[i] = (char)(w[i] >= 'a' && w[i] <= 'z' ? w[i] - 32 : w[i]);
        snprintf(t->wrong, sizeof t->wrong, "%s", w);
        break;
    case 5:
        snprintf(t->prompt, sizeof t->prompt, "How many letters are in \"%s\"?", w);
        snprintf(t->answer, sizeof t->answer, "%zu", wl);
        snprintf(t->wrong, sizeof t->wrong, "%s", w);
        break;
    case 6:
        snprintf(t->prompt, sizeof t->prompt, "What is the first letter of \"%s\"?", w);
        snprintf(t->answer, sizeof t->answer, "%c", w[0]);
        snprintf(t->wrong, sizeof t->wrong, "%s", w);
        break;
    default:
        snprintf(t->prompt, sizeof t->prompt, "What number comes after %d?", a);
        snprintf(t->answer, sizeof t->answer, "%d", a + 1);
        snprintf(t->wrong, sizeof t->wrong, "after %d", a);
        break;
    }
}

/* records JSONL lines of kind (DSET_SFT / DSET_DPO / DSET_RL) from a fixed seed, the
 * arithmetic bounded by top and ptop (make_task) */
static char *gen_tasks(int kind, size_t records, uint64_t seed, int top, int ptop, size_t *len,
                       mtc_error_t *err)
{
    struct buf b = {0};
    uint64_t s = seed;
    for (size_t i = 0; i < records; i++) {
        struct task t;
        make_task(&s, &t, kind == DSET_RL, top, ptop);
        json_t *o =
            kind == DSET_SFT   ? json_pack("{s:s,s:s}", "prompt", t.prompt, "response", t.answer)
            : kind == DSET_DPO ? json_pack("{s:s,s:s,s:s}", "prompt", t.prompt, "chosen", t.answer,
                                           "rejected", t.wrong)
                               : json_pack("{s:s,s:s}", "prompt", t.prompt, "answer", t.answer);
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        int bad = !line || put(&b, line, strlen(line)) < 0 || put(&b, "\n", 1) < 0;
        free(line);
        if (bad) {
            free(b.s);
            return errprintf(err, "builtin generator: out of memory"), NULL;
        }
    }
    *len = b.n;
    return b.s;
}

/* Countdown (GRPO's countdown environment): three numbers 1..9 and a target made from all
 * three with + - *, so every prompt has an answer; the numbers in [..] are what the
 * environment reads. The answer field is the target. */
static char *gen_countdown(size_t records, uint64_t seed, size_t *len, mtc_error_t *err)
{
    struct buf b = {0};
    uint64_t s = seed;
    for (size_t i = 0; i < records; i++) {
        int n[3], v;
        for (int k = 0; k < 3; k++)
            n[k] = 1 + pick(&s, 9);
        do {
            int o1 = pick(&s, 3), o2 = pick(&s, 3);
            v = o1 == 0 ? n[0] + n[1] : o1 == 1 ? n[0] * n[1] : n[0] - n[1];
            v = o2 == 0 ? v + n[2] : o2 == 1 ? v * n[2] : v - n[2];
        } while (v <= 0 && (n[0] = 1 + pick(&s, 9)));
        char prompt[128], answer[16];
        snprintf(prompt, sizeof prompt, "Using the numbers [%d, %d, %d], make %d.", n[0], n[1],
                 n[2], v);
        snprintf(answer, sizeof answer, "%d", v);
        json_t *o = json_pack("{s:s,s:s}", "prompt", prompt, "answer", answer);
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        int bad = !line || put(&b, line, strlen(line)) < 0 || put(&b, "\n", 1) < 0;
        free(line);
        if (bad) {
            free(b.s);
            return errprintf(err, "builtin generator: out of memory"), NULL;
        }
    }
    *len = b.n;
    return b.s;
}

/* The arithmetic is sized for the tiny models (issue 48): tiny-rl's sums, differences and
 * products of small numbers (24 distinct prompts) are what a tiny model after the tiny SFT
 * answers right a fifth of the time and GRPO raises within 30 steps; tiny-sft's arithmetic
 * (operands 0..4, products 1..4) covers them, in the same format. With two-digit operands
 * the SFT stage answered every question "10" and GRPO saw groups of eight zero rewards.
 * tiny-dpo keeps 0..99. */
static const struct {
    const char *name;
    int kind;
    size_t records;
    uint64_t seed;
    int top, ptop; /* make_task's arithmetic bounds */
} generators[] = {
    // clang-format off
    {"tiny-corpus",    DSET_PRETRAIN, 0,    0,       0,   0},
    {"tiny-sft",       DSET_SFT,      4000, 0x5f7u,  5,   4},
    {"tiny-dpo",       DSET_DPO,      2000, 0xd90u,  100, 12},
    {"tiny-rl",        DSET_RL,       1000, 0x41u,   3,   3},
    {"tiny-countdown", DSET_RL,       1000, 0xc0du,  0,   0},
    // clang-format on
};
#define NGEN (sizeof generators / sizeof generators[0])

int dset_generator_kind(const char *name)
{
    for (size_t i = 0; name && i < NGEN; i++)
        if (!strcmp(name, generators[i].name))
            return generators[i].kind;
    return -1;
}

char *dset_generate(const char *name, size_t *len, mtc_error_t *err)
{
    for (size_t i = 0; name && i < NGEN; i++) {
        if (strcmp(name, generators[i].name))
            continue;
        if (generators[i].kind == DSET_PRETRAIN)
            return gen_corpus(len, err);
        if (!strcmp(name, "tiny-countdown"))
            return gen_countdown(generators[i].records, generators[i].seed, len, err);
        return gen_tasks(generators[i].kind, generators[i].records, generators[i].seed,
                         generators[i].top, generators[i].ptop, len, err);
    }
    char list[160] = "";
    for (size_t i = 0; i < NGEN; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 generators[i].name);
    return errprintf(err, "unknown built-in dataset \"%s\" (one of %s)", name ? name : "", list),
           NULL;
}
