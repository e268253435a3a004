/* Fuzz harness: log rules (experiment/logrule.c) — the input's first line is a
 * pattern (named groups taken out, the rest compiled as a POSIX ERE), the
 * other lines are log lines matched against it: whatever the bytes, the
 * pattern is compiled or refused with a message, never read past its end, a
 * match's values are numbers of their kind, and the literals the rule
 * requires never turn away a line the matcher would take. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/experiment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0; /* regcomp's cost grows fast with the pattern: bounded as recipes are */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *nl = strchr(text, '\n');
    char *lines = nl ? nl + 1 : text + size;
    if (nl)
        *nl = '\0';
    struct exp_logrule r;
    mtc_error_t err = {""};
    if (exp_logrule_compile(&r, text, &err) < 0) {
        if (!err.text[0])
            abort(); /* a refusal always says why */
        free(text);
        return 0;
    }
    for (char *line = lines; *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        double v[EXP_CAP_N];
        int have = exp_logrule_match(&r, line, v);
        if ((have & (1 << EXP_CAP_STEP)) && (!(v[EXP_CAP_STEP] >= 0) || v[EXP_CAP_STEP] != floor(v[EXP_CAP_STEP])))
            abort(); /* a step is a whole number */
        for (int c = EXP_CAP_STEP_TIME; c < EXP_CAP_N; c++)
            if ((have & (1 << c)) && !(v[c] >= 0 && isfinite(v[c])))
                abort(); /* times are finite and not negative */
        struct exp_logrule bare = r; /* the same rule without the literal prefilter */
        bare.nneed = 0;
        double w[EXP_CAP_N];
        if (exp_logrule_match(&bare, line, w) != have)
            abort(); /* the prefilter turned away a line the matcher takes */
        if (!end)
            break;
        line = end + 1;
    }
    exp_logrule_release(&r);
    free(text);
    return 0;
}
