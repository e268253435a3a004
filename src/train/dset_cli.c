/* dset_cli: `mtc-train data generate|prepare|check` — the dataset cache's command line
 * (mtc run's job scripts and mtcd's datasets API run it). Bad input: exit 1 and one line
 * on stderr; usage errors exit 2. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/dset_internal.h"

enum {
    A_SOURCE,
    A_KIND,
    A_CACHE,
    A_TOKENIZER,
    A_VOCAB,
    A_NAME,
    A_VALFRAC,
    A_OUTPUT,
    A_JSON,
    A_SOURCE_FD,
    A_TOKENIZER_FD,
    A_READ_AS,
    A_N
};
static const struct {
    const char *name;
    int flag; /* takes no value */
} args[A_N] = {
    [A_SOURCE] = {"source", 0},        [A_KIND] = {"kind", 0},        [A_CACHE] = {"cache-dir", 0},
    [A_TOKENIZER] = {"tokenizer", 0},  [A_VOCAB] = {"vocab-size", 0}, [A_NAME] = {"name", 0},
    [A_VALFRAC] = {"val-fraction", 0}, [A_OUTPUT] = {"output", 0},    [A_JSON] = {"json", 1},
    [A_SOURCE_FD] = {"source-fd", 0},  [A_TOKENIZER_FD] = {"tokenizer-fd", 0},
    [A_READ_AS] = {"read-as", 0},
};

/* Parse --name value / --flag into v[] for the arguments allowed (bit mask). 0, or -1. */
static int parse(int argc, char **argv, const char *cmd, unsigned allowed, const char **v)
{
    for (int i = 2; i < argc; i++) {
        int hit = -1;
        for (int a = 0; a < A_N; a++)
            if ((allowed >> a & 1) && !strncmp(argv[i], "--", 2) &&
                !strcmp(argv[i] + 2, args[a].name))
                hit = a;
        if (hit < 0 || (!args[hit].flag && i + 1 >= argc)) {
            fprintf(stderr, "mtc-train data %s: %s %s\n", cmd,
                    hit < 0 ? "unknown argument" : "missing value for", argv[i]);
            return -1;
        }
        v[hit] = args[hit].flag ? "1" : argv[++i];
    }
    return 0;
}

static int fail(const char *cmd, const mtc_error_t *err)
{
    fprintf(stderr, "mtc-train data %s: %s\n", cmd, err->text[0] ? err->text : strerror(errno));
    return 1;
}

/* --source-fd / --tokenizer-fd N: a descriptor above 2 this process has open (mtcd's). */
static int given_fd(const char *v, const char *arg, int *fd, mtc_error_t *err)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : -1;
    if (v && (*end || end == v || n <= 2 || n > 1 << 20 || fcntl((int)n, F_GETFD) < 0))
        return errprintf(err, "--%s \"%s\": not an open descriptor above 2", arg, v);
    *fd = (int)n;
    return 0;
}

/* --kind, --vocab-size, --val-fraction, the descriptors and --read-as into o (as: where
 * --read-as's user goes). 0, or -1 with err. */
static int options(const char **v, struct dset_options *o, struct mtc_user *as, mtc_error_t *err)
{
    char list[64];
    memset(o, 0, sizeof *o);
    o->source = v[A_SOURCE];
    o->cache_dir = v[A_CACHE];
    o->tokenizer = v[A_TOKENIZER];
    o->name = v[A_NAME];
    o->vocab_size = 1024;
    o->val_fraction = 0.05;
    int k = schema_enum_parse(&dset_kind_enum, v[A_KIND], 0);
    if (k < 0)
        return errprintf(err, "unknown kind \"%s\" (one of %s)", v[A_KIND],
                         schema_enum_list(&dset_kind_enum, list, sizeof list));
    o->kind = (enum dset_kind)k;
    if (given_fd(v[A_SOURCE_FD], "source-fd", &o->source_fd, err) < 0 ||
        given_fd(v[A_TOKENIZER_FD], "tokenizer-fd", &o->tokenizer_fd, err) < 0)
        return -1;
    if (v[A_READ_AS] && !strcmp(v[A_READ_AS], "nobody"))
        mtc_user_nobody(as);
    else if (v[A_READ_AS] && mtc_user_lookup(v[A_READ_AS], as, err) < 0)
        return -1;
    o->read_as = v[A_READ_AS] ? as : NULL;
    char *end;
    if (v[A_VOCAB]) {
        long n = strtol(v[A_VOCAB], &end, 10);
        if (*end || end == v[A_VOCAB] || n < 257 || n > 65536)
            return errprintf(err, "--vocab-size \"%s\" must be an integer in 257..65536",
                             v[A_VOCAB]);
        if (o->tokenizer && strcmp(o->tokenizer, "builtin:tiny-corpus"))
            return errprintf(err, "--vocab-size is for the built-in tokenizer only");
        o->vocab_size = (int)n;
    }
    if (v[A_VALFRAC]) {
        o->val_fraction = strtod(v[A_VALFRAC], &end);
        if (*end || end == v[A_VALFRAC] || !(o->val_fraction >= 0 && o->val_fraction < 1))
            return errprintf(err, "--val-fraction \"%s\" must be a number in [0, 1)", v[A_VALFRAC]);
    }
    return 0;
}

