/* logrule: progress read from a program's log lines — a recipe's
 * monitor.log_rules, POSIX extended regular expressions whose named groups
 * (?<step>…), (?<loss>…), (?<step_time_s>…) and (?<checkpoint_s>…) say what
 * a matching line holds (as HyperPod's log-pattern rules do), for programs
 * that write neither MTC_METRICS_FILE rows nor TensorBoard events. POSIX has
 * no named groups: the names are taken out of the pattern and the groups
 * counted, then TRE compiles what is left. A user writes the pattern, so it
 * is matched in time linear in the line: TRE's parallel (tagged NFA) matcher,
 * which it uses for any pattern without back-references (glibc's regexec
 * retries from each position: a 16 KiB line took seconds), and scan refuses
 * back-references and nested quantifiers. TRE's matcher still costs tens of
 * ns a byte, so a line is matched on its first EXP_LOGRULE_LINE_MAX bytes
 * (all goodput.c reads) and only when it holds the literals every match
 * must (needs: grep's "must" strings), found by memmem first. */
#include "experiment/experiment.h"

#include <tre/tre.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const cap_names[EXP_CAP_N] = {
    [EXP_CAP_STEP] = "step",
    [EXP_CAP_LOSS] = "loss",
    [EXP_CAP_STEP_TIME] = "step_time_s",
    [EXP_CAP_CHECKPOINT] = "checkpoint_s",
};

static int cap_index(const char *name, size_t len)
{
    for (int i = 0; i < EXP_CAP_N; i++)
        if (strlen(cap_names[i]) == len && strncmp(cap_names[i], name, len) == 0)
            return i;
    return -1;
}

/* The end of a bracket expression that starts at p ('['): "]" first is a
 * member, "[:class:]", "[.x.]" and "[=x=]" are read whole. NULL: unclosed. */
static const char *bracket_end(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++;
    for (; *p; p++) {
        if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char c = p[1];
            const char *q = p + 2;
            while (*q && !(q[0] == c && q[1] == ']'))
                q++;
            if (!*q)
                return NULL;
            p = q + 1;
        } else if (*p == ']') {
            return p;
        }
    }
    return NULL;
}

/* A {m}, {m,} or {m,n} interval at p: its largest count (m when open), or -1
 * when it is not one (regcomp then says what is wrong). *end: past it. */
static int interval(const char *p, const char **end)
{
    char *e;
    long m = strtol(p + 1, &e, 10), n = m;
    if (e == p + 1 || m < 0)
        return -1;
    if (*e == ',') {
        const char *f = e + 1;
        n = *f == '}' ? m : strtol(f, &e, 10);
        if (*f != '}' && (e == f || n < m))
            return -1;
        if (*f == '}')
            e = (char *)f;
    }
    if (*e != '}')
        return -1;
    *end = e + 1;
    return (int)(n > m ? n : m);
}

/* The pattern without its groups' names into out (3 times as long as
 * pattern: a plain group becomes TRE's non-capturing "(?:"), the named
 * groups' capture numbers into r->group, *groups and *captured counted. What would make
 * matching or compiling cost more than linear is refused: a back-reference
 * ("\\2"), a nested quantifier (a repeated group that holds a repetition:
 * "(a*)*", "(x{2})+"), a repetition of a repetition ("a++", "a*{2}"), an
 * interval past EXP_LOGRULE_DUP (regcomp copies the atom that often) or one
 * that is not {m}, {m,} or {m,n} (TRE reads "{~1}" as approximate matching).
 * 0, or -1 with err. */
