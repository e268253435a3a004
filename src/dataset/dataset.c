/* dataset: the kinds and states, name and source checks, and the field tables
 * of a dataset request and of mtc-train's preparation record (through the one
 * schema engine). */
#include "dataset/dataset.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const struct schema_enum dataset_kind_enum =
    SCHEMA_NAMES(NULL, [DATASET_PRETRAIN] = "pretrain", [DATASET_SFT] = "sft",
                 [DATASET_DPO] = "dpo", [DATASET_RL] = "rl");

const struct schema_enum dataset_state_enum =
    SCHEMA_NAMES(NULL, [DATASET_PREPARING] = "PREPARING", [DATASET_READY] = "READY");

int dataset_name_valid(const char *name)
{
    return name && mtc_name_valid(name, DATASET_NAME_MAX);
}

int dataset_name_error(const char *name, mtc_error_t *err)
{
    errno = EINVAL;
    return errprintf(err,
                     "dataset name \"%.64s\": must match [a-z][a-z0-9-]{0,62} (lowercase letters, "
                     "digits and '-', starting with a letter)",
                     name ? name : "");
}

int dataset_is_builtin(const char *source)
{
    return source && strncmp(source, "builtin:", 8) == 0;
}

/* A source or tokenizer: "builtin:NAME" with a name like a dataset's, or an
 * absolute path without control characters (it reaches a command line). */
static int where_check(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (dataset_is_builtin(s)) {
        if (!mtc_name_valid(s + 8, 63))
            return schema_error(err, path,
                                "\"%.80s\": a built-in is builtin:NAME, NAME matching "
                                "[a-z][a-z0-9-]{0,62}",
                                s);
        return 0;
    }
    if (s[0] != '/')
        return schema_error(
            err, path, "\"%.80s\": must be an absolute path (mtcd reads it) or builtin:NAME", s);
    for (const char *p = s; *p; p++)
        if (iscntrl((unsigned char)*p))
            return schema_error(err, path, "must not contain control characters");
    return 0;
}

#define WHERE_FIELD(name_, flags_)                                                                 \
    {                                                                                              \
        .name = name_, .kind = SCHEMA_STR, .flags = (flags_) | SCHEMA_NONEMPTY | SCHEMA_ONELINE,   \
        .size = PATH_MAX, .check = where_check                                                     \
    }

/* The resource's output-only fields: a GET body sent back is accepted. */
static const char *const output_only[] = {"name",       "state",      "versions", "latestVersion",
                                          "createTime", "updateTime", NULL};

static const struct schema_field create_fields[] = {
    WHERE_FIELD("source", SCHEMA_REQUIRED),
    {.name = "kind", .kind = SCHEMA_ENUM, .flags = SCHEMA_REQUIRED, .enm = &dataset_kind_enum},
    WHERE_FIELD("tokenizer", 0),
    {.name = "description", .kind = SCHEMA_STR, .size = 1025},
    {.name = "labels", .kind = SCHEMA_LABELS},
    {.name = NULL},
};
const struct schema dataset_create_schema = {
    .fields = create_fields, .flags = SCHEMA_PROTO3, .ignore = output_only};

static const struct schema_field prepare_fields[] = {
    WHERE_FIELD("source", 0),
    {.name = "kind", .kind = SCHEMA_ENUM, .enm = &dataset_kind_enum},
    WHERE_FIELD("tokenizer", 0),
    {.name = "description", .kind = SCHEMA_STR, .size = 1025},
    {.name = "labels", .kind = SCHEMA_LABELS},
    {.name = NULL},
};
const struct schema dataset_prepare_schema = {
    .fields = prepare_fields, .flags = SCHEMA_PROTO3, .ignore = output_only};

json_t *dataset_request_normalize(const json_t *body, int create, mtc_error_t *err)
{
    if (!body) {
        if (create) {
            errno = EINVAL;
            errprintf(err, "request body: a Dataset object {\"source\", \"kind\"} is required");
            return NULL;
        }
        json_t *empty = json_object();
        json_t *out = schema_normalize(empty, &dataset_prepare_schema, "", err);
        json_decref(empty);
        return out;
    }
    return schema_normalize(body, create ? &dataset_create_schema : &dataset_prepare_schema, "",
                            err);
}

/* 1 when path is root or below it ("/" holds every path). */
static int under(const char *path, const char *root)
{
    return strcmp(root, "/") == 0 || mtc_path_under(path, root);
}

