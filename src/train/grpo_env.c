/* grpo_env: GRPO's verifiable rewards — the built-in environments (arithmetic: an exact
 * numeric answer; countdown: reach the target with the given numbers, each used once, a
 * format reward and an answer reward) in one table, and a user's verifier run as a command
 * (JSONL of prompt/answer/completion in on stdin, JSONL of rewards out on stdout). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/train.h"

/* The text with leading and trailing white space cut, into buf. */
static const char *trim(const char *s, char *buf, size_t len)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

/* A whole string read as a number (1), else 0. */
static int number_of(const char *s, double *v)
{
    char *end;
    if (!*s)
        return 0;
    errno = 0;
    *v = strtod(s, &end);
    return !errno && *end == 0 && isfinite(*v);
}

static float env_arithmetic(const char *prompt, const char *answer, const char *completion,
                            int *correct)
{
    (void)prompt;
    char a[256], c[256];
    double va, vc;
    trim(answer, a, sizeof a);
    trim(completion, c, sizeof c);
    if (number_of(a, &va))
        *correct = number_of(c, &vc) && vc == va;
    else
        *correct = strcmp(a, c) == 0;
    return *correct ? 1.0f : 0.0f;
}

/* ---- countdown: a small recursive-descent evaluator over + - * / and parentheses ---- */

struct expr {
    const char *p;
    int used[16], nused, bad;
};

static double parse_sum(struct expr *e);

static void skip(struct expr *e)
{
    while (*e->p == ' ')
        e->p++;
}

static double parse_atom(struct expr *e)
{
    skip(e);
    if (*e->p == '(') {
        e->p++;
        double v = parse_sum(e);
        skip(e);
        if (*e->p != ')')
            e->bad = 1;
        else
            e->p++;
        return v;
    }
    if (!isdigit((unsigned char)*e->p)) {
        e->bad = 1;
        return 0;
    }
    long v = 0;
    while (isdigit((unsigned char)*e->p) && v < 1000000)
        v = v * 10 + (*e->p++ - '0');
    if (e->nused < 16)
        e->used[e->nused++] = (int)v;
    else
        e->bad = 1;
    return (double)v;
}

static double parse_prod(struct expr *e)
{
    double v = parse_atom(e);
    for (skip(e); !e->bad && (*e->p == '*' || *e->p == '/'); skip(e)) {
        char op = *e->p++;
        double r = parse_atom(e);
        if (op == '/' && r == 0)
            e->bad = 1;
        else
            v = op == '*' ? v * r : v / r;
    }
    return v;
}

static double parse_sum(struct expr *e)
{
    double v = parse_prod(e);
    for (skip(e); !e->bad && (*e->p == '+' || *e->p == '-'); skip(e)) {
        char op = *e->p++;
        double r = parse_prod(e);
        v = op == '+' ? v + r : v - r;
    }
    return v;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The numbers of a countdown prompt: the comma-separated list inside its first [...]. */
static int prompt_numbers(const char *prompt, int *nums, int max)
{
    const char *p = strchr(prompt, '[');
    int n = 0;
    if (!p)
        return 0;
    for (p++; *p && *p != ']' && n < max;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!isdigit((unsigned char)*p))
            break;
        nums[n++] = (int)strtol(p, (char **)&p, 10);
    }
    return n;
}

/* 0.1 for a well-formed expression over the prompt's numbers (each used exactly once), 1.0
 * when it also equals the target; 0 otherwise. */
static float env_countdown(const char *prompt, const char *answer, const char *completion,
                           int *correct)
{
    char c[256], a[64];
    double target;
    *correct = 0;
    trim(completion, c, sizeof c);
    if (!number_of(trim(answer, a, sizeof a), &target) || !c[0])
        return 0.0f;
    struct expr e = {.p = c};
    double v = parse_sum(&e);
    skip(&e);
    if (e.bad || *e.p)
        return 0.0f;
    int nums[16], n = prompt_numbers(prompt, nums, 16);
    if (n != e.nused)
        return 0.0f;
    qsort(nums, (size_t)n, sizeof *nums, cmp_int);
    qsort(e.used, (size_t)n, sizeof *e.used, cmp_int);
    if (memcmp(nums, e.used, (size_t)n * sizeof *nums))
        return 0.0f;
    *correct = fabs(v - target) < 1e-9;
    return *correct ? 1.0f : 0.1f;
}

static const struct {
    const char *name;
    float (*reward)(const char *prompt, const char *answer, const char *completion, int *correct);
} envs[] = {
    {"arithmetic", env_arithmetic},
    {"countdown", env_countdown},
};
#define NENVS (int)(sizeof envs / sizeof envs[0])

int grpo_env_of(const char *name, mtc_error_t *err)
{
    for (int i = 0; name && i < NENVS; i++)
        if (!strcmp(name, envs[i].name))
            return i;
    if (name && !strcmp(name, "command"))
        return GRPO_ENV_COMMAND;
    return errprintf(err, "--env %s: want arithmetic, countdown or command (with --env-command)",
                     name ? name : "");
}

