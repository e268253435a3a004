/* test_container: the container plugin's pure pieces — the pyxis options
 * (mount specs, names and their flags, env lists, conflicting flags), their
 * PYXIS_CONTAINER_* forms and the command line's precedence, paths inside a
 * container, the command lookup, the image digest and its cache, and the sweep of a directory. */
#include "check.h"
#include "spank/container.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_normalize(void)
{
    char out[64];
    mtc_error_t err;
    static const struct {
        const char *in, *want;
    } ok[] = {{"/a//b/./c/", "/a/b/c"}, {"/", "/"}, {"/./", "/"}, {"/a..b/c", "/a..b/c"}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        CHECK(container_path_normalize("x", ok[i].in, out, sizeof(out), &err) == 0, "%s accepted",
              ok[i].in);
        CHECK_STR(out, ok[i].want, "%s normalized", ok[i].in);
    }
    CHECK(container_path_normalize("dst", "/a/../../etc", out, sizeof(out), &err) < 0 &&
              strstr(err.text, "dst: /a/../../etc leaves the container"),
          "'..' refused, named: %s", err.text);
    CHECK(container_path_normalize("dst", "rel", out, sizeof(out), &err) < 0 &&
              strstr(err.text, "not an absolute path"),
          "relative refused");
    char longp[200];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[199] = '\0';
    CHECK(container_path_normalize("dst", longp, out, sizeof(out), &err) < 0, "too long refused");
}

static void test_mounts(void)
{
    struct container_opts o;
    mtc_error_t err;
    container_opts_init(&o);
    CHECK(container_opt_set(&o, "container-mounts", "/data:/mnt/d:ro,rel:/r,/same,/x:/y:rw", "/cwd",
                            &err) == 0,
          "mount list parsed (%s)", err.text);
    CHECK(o.nmounts == 4, "four mounts");
    CHECK_STR(o.mounts[0].src, "/data", "src");
    CHECK_STR(o.mounts[0].dst, "/mnt/d", "dst");
    CHECK(o.mounts[0].ro == 1 && o.mounts[3].ro == 0, "ro and rw flags");
    CHECK_STR(o.mounts[1].src, "/cwd/rel", "a relative source is made absolute against the cwd");
    CHECK_STR(o.mounts[2].dst, "/same", "SRC alone mounts at the same path");
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"/a:relative", "destination relative is not an absolute path"},
        {"/a:/b/../../c", "leaves the container"},
        {"/a:/b:bogus", "unknown flag 'bogus'"},
        {"/a:/", "cannot mount over the container's /"},
        {"/a:/b,,/c:/d", "empty entry"},
        {":/b", "invalid entry"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        container_opts_init(&o);
        CHECK(container_opt_set(&o, "container-mounts", bad[i].spec, "/", &err) < 0 &&
                  strstr(err.text, bad[i].want) && strstr(err.text, "--container-mounts"),
              "bad mount spec '%s': %s", bad[i].spec, err.text);
    }
    container_opts_init(&o);
    CHECK(container_opt_set(&o, "container-mounts", "rel:/r", NULL, &err) < 0,
          "a relative source without a cwd refused");
}