/* 1 when path (cleaned) lies under one of roots, by name. */
static int in_roots(const char *path, const char *const *roots)
{
    for (const char *const *r = roots; *r; r++) {
        char root[PATH_MAX];
        if (mtc_path_clean(*r, 1, root, sizeof(root)) == 0 && under(path, root))
            return 1;
    }
    return 0;
}

/* The end of err's text is strerror(e): the walk's own words for a refusal
 * (a link on the way) are not. */
static int says(const mtc_error_t *err, int e)
{
    const char *why = strerror(e);
    size_t n = strlen(err->text), w = strlen(why);
    return n >= w && strcmp(err->text + n - w, why) == 0;
}

int dataset_open(const char *field, const char *path, const char *const *roots,
                 const struct mtc_user *as, mtc_error_t *err)
{
    char name[PATH_MAX];
    if (!path || path[0] != '/' || mtc_path_clean(path, 1, name, sizeof(name)) < 0) {
        errno = EINVAL;
        return errprintf(err, "%s: \"%.100s\" is not an absolute path", field, path ? path : "");
    }
    /* outside the roots by name: refused before the filesystem is touched, so
     * the answer says nothing about what exists there */
    if (roots && !in_roots(name, roots)) {
        errno = EACCES;
        return errprintf(err,
                         "%s: %.120s lies outside the directories mtcd reads sources from "
                         "(MTC_HOME/data, mtcd --data-root); only an admin may name other paths",
                         field, path);
    }
    /* walked once, as the caller: what the caller may not read is one answer,
     * whatever root would find there */
    mtc_error_t e = {""};
    struct mtc_reach how = {.roots = roots, .as = as};
    int fd = mtc_reach_open(name, &how, 0, &e);
    if (fd >= 0)
        return fd;
    int saved = errno;
    if (as && (saved == EACCES || saved == EPERM) && says(&e, saved))
        errprintf(err, "%s: cannot read %.150s as user %s", field, path, as->name);
    else
        errprintf(err, "%s: %s", field, e.text);
    errno = saved == ENOTDIR ? ENOENT : saved;
    return -1;
}

/* ---- the preparation record ---- */

/* A count (records, tokens, bytes): a JSON integer >= 0 (64-bit: token counts
 * pass 2^31). */
static int count_check(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (!json_is_integer(*v) || json_integer_value(*v) < 0)
        return schema_error(err, path, "must be an integer >= 0");
    return 0;
}

/* The cache key names a directory in the cache: a plain file name. */
static int key_check(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    const char *s = json_string_value(*v);
    if (s[0] == '.' ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(s))
        return schema_error(err, path, "\"%.80s\" is not a cache key ([A-Za-z0-9._-])", s);
    return 0;
}

static int abs_check(const struct schema_field *f, json_t **v, const char *path, mtc_error_t *err)
{
    (void)f;
    if (json_string_value(*v)[0] != '/')
        return schema_error(err, path, "must be an absolute path");
    return 0;
}

#define COUNT_FIELD(name_, flags_)                                                                 \
    {                                                                                              \
        .name = name_, .kind = SCHEMA_CUSTOM, .flags = (flags_), .check = count_check              \
    }
#define TEXT_FIELD(name_, flags_, size_)                                                           \
    {                                                                                              \
        .name = name_, .kind = SCHEMA_STR, .flags = (flags_) | SCHEMA_ONELINE, .size = (size_)     \
    }

static const struct schema_field prepared_fields[] = {
    {.name = "key",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY,
     .size = 160,
     .check = key_check},
    {.name = "path",
     .kind = SCHEMA_STR,
     .flags = SCHEMA_REQUIRED | SCHEMA_NONEMPTY | SCHEMA_ONELINE,
     .size = PATH_MAX,
     .check = abs_check},
    {.name = "kind", .kind = SCHEMA_ENUM, .flags = SCHEMA_REQUIRED, .enm = &dataset_kind_enum},
    TEXT_FIELD("source", 0, PATH_MAX),
    TEXT_FIELD("sourceFingerprint", SCHEMA_REQUIRED | SCHEMA_NONEMPTY, 160),
    TEXT_FIELD("tokenizer", 0, PATH_MAX),
    TEXT_FIELD("tokenizerFingerprint", SCHEMA_REQUIRED | SCHEMA_NONEMPTY, 160),
    COUNT_FIELD("records", SCHEMA_REQUIRED),
    COUNT_FIELD("trainTokens", SCHEMA_REQUIRED),
    {.name = "valTokens", .kind = SCHEMA_CUSTOM, .dflt = "0", .check = count_check},
    COUNT_FIELD("bytes", SCHEMA_REQUIRED),
    {.name = "cached", .kind = SCHEMA_BOOL, .dflt = "false"},
    {.name = NULL},
};
const struct schema dataset_prepared_schema = {.fields = prepared_fields, .flags = SCHEMA_EXACT};