static int scan(const char *pattern, char *out, struct exp_logrule *r, int *groups,
                int *captured, mtc_error_t *err)
{
    size_t o = 0;
    int depth = 0, quant = 0, closed = 0; /* closed: the atom just read is group `closed` */
    int num[EXP_LOGRULE_GROUPS + 1];      /* per open group: its number */
    int holds[EXP_LOGRULE_GROUPS + 1];    /* per open group: a repetition inside */
    int last_holds = 0;                   /* the group just closed held one */
    num[0] = 0, holds[0] = 0;
    for (const char *p = pattern; *p;) {
        int at = (int)(p - pattern) + 1;
        int is_quant = *p == '*' || *p == '+' || *p == '?' || *p == '{';
        if (is_quant && quant)
            return errprintf(err, "a repetition of a repetition at character %d", at);
        if (is_quant && closed && last_holds)
            return errprintf(err,
                             "a nested quantifier at character %d: group %d, which holds a "
                             "repetition, is repeated (log rules are matched in linear time)",
                             at, closed);
        if (is_quant)
            holds[depth] = 1;
        if (*p == '{') {
            const char *end;
            int n = interval(p, &end);
            if (n < 0)
                return errprintf(err,
                                 "character %d: an interval is {m}, {m,} or {m,n} (a brace "
                                 "itself is \\{)",
                                 at);
            if (n > EXP_LOGRULE_DUP)
                return errprintf(err, "an interval of %d: at most %d", n, EXP_LOGRULE_DUP);
            memcpy(out + o, p, (size_t)(end - p));
            o += (size_t)(end - p);
            p = end;
            quant = 1, closed = 0;
            continue;
        }
        quant = is_quant;
        closed = 0;
        if (*p == '\\') { /* an escaped character, kept as it is */
            if (p[1] >= '1' && p[1] <= '9')
                return errprintf(err,
                                 "a back-reference \\%c at character %d (log rules are matched "
                                 "in linear time, without back-references)",
                                 p[1], at);
            out[o++] = *p++;
            if (*p)
                out[o++] = *p++;
        } else if (*p == '[') {
            const char *e = bracket_end(p);
            if (!e)
                return errprintf(err, "an unclosed [ bracket expression");
            memcpy(out + o, p, (size_t)(e - p) + 1);
            o += (size_t)(e - p) + 1;
            p = e + 1;
        } else if (*p == ')') {
            out[o++] = *p++;
            if (depth > 0) {
                closed = num[depth];
                last_holds = holds[depth--];
                if (last_holds)
                    holds[depth] = 1;
            }
        } else if (*p == '(') {
            if (++*groups >= EXP_LOGRULE_GROUPS)
                return errprintf(err, "more than %d groups", EXP_LOGRULE_GROUPS - 1);
            ++depth;
            num[depth] = *groups, holds[depth] = 0;
            out[o++] = *p++;
            if (*p != '?') { /* only the named groups capture: fewer tags to carry */
                memcpy(out + o, "?:", 2);
                o += 2;
                continue;
            }
            /* (?<name>…) or (?P<name>…): the only extension taken */
            const char *name = p[1] == '<' ? p + 2 : p[1] == 'P' && p[2] == '<' ? p + 3 : NULL;
            const char *close = name ? strchr(name, '>') : NULL;
            int c = close ? cap_index(name, (size_t)(close - name)) : -1;
            if (!close)
                return errprintf(err, "group %d: only named groups (?<name>...) may start with (?",
                                 *groups);
            if (c < 0)
                return errprintf(err,
                                 "group %d: unknown name \"%.*s\" (step, loss, step_time_s, "
                                 "checkpoint_s)",
                                 *groups, (int)(close - name) > 40 ? 40 : (int)(close - name),
                                 name);
            if (r->group[c])
                return errprintf(err, "the group name %s is given twice", cap_names[c]);
            r->group[c] = ++*captured;
            p = close + 1;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    for (int c = 0; c < EXP_CAP_N; c++)
        if (r->group[c])
            return 0;
    return errprintf(err, "no named group: name at least one of (?<step>...), (?<loss>...), "
                          "(?<step_time_s>...), (?<checkpoint_s>...)");
}

/* The end of the group that opens at p ('('): past its ')'. */
static const char *group_end(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '[' && bracket_end(p))
            p = bracket_end(p);
        else if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p + 1;
    }
    return p;
}

/* Keep run (len bytes) among r's needs, the longest EXP_LOGRULE_NEEDS. */
static void keep_need(struct exp_logrule *r, const char *run, size_t len)
{
    if (len == 0)
        return;
    int at = r->nneed;
    if (at == EXP_LOGRULE_NEEDS) {
        at = 0; /* replace the shortest, if shorter */
        for (int i = 1; i < r->nneed; i++)
            if (strlen(r->need[i]) < strlen(r->need[at]))
                at = i;
        if (strlen(r->need[at]) >= len)
            return;
        free(r->need[at]);
    } else {
        r->nneed++;
    }
    r->need[at] = strndup(run, len);
    if (!r->need[at]) /* out of memory: one need fewer, never a wrong one */
        r->need[at] = r->need[--r->nneed];
}

/* What every match of pattern (scan accepted it) holds: the runs of literal
 * characters its top level concatenates, each required once or more (a
 * literal repeated with + or {m,} with m > 0 ends its run; one that may be
 * absent — ?, *, {0,n} — or anything not a literal — a group, a bracket
 * expression, ".", an anchor, TRE's escapes \w, \<, \x41 — ends it too).
 * Only ASCII is taken literally (a locale's multibyte character is one atom
 * to TRE). A top-level '|', or TRE's \Q...\E quoting, means nothing is
 * required. */
