/* logrule bench: a log rule (experiment/logrule.c: a literal prefilter, then
 * TRE's parallel matcher on at most EXP_LOGRULE_LINE_MAX bytes) against
 * lines built to make a matcher work — a run of the rule's own characters
 * that never completes a match, or completes it only at the end — in CPU ms:
 * one 1 MiB line (the bound: < 50 ms; a rule sees its first
 * EXP_LOGRULE_LINE_MAX bytes), and 1 MiB of log as 256 lines of 4 KiB each
 * (the longest lines goodput.c reads: the matcher's throughput), beside a
 * baseline pass over the same bytes (strlen) and glibc's regexec (what log
 * rules used before) on one 4 KiB line. */
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The pattern without its names, for glibc (only "(?<name>" forms here). */
static void plain(const char *p, char *out)
{
    while (*p) {
        if (p[0] == '(' && p[1] == '?' && p[2] == '<') {
            *out++ = '(';
            p = strchr(p, '>') + 1;
        } else {
            *out++ = *p++;
        }
    }
    *out = '\0';
}

/* line (n bytes of fill, then tail when matched) into buf. */
static size_t fill(char *buf, size_t n, const char *f, const char *tail, int matched)
{
    size_t fl = strlen(f), tl = matched ? strlen(tail) : 0, at = 0;
    while (at + fl + tl <= n)
        memcpy(buf + at, f, fl), at += fl;
    if (matched)
        memcpy(buf + at, tail, tl), at += tl;
    buf[at] = '\0';
    return at;
}

int main(void)
{
    static const struct {
        const char *rule, *fill, *tail;
    } cases[] = {
        {"(?<step>[0-9]+)", "x", " 42"},
        {"^step (?<step>[0-9]+) loss (?<loss>[0-9.]+)", "step 1 loss ", "1.5"},
        {"^iteration +(?<step>[0-9]+)/.*lm loss: (?<loss>[0-9.E+-]+)", "iteration 1/", " lm loss: 2"},
        {"(?<loss>[0-9]+)/(?<step>[0-9]+)", "1", "/7"},
        {"(?<step>(a|aa)+)b", "a", "b"},
        {"saved checkpoint .* in (?<checkpoint_s>[0-9.]+) s", "saved checkpoint ", " in 2.5 s"},
    };
    enum { BIG = 1 << 20, SMALL = 4095, LINES = 256 };
    char *line = malloc(BIG + 64), *lines[LINES], pat[256];
    for (int k = 0; k < LINES; k++)
        lines[k] = malloc(SMALL + 64);
    printf("%-58s %-6s %10s %12s %10s %10s %14s\n", "rule", "end", "1MiB line", "256x4KiB ms",
           "strlen ms", "ratio", "glibc 4KiB ms");
    double worst = 0, worst_lines = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int matched = 0; matched < 2; matched++) {
            fill(line, BIG, cases[i].fill, cases[i].tail, matched);
            for (int k = 0; k < LINES; k++)
                fill(lines[k], SMALL, cases[i].fill, cases[i].tail, matched);
            struct exp_logrule r;
            mtc_error_t err = {""};
            if (exp_logrule_compile(&r, cases[i].rule, &err) < 0) {
                printf("%s: %s\n", cases[i].rule, err.text);
                return 1;
            }
            double v[EXP_CAP_N], t0 = cpu_ms();
            int have = exp_logrule_match(&r, line, v);
            double t1 = cpu_ms();
            int have_lines = 0;
            for (int k = 0; k < LINES; k++)
                have_lines += exp_logrule_match(&r, lines[k], v) != 0;
            double t2 = cpu_ms();
            volatile size_t len = 0;
            for (int k = 0; k < LINES; k++)
                len += strlen(lines[k]);
            double t3 = cpu_ms();
            exp_logrule_release(&r);
            /* glibc on one 4 KiB line (1 MiB would take hours where it retries) */
            regex_t g;
            plain(cases[i].rule, pat);
            regmatch_t m[8];
            double g0 = cpu_ms();
            int grc = regcomp(&g, pat, REG_EXTENDED) == 0 ? regexec(&g, lines[0], 8, m, 0) : -1;
            double g1 = cpu_ms();
            regfree(&g);
            (void)grc;
            if (t1 - t0 > worst)
                worst = t1 - t0;
            if (t2 - t1 > worst_lines)
                worst_lines = t2 - t1;
            (void)have, (void)have_lines;
            printf("%-58s %-6s %10.2f %12.2f %10.3f %10.0f %14.2f\n", cases[i].rule,
                   matched ? "match" : "none", t1 - t0, t2 - t1, t3 - t2,
                   (t3 - t2) > 0 ? (t2 - t1) / (t3 - t2) : 0, g1 - g0);
        }
    }
    printf("worst 1 MiB line: %.1f ms CPU (the bound asked: < 50 ms); worst 1 MiB of 4 KiB "
           "lines: %.1f ms\n",
           worst, worst_lines);
    free(line);
    for (int k = 0; k < LINES; k++)
        free(lines[k]);
    return 0;
}