json_t *dataset_prepared_parse(const char *text, mtc_error_t *err)
{
    json_error_t jerr;
    json_t *in = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    /* else the last line that starts a JSON object: the record (a trainer may
     * print other lines before it) */
    const char *start = text && !in ? strrchr(text, '{') : text;
    while (!in && start && start > text && start[-1] != '\n')
        start = memrchr(text, '{', (size_t)(start - text));
    if (!in && start)
        in = json_loads(start, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(in)) {
        json_decref(in);
        errno = EINVAL;
        errprintf(err, "mtc-train data prepare printed no JSON record%s%.120s", start ? ": " : "",
                  start ? jerr.text : "");
        return NULL;
    }
    /* another program's output: fields a newer trainer adds are dropped */
    json_t *known = json_object();
    for (const struct schema_field *f = prepared_fields; f->name; f++)
        if (json_object_get(in, f->name))
            json_object_set(known, f->name, json_object_get(in, f->name));
    json_decref(in);
    json_t *out = schema_normalize(known, &dataset_prepared_schema, "prepare", err);
    json_decref(known);
    return out;
}

json_t *dataset_version_json(int version, const json_t *record, int64_t create_ms)
{
    char ts[40];
    json_t *j = json_pack("{s:i, s:s}", "versionId", version, "createTime",
                          mtc_time_rfc3339(create_ms, ts, sizeof(ts)));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)record, k, v)
    {
        if (strcmp(k, "cached") != 0)
            json_object_set(j, k, v);
    }
    return j;
}

int dataset_ref_parse(const char *field, const char *ref, char *name, int *version,
                      mtc_error_t *err)
{
    const char *at = ref ? strchr(ref, '@') : NULL;
    size_t n = at ? (size_t)(at - ref) : ref ? strlen(ref) : 0;
    *version = 0;
    if (at) {
        char *end;
        long v = strtol(at + 1, &end, 10);
        if (!isdigit((unsigned char)at[1]) || *end || v < 1 || v > 1000000000)
            return schema_error(err, field,
                                "\"%.80s\": want NAME or NAME@VERSION (a version id >= 1)", ref);
        *version = (int)v;
    }
    if (n == 0 || n > DATASET_NAME_MAX)
        return schema_error(err, field, "\"%.80s\": want NAME or NAME@VERSION", ref ? ref : "");
    memcpy(name, ref, n);
    name[n] = '\0';
    if (!dataset_name_valid(name))
        return schema_error(err, field, "\"%.80s\": the name must match [a-z][a-z0-9-]{0,62}", ref);
    return 0;
}

int dataset_pick(const char *field, const json_t *ds, const char *ref, const char *kind, char *path,
                 size_t len, mtc_error_t *err)
{
    char name[DATASET_NAME_MAX + 1], ids[120] = "";
    int want;
    if (dataset_ref_parse(field, ref, name, &want, err) < 0)
        return -1;
    const json_t *versions = json_object_get(ds, "versions"), *v, *found = NULL;
    size_t i, used = 0;
    json_array_foreach(versions, i, v)
    {
        int id = (int)json_integer_value(json_object_get(v, "versionId"));
        if (used < sizeof(ids))
            used += (size_t)snprintf(ids + used, sizeof(ids) - used, "%s%d", used ? ", " : "", id);
        if (want == 0 || id == want)
            found = v; /* the last one when no version is asked for */
    }
    if (!found && want == 0)
        return schema_error(err, field, "dataset %s has no prepared version yet", name);
    if (!found)
        return schema_error(err, field, "%.80s: no such version (dataset %s has %s)", ref, name,
                            *ids ? ids : "none");
    const char *vkind = json_string_value(json_object_get(found, "kind"));
    const char *dir = json_string_value(json_object_get(found, "path"));
    struct stat sb;
    if (kind && vkind && strcmp(kind, vkind) != 0)
        return schema_error(err, field, "dataset %s holds %s data; this run needs %s data", name,
                            vkind, kind);
    if (!dir || dir[0] != '/' || stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return schema_error(err, field,
                            "dataset %s version %d: its data %.120s is gone (mtc data "
                            "prepare %s makes it again)",
                            name, (int)json_integer_value(json_object_get(found, "versionId")),
                            dir ? dir : "(none)", name);
    if (strlen(dir) >= len)
        return schema_error(err, field, "dataset %s: path too long", name);
    snprintf(path, len, "%s", dir);
    return 0;
}