static int cmd_generate(int argc, char **argv)
{
    const char *v[A_N] = {0};
    if (parse(argc, argv, "generate", 1u << A_NAME | 1u << A_OUTPUT, v) < 0)
        return 2;
    if (!v[A_NAME] || !v[A_OUTPUT]) {
        fprintf(stderr, "usage: %s", train_data_usage);
        return 2;
    }
    mtc_error_t err = {{0}};
    size_t len;
    char *s = dset_generate(v[A_NAME], &len, &err);
    if (!s)
        return fail("generate", &err);
    int rc = mtc_write_file_atomic(v[A_OUTPUT], s, len, 0644);
    free(s);
    if (rc < 0) {
        errprintf(&err, "%s: %s", v[A_OUTPUT], strerror(errno));
        return fail("generate", &err);
    }
    fprintf(stderr, "data: wrote builtin:%s (%zu bytes) to %s\n", v[A_NAME], len, v[A_OUTPUT]);
    return 0;
}

static int cmd_prepare(int argc, char **argv)
{
    const char *v[A_N] = {0};
    unsigned allowed = 1u << A_SOURCE | 1u << A_KIND | 1u << A_CACHE | 1u << A_TOKENIZER |
                       1u << A_VOCAB | 1u << A_NAME | 1u << A_VALFRAC | 1u << A_JSON |
                       1u << A_SOURCE_FD | 1u << A_TOKENIZER_FD | 1u << A_READ_AS;
    if (parse(argc, argv, "prepare", allowed, v) < 0)
        return 2;
    if (!v[A_SOURCE] || !v[A_KIND] || !v[A_CACHE]) {
        fprintf(stderr, "usage: %s", train_data_usage);
        return 2;
    }
    mtc_error_t err = {{0}};
    struct dset_options o;
    struct dset_result r;
    struct mtc_user as;
    if (options(v, &o, &as, &err) < 0 || dset_prepare(&o, &r, &err) < 0)
        return fail("prepare", &err);
    if (v[A_JSON]) {
        json_t *j = dset_result_json(&o, &r);
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (!s)
            return fail("prepare", &err);
        printf("%s\n", s);
        free(s);
    } else {
        printf("%s %s\n", r.key, r.path);
    }
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    const char *v[A_N] = {0};
    if (parse(argc, argv, "check", 1u << A_SOURCE | 1u << A_KIND | 1u << A_JSON, v) < 0)
        return 2;
    if (!v[A_SOURCE] || !v[A_KIND]) {
        fprintf(stderr, "usage: %s", train_data_usage);
        return 2;
    }
    mtc_error_t err = {{0}};
    struct dset_options o;
    struct dset_result r;
    struct mtc_user as;
    if (options(v, &o, &as, &err) < 0 || dset_check(&o, &r, &err) < 0)
        return fail("check", &err);
    if (v[A_JSON]) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:s}", "source", v[A_SOURCE], "kind", v[A_KIND],
                              "records", (json_int_t)r.records, "bytes", (json_int_t)r.bytes,
                              "sourceFingerprint", r.source_fp);
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else
        printf("%s: %zu %s records, %zu bytes: ok\n", v[A_SOURCE], r.records, v[A_KIND], r.bytes);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} data_cmds[] = {{"generate", cmd_generate}, {"prepare", cmd_prepare}, {"check", cmd_check}};

const char train_data_usage[] =
    "mtc-train data generate --name tiny-corpus|tiny-sft|tiny-dpo|tiny-rl|tiny-countdown "
    "--output PATH\n"
    "       mtc-train data prepare --source SRC --kind pretrain|sft|dpo|rl --cache-dir DIR "
    "[--tokenizer PATH|builtin:tiny-corpus] [--vocab-size N] [--name NAME] [--val-fraction X] "
    "[--json] [--source-fd N] [--tokenizer-fd N] [--read-as USER]\n"
    "       mtc-train data check --source SRC --kind pretrain|sft|dpo|rl [--json]\n"
    "  (docs/datasets.md)\n";

int train_data_main(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < sizeof data_cmds / sizeof data_cmds[0]; i++)
        if (!strcmp(argv[1], data_cmds[i].name))
            return data_cmds[i].fn(argc, argv);
    fprintf(stderr, "usage: %s", train_data_usage);
    return 2;
}
