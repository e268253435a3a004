/* proc: run commands (capturing output, with a timeout), spawn daemons,
 * manage processes by recorded pid or by what /proc says of them (trees
 * through parent pids) — never by name — quote words for a shell, and tell
 * systemd how a service is doing (sd_notify's protocol, without libsystemd). */
#include "common/common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* environ plus extra "K=V" entries (extra wins); extra alone when only.
 * Caller frees the array only. */
static char **merge_env(char *const extra[], int only)
{
    size_t n = 0, m = 0;
    while (!only && environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **env = calloc(n + m + 1, sizeof(char *));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int overridden = 0;
        for (size_t j = 0; j < m; j++)
            if (strncmp(extra[j], environ[i], klen) == 0 && extra[j][klen] == '=')
                overridden = 1;
        if (!overridden)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        env[k++] = extra[j];
    return env;
}

/* One captured stream: a growing NUL-terminated buffer. */
struct sink {
    int fd;
    char *buf;
    size_t len, cap;
};

/* Read what is available into k; 0 on EOF or error (fd closed), 1 otherwise. */
static int sink_read(struct sink *k)
{
    if (k->len + 4096 + 1 > k->cap) {
        size_t ncap = k->cap ? k->cap * 2 : 8192;
        char *nb = realloc(k->buf, ncap);
        if (!nb)
            goto eof;
        k->buf = nb;
        k->cap = ncap;
    }
    ssize_t r = read(k->fd, k->buf + k->len, k->cap - k->len - 1);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return 1;
    if (r <= 0)
        goto eof;
    k->len += (size_t)r;
    return 1;
eof:
    close(k->fd);
    k->fd = -1;
    return 0;
}

static char *sink_take(struct sink *k)
{
    if (k->fd >= 0)
        close(k->fd);
    char *s = k->buf ? k->buf : calloc(1, 1);
    if (k->buf)
        s[k->len] = '\0';
    k->buf = NULL;
    return s;
}

/* Write the next chunk of stdin without dying of SIGPIPE when the child has
 * gone (SIGPIPE blocked for this thread, a pending one consumed).
 * Returns bytes written, or -1 when stdin is finished or broken. */
static ssize_t feed(int fd, const char *p, size_t n)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t w = write(fd, p, n > 65536 ? 65536 : n);
    int saved = errno;
    if (w < 0 && errno == EPIPE) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    if (w < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    return w;
}

/* Pipes p[0] (stdin), p[1] (stdout), p[2] (stderr) for the streams wanted,
 * close-on-exec; the others stay -1. 0, or -1 with errno and none left open. */
static int open_pipes(int p[3][2], const int want[3])
{
    for (int i = 0; i < 3; i++) {
        if (want[i] && pipe2(p[i], O_CLOEXEC) < 0) {
            int saved = errno;
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++)
                    if (p[j][k] >= 0)
                        close(p[j][k]);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

/* Start argv with the pipes as its stdio — stdin from p[0] or /dev/null, stdout
 * into p[1], stderr into p[2] or (merge) into p[1] — and the signals we block or
 * ignore back to their defaults. The child's ends are closed here.
 * Returns 0 or an errno value. */
static int spawn_child(char *const argv[], char **envp, int p[3][2], int merge, const int *keep,
                       pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGCHLD);
    sigaddset(&def, SIGHUP);
    sigset_t nomask;
    sigemptyset(&nomask);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &nomask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    if (p[0][0] >= 0)
        posix_spawn_file_actions_adddup2(&fa, p[0][0], 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (p[1][1] >= 0)
        posix_spawn_file_actions_adddup2(&fa, p[1][1], 1);
    if (p[2][1] >= 0)
        posix_spawn_file_actions_adddup2(&fa, p[2][1], 2);
    else if (merge)
        posix_spawn_file_actions_adddup2(&fa, p[1][1], 2);
    /* dup2 onto itself clears FD_CLOEXEC in the child alone (POSIX 2024, glibc) */
    for (int i = 0; keep && keep[i] >= 0; i++)
        if (keep[i] > 2)
            posix_spawn_file_actions_adddup2(&fa, keep[i], keep[i]);
    int err = posix_spawnp(pid, argv[0], &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    int child_end[3] = {p[0][0], p[1][1], p[2][1]};
    for (int i = 0; i < 3; i++)
        if (child_end[i] >= 0)
            close(child_end[i]);
    return err;
}

/* A started child seen from our side: its stdin being fed, its output being read. */
struct child {
    pid_t pid;
    int in_fd;     /* our end of its stdin, -1 once closed */
    size_t in_off; /* bytes of io->in written so far */
    struct sink out, errs;
    size_t err_done; /* bytes of errs already passed to io->err_line */
};

/* Pass the complete lines of stderr read since the last call to io->err_line
 * (all of it, a last line without a newline too, when final). */
static void err_lines(struct child *c, const struct mtc_io *io, int final)
{
    if (!io->err_line || !c->errs.buf)
        return;
    char *buf = c->errs.buf;
    while (c->err_done < c->errs.len) {
        char *nl = memchr(buf + c->err_done, '\n', c->errs.len - c->err_done);
        if (!nl && !final)
            break;
        char *end = nl ? nl : buf + c->errs.len;
        char saved = *end; /* buf has room for a NUL past len */
        *end = '\0';
        io->err_line(io->err_line_arg, buf + c->err_done);
        *end = saved;
        c->err_done = (size_t)(end - buf) + (nl ? 1 : 0);
    }
}

/* Write more of io->in when the child's stdin is ready (revents); close it when
 * all is written or the child stopped reading. */
static void feed_stdin(struct child *c, const struct mtc_io *io, short revents)
{
    ssize_t w = (revents & POLLOUT)
                    ? feed(c->in_fd, (const char *)io->in + c->in_off, io->in_len - c->in_off)
                    : -1;
    if (w > 0)
        c->in_off += (size_t)w;
    if (w < 0 || c->in_off == io->in_len) {
        close(c->in_fd);
        c->in_fd = -1;
    }
}

/* Feed stdin and drain stdout and stderr until all three are closed or the
 * deadline (0: none) passes; stdin is closed either way. 1 if it passed. */
static int pump(struct child *c, const struct mtc_io *io, int64_t deadline)
{
    if (c->in_fd >= 0) {
        fcntl(c->in_fd, F_SETFL, fcntl(c->in_fd, F_GETFL) | O_NONBLOCK);
        if (io->in_len == 0) {
            close(c->in_fd);
            c->in_fd = -1;
        }
    }
    int timed_out = 0;
    while (c->out.fd >= 0 || c->errs.fd >= 0 || c->in_fd >= 0) {
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - mtc_now_ms();
            if (left <= 0) {
                timed_out = 1;
                break;
            }
            wait = (int)left;
        }
        struct pollfd p[3] = {{.fd = c->out.fd, .events = POLLIN},
                              {.fd = c->errs.fd, .events = POLLIN},
                              {.fd = c->in_fd, .events = POLLOUT}};
        int pr = poll(p, 3, wait);
        if (pr <= 0)
            continue; /* EINTR or the deadline: checked above */
        if (p[0].revents)
            sink_read(&c->out);
        if (p[1].revents) {
            sink_read(&c->errs);
            err_lines(c, io, 0);
        }
        if (p[2].revents)
            feed_stdin(c, io, p[2].revents);
    }
    if (c->in_fd >= 0) {
        close(c->in_fd);
        c->in_fd = -1;
    }
    err_lines(c, io, 1);
    return timed_out;
}

/* Wait for the child's exit, still honouring the deadline (SIGKILL once it has
 * passed). Its exit status (0..255), 128+signal, or -1 (errno; ETIMEDOUT). */
static int reap(pid_t pid, int64_t deadline, int timed_out)
{
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, deadline ? WNOHANG : 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (timed_out || (deadline && mtc_now_ms() >= deadline)) {
            timed_out = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        if (w == 0)
            mtc_sleep_ms(10);
    }
    if (timed_out) {
        errno = ETIMEDOUT;
        return -1;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

int mtc_run_io(char *const argv[], char *const env[], struct mtc_io *io, int timeout_ms)
{
    struct mtc_io none = {0};
    if (!io)
        io = &none;
    int want_out = io->capture & (MTC_IO_OUT | MTC_IO_MERGE);
    int want_err = (io->capture & MTC_IO_ERR) && !(io->capture & MTC_IO_MERGE);
    int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};

    io->out = io->err = NULL;
    io->out_len = 0;
    char **envp = merge_env(env, io->only_env);
    if (!envp)
        return -1;
    if (open_pipes(p, (const int[3]){io->in != NULL, want_out, want_err}) < 0) {
        int saved = errno;
        free(envp);
        errno = saved;
        return -1;
    }
    struct child c = {.pid = -1, .in_fd = p[0][1], .out = {.fd = p[1][0]}, .errs = {.fd = p[2][0]}};
    int err = spawn_child(argv, envp, p, io->capture & MTC_IO_MERGE, io->keep_fds, &c.pid);
    free(envp);
    if (err) {
        if (c.in_fd >= 0)
            close(c.in_fd);
        free(sink_take(&c.out));
        free(sink_take(&c.errs));
        errno = err;
        return -1;
    }
    int64_t deadline = timeout_ms > 0 ? mtc_now_ms() + timeout_ms : 0;
    int rc = reap(c.pid, deadline, pump(&c, io, deadline));
    int saved = errno;
    io->out_len = c.out.len;
    if (want_out)
        io->out = sink_take(&c.out);
    if (want_err)
        io->err = sink_take(&c.errs);
    errno = saved;
    return rc;
}

char *mtc_shell_quote(const char *s)
{
    size_t n = 3; /* the two quotes and the NUL */
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *out = malloc(n), *o = out;
    if (!out)
        return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

int mtc_run(char *const argv[], char *const env[], char **out, int timeout_ms)
{
    struct mtc_io io = {.capture = out ? MTC_IO_MERGE : 0};
    int rc = mtc_run_io(argv, env, &io, timeout_ms);
    if (out)
        *out = io.out;
    return rc;
}

pid_t mtc_spawn(char *const argv[], char *const env[], const char *logpath)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char **envp = merge_env(env, 0);
    pid_t pid = -1;
    if (!envp)
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    sigset_t def, none;
    sigfillset(&def);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, logpath ? logpath : "/dev/null",
                                     O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3); /* a daemon keeps none of our sockets */
    int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    if (err) {
        errno = err;
        return -1;
    }
    return pid;
}

int mtc_pid_alive(pid_t pid)
{
    if (pid <= 0)
        return 0;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid)
        return 0; /* our child, now reaped */
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 0;
    char path[64], *stat;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(stat = mtc_read_file(path, NULL)))
        return 0;
    char *rp = strrchr(stat, ')');
    int alive = !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
    free(stat);
    return alive;
}

pid_t mtc_pid_read(const char *path)
{
    char *s = mtc_read_file(path, NULL);
    if (!s)
        return 0;
    long v = strtol(s, NULL, 10);
    free(s);
    return v > 0 ? (pid_t)v : 0;
}

int mtc_pid_stop(pid_t pid, int ms)
{
    if (!mtc_pid_alive(pid))
        return 0;
    kill(pid, SIGTERM);
    int64_t deadline = mtc_now_ms() + ms;
    while (mtc_now_ms() < deadline) {
        if (!mtc_pid_alive(pid))
            return 0;
        mtc_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    for (int i = 0; i < 100; i++) {
        if (!mtc_pid_alive(pid))
            return 0;
        mtc_sleep_ms(20);
    }
    errno = EBUSY;
    return -1;
}

/* What /proc says of pid's argv or environment (common.h). */
const char *mtc_environ_get(const char *env, size_t len, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (strncmp(env + i, key, k) == 0 && env[i + k] == '=')
            return env + i + k + 1;
    return NULL;
}

int mtc_proc_has(pid_t pid, const char *file, const char *a, const char *b)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    char *s = mtc_read_file(path, &len);
    if (!s)
        return 0;
    int fa = 0, fb = !b;
    for (size_t i = 0; i < len; i += strlen(s + i) + 1) {
        fa |= strcmp(s + i, a) == 0;
        fb |= b && strcmp(s + i, b) == 0;
    }
    free(s);
    return fa && fb;
}

int mtc_cmdline_has(pid_t pid, const char *a, const char *b)
{
    return mtc_proc_has(pid, "cmdline", a, b);
}

/* 1 when pid runs in this process's mount namespace (its /proc/PID/ns/mnt
 * names the same one). */
static int same_mounts(pid_t pid, const char *mine)
{
    char path[64], ns[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
    ssize_t n = readlink(path, ns, sizeof(ns) - 1);
    if (n < 0)
        return 0;
    ns[n] = '\0';
    return strcmp(ns, mine) == 0;
}

pid_t mtc_cmdline_find(const char *a, const char *b)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t self = getpid(), found = 0;
    char mine[64] = "";
    ssize_t n = readlink("/proc/self/ns/mnt", mine, sizeof(mine) - 1);
    mine[n > 0 ? n : 0] = '\0';
    while (d && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid != self && (!found || pid < found) && mtc_cmdline_has(pid, a, b) &&
            mtc_pid_alive(pid) && (!*mine || same_mounts(pid, mine)))
            found = pid;
    }
    if (d)
        closedir(d);
    return found;
}

