/* Unit tests for the model registry: src/registry (names, references, alias
 * rules, detection, content-addressed ingest and removal, refs files and
 * registry_resolve) and the store's models (versions, the default alias,
 * alias moves, deleteVersion moving default, delete). */
#include "check.h"
#include "registry/registry.h"
#include "store/store.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_names(void)
{
    struct registry_ref r;
    mtc_error_t err = {""};
    char out[REGISTRY_NAME_MAX + 1];
    CHECK(registry_alias_valid("prod") && registry_alias_valid("v2-candidate") &&
              registry_alias_valid("a"),
          "valid aliases");
    CHECK(!registry_alias_valid("12") && !registry_alias_valid("Prod") &&
              !registry_alias_valid("-x") && !registry_alias_valid("") &&
              !registry_alias_valid("a_b") && !registry_alias_valid("2a"),
          "numbers, capitals, a leading '-', empty, '_', a digit first refused");
    char long_alias[130];
    memset(long_alias, 'a', 128);
    long_alias[128] = '\0';
    CHECK(!registry_alias_valid(long_alias), "128 characters refused");
    long_alias[127] = '\0';
    CHECK(registry_alias_valid(long_alias), "127 characters accepted");

    CHECK(registry_ref_parse("tiny", &r, &err) == 0 && !strcmp(r.name, "tiny") && r.version == 0 &&
              !*r.alias,
          "NAME");
    CHECK(registry_ref_parse("tiny@3", &r, &err) == 0 && r.version == 3, "NAME@3");
    CHECK(registry_ref_parse("tiny@prod", &r, &err) == 0 && !strcmp(r.alias, "prod"),
          "NAME@alias");
    CHECK(registry_ref_parse("tiny@0", &r, &err) < 0 && strstr(err.text, "1 or more"), "@0: %s",
          err.text);
    CHECK(registry_ref_parse("tiny@", &r, &err) < 0, "empty selector");
    CHECK(registry_ref_parse("Tiny@1", &r, &err) < 0 && strstr(err.text, "model name \"Tiny\""),
          "bad name: %s", err.text);
    CHECK(registry_ref_parse("a/../b", &r, &err) < 0, "a path is not a name");
    CHECK(registry_ref_parse("tiny@a@b", &r, &err) < 0, "two selectors");

    CHECK(registry_name_from("Tiny_Run.1", out) == 0 && !strcmp(out, "tiny-run-1"),
          "experiment name mapped: %s", out);
    CHECK(registry_name_from("7b__sft-", out) == 0 && !strcmp(out, "m-7b-sft"), "digit first: %s",
          out);
    CHECK(registry_name_from("___", out) < 0, "nothing left");
}

/* A fake checkpoint root: step_00000002 complete, step_00000004 without DONE. */
static void make_ckpt(const char *root, const char *params)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/step_00000002", root);
    mtc_mkdir_p(p, 0755);
    snprintf(p, sizeof(p), "%s/step_00000002/meta.json", root);
    mtc_write_file_fmt(p, 0644, "{\"step\":2}");
    snprintf(p, sizeof(p), "%s/step_00000002/params.bin", root);
    mtc_write_file_fmt(p, 0644, "%s", params);
    snprintf(p, sizeof(p), "%s/step_00000002/DONE", root);
    mtc_write_file_fmt(p, 0644, "ok");
    snprintf(p, sizeof(p), "%s/step_00000004", root);
    mtc_mkdir_p(p, 0755);
    snprintf(p, sizeof(p), "%s/step_00000004/meta.json", root);
    mtc_write_file_fmt(p, 0644, "{\"step\":4}");
}

static int nlink(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (int)sb.st_nlink : -1;
}