static void test_names_and_flags(void)
{
    struct container_opts o;
    mtc_error_t err;
    container_opts_init(&o);
    CHECK(!container_opts_active(&o), "nothing given: no container");
    CHECK(container_opt_set(&o, "container-name", "job_c.1:exec", NULL, &err) == 0 &&
              strcmp(o.name, "job_c.1") == 0 && o.name_mode == CONTAINER_NAME_EXEC,
          "name with flag exec");
    CHECK(container_opts_active(&o), "a name alone makes a container");
    CHECK(container_opt_set(&o, "container-name", "n", NULL, &err) == 0 &&
              o.name_mode == CONTAINER_NAME_AUTO,
          "no flag: auto");
    static const char *const bad[] = {"x:bogus", ":create", "a/b", "../x", ".hidden"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        CHECK(container_opt_set(&o, "container-name", bad[i], NULL, &err) < 0 &&
                  strstr(err.text, "--container-name"),
              "bad name '%s': %s", bad[i], err.text);
    container_opts_init(&o);
    CHECK(container_opt_set(&o, "container-writable", NULL, NULL, &err) == 0 && o.writable == 1,
          "--container-writable");
    CHECK(container_opt_set(&o, "container-readonly", NULL, NULL, &err) < 0 &&
              strstr(err.text, "--container-readonly conflicts"),
          "writable then readonly: a conflict");
    CHECK(container_opt_set(&o, "no-container-mount-home", NULL, NULL, &err) == 0 &&
              o.mount_home == 0,
          "--no-container-mount-home");
    CHECK(container_opt_set(&o, "container-env", "A,B_2", NULL, &err) == 0 && o.nenv == 2 &&
              strcmp(o.env[1], "B_2") == 0,
          "env list");
    CHECK(container_opt_set(&o, "container-env", "A,,B", NULL, &err) < 0, "empty env name refused");
    CHECK(container_opt_set(&o, "container-env", "1X", NULL, &err) < 0, "a digit first refused");
    CHECK(container_opt_set(&o, "container-workdir", "../x", NULL, &err) == 0 &&
              strcmp(o.workdir, "/../x") == 0,
          "a relative workdir is inside the container");
    CHECK(container_opt_set(&o, "container-image", "", NULL, &err) < 0 &&
              strstr(err.text, "argument required"),
          "empty image refused");
    CHECK(container_opt_set(&o, "container-image", "x.sqsh", "/imgs", &err) == 0 &&
              strcmp(o.image, "/imgs/x.sqsh") == 0,
          "a relative image made absolute");
}

/* The environment forms, from a small table. */
static const char *const *env_table;
static const char *table_get(void *arg, const char *name)
{
    (void)arg;
    for (size_t i = 0; env_table[i]; i += 2)
        if (strcmp(env_table[i], name) == 0)
            return env_table[i + 1];
    return NULL;
}

static void test_env_forms(void)
{
    struct container_opts o;
    mtc_error_t err;
    static const char *const vars[] = {"PYXIS_CONTAINER_IMAGE", "/env.sqsh",
                                       "PYXIS_CONTAINER_WORKDIR", "/w",
                                       "PYXIS_CONTAINER_MOUNTS", "/a:/b",
                                       "PYXIS_CONTAINER_READONLY", "1",
                                       "PYXIS_CONTAINER_REMAP_ROOT", "true",
                                       NULL};
    env_table = vars;
    container_opts_init(&o);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) == 0, "env forms read");
    CHECK(strcmp(o.image, "/env.sqsh") == 0 && strcmp(o.workdir, "/w") == 0 && o.nmounts == 1,
          "image, workdir and mounts from the environment");
    CHECK(o.writable == 0 && o.remap_root == 1, "READONLY=1 and REMAP_ROOT=true");
    container_opts_init(&o);
    container_opt_set(&o, "container-image", "/cli.sqsh", NULL, &err);
    container_opt_set(&o, "container-writable", NULL, NULL, &err);
    container_opt_set(&o, "container-mounts", "/c:/d,/e:/f", NULL, &err);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) == 0 &&
              strcmp(o.image, "/cli.sqsh") == 0 && o.writable == 1 && o.nmounts == 2,
          "the command line wins over the environment");
    static const char *const badvars[] = {"PYXIS_CONTAINER_WRITABLE", "maybe", NULL};
    env_table = badvars;
    container_opts_init(&o);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) < 0 &&
              strstr(err.text, "PYXIS_CONTAINER_WRITABLE: 'maybe' is not 0 or 1"),
          "a bad boolean is named: %s", err.text);
}

static void test_find_command(void)
{
    CHECK(container_find_command("sh", "/nonexistent:/bin"), "sh found in PATH");
    CHECK(!container_find_command("no-such-command-here", "/bin:/usr/bin"), "missing command");
    CHECK(container_find_command("/bin/sh", NULL), "an absolute path");
    CHECK(!container_find_command("", NULL), "empty argv0");
}

static void test_digest_and_sweep(void)
{
    char dir[] = "/tmp/test_container.XXXXXX";
    if (!mkdtemp(dir))
        return;
    char img[128], rt[128], out[72], out2[72];
    mtc_error_t err;
    snprintf(img, sizeof(img), "%s/x.sqsh", dir);
    snprintf(rt, sizeof(rt), "%s/rt", dir);
    mtc_write_file_fmt(img, 0644, "abc");
    CHECK(container_image_digest(rt, img, out, &err) == 0 &&
              strcmp(out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") ==
                  0,
          "digest = sha256 of the file (%s)", out);
    /* the cache is keyed by the file's identity: a changed file, a new key */
    CHECK(container_image_digest(rt, img, out2, &err) == 0 && strcmp(out, out2) == 0,
          "cached digest equal");
    mtc_write_file_fmt(img, 0644, "abd");
    CHECK(container_image_digest(rt, img, out2, &err) == 0 && strcmp(out, out2) != 0,
          "a replaced file is hashed again");
    CHECK(container_image_digest(rt, "/nonexistent.sqsh", out, &err) < 0 &&
              strstr(err.text, "/nonexistent.sqsh"),
          "missing image named");
    char sub[160], deep[200];
    snprintf(sub, sizeof(sub), "%s/jobs/7/images/x", rt);
    mtc_mkdir_p(sub, 0755);
    int mounted = 0;
    if (geteuid() == 0 && mount("tmpfs", sub, "tmpfs", 0, "size=1m") == 0) {
        /* nested, and two stacked on one point: what a crashed job can leave */
        snprintf(deep, sizeof(deep), "%s/inner", sub);
        mounted = mkdir(deep, 0755) == 0 && mount("tmpfs", deep, "tmpfs", 0, "size=1m") == 0 &&
                  mount("tmpfs", deep, "tmpfs", 0, "size=1m") == 0;
    }
    snprintf(sub, sizeof(sub), "%s/jobs", rt);
    int n = container_sweep(sub, &err);
    CHECK(n >= 0 && !mtc_path_exists(sub), "sweep removes the tree (%d mounts)", n);
    if (mounted) {
        char *mi = mtc_read_file("/proc/self/mountinfo", NULL);
        CHECK(n >= 1 && mi && !strstr(mi, dir), "nested and stacked mounts all gone");
        free(mi);
    }
    mtc_rm_rf(dir);
}

int main(void)
{
    test_normalize();
    test_mounts();
    test_names_and_flags();
    test_env_forms();
    test_find_command();
    test_digest_and_sweep();
    return check_done();
}
