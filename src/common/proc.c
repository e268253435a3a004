/* proc: run commands (capturing output, with a timeout), spawn daemons,
 * and manage processes by recorded pid — never by name. */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

int mtc_run(char *const argv[], char *const env[], char **out, int timeout_ms)
{
    int pfd[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    char **envp = merge_env(env);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    pid_t pid = -1;
    int status = 0, rc = -1;

    if (!envp)
        return -1;
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        free(envp);
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
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out) {
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    }
    int err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    close(pfd[1]);
    if (err) {
        close(pfd[0]);
        errno = err;
        return -1;
    }
    int64_t deadline = timeout_ms > 0 ? mtc_now_ms() + timeout_ms : 0;
    int timed_out = 0, eof = !out;
    if (!out) {
        close(pfd[0]);
        pfd[0] = -1;
    }
    while (!eof) {
        int wait = -1;
        if (deadline) {
            int64_t left = deadline - mtc_now_ms();
            if (left <= 0) {
                timed_out = 1;
                break;
            }
            wait = (int)left;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int pr = poll(&p, 1, wait);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        if (len + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, ncap);
            if (!nb)
                break;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(pfd[0], buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            eof = 1;
        else
            len += (size_t)r;
    }
    if (pfd[0] >= 0)
        close(pfd[0]);
    /* output closed (or not captured): wait for exit, still honouring the deadline */
    for (;;) {
        pid_t w = waitpid(pid, &status, deadline && !timed_out ? WNOHANG : 0);
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
done:
    if (out) {
        if (!buf)
            buf = calloc(1, 1);
        else
            buf[len] = '\0';
        *out = buf;
    } else {
        free(buf);
    }
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