static void needs(const char *pattern, struct exp_logrule *r)
{
    size_t n = strlen(pattern), len = 0;
    char *run = strstr(pattern, "\\Q") ? NULL : malloc(n + 1);
    if (!run)
        return;
    for (const char *p = pattern; *p;) {
        int lit = -1; /* the atom's literal character, or -1 */
        const char *next;
        if (*p == '|') {
            for (int i = 0; i < r->nneed; i++)
                free(r->need[i]);
            r->nneed = 0;
            break;
        } else if (*p == '(') {
            next = group_end(p);
        } else if (*p == '[') {
            next = bracket_end(p) ? bracket_end(p) + 1 : p + strlen(p);
        } else if (*p == '\\') {
            if (p[1] && isascii((unsigned char)p[1]) && !isalnum((unsigned char)p[1]) &&
                p[1] != '<' && p[1] != '>')
                lit = (unsigned char)p[1];
            next = p[1] ? p + 2 : p + 1;
        } else {
            if (isascii((unsigned char)*p) && !strchr(".^$*+?{", *p))
                lit = (unsigned char)*p;
            next = p + 1;
        }
        /* the atom's quantifier: how often it must appear */
        long least = 1;
        int more = 0;
        if (*next == '*' || *next == '?') {
            least = 0, next++;
        } else if (*next == '+') {
            more = 1, next++;
        } else if (*next == '{') {
            const char *end;
            least = strtol(next + 1, NULL, 10);
            more = 1;
            next = interval(next, &end) >= 0 ? end : next + 1;
        }
        if (lit >= 0 && least > 0)
            run[len++] = (char)lit;
        if (lit < 0 || least == 0 || more) {
            keep_need(r, run, len);
            len = 0;
        }
        p = next;
    }
    keep_need(r, run, len);
    free(run);
    for (int i = 1; i < r->nneed; i++) /* the longest, likely the rarest, first */
        for (int j = i; j > 0 && strlen(r->need[j]) > strlen(r->need[j - 1]); j--) {
            char *t = r->need[j];
            r->need[j] = r->need[j - 1];
            r->need[j - 1] = t;
        }
}

int exp_logrule_compile(struct exp_logrule *r, const char *pattern, mtc_error_t *err)
{
    memset(r, 0, sizeof(*r));
    char *out = malloc(3 * strlen(pattern) + 1);
    if (!out)
        return errprintf(err, "out of memory");
    int groups = 0, captured = 0;
    if (scan(pattern, out, r, &groups, &captured, err) < 0) {
        free(out);
        return -1;
    }
    regex_t *re = calloc(1, sizeof(*re));
    int rc = re ? tre_regcomp(re, out, REG_EXTENDED) : REG_ESPACE;
    free(out);
    if (rc != 0) {
        char msg[160] = "out of memory";
        if (re)
            tre_regerror(rc, re, msg, sizeof(msg));
        free(re);
        return errprintf(err, "not a POSIX extended regular expression: %s", msg);
    }
    r->re = re;
    r->compiled = 1;
    needs(pattern, r);
    return 0;
}

void exp_logrule_release(struct exp_logrule *r)
{
    if (r->compiled)
        tre_regfree(r->re);
    free(r->re);
    for (int i = 0; i < r->nneed; i++)
        free(r->need[i]);
    r->nneed = 0;
    r->re = NULL;
    r->compiled = 0;
}

int exp_logrule_match(const struct exp_logrule *r, const char *line, double v[EXP_CAP_N])
{
    regmatch_t m[EXP_LOGRULE_GROUPS];
    size_t n = strnlen(line, EXP_LOGRULE_LINE_MAX - 1);
    if (!r->compiled)
        return 0;
    for (int i = 0; i < r->nneed; i++)
        if (!memmem(line, n, r->need[i], strlen(r->need[i])))
            return 0;
    /* a cut line has no end there for `$` */
    if (tre_regnexec(r->re, line, n, EXP_LOGRULE_GROUPS, m, line[n] ? REG_NOTEOL : 0) != 0)
        return 0;
    int have = 0;
    for (int c = 0; c < EXP_CAP_N; c++) {
        int g = r->group[c];
        if (!g || m[g].rm_so < 0)
            continue;
        char num[64];
        size_t len = (size_t)(m[g].rm_eo - m[g].rm_so);
        if (len == 0 || len >= sizeof(num))
            continue;
        memcpy(num, line + m[g].rm_so, len);
        num[len] = '\0';
        char *end;
        errno = 0;
        double x = strtod(num, &end);
        if (*end || errno == ERANGE || (c != EXP_CAP_LOSS && !isfinite(x)) ||
            (c == EXP_CAP_STEP && (x < 0 || x > 9e15)) || (c >= EXP_CAP_STEP_TIME && x < 0))
            continue; /* not a number of that kind: the capture is left out */
        v[c] = c == EXP_CAP_STEP ? floor(x) : x;
        have |= 1 << c;
    }
    return have;
}
