/* logrule bench: a log rule (recipes/logrule.c, TRE's parallel matcher)
 * against 1 MiB lines built to make a matcher work — a run of the rule's own
 * characters that never completes a match, or completes it only at the end —
 * in CPU ms per match, beside a baseline pass over the same line (strlen)
 * and glibc's regexec (what log rules used before) on a 4 KiB prefix: the
 * longest line goodput.c reads. */
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
    size_t big = 1 << 20, small = 4096;
    char *line = malloc(big + 64), *prefix = malloc(small + 64), pat[256];
    printf("%-58s %-6s %10s %10s %10s %14s\n", "rule", "end", "1MiB ms", "strlen ms", "ratio",
           "glibc 4KiB ms");
    double worst = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int matched = 0; matched < 2; matched++) {
            size_t fl = strlen(cases[i].fill), n = 0;
            while (n + fl <= big)
                memcpy(line + n, cases[i].fill, fl), n += fl;
            line[n] = '\0';
            if (matched)
                strcpy(line + n, cases[i].tail);
            struct exp_logrule r;
            mtc_error_t err = {""};
            if (exp_logrule_compile(&r, cases[i].rule, &err) < 0) {
                printf("%s: %s\n", cases[i].rule, err.text);
                return 1;
            }
            double v[EXP_CAP_N], t0 = cpu_ms();
            int have = exp_logrule_match(&r, line, v);
            double t1 = cpu_ms();
            volatile size_t len = strlen(line);
            double t2 = cpu_ms();
            (void)len;
            exp_logrule_release(&r);
            /* glibc on the first 4 KiB (1 MiB would take hours where it retries) */
            memcpy(prefix, line, small);
            prefix[small] = '\0';
            if (matched)
                strcpy(prefix + small - strlen(cases[i].tail), cases[i].tail);
            regex_t g;
            plain(cases[i].rule, pat);
            regmatch_t m[8];
            double g0 = cpu_ms();
            int grc = regcomp(&g, pat, REG_EXTENDED) == 0 ? regexec(&g, prefix, 8, m, 0) : -1;
            double g1 = cpu_ms();
            regfree(&g);
            (void)grc;
            if (t1 - t0 > worst)
                worst = t1 - t0;
            printf("%-58s %-6s %10.2f %10.3f %10.0f %14.2f%s\n", cases[i].rule,
                   matched ? "match" : "none", t1 - t0, t2 - t1,
                   (t2 - t1) > 0 ? (t1 - t0) / (t2 - t1) : 0, g1 - g0, have ? "" : "");
        }
    }
    printf("worst 1 MiB match: %.1f ms CPU (the bound asked: < 50 ms)\n", worst);
    free(line);
    free(prefix);
    return 0;
}
