/* registry names: model names and the experiment names mapped onto them,
 * version aliases, NAME[@SELECTOR] references, and the artifact formats'
 * names. Pure: no file is touched. */
#include "registry/registry.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct schema_enum registry_format_enum = SCHEMA_NAMES(
    NULL, [REGISTRY_NATIVE] = "native", [REGISTRY_HF] = "hf", [REGISTRY_LLMC] = "llmc");

/* ---- names ---- */

int registry_name_valid(const char *name)
{
    return name && mtc_name_valid(name, REGISTRY_NAME_MAX);
}

int registry_name_error(const char *name, mtc_error_t *err)
{
    errno = EINVAL;
    return errprintf(err,
                     "model name \"%.64s\": must match [a-z][a-z0-9-]{0,62} (lowercase letters, "
                     "digits and '-', starting with a letter)",
                     name ? name : "");
}

int registry_name_from(const char *experiment, char out[REGISTRY_NAME_MAX + 1])
{
    size_t o = 0;
    if (experiment && isdigit((unsigned char)experiment[0])) {
        memcpy(out, "m-", 2);
        o = 2;
    }
    for (const char *p = experiment; p && *p && o < REGISTRY_NAME_MAX; p++) {
        int c = tolower((unsigned char)*p);
        if (c == '_' || c == '.')
            c = '-';
        if (!(islower(c) || isdigit(c) || c == '-'))
            continue;
        if (c == '-' && (o == 0 || out[o - 1] == '-'))
            continue;
        out[o++] = (char)c;
    }
    while (o > 0 && out[o - 1] == '-')
        o--;
    out[o] = '\0';
    if (!registry_name_valid(out)) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int registry_alias_valid(const char *alias)
{
    size_t n = alias ? strlen(alias) : 0;
    if (n == 0 || n > REGISTRY_ALIAS_MAX || !islower((unsigned char)alias[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)alias[i]) && !isdigit((unsigned char)alias[i]) &&
            alias[i] != '-')
            return 0;
    return 1; /* a lowercase letter first: never a number */
}

int registry_ref_parse(const char *ref, struct registry_ref *out, mtc_error_t *err)
{
    memset(out, 0, sizeof(*out));
    errno = EINVAL;
    if (!ref || !*ref)
        return errprintf(err, "model reference: empty (want NAME, NAME@VERSION or NAME@ALIAS)");
    const char *at = strchr(ref, '@');
    size_t n = at ? (size_t)(at - ref) : strlen(ref);
    if (n > REGISTRY_NAME_MAX)
        return registry_name_error(ref, err);
    memcpy(out->name, ref, n);
    out->name[n] = '\0';
    if (!registry_name_valid(out->name))
        return registry_name_error(out->name, err);
    if (!at)
        return 0;
    const char *sel = at + 1;
    if (*sel && strspn(sel, "0123456789") == strlen(sel)) {
        long v = strtol(sel, NULL, 10);
        if (v < 1 || v > 1000000000 || sel[0] == '0')
            return errprintf(err, "model reference \"%.80s\": version must be 1 or more", ref);
        out->version = (int)v;
        return 0;
    }
    if (!registry_alias_valid(sel))
        return errprintf(err,
                         "model reference \"%.80s\": after '@' comes a version number or an alias "
                         "([a-z][a-z0-9-]{0,126})",
                         ref);
    snprintf(out->alias, sizeof(out->alias), "%s", sel);
    return 0;
}