struct proc_entry {
    pid_t pid, ppid;
    int mine;
};

size_t mtc_proc_tree(int (*mine)(pid_t pid, void *arg), void *arg, pid_t *out, size_t max)
{
    size_t n = 0, cap = 256;
    struct proc_entry *ps = malloc(cap * sizeof(*ps));
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t self = getpid(), parent = getppid();
    while (ps && d && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        char path[64], *st;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (pid == self || pid == parent || !(st = mtc_read_file(path, NULL)))
            continue;
        char *rp = strrchr(st, ')'); /* the name may hold blanks and parentheses */
        int ppid = 0;
        char state = 0;
        if (rp)
            sscanf(rp + 1, " %c %d", &state, &ppid);
        free(st);
        if (state == 'Z' || state == 'X')
            continue;
        if (n == cap) {
            struct proc_entry *np = realloc(ps, (cap *= 2) * sizeof(*ps));
            if (!np)
                break;
            ps = np;
        }
        ps[n] = (struct proc_entry){pid, (pid_t)ppid, mine(pid, arg)};
        n++;
    }
    if (d)
        closedir(d);
    for (int changed = 1; changed && ps;) { /* descendants, to a fixed point */
        changed = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; !ps[i].mine && j < n; j++)
                if (ps[j].mine && ps[j].pid == ps[i].ppid)
                    ps[i].mine = changed = 1;
    }
    size_t k = 0;
    for (size_t i = 0; ps && i < n && k < max; i++)
        if (ps[i].mine)
            out[k++] = ps[i].pid;
    free(ps);
    return k;
}

int mtc_sd_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
        return errno = EINVAL, -1;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@') // an abstract socket: its name starts with a NUL byte
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    int e = errno;
    close(fd);
    return n < 0 ? (errno = e, -1) : 1;
}

int mtc_cgroup_service(const char *cgroup, char *unit, size_t len)
{
    for (const char *line = cgroup; line && *line;) {
        const char *end = strchr(line, '\n'), *stop = end ? end : line + strlen(line);
        const char *slash = stop;
        while (slash > line && slash[-1] != '/')
            slash--;
        size_t n = (size_t)(stop - slash);
        if (slash > line && n > 8 && n < len && memcmp(stop - 8, ".service", 8) == 0) {
            memcpy(unit, slash, n);
            unit[n] = '\0';
            return 1;
        }
        line = end ? end + 1 : NULL;
    }
    return 0;
}
