/* test_container: the container plugin's pure pieces — the pyxis options
 * (mount specs, names and their flags, env lists, conflicting flags), their
 * PYXIS_CONTAINER_* forms and the command line's precedence, paths inside a
 * container, the command lookup, the image digest and its cache, the sweep of a directory
 * (also while a user swaps a directory of theirs for a symlink), removal by descriptor and
 * the trusted walk root takes to its directories. */
#include "check.h"
#include "spank/container.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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
              strcmp(o.image, "/imgs/x.sqsh") == 0 && o.image_ref == 0,
          "a relative image made absolute");
    CHECK(container_opt_set(&o, "container-image", "nvcr.io#nvidia/pytorch:24.01-py3", "/imgs",
                            &err) == 0 &&
              strcmp(o.image, "nvcr.io#nvidia/pytorch:24.01-py3") == 0 && o.image_ref == 1,
          "a registry reference (pyxis's rule) kept as given, for the nodes to pull");
    CHECK(container_opt_set(&o, "container-image", "./app", "/imgs", &err) == 0 &&
              strcmp(o.image, "/imgs/./app") == 0 && o.image_ref == 0,
          "./ makes a file of a name without .sqsh");
    CHECK(container_opt_set(&o, "container-image", "reg#a b:1", NULL, &err) < 0 &&
              strstr(err.text, "a space or control character"),
          "a reference with a space refused: %s", err.text);
    CHECK(container_opt_set(&o, "container-image", "reg#a/../b", NULL, &err) < 0 &&
              strstr(err.text, "'..' in the reference"),
          "a reference with '..' refused: %s", err.text);
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

/* The names in dfd's directory that are no temporary, into a count. */
static size_t digest_entries(int dfd)
{
    size_t n = 0;
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    for (struct dirent *de; d && (de = readdir(d));)
        n += de->d_name[0] != '.' && !strstr(de->d_name, ".tmp");
    if (d)
        closedir(d);
    return n;
}

/* R/digests/ is kept to CONTAINER_DIGESTS_MAX entries, the least recently
 * used going: CONTAINER_DIGESTS_MAX + 1 images hashed, their entries aged
 * (the oldest first), the oldest used again (touched), one more hashed. */
