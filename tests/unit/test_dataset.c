/* Unit tests for datasets: src/dataset (names, the request's and the
 * preparation record's field tables, where a source may lie and whom it is
 * opened as) and the store's
 * datasets (versions, one operation at a time, delete and shared keys). */
#include "check.h"
#include "dataset/dataset.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *norm(const char *text, int create, mtc_error_t *err)
{
    json_t *in = json_loads(text, 0, NULL);
    json_t *out = dataset_request_normalize(in, create, err);
    json_decref(in);
    return out;
}

static void test_names_and_requests(void)
{
    mtc_error_t err = {""};
    CHECK(dataset_name_valid("tiny-sft") && dataset_name_valid("a1"), "valid names");
    CHECK(!dataset_name_valid("Tiny") && !dataset_name_valid("1a") && !dataset_name_valid("a/b") &&
              !dataset_name_valid("..") && !dataset_name_valid("a-") && !dataset_name_valid(""),
          "names with capitals, a digit first, slashes, dots, a trailing '-', empty refused");
    dataset_name_error("Bad_Name", &err);
    CHECK(strstr(err.text, "Bad_Name") && strstr(err.text, "[a-z]"), "name error: %s", err.text);

    json_t *j = norm(
        "{\"source\":\"builtin:tiny-sft\",\"kind\":\"sft\",\"labels\":{\"team\":\"x\"}}", 1, &err);
    CHECK(j && !strcmp(json_string_value(json_object_get(j, "kind")), "sft"), "create body");
    json_decref(j);
    j = norm("{\"source\":\"/data/a.jsonl\",\"kind\":\"dpo\",\"tokenizer\":\"/t/tok.json\"}", 1,
             &err);
    CHECK(j && json_object_get(j, "tokenizer"), "absolute paths accepted");
    json_decref(j);
    j = norm("{\"source\":\"builtin:tiny-corpus\",\"kind\":\"pretrain\",\"name\":\"projects/x\","
             "\"state\":\"READY\"}",
             1, &err);
    CHECK(j && !json_object_get(j, "state"), "output-only fields (a GET body) dropped");
    json_decref(j);
    struct {
        const char *body, *want;
    } bad[] = {
        {"{\"kind\":\"sft\"}", "source: required"},
        {"{\"source\":\"builtin:tiny-sft\"}", "kind: required"},
        {"{\"source\":\"builtin:tiny-sft\",\"kind\":\"chat\"}", "kind: must be one of pretrain"},
        {"{\"source\":\"data/a.jsonl\",\"kind\":\"sft\"}", "source: \"data/a.jsonl\": must be an "
                                                           "absolute path"},
        {"{\"source\":\"builtin:Tiny\",\"kind\":\"sft\"}", "source: \"builtin:Tiny\""},
        {"{\"source\":\"/a\\nb\",\"kind\":\"sft\"}", "source: must not contain a newline"},
        {"{\"source\":\"/a\",\"kind\":\"sft\",\"colour\":1}", "colour: unknown field"},
        {"{\"source\":\"/a\",\"kind\":\"sft\",\"labels\":{\"A\":\"b\"}}", "labels.A: invalid"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = norm(bad[i].body, 1, &err);
        CHECK(!j && strstr(err.text, bad[i].want) && !strchr(err.text, '\n'),
              "bad create body %zu refused naming the field: %s", i, err.text);
        json_decref(j);
    }
    j = norm("{\"source_path\":\"/a\"}", 0, &err);
    CHECK(!j && strstr(err.text, "source_path"), "prepare: unknown field refused: %s", err.text);
    j = dataset_request_normalize(NULL, 0, &err);
    CHECK(j && json_object_size(j) == 0, "prepare: no body is an empty request");
    json_decref(j);
    j = norm("{\"tokenizer\":\"builtin:tiny-corpus\"}", 0, &err);
    CHECK(j && json_object_size(j) == 1, "prepare: fields optional");
    json_decref(j);
    CHECK(dataset_request_normalize(NULL, 1, &err) == NULL && strstr(err.text, "required"),
          "create: a body is required");
}

/* fd's file is the one at path (same device and inode). */
static int is(int fd, const char *path)
{
    struct stat a, b;
    return fd >= 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static void test_open(const char *dir)
{
    char root[PATH_MAX], inside[PATH_MAX], outside[PATH_MAX], link[PATH_MAX];
    mtc_error_t err = {""};
    snprintf(root, sizeof(root), "%s/data", dir);
    snprintf(inside, sizeof(inside), "%s/data/a.txt", dir);
    snprintf(outside, sizeof(outside), "%s/secret.txt", dir);
    snprintf(link, sizeof(link), "%s/data/link.txt", dir);
    mtc_mkdir_p(root, 0700);
    mtc_write_file_fmt(inside, 0600, "hello\n");
    mtc_write_file_fmt(outside, 0600, "secret\n");
    CHECK(symlink(outside, link) == 0, "a link out of the root");
    const char *roots[] = {"/nonexistent-root", root, NULL};
    int fd = dataset_open("source", inside, roots, NULL, &err);
    CHECK(is(fd, inside), "a file under a root opens (%s)", err.text);
    close(fd);
    fd = dataset_open("source", root, roots, NULL, &err);
    CHECK(is(fd, root), "a directory under a root too (the root itself)");
    close(fd);
    CHECK(dataset_open("source", outside, roots, NULL, &err) < 0 && errno == EACCES &&
              strstr(err.text, "source:") && strstr(err.text, "admin"),
          "a file outside the roots: EACCES naming the field: %s", err.text);
    CHECK(dataset_open("source", link, roots, NULL, &err) < 0 && errno == EACCES &&
              strstr(err.text, "symbolic link"),
          "a link in a root is not followed: EACCES (%s)", err.text);
    char dots[PATH_MAX + 32];
    snprintf(dots, sizeof(dots), "%s/../secret.txt", root);
    CHECK(dataset_open("source", dots, roots, NULL, &err) < 0 && errno == EACCES,
          "\"..\" leading out of a root is outside");
    fd = dataset_open("source", outside, NULL, NULL, &err);
    CHECK(is(fd, outside), "no roots (an admin): anywhere (%s)", err.text);
    close(fd);
    snprintf(dots, sizeof(dots), "%s/missing.txt", root);
    CHECK(dataset_open("tokenizer", dots, roots, NULL, &err) < 0 && errno == ENOENT &&
              strstr(err.text, "tokenizer:"),
          "a missing file: ENOENT naming the field: %s", err.text);
    char prefix[PATH_MAX + 8];
    snprintf(prefix, sizeof(prefix), "%s-x", root); /* /…/data-x is not under /…/data */
    mtc_mkdir_p(prefix, 0700);
    CHECK(dataset_open("source", prefix, roots, NULL, &err) < 0 && errno == EACCES,
          "a sibling sharing the root's prefix is outside");
    /* outside the roots, a missing file and an existing one get the same
     * answer: nothing says what exists there (issue 26) */
    char missing[PATH_MAX + 16], e1[256], e2[256];
    snprintf(missing, sizeof(missing), "%s/no-such.txt", dir);
    int r1 = dataset_open("source", outside, roots, NULL, &err);
    int x1 = errno;
    snprintf(e1, sizeof(e1), "%s", strstr(err.text, "lies outside") ? strstr(err.text, "lies outside") : "");
    int r2 = dataset_open("source", missing, roots, NULL, &err);
    snprintf(e2, sizeof(e2), "%s", strstr(err.text, "lies outside") ? strstr(err.text, "lies outside") : "");
    CHECK(r1 < 0 && r2 < 0 && x1 == EACCES && errno == EACCES && e1[0] && strcmp(e1, e2) == 0,
          "outside: missing and existing answered alike (%s)", err.text);
    /* through a link inside a root that leads out: refused whatever lies there */
    char dirlink[PATH_MAX], via[PATH_MAX + 32];
    snprintf(dirlink, sizeof(dirlink), "%s/data/out", dir);
    CHECK(symlink("/etc", dirlink) == 0, "a directory link out of the root");
    snprintf(via, sizeof(via), "%s/no-such-file", dirlink);
    CHECK(dataset_open("source", via, roots, NULL, &err) < 0 && errno == EACCES,
          "a missing file through a link out of the root: EACCES (%s)", err.text);
    snprintf(via, sizeof(via), "%s/passwd", dirlink);
    CHECK(dataset_open("source", via, roots, NULL, &err) < 0 && errno == EACCES,
          "an existing file there: the same");
    /* a FIFO is refused at once: nothing waits for a writer */
    char fifo[PATH_MAX + 16];
    snprintf(fifo, sizeof(fifo), "%s/data/pipe.txt", dir);
    CHECK(mkfifo(fifo, 0644) == 0, "a FIFO in the root");
    CHECK(dataset_open("source", fifo, roots, NULL, &err) < 0 && errno == EINVAL,
          "a FIFO: EINVAL, not a hang (%s)", err.text);
    if (geteuid() == 0) { /* as a user: what that user may not read is one answer */
        struct mtc_user nobody;
        mtc_user_nobody(&nobody);
        chmod(root, 0755);
        CHECK(dataset_open("source", inside, roots, &nobody, &err) < 0 && errno == EACCES &&
                  strstr(err.text, "source: cannot read ") && strstr(err.text, " as user nobody"),
              "a 0600 file of root's, as nobody: \"cannot read PATH as user nobody\" (%s)",
              err.text);
        chmod(root, 0700);
        CHECK(dataset_open("source", inside, roots, &nobody, &err) < 0 && errno == EACCES &&
                  strstr(err.text, " as user nobody"),
              "  in a 0700 directory: the same answer (%s)", err.text);
        snprintf(dots, sizeof(dots), "%s/data/none.txt", dir);
        CHECK(dataset_open("source", dots, roots, &nobody, &err) < 0 && errno == EACCES &&
                  strstr(err.text, " as user nobody"),
              "  a missing file there: the same (root's view says nothing)");
    }
}

static void test_record(void)
{
    mtc_error_t err = {""};
    const char *good =
        "{\"key\":\"sft-0123456789abcdef\",\"path\":\"/c/datasets/sft-0123456789abcdef\","
        "\"kind\":\"sft\",\"source\":\"builtin:tiny-sft\",\"sourceFingerprint\":\"sha256:aa\","
        "\"tokenizer\":\"builtin:tiny-corpus\",\"tokenizerFingerprint\":\"sha256:bb\","
        "\"records\":500,\"trainTokens\":4000000000,\"valTokens\":100,\"bytes\":9000,"
        "\"cached\":true,\"format\":1}";
    json_t *r = dataset_prepared_parse(good, &err);
    CHECK(r && json_integer_value(json_object_get(r, "trainTokens")) == 4000000000LL,
          "record parsed, 64-bit token counts kept: %s", err.text);
    CHECK(r && !json_object_get(r, "format"), "fields a newer trainer adds are dropped");
    json_t *v = dataset_version_json(2, r, 0);
    CHECK(json_integer_value(json_object_get(v, "versionId")) == 2 &&
              !json_object_get(v, "cached") && json_object_get(v, "createTime"),
          "version view: id and time, no \"cached\"");
    json_decref(v);
    json_decref(r);
    char text[1200];
    snprintf(text, sizeof(text), "progress line\n%s\n", good);
    r = dataset_prepared_parse(text, &err);
    CHECK(r != NULL, "the record after other lines is found");
    json_decref(r);
    struct {
        const char *from, *to, *want;
    } bad[] = {
        {"\"key\":\"sft-0123456789abcdef\"", "\"key\":\"../etc\"", "prepare.key"},
        {"\"path\":\"/c/", "\"path\":\"c/", "prepare.path: must be an absolute path"},
        {"\"records\":500", "\"records\":-1", "prepare.records: must be an integer >= 0"},
        {"\"kind\":\"sft\"", "\"kind\":\"chat\"", "prepare.kind"},
        {"\"tokenizerFingerprint\":\"sha256:bb\",", "", "tokenizerFingerprint: required"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char t[1200];
        const char *at = strstr(good, bad[i].from);
        snprintf(t, sizeof(t), "%.*s%s%s", (int)(at - good), good, bad[i].to,
                 at + strlen(bad[i].from));
        r = dataset_prepared_parse(t, &err);
        CHECK(!r && strstr(err.text, bad[i].want), "bad record %zu refused: %s", i, err.text);
        json_decref(r);
    }
    CHECK(!dataset_prepared_parse("no json here", &err) && strstr(err.text, "no JSON record"),
          "no record: %s", err.text);
    CHECK(!dataset_prepared_parse(NULL, &err), "no output at all");
}

static void test_refs(const char *dir)
{
    mtc_error_t err = {""};
    char name[DATASET_NAME_MAX + 1], path[PATH_MAX], v1[PATH_MAX], v2[PATH_MAX];
    int version = -1;
    CHECK(dataset_ref_parse("dataset", "chat", name, &version, &err) == 0 &&
              !strcmp(name, "chat") && version == 0,
          "NAME: the latest version");
    CHECK(dataset_ref_parse("dataset", "chat@12", name, &version, &err) == 0 && version == 12,
          "NAME@VERSION");
    const char *bad[] = {"chat@", "chat@0", "chat@x", "chat@1x", "@2", "Chat", "a/b@1", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(dataset_ref_parse("dataset", bad[i], name, &version, &err) < 0 &&
                  !strncmp(err.text, "dataset: ", 9),
              "bad reference \"%s\" refused: %s", bad[i], err.text);

    snprintf(v1, sizeof(v1), "%s/v1", dir);
    snprintf(v2, sizeof(v2), "%s/v2", dir);
    mtc_mkdir_p(v1, 0700);
    mtc_mkdir_p(v2, 0700);
    json_t *ds = json_pack("{s:[{s:i, s:s, s:s}, {s:i, s:s, s:s}]}", "versions", "versionId", 1,
                           "kind", "sft", "path", v1, "versionId", 2, "kind", "sft", "path", v2);
    CHECK(dataset_pick("dataset", ds, "chat", "sft", path, sizeof(path), &err) == 0 &&
              !strcmp(path, v2),
          "no version: the latest one's data");
    CHECK(dataset_pick("dataset", ds, "chat@1", "sft", path, sizeof(path), &err) == 0 &&
              !strcmp(path, v1),
          "@1: version 1's data");
    CHECK(dataset_pick("dataset", ds, "chat@3", "sft", path, sizeof(path), &err) < 0 &&
              strstr(err.text, "no such version (dataset chat has 1, 2)"),
          "an unknown version named with the ones there are: %s", err.text);
    CHECK(dataset_pick("dataset", ds, "chat", "dpo", path, sizeof(path), &err) < 0 &&
              strstr(err.text, "holds sft data; this run needs dpo data"),
          "another kind refused: %s", err.text);
    mtc_rm_rf(v2);
    CHECK(dataset_pick("dataset", ds, "chat@2", NULL, path, sizeof(path), &err) < 0 &&
              strstr(err.text, "is gone"),
          "data that is gone: %s", err.text);
    json_decref(ds);
    ds = json_pack("{s:[]}", "versions");
    CHECK(dataset_pick("dataset", ds, "chat", NULL, path, sizeof(path), &err) < 0 &&
              strstr(err.text, "no prepared version yet"),
          "a dataset still preparing its first version: %s", err.text);
    json_decref(ds);
}

static struct store_op ds_op(const char *id, const char *name, const char *kind)
{
    struct store_op op;
    memset(&op, 0, sizeof(op));
    snprintf(op.id, sizeof(op.id), "%s", id);
    snprintf(op.project, sizeof(op.project), "local");
    snprintf(op.location, sizeof(op.location), "local");
    snprintf(op.kind, sizeof(op.kind), "%s", kind);
    snprintf(op.target, sizeof(op.target), "datasets/%s", name);
    return op;
}

static int ds_create(struct store *st, const char *name, const char *op_id)
{
    struct store_dataset d = {.spec = json_pack("{s:s, s:s}", "source", "/s", "kind", "sft")};
    snprintf(d.project, sizeof(d.project), "local");
    snprintf(d.location, sizeof(d.location), "local");
    snprintf(d.name, sizeof(d.name), "%s", name);
    snprintf(d.state, sizeof(d.state), "PREPARING");
    struct store_op op = ds_op(op_id, name, "CREATE");
    int rc = store_dataset_create(st, &d, &op, NULL);
    json_decref(d.spec);
    return rc;
}

static int record(struct store *st, const char *name, const char *key, int *version, int *added)
{
    json_t *rec = json_pack("{s:s, s:s}", "key", key, "path", "/c/x");
    int rc = store_dataset_record(st, "local", "local", name, NULL, key, rec, version, added);
    json_decref(rec);
    return rc;
}

static void test_store(const char *dir)
{
    char path[PATH_MAX];
    mtc_error_t err = {""};
    snprintf(path, sizeof(path), "%s/db", dir);
    struct store *st = store_open(path, &err);
    CHECK(st != NULL, "store opens: %s", err.text);
    CHECK(ds_create(st, "web", "op-d1") == 0, "create dataset web with its operation");
    CHECK(ds_create(st, "web", "op-d2") < 0 && errno == EEXIST, "a taken name: EEXIST");
    struct store_op op;
    CHECK(store_op_get(st, "op-d2", &op) < 0, "a refused create stores no operation");
    CHECK(store_op_get(st, "op-d1", &op) == 0 && !strcmp(op.target, "datasets/web") &&
              !op.cluster_id[0],
          "the operation names its target");
    store_op_release(&op);
    struct store_op p = ds_op("op-d3", "web", "PREPARE");
    char busy[48] = "";
    CHECK(store_dataset_op_begin(st, &p, "web", busy) < 0 && errno == EBUSY &&
              !strcmp(busy, "op-d1"),
          "one operation at a time per dataset (busy: %s)", busy);
    int version = 0, added = 0;
    CHECK(record(st, "web", "k1", &version, &added) == 0 && version == 1 && added,
          "first preparation: version 1");
    store_op_finish(st, "op-d1", NULL, 0, NULL);
    struct store_dataset d;
    CHECK(store_dataset_get(st, "local", "local", "web", &d) == 0 && !strcmp(d.state, "READY"),
          "recorded: READY");
    store_dataset_release(&d);
    CHECK(store_dataset_op_begin(st, &p, "web", busy) == 0, "a :prepare starts once it is free");
    CHECK(record(st, "web", "k1", &version, &added) == 0 && version == 1 && !added,
          "same key again: no new version");
    CHECK(record(st, "web", "k2", &version, &added) == 0 && version == 2 && added,
          "changed key: version 2");
    store_op_finish(st, "op-d3", NULL, 0, NULL);
    CHECK(record(st, "nosuch", "k1", &version, &added) < 0 && errno == ENOENT,
          "recording for an unknown dataset: ENOENT");
    int n = 0;
    struct store_dataset_version *v = store_dataset_versions(st, "local", "local", "web", &n);
    CHECK(n == 2 && v[0].version == 1 && !strcmp(v[1].key, "k2") && v[1].record,
          "versions oldest first with their records");
    store_dataset_versions_free(v, n);

    CHECK(ds_create(st, "news", "op-d4") == 0, "create dataset news");
    CHECK(record(st, "news", "k2", &version, &added) == 0 && version == 1, "news shares key k2");
    store_op_finish(st, "op-d4", NULL, 0, NULL);
    struct store_dataset *l = store_dataset_list(st, "local", "local", NULL, 1, &n);
    CHECK(n == 1 && !strcmp(l[0].name, "news"), "list: by name, limited");
    store_dataset_release(&l[0]);
    free(l);
    l = store_dataset_list(st, "local", "local", "news", 10, &n);
    CHECK(n == 1 && !strcmp(l[0].name, "web"), "list: after a page token");
    store_dataset_release(&l[0]);
    free(l);
    l = store_dataset_list(st, "other", "local", NULL, 10, &n);
    CHECK(n == 0, "list: only the project's");
    free(l);

    json_t *orphans = NULL;
    CHECK(store_dataset_delete(st, "local", "local", "web", NULL, busy, &orphans) == 0,
          "delete web");
    CHECK(json_array_size(orphans) == 1 &&
              !strcmp(json_string_value(json_object_get(json_array_get(orphans, 0), "key")), "k1"),
          "only the key no other dataset uses is an orphan");
    json_decref(orphans);
    CHECK(store_dataset_get(st, "local", "local", "web", &d) < 0 && errno == ENOENT,
          "deleted: not found");
    v = store_dataset_versions(st, "local", "local", "web", &n);
    CHECK(n == 0, "its versions went with it");
    store_dataset_versions_free(v, n);
    v = store_dataset_versions(st, "local", "local", "news", &n);
    CHECK(n == 1, "the other dataset's versions stay");
    store_dataset_versions_free(v, n);
    CHECK(store_dataset_delete(st, "local", "local", "web", NULL, busy, NULL) < 0 &&
              errno == ENOENT,
          "deleting twice: ENOENT");
    p = ds_op("op-d5", "news", "PREPARE");
    CHECK(store_dataset_op_begin(st, &p, "news", busy) == 0, "prepare news");
    CHECK(store_dataset_delete(st, "local", "local", "news", NULL, busy, NULL) < 0 &&
              errno == EBUSY,
          "no delete while an operation runs");
    CHECK(store_dataset_delete(st, "local", "local", "news", "op-d5", busy, &orphans) == 0 &&
              json_array_size(orphans) == 1,
          "its own operation may delete it (a failed create)");
    json_decref(orphans);
    store_close(st);
}

int main(void)
{
    char dir[] = "/tmp/mtc-dataset-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    test_names_and_requests();
    test_open(dir);
    test_record();
    test_refs(dir);
    test_store(dir);
    mtc_rm_rf(dir);
    return check_done();
}