static void test_artifacts(const char *dir)
{
    char models[PATH_MAX], ck[PATH_MAX], ck2[PATH_MAX], real[PATH_MAX], p[PATH_MAX + 300];
    mtc_error_t err = {""};
    snprintf(models, sizeof(models), "%s/models", dir);
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    snprintf(ck2, sizeof(ck2), "%s/ck2", dir);
    make_ckpt(ck, "weights-A");
    make_ckpt(ck2, "weights-A"); /* the same bytes elsewhere */
    int fmt = -1;
    CHECK(registry_detect(ck, &fmt, real, sizeof(real), &err) == 0 && fmt == REGISTRY_NATIVE &&
              strstr(real, "step_00000002"),
          "a checkpoint root: its newest complete step (%s) %s", real, err.text);
    fmt = REGISTRY_HF;
    CHECK(registry_detect(ck, &fmt, real, sizeof(real), &err) < 0 &&
              strstr(err.text, "for format hf"),
          "the wrong format named: %s", err.text);
    fmt = -1;
    CHECK(registry_detect(dir, &fmt, real, sizeof(real), &err) < 0 &&
              strstr(err.text, "holds no model"),
          "no model: %s", err.text);
    snprintf(p, sizeof(p), "%s/nope", dir);
    CHECK(registry_detect(p, &fmt, real, sizeof(real), &err) < 0 && errno == ENOENT,
          "missing source");

    json_t *m1 = NULL, *m2 = NULL;
    fmt = -1;
    registry_detect(ck, &fmt, real, sizeof(real), &err);
    CHECK(registry_ingest(models, real, fmt, NULL, NULL, &m1, &err) == 0, "ingest 1: %s", err.text);
    registry_detect(ck2, &fmt, real, sizeof(real), &err);
    CHECK(registry_ingest(models, real, fmt, NULL, NULL, &m2, &err) == 0, "ingest 2: %s", err.text);
    const char *d1 = json_string_value(json_object_get(m1, "dir"));
    const char *d2 = json_string_value(json_object_get(m2, "dir"));
    CHECK(d1 && d2 && strcmp(d1, d2) != 0, "two version directories");
    CHECK(!strcmp(json_string_value(json_object_get(m1, "digest")),
                  json_string_value(json_object_get(m2, "digest"))),
          "the same content has the same digest");
    CHECK(json_array_size(json_object_get(m1, "files")) == 3 &&
              json_integer_value(json_object_get(m1, "sizeBytes")) == 9 + 10 + 2,
          "files and size of the manifest");
    snprintf(p, sizeof(p), "%s/params.bin", d1);
    CHECK(nlink(p) == 3, "one blob, linked from both versions (links %d)", nlink(p));
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0222) == 0, "blobs are read-only");

    /* resolve through a refs file */
    json_t *versions = json_pack("{s:O, s:O}", "1", m1, "2", m2);
    json_t *aliases = json_pack("{s:i, s:i}", "default", 2, "prod", 1);
    CHECK(registry_refs_write(models, "local", "local", "tiny", versions, aliases) == 0,
          "refs written");
    char out[PATH_MAX];
    CHECK(registry_resolve(dir, NULL, NULL, "tiny", -1, NULL, out, sizeof(out), &err) == 0 &&
              !strcmp(out, d2),
          "NAME resolves to the default version: %s", out);
    CHECK(registry_resolve(dir, "local", "local", "tiny@prod", -1, NULL, out, sizeof(out), &err) ==
                  0 &&
              !strcmp(out, d1),
          "NAME@alias");
    CHECK(registry_resolve(dir, NULL, NULL, "tiny@1", REGISTRY_NATIVE, NULL, out, sizeof(out),
                           &err) == 0 &&
              !strcmp(out, d1),
          "NAME@1 in its own format");
    int ver = 0;
    CHECK(registry_resolve_version(dir, NULL, NULL, "tiny@prod", &ver, &err) == 0 && ver == 1 &&
              registry_resolve_version(dir, NULL, NULL, "tiny", &ver, &err) == 0 && ver == 2,
          "the version an alias names now");
    CHECK(registry_resolve(dir, NULL, NULL, "tiny@staging", -1, NULL, out, sizeof(out), &err) <
                  0 &&
              errno == ENOENT && strstr(err.text, "no alias staging (aliases: default, prod)"),
          "unknown alias lists the known ones: %s", err.text);
    CHECK(registry_resolve(dir, NULL, NULL, "tiny@7", -1, NULL, out, sizeof(out), &err) < 0 &&
              errno == ENOENT,
          "unknown version");
    CHECK(registry_resolve(dir, NULL, NULL, "ghost", -1, NULL, out, sizeof(out), &err) < 0 &&
              errno == ENOENT && strstr(err.text, "ghost not found"),
          "unknown model");

    /* a sweep keeps what is recorded, removes what is not */
    char orphan[PATH_MAX + 64], tmpf[PATH_MAX + 64];
    snprintf(orphan, sizeof(orphan), "%s/versions/orphan", models);
    snprintf(tmpf, sizeof(tmpf), "%s/blobs/tmp/x", models);
    mtc_mkdir_p(orphan, 0700);
    mtc_write_file_fmt(tmpf, 0600, "half a blob");
    json_t *dirs = json_pack("[s,s]", d1, d2);
    int removed = 0;
    CHECK(registry_sweep(models, dirs, &removed, &err) == 0 && removed == 2 &&
              !mtc_path_exists(orphan) && !mtc_path_exists(tmpf) && mtc_path_exists(d1) &&
              mtc_path_exists(d2),
          "sweep: the orphan and the temporary go, recorded versions stay (%d)", removed);
    json_decref(dirs);

    /* removal keeps what another version links to */
    CHECK(registry_remove(models, m1, &err) == 0 && !mtc_path_exists(d1), "version 1 removed");
    snprintf(p, sizeof(p), "%s/params.bin", d2);
    CHECK(nlink(p) == 2 && mtc_path_exists(p), "version 2's blob stays (links %d)", nlink(p));
    CHECK(registry_remove(models, m2, &err) == 0, "version 2 removed");
    snprintf(p, sizeof(p), "%s/blobs/sha256", models);
    char cmd[PATH_MAX + 512];
    snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", p);
    CHECK(system(cmd) == 0, "no blob left");
    json_t *bad = json_pack("{s:s}", "dir", "/etc");
    CHECK(registry_remove(models, bad, &err) < 0, "a directory outside versions/ is never removed");
    json_decref(bad);
    CHECK(registry_refs_write(models, "local", "local", "tiny", NULL, NULL) == 0 &&
              registry_resolve(dir, NULL, NULL, "tiny", -1, NULL, out, sizeof(out), &err) < 0,
          "refs removed: nothing resolves");
    CHECK(registry_refs_write(models, "local", "local", "../x", versions, aliases) < 0,
          "refs of a bad name refused");
    json_decref(versions);
    json_decref(aliases);
    json_decref(m1);
    json_decref(m2);
}