static void test_digest_bound(const char *dir, int rtfd)
{
    const size_t max = CONTAINER_DIGESTS_MAX;
    char img[160], out[72], key0[256] = "", key1[256] = "";
    mtc_error_t err;
    int dfd = openat(rtfd, "digests", O_RDONLY | O_DIRECTORY);
    /* clear what the checks above cached */
    for (size_t n = digest_entries(dfd); n > 0; n = 0) {
        DIR *d = fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY));
        for (struct dirent *de; d && (de = readdir(d));)
            if (de->d_name[0] != '.')
                unlinkat(dfd, de->d_name, 0);
        if (d)
            closedir(d);
    }
    int ok = 1;
    time_t now = time(NULL);
    for (size_t i = 0; i < max && ok; i++) {
        snprintf(img, sizeof(img), "%s/img%zu", dir, i);
        mtc_write_file_fmt(img, 0644, "image %zu", i);
        int fd = open(img, O_RDONLY);
        ok = fd >= 0 && container_image_digest(rtfd, fd, out, &err) == 0;
        close(fd);
    }
    CHECK(ok && digest_entries(dfd) == max, "%zu images hashed: %zu entries", max,
          digest_entries(dfd));
    /* aged: the entry of img<i> last used (max - i) minutes ago */
    DIR *d = fdopendir(openat(dfd, ".", O_RDONLY | O_DIRECTORY));
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char val[80] = "";
        int f = openat(dfd, de->d_name, O_RDONLY);
        ssize_t n = f >= 0 ? read(f, val, sizeof(val) - 1) : -1;
        if (f >= 0)
            close(f);
        for (size_t i = 0; n > 0 && i < max; i++) {
            char want[72], body[32];
            snprintf(body, sizeof(body), "image %zu", i);
            mtc_sha256_hex(body, want + 7);
            memcpy(want, "sha256:", 7);
            if (strncmp(val, want, 71) != 0)
                continue;
            struct timespec t[2] = {{now - (time_t)(max - i) * 60, 0},
                                    {now - (time_t)(max - i) * 60, 0}};
            utimensat(dfd, de->d_name, t, 0);
            if (i == 0)
                snprintf(key0, sizeof(key0), "%s", de->d_name);
            if (i == 1)
                snprintf(key1, sizeof(key1), "%s", de->d_name);
        }
    }
    if (d)
        closedir(d);
    /* img0, the oldest, used again: touched, it is no longer the one to go */
    snprintf(img, sizeof(img), "%s/img0", dir);
    int fd = open(img, O_RDONLY);
    CHECK(key0[0] && key1[0] && fd >= 0 && container_image_digest(rtfd, fd, out, &err) == 0,
          "the oldest image used again (a hit)");
    close(fd);
    snprintf(img, sizeof(img), "%s/img%zu", dir, max);
    mtc_write_file_fmt(img, 0644, "image %zu", max);
    fd = open(img, O_RDONLY);
    CHECK(fd >= 0 && container_image_digest(rtfd, fd, out, &err) == 0, "one image more hashed");
    close(fd);
    CHECK(digest_entries(dfd) == max, "  the cache kept to %zu entries (%zu)", max,
          digest_entries(dfd));
    CHECK(faccessat(dfd, key0, F_OK, 0) == 0, "  the one used again stays");
    CHECK(faccessat(dfd, key1, F_OK, 0) < 0 && errno == ENOENT,
          "  the least recently used went");
    /* a writer's temporary left a minute ago goes with the next trim */
    int t = openat(dfd, "x.tmp123", O_WRONLY | O_CREAT, 0644);
    struct timespec old[2] = {{now - 120, 0}, {now - 120, 0}};
    if (t >= 0)
        futimens(t, old), close(t);
    snprintf(img, sizeof(img), "%s/img%zu", dir, max + 1);
    mtc_write_file_fmt(img, 0644, "image %zu", max + 1);
    fd = open(img, O_RDONLY);
    container_image_digest(rtfd, fd, out, &err);
    close(fd);
    CHECK(faccessat(dfd, "x.tmp123", F_OK, 0) < 0, "  a stale temporary removed");
    for (size_t i = 0; i <= max + 1; i++) {
        snprintf(img, sizeof(img), "%s/img%zu", dir, i);
        unlink(img);
    }
    close(dfd);
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
    mkdir(rt, 0755);
    int rtfd = open(rt, O_PATH | O_DIRECTORY);
    mtc_write_file_fmt(img, 0644, "abc");
    int fd = open(img, O_RDONLY);
    CHECK(container_image_digest(rtfd, fd, out, &err) == 0 &&
              strcmp(out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") ==
                  0,
          "digest = sha256 of the file (%s)", out);
    /* the cache is keyed by the file's identity: a changed file, a new key */
    CHECK(container_image_digest(rtfd, fd, out2, &err) == 0 && strcmp(out, out2) == 0,
          "cached digest equal");
    /* changed in place, its size and mtime put back: the ctime (no user can
     * set it) still tells */
    struct stat st;
    fstat(fd, &st);
    int w = open(img, O_WRONLY);
    CHECK(w >= 0 && pwrite(w, "abd", 3, 0) == 3, "the image rewritten in place");
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    futimens(w, times);
    close(w);
    CHECK(container_image_digest(rtfd, fd, out2, &err) == 0 && strcmp(out, out2) != 0,
          "changed in place with its mtime reset: hashed again");
    close(fd);
    mtc_write_file_fmt(img, 0644, "abd");
    fd = open(img, O_RDONLY);
    CHECK(container_image_digest(-1, fd, out2, &err) == 0 && strcmp(out, out2) != 0,
          "a replaced file is hashed again (no cache)");
    close(fd);
    CHECK(container_image_digest(rtfd, -1, out, &err) < 0 && strstr(err.text, "the image"),
          "a bad descriptor refused");
    test_digest_bound(dir, rtfd);
    close(rtfd);
    char sub[160], deep[200];
    snprintf(sub, sizeof(sub), "%s/jobs/7/images/x", rt);
    mtc_mkdir_p(sub, 0755);
    int root = geteuid() == 0;
    if (root) {
        /* one mount, one nested in it, and two stacked on one point: what a
         * crashed job can leave */
        snprintf(deep, sizeof(deep), "%s/inner", sub);
        CHECK(mount("tmpfs", sub, "tmpfs", 0, "size=1m") == 0 && mkdir(deep, 0755) == 0 &&
                  mount("tmpfs", deep, "tmpfs", 0, "size=1m") == 0 &&
                  mount("tmpfs", deep, "tmpfs", 0, "size=1m") == 0,
              "three tmpfs mounted under the job (nested, and two stacked)");
    } else {
        printf("ok %d - # SKIP mounts under the job need root\n", ++check_n);
    }
    snprintf(sub, sizeof(sub), "%s/jobs", rt);
    int n = container_sweep(sub, &err);
    CHECK(n >= 0 && !mtc_path_exists(sub), "sweep removes the tree (%s)", err.text);
    if (root) {
        char *mi = mtc_read_file("/proc/self/mountinfo", NULL);
        CHECK(n == 3 && mi && !strstr(mi, dir),
              "nested and stacked mounts all gone: 3 unmounted (%d)", n);
        free(mi);
    }
    mtc_rm_rf(dir);
}