/* Run cmd with the file in as stdin and out as stdout (stderr passes through). */
static int run_cmd(const char *cmd, const char *in, const char *out, mtc_error_t *err)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return errprintf(err, "environment command: fork: %s", strerror(errno));
    if (pid == 0) {
        if (!freopen(in, "r", stdin) || !freopen(out, "w", stdout))
            _exit(127);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return errprintf(err, "environment command: wait: %s", strerror(errno));
    if (WIFSIGNALED(st))
        return errprintf(err, "environment command '%s' was killed by signal %d", cmd,
                         WTERMSIG(st));
    if (WEXITSTATUS(st) != 0)
        return errprintf(err, "environment command '%s' exited with status %d", cmd,
                         WEXITSTATUS(st));
    return 0;
}

/* The rewards of a command's output: exactly n lines {"reward": number[, "correct": bool]}. */
static int read_rewards(const char *cmd, const char *out, int n, float *reward, int *correct,
                        mtc_error_t *err)
{
    size_t len;
    char *buf = mtc_read_file(out, &len);
    if (!buf)
        return errprintf(err, "environment command '%s': cannot read its output: %s", cmd,
                         strerror(errno));
    int k = 0, rc = 0;
    for (char *p = buf, *end = buf + len; p < end && rc == 0;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *le = nl ? nl : end, *line = p;
        p = nl ? nl + 1 : end;
        if (le == line)
            continue;
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)(le - line), 0, &je);
        json_t *r = json_object_get(o, "reward"), *c = json_object_get(o, "correct");
        if (k >= n)
            rc = errprintf(err, "environment command '%s' wrote more than %d rewards", cmd, n);
        else if (!json_is_number(r) || !isfinite(json_number_value(r)) ||
                 (c && !json_is_boolean(c)))
            rc = errprintf(err,
                           "environment command '%s': output line %d is not {\"reward\": number}",
                           cmd, k + 1);
        else {
            reward[k] = (float)json_number_value(r);
            correct[k] = c ? json_is_true(c) : reward[k] >= 1.0f;
            k++;
        }
        json_decref(o);
    }
    free(buf);
    if (rc == 0 && k != n)
        rc = errprintf(err, "environment command '%s' wrote %d rewards for %d completions", cmd, k,
                       n);
    return rc;
}

/* s with every byte that is not part of valid UTF-8 replaced by U+FFFD (a completion can
 * end inside a multi-byte character), as a new JSON string. */
static json_t *utf8_string(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *b = malloc(3 * n + 1);
    if (!b)
        return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] >> 6) == 2;
        if (ok && len > 1) { // reject what jansson rejects: overlong forms, surrogates, > U+10FFFF
            uint32_t cp = c & (0x7f >> len);
            for (size_t k = 1; k < len; k++)
                cp = cp << 6 | ((unsigned char)s[i + k] & 0x3f);
            ok = !(cp < (len == 2   ? 0x80u
                         : len == 3 ? 0x800u
                                    : 0x10000u)) &&
                 !(cp >= 0xd800 && cp <= 0xdfff) && cp <= 0x10ffff;
        }
        if (ok) {
            memcpy(b + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(b + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(b, o);
    free(b);
    return j;
}

static int command_rewards(const char *cmd, int n, const char *const *prompt,
                           const char *const *answer, const char *const *completion, float *reward,
                           int *correct, mtc_error_t *err)
{
    const char *tmp = getenv("TMPDIR");
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/mtc-grpo-in.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    snprintf(out, sizeof out, "%s/mtc-grpo-out.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fi = mkstemp(in);
    if (fi < 0)
        return errprintf(err, "environment command: cannot create %s: %s", in, strerror(errno));
    int fo = mkstemp(out);
    if (fo < 0) {
        close(fi);
        unlink(in);
        return errprintf(err, "environment command: cannot create %s: %s", out, strerror(errno));
    }
    close(fo);
    FILE *f = fdopen(fi, "w");
    int rc = f ? 0 : errprintf(err, "environment command: %s", strerror(errno));
    for (int i = 0; rc == 0 && i < n; i++) {
        json_t *o = json_pack("{s:o,s:o,s:o}", "prompt", utf8_string(prompt[i]), "answer",
                              utf8_string(answer[i]), "completion", utf8_string(completion[i]));
        if (!o || json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0 || fputc('\n', f) < 0)
            rc = errprintf(err, "environment command: cannot write %s", in);
        json_decref(o);
    }
    if (f && fclose(f) != 0 && rc == 0)
        rc = errprintf(err, "environment command: cannot write %s", in);
    if (!f)
        close(fi);
    if (rc == 0)
        rc = run_cmd(cmd, in, out, err);
    if (rc == 0)
        rc = read_rewards(cmd, out, n, reward, correct, err);
    unlink(in);
    unlink(out);
    return rc;
}

int grpo_env_rewards(int env, const char *cmd, int n, const char *const *prompt,
                     const char *const *answer, const char *const *completion, float *reward,
                     int *correct, mtc_error_t *err)
{
    if (env == GRPO_ENV_COMMAND)
        return command_rewards(cmd, n, prompt, answer, completion, reward, correct, err);
    if (env < 0 || env >= NENVS)
        return errprintf(err, "unknown environment %d", env);
    for (int i = 0; i < n; i++)
        reward[i] = envs[env].reward(prompt[i], answer[i], completion[i], &correct[i]);
    return 0;
}
