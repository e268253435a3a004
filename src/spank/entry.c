/* entry: pyxis's --container-entrypoint and --container-save. The image's
 * entrypoint runs as the user inside the container before the task, pyxis's
 * way: with "/bin/sh -c 'kill -STOP $$'" as its arguments (the shell stops
 * only when exec'd by the entrypoint itself), so that when it ends with
 * `exec "$@"` the stopped shell holds the environment it made, which the
 * task takes. The save writes the container's root with
 * mksquashfs, as root, into a file the user opened. */
#include "spank/container.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The JSON string at *p (after its opening quote) unescaped into out; *p
 * moved past the closing quote. 0/-1. */
static int json_str(const char **p, char *out, size_t len)
{
    size_t o = 0;
    for (const char *s = *p; *s; s++) {
        char c = *s;
        if (c == '"') {
            out[o] = '\0';
            *p = s + 1;
            return 0;
        }
        if (c == '\\') {
            s++;
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *k = *s ? strchr(from, *s) : NULL;
            if (!k)
                return -1; /* \u and the rest: not in an entrypoint we run */
            c = to[k - from];
        }
        if (o + 1 >= len)
            return -1;
        out[o++] = c;
    }
    return -1;
}

int container_image_entrypoint(const char *json, char out[][1024], size_t max, size_t *n)
{
    *n = 0;
    const char *k = json ? strstr(json, "\"entrypoint\"") : NULL;
    if (!k)
        return 0;
    const char *p = k + 12;
    p += strspn(p, " \t\r\n:");
    if (*p != '[')
        return 0;
    for (p++;;) {
        p += strspn(p, " \t\r\n,");
        if (*p == ']')
            return 0;
        if (*p != '"' || *n == max)
            return -1;
        p++;
        if (json_str(&p, out[*n], sizeof(out[0])) < 0)
            return -1;
        (*n)++;
    }
}

/* argv0 found in the job's PATH (a name without '/'), into out. */
static int find_in_path(const char *argv0, const char *path, char *out, size_t len)
{
    if (strchr(argv0, '/')) {
        snprintf(out, len, "%s", argv0);
        return access(out, X_OK);
    }
    for (const char *p = path && *path ? path : "/usr/bin:/bin"; *p;) {
        size_t l = strcspn(p, ":");
        snprintf(out, len, "%.*s/%s", (int)(l ? l : 1), l ? p : ".", argv0);
        if (access(out, X_OK) == 0)
            return 0;
        p += l;
        if (*p == ':')
            p++;
    }
    return -1;
}

/* What the memfd holds, to stderr (the task's, srun's). */
static void show(int mfd)
{
    char buf[4096];
    ssize_t r;
    lseek(mfd, 0, SEEK_SET);
    while ((r = read(mfd, buf, sizeof(buf))) > 0)
        if (write(2, buf, (size_t)r) < 0)
            break;
}

int container_entrypoint_run(const char *json, char **env, int log,
                             int (*set_fn)(void *, const char *, const char *), void *arg,
                             mtc_error_t *err)
{
    char(*ep)[1024] = calloc(32, sizeof(*ep));
    size_t n = 0;
    if (!ep)
        return errprintf(err, "out of memory");
    int rc = 0;
    if (container_image_entrypoint(json, ep, 32, &n) < 0) {
        rc = errprintf(err, "--container-entrypoint: the image's entrypoint cannot be read");
        goto out;
    }
    if (n == 0)
        goto out; /* none: nothing to run */
    const char *path = NULL;
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], "PATH=", 5) == 0)
            path = env[i] + 5;
    char prog[1100];
    if (find_in_path(ep[0], path, prog, sizeof(prog)) < 0) {
        rc = errprintf(err, "--container-entrypoint: %.200s: not found in the image", ep[0]);
        goto out;
    }
    char *argv[32 + 4];
    for (size_t i = 0; i < n; i++)
        argv[i] = ep[i];
    /* the shell stops itself only when the entrypoint exec'd it (its parent
     * is this process): one the entrypoint runs as its child just exits, and
     * never holds the entrypoint up */
    char stop[96];
    snprintf(stop, sizeof(stop), "[ \"$PPID\" = %d ] && kill -STOP $$; exit 0", (int)getpid());
    argv[n] = "/bin/sh";
    argv[n + 1] = "-c";
    argv[n + 2] = stop;
    argv[n + 3] = NULL;
    int mfd = memfd_create("entrypoint-log", MFD_CLOEXEC);
    if (mfd < 0) {
        rc = errprintf(err, "--container-entrypoint: %s", strerror(errno));
        goto out;
    }
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        dup2(mfd, 1);
        dup2(mfd, 2);
        execve(prog, argv, env);
        dprintf(2, "%s: %s\n", prog, strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, WUNTRACED) < 0 && errno == EINTR)
        ;
    if (pid > 0 && WIFSTOPPED(st)) {
        /* the shell the entrypoint exec'd: its environment is the task's */
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/environ", (int)pid);
        size_t len = 0;
        char *e = mtc_read_file(p, &len);
        for (size_t o = 0; e && o < len; o += strlen(e + o) + 1) {
            char *eq = strchr(e + o, '=');
            if (!eq || eq == e + o)
                continue;
            *eq = '\0';
            if (set_fn(arg, e + o, eq + 1) < 0)
                rc = errprintf(err, "--container-entrypoint: cannot set %.100s", e + o);
            *eq = '=';
        }
        free(e);
        kill(pid, SIGCONT);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        st = 0;
    }
    if (log)
        show(mfd);
    if (pid < 0)
        rc = errprintf(err, "--container-entrypoint: fork: %s", strerror(errno));
    else if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        if (!log)
            show(mfd);
        rc = errprintf(err, "--container-entrypoint: the image's entrypoint %.200s failed (%s %d)",
                       ep[0], WIFEXITED(st) ? "exit" : "signal",
                       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
    close(mfd);
out:
    free(ep);
    return rc;
}

int container_save_open(const char *path, int *fd, mtc_error_t *err)
{
    *fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (*fd < 0)
        return errprintf(err, "--container-save: %.200s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return errprintf(err, "--container-save: %.200s is not a regular file", path);
    }
    return 0;
}

int container_save(const struct container_step *s, int fd, mtc_error_t *err)
{
    static const char *const progs[] = {"/usr/bin/mksquashfs", "/usr/sbin/mksquashfs"};
    const char *prog = access(progs[0], X_OK) == 0 ? progs[0] : progs[1];
    if (ftruncate(fd, 0) < 0)
        return errprintf(err, "--container-save: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        /* the user's file as fd 3, reached again through /proc/self/fd/3:
         * the same inode, never a path of the user's resolved by root */
        if (dup2(fd, 3) < 0)
            _exit(126);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        char *argv[] = {(char *)prog,
                        (char *)s->root,
                        "/proc/self/fd/3",
                        "-noappend",
                        "-no-progress",
                        "-quiet",
                        "-comp",
                        "zstd",
                        "-Xcompression-level",
                        "1",
                        NULL}; /* as image_squash: fast, nearly as small */
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        execve(prog, argv, envp);
        _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return errprintf(err, "--container-save: mksquashfs of the container failed (%s %d)",
                         pid < 0         ? "fork"
                         : WIFEXITED(st) ? "exit"
                                         : "signal",
                         pid < 0         ? errno
                         : WIFEXITED(st) ? WEXITSTATUS(st)
                                         : WTERMSIG(st));
    return 0;
}