/* A writable container's upper/ is its user's: while root sweeps the job,
 * the user swaps a subdirectory for a symlink to a directory of root's
 * (renameat2 RENAME_EXCHANGE, as fast as it can), the audit's attack on a
 * path-walking removal. The sweep must delete nothing outside the tree, in
 * 200 rounds; the swapper runs as nobody, as a user would. */
static void test_sweep_race(void)
{
    if (geteuid() != 0) {
        printf("ok %d - # SKIP the sweep race needs root (a user's swapper beside root's sweep)\n",
               ++check_n);
        return;
    }
    char dir[] = "/tmp/test_container_race.XXXXXX";
    if (!mkdtemp(dir))
        return;
    chmod(dir, 0755);
    char victim[160], keep[200], job[200], upper[240], path[300];
    snprintf(victim, sizeof(victim), "%s/victim", dir); /* root's, outside the tree */
    mkdir(victim, 0700);
    int lost = 0, rounds = 0, swaps_done = 0;
    mtc_error_t err;
    for (; rounds < 200 && !lost; rounds++) {
        for (int i = 0; i < 8; i++) {
            snprintf(keep, sizeof(keep), "%s/keep%d", victim, i);
            if (!mtc_path_exists(keep))
                mtc_write_file_fmt(keep, 0600, "root's\n");
        }
        snprintf(job, sizeof(job), "%s/rt/jobs/7", dir);
        snprintf(upper, sizeof(upper), "%s/steps/0/upper", job);
        snprintf(path, sizeof(path), "%s/sub", upper);
        mtc_mkdir_p(path, 0755);
        for (int i = 0; i < 8; i++) {
            snprintf(path, sizeof(path), "%s/sub/keep%d", upper, i);
            mtc_write_file_fmt(path, 0644, "the user's\n");
        }
        snprintf(path, sizeof(path), "%s/lnk", upper);
        if (symlink(victim, path) < 0)
            break;
        snprintf(path, sizeof(path), "chown -R 65534:65534 %s", upper);
        if (system(path) != 0)
            break;
        int go[2];
        if (pipe(go) < 0)
            break;
        pid_t pid = fork();
        if (pid == 0) {
            close(go[0]);
            if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(2);
            int ufd = open(upper, O_PATH | O_DIRECTORY);
            close(go[1]); /* started: the sweep may begin */
            int n = 0;
            while (ufd >= 0 && n < 200000 &&
                   syscall(SYS_renameat2, ufd, "sub", ufd, "lnk", RENAME_EXCHANGE) == 0)
                n++;
            _exit(n > 0 ? 0 : 1);
        }
        close(go[1]);
        char c;
        while (read(go[0], &c, 1) > 0)
            ;
        close(go[0]);
        snprintf(path, sizeof(path), "%s/rt/jobs", dir);
        container_sweep(path, &err);
        int status;
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        swaps_done += WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
        for (int i = 0; i < 8; i++) {
            snprintf(keep, sizeof(keep), "%s/keep%d", victim, i);
            lost += !mtc_path_exists(keep);
        }
        mtc_rm_rf(path);
    }
    CHECK(swaps_done > 0, "the user's swapper ran (%d of %d rounds)", swaps_done, rounds);
    CHECK(lost == 0, "the sweep deleted nothing of root's outside the tree in %d rounds (%d lost)",
          rounds, lost);
    mtc_rm_rf(dir);
}

