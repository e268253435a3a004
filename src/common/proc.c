/* proc: run commands (capturing output, with a timeout), spawn daemons,
 * and manage processes by recorded pid — never by name. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* environ plus extra "K=V" entries (extra wins). Caller frees the array only. */
static char **merge_env(char *const extra[])
{
    size_t n = 0, m = 0;
    while (environ[n])
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

int mtc_run_io(char *const argv[], char *const env[], struct mtc_io *io, int timeout_ms)
{
    struct mtc_io none = {0};
    if (!io)
        io = &none;
    int want_out = io->capture & (MTC_IO_OUT | MTC_IO_MERGE);
    int want_err = (io->capture & MTC_IO_ERR) && !(io->capture & MTC_IO_MERGE);
    int ipfd[2] = {-1, -1}, opfd[2] = {-1, -1}, epfd[2] = {-1, -1};
    struct sink out = {.fd = -1}, errs = {.fd = -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    pid_t pid = -1;
    int status = 0, rc = -1;
    size_t in_off = 0;

    io->out = io->err = NULL;
    io->out_len = 0;
    char **envp = merge_env(env);
    if (!envp)
        return -1;
    if ((io->in && pipe2(ipfd, O_CLOEXEC) < 0) || (want_out && pipe2(opfd, O_CLOEXEC) < 0) ||
        (want_err && pipe2(epfd, O_CLOEXEC) < 0)) {
        int saved = errno;
        for (int i = 0; i < 2; i++) {
            if (ipfd[i] >= 0)
                close(ipfd[i]);
            if (opfd[i] >= 0)
                close(opfd[i]);
            if (epfd[i] >= 0)
                close(epfd[i]);
        }
        free(envp);
        errno = saved;
        return -1;
    }
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
    if (io->in)
        posix_spawn_file_actions_adddup2(&fa, ipfd[0], 0);
    else
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (want_out)
        posix_spawn_file_actions_adddup2(&fa, opfd[1], 1);
    if (want_err)
        posix_spawn_file_actions_adddup2(&fa, epfd[1], 2);
    else if (io->capture & MTC_IO_MERGE)
        posix_spawn_file_actions_adddup2(&fa, opfd[1], 2);
    int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    if (ipfd[0] >= 0)
        close(ipfd[0]);
    if (opfd[1] >= 0)
        close(opfd[1]);
    if (epfd[1] >= 0)
        close(epfd[1]);
    out.fd = opfd[0];
    errs.fd = epfd[0];
    int in_fd = ipfd[1];
    if (err) {
        if (in_fd >= 0)
            close(in_fd);
        free(sink_take(&out));
        free(sink_take(&errs));
        errno = err;
        return -1;
    }
    if (in_fd >= 0) {
        fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
        if (io->in_len == 0) {
            close(in_fd);
            in_fd = -1;
        }
    }
    int64_t deadline = timeout_ms > 0 ? mtc_now_ms() + timeout_ms : 0;
    int timed_out = 0;
    while (out.fd >= 0 || errs.fd >= 0 || in_fd >= 0) {
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - mtc_now_ms();
            if (left <= 0) {
                timed_out = 1;
                break;
            }
            wait = (int)left;
        }
        struct pollfd p[3] = {{.fd = out.fd, .events = POLLIN},
                              {.fd = errs.fd, .events = POLLIN},
                              {.fd = in_fd, .events = POLLOUT}};
        int pr = poll(p, 3, wait);
        if (pr <= 0)
            continue; /* EINTR or the deadline: checked above */
        if (p[0].revents)
            sink_read(&out);
        if (p[1].revents)
            sink_read(&errs);
        if (p[2].revents) {
            ssize_t w = (p[2].revents & POLLOUT)
                            ? feed(in_fd, (const char *)io->in + in_off, io->in_len - in_off)
                            : -1;
            if (w > 0)
                in_off += (size_t)w;
            if (w < 0 || in_off == io->in_len) {
                close(in_fd);
                in_fd = -1;
            }
        }
    }
    if (in_fd >= 0)
        close(in_fd);
    /* output closed (or not captured): wait for exit, still honouring the deadline */
    for (;;) {
        pid_t w = waitpid(pid, &status, deadline ? WNOHANG : 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            goto done;
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
        rc = -1;
    } else if (WIFEXITED(status)) {
        rc = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        rc = 128 + WTERMSIG(status);
    }
done:;
    int saved = errno;
    io->out_len = out.len;
    if (want_out)
        io->out = sink_take(&out);
    if (want_err)
        io->err = sink_take(&errs);
    errno = saved;
    return rc;
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
    char **envp = merge_env(env);
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