static int has(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (!strcmp(json_string_value(v), s)) return 1;
    return 0;
}

static void test_store(const char *dir)
{
    char db[PATH_MAX];
    mtc_error_t err = {""};
    snprintf(db, sizeof(db), "%s/mtcd.db", dir);
    struct store *st = store_open(db, &err);
    CHECK(st != NULL, "store: %s", err.text);
    if (!st)
        return;
    json_t *meta = json_pack("{s:s}", "description", "d"), *mf = json_pack("{s:s}", "dir", "/x");
    int v = 0, n = 0;
    for (int i = 1; i <= 3; i++)
        CHECK(store_model_add_version(st, "p", "l", "m", meta, mf, NULL, &v) == 0 && v == i,
              "version %d", i);
    struct store_model_version *vs = store_model_versions(st, "p", "l", "m", &n);
    CHECK(n == 3 && has(vs[0].aliases, "default") && !has(vs[1].aliases, "default") &&
              !has(vs[2].aliases, "default"),
          "only the first version gets default");
    store_model_versions_free(vs, n);

    json_t *add = json_pack("[s,s]", "prod", "default"), *none = json_array();
    CHECK(store_model_aliases(st, "p", "l", "m", 2, add, none) == 0, "aliases on version 2");
    vs = store_model_versions(st, "p", "l", "m", &n);
    CHECK(!has(vs[0].aliases, "default") && has(vs[1].aliases, "default") &&
              has(vs[1].aliases, "prod"),
          "default moved to 2");
    store_model_versions_free(vs, n);
    json_t *rm = json_pack("[s]", "default");
    CHECK(store_model_aliases(st, "p", "l", "m", 2, none, rm) < 0 && errno == EPERM,
          "default cannot be removed from its holder");
    CHECK(store_model_aliases(st, "p", "l", "m", 9, add, none) < 0 && errno == ENOENT,
          "no such version");

    json_t *gone = NULL;
    CHECK(store_model_delete_version(st, "p", "l", "m", 2, &gone) == 0 && gone, "delete 2");
    json_decref(gone);
    vs = store_model_versions(st, "p", "l", "m", &n);
    CHECK(n == 2 && vs[1].version == 3 && has(vs[1].aliases, "default") &&
              !has(vs[0].aliases, "default"),
          "default moved to the newest remaining (3)");
    store_model_versions_free(vs, n);
    CHECK(store_model_add_version(st, "p", "l", "m", meta, mf, NULL, &v) == 0 && v == 4,
          "numbers are not reused (4)");
    store_model_delete_version(st, "p", "l", "m", 1, &gone);
    json_decref(gone);
    store_model_delete_version(st, "p", "l", "m", 4, &gone);
    json_decref(gone);
    CHECK(store_model_delete_version(st, "p", "l", "m", 3, &gone) < 0 && errno == EBUSY,
          "the only version is not deleted alone");
    json_t *all = NULL;
    CHECK(store_model_delete(st, "p", "l", "m", &all) == 0 && json_array_size(all) == 1,
          "delete the model: its manifests");
    json_decref(all);
    struct store_model m;
    CHECK(store_model_get(st, "p", "l", "m", &m) < 0 && errno == ENOENT, "gone");
    CHECK(store_model_add_version(st, "p", "l", "m", meta, mf, NULL, &v) == 0 && v == 1,
          "a new model of that name starts at 1");
    struct store_op op = {.id = "op-m1", .project = "p", .location = "l", .kind = "UPLOAD",
                          .progress = "queued", .target = "models/m"};
    char busy[48] = "";
    CHECK(store_model_op_begin(st, &op, busy) == 0, "an upload operation is recorded");
    snprintf(op.id, sizeof(op.id), "op-m2");
    CHECK(store_model_op_begin(st, &op, busy) < 0 && errno == EBUSY && !strcmp(busy, "op-m1"),
          "one operation at a time per model (busy: %s)", busy);
    store_op_finish(st, "op-m1", NULL, 0, NULL);
    CHECK(store_model_op_begin(st, &op, busy) == 0, "the next one once it is done");
    json_decref(add);
    json_decref(none);
    json_decref(rm);
    json_decref(meta);
    json_decref(mf);
    store_close(st);
}

int main(void)
{
    char dir[] = "/tmp/mtc-registry-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    test_names();
    test_artifacts(dir);
    test_store(dir);
    mtc_rm_rf(dir);
    return check_done();
}