/* mtc_remove_at never enters a mount, and a tree deeper than the
 * descriptors it may hold is removed all the same. */
static void test_remove_at(void)
{
    char dir[] = "/tmp/test_container_rm.XXXXXX";
    if (!mkdtemp(dir))
        return;
    char path[8192], sub[200];
    mtc_error_t err = {""};
    /* 300 levels: deeper than RM_DEPTH several times over */
    size_t n = (size_t)snprintf(path, sizeof(path), "%s/deep", dir);
    for (int i = 0; i < 300 && n + 4 < sizeof(path); i++)
        n += (size_t)snprintf(path + n, sizeof(path) - n, "/d");
    int made = mtc_mkdir_p(path, 0755) == 0;
    snprintf(sub, sizeof(sub), "%s/deep", dir);
    int dfd = open(dir, O_PATH | O_DIRECTORY);
    CHECK(made && mtc_remove_at(dfd, "deep", &err) == 0 && !mtc_path_exists(sub),
          "a 300-level tree removed (%s)", err.text);
    if (geteuid() == 0) {
        snprintf(sub, sizeof(sub), "%s/t/m", dir);
        mtc_mkdir_p(sub, 0755);
        if (mount("tmpfs", sub, "tmpfs", 0, "size=1m") == 0) {
            snprintf(path, sizeof(path), "%s/t/m/inside", dir);
            mtc_write_file_fmt(path, 0644, "kept\n");
            CHECK(mtc_remove_at(dfd, "t", &err) < 0 && errno == EBUSY &&
                      strstr(err.text, "a mount point below it (m)") && mtc_path_exists(path),
                  "a mount below is not entered: EBUSY, named, its file kept (%s)", err.text);
            umount2(sub, MNT_DETACH);
        }
        snprintf(sub, sizeof(sub), "%s/t", dir);
        CHECK(mtc_remove_at(dfd, "t", &err) == 0 && !mtc_path_exists(sub), "removed once unmounted");
    }
    close(dfd);
    /* a trusted walk refuses a directory others may write */
    snprintf(sub, sizeof(sub), "%s/open", dir);
    mkdir(sub, 0777);
    chmod(sub, 0777);
    snprintf(path, sizeof(path), "%s/inner", sub);
    int fd = mtc_dir_open_trusted(path, 1, 0755, &err);
    CHECK(fd < 0 && errno == EPERM && strstr(err.text, "/open: owned by uid") &&
              !mtc_path_exists(path),
          "a trusted walk stops at a world-writable directory, creating nothing (%s)", err.text);
    chmod(sub, 01777);
    fd = mtc_dir_open_trusted(path, 1, 0755, &err);
    CHECK(fd >= 0, "a sticky one is walked through (%s)", err.text);
    if (fd >= 0)
        close(fd);
    snprintf(path, sizeof(path), "%s/ln", dir);
    symlink(sub, path);
    if (geteuid() == 0)
        lchown(path, 65534, 65534);
    snprintf(path, sizeof(path), "%s/ln/inner", dir);
    fd = mtc_dir_open_trusted(path, 0, 0, &err);
    CHECK(geteuid() != 0 ? fd >= 0 : fd < 0 && strstr(err.text, "a symlink root does not follow"),
          "a symlink another user owns is not followed (%s)", err.text);
    if (fd >= 0)
        close(fd);
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
    test_remove_at();
    test_sweep_race();
    return check_done();
}
