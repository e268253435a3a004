/* ssh: remote commands and files over the system OpenSSH client (ControlMaster
 * multiplexing, BatchMode, mtc's own known_hosts), with a deadline enforced on
 * both ends and ssh's own errors turned into one-line, classified errors. */
#include "provider/ssh.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_CONNECT_S 10
#define ALIVE_INTERVAL_S 5 /* with ALIVE_COUNT: a dead peer is noticed in 15 s */
#define ALIVE_COUNT 3
#define PERSIST_S 300  /* an idle master closes after this */
#define KILL_AFTER_S 2 /* remote `timeout -k`: SIGKILL this long after SIGTERM */
#define MAX_OPTS 32
/* ssh binds the master socket at ControlPath plus ".<16 random chars>" first */
#define CM_SUFFIX_LEN 17
#define CM_HASH_LEN 40 /* %C: hex SHA-1 */
#define CM_KEY_LEN 9   /* "-" and 8 hex of the identity: a master per key */

struct ssh_conn {
    char host[256];
    char user[64];
    char known_hosts[PATH_MAX];
    char *opts[MAX_OPTS]; /* ssh options shared by every call, malloc'd */
    int nopts;
};

/* ssh's messages (stderr, exit 255) → errno and the words for the error. The
 * first match wins, so the specific ones come first. */
static const struct {
    const char *needle;
    int err;
    const char *what;
} ssh_errors[] = {
    {"REMOTE HOST IDENTIFICATION HAS CHANGED", EKEYREJECTED, "host key changed"},
    {"Host key verification failed", EKEYREJECTED, "host key verification failed"},
    {"Permission denied", EACCES, "authentication refused (wrong key or user)"},
    {"Too many authentication failures", EACCES, "authentication refused (too many keys)"},
    {"Connection refused", ECONNREFUSED, "connection refused (no sshd on the port?)"},
    {"No route to host", EHOSTUNREACH, "unreachable (no route to host)"},
    {"Network is unreachable", EHOSTUNREACH, "unreachable (network is unreachable)"},
    {"Connection timed out during banner exchange", EHOSTUNREACH,
     "unreachable (no ssh banner before the connect timeout)"},
    {"Connection timed out", EHOSTUNREACH, "unreachable (connect timed out)"},
    {"Operation timed out", EHOSTUNREACH, "unreachable (connect timed out)"},
    {"Could not resolve hostname", EHOSTUNREACH, "unknown host name"},
    {"Timeout, server", ECONNRESET, "connection lost (host stopped answering)"},
    {"Connection reset", ECONNRESET, "connection reset"},
    {"Connection closed", ECONNRESET, "connection closed by the host"},
    {"Broken pipe", ECONNRESET, "connection broken"},
};

static int valid_chars(const char *s, const char *extra)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr(extra, *s)))
            return 0;
    return 1;
}

static int add_opt(struct ssh_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_opt(struct ssh_conn *c, const char *fmt, ...)
{
    if (c->nopts >= MAX_OPTS) {
        errno = E2BIG;
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&c->opts[c->nopts], fmt, ap);
    va_end(ap);
    if (n < 0) {
        c->opts[c->nopts] = NULL;
        errno = ENOMEM;
        return -1;
    }
    c->nopts++;
    return 0;
}

struct ssh_conn *ssh_create(const struct ssh_target *t, const char *state_dir, mtc_error_t *err)
{
    const char *user = t->user ? t->user : "root";
    int port = t->port ? t->port : 22;
    int cto = t->connect_timeout_s > 0 ? t->connect_timeout_s : DEFAULT_CONNECT_S;
    struct ssh_conn *c = NULL;

    if (!t->host || !*t->host || t->host[0] == '-' || strlen(t->host) >= sizeof(c->host) ||
        !valid_chars(t->host, ".:_-")) {
        errno = EINVAL;
        errprintf(err, "invalid ssh host '%s'", t->host ? t->host : "");
        return NULL;
    }
    if (!*user || user[0] == '-' || strlen(user) >= sizeof(c->user) || !valid_chars(user, "._-")) {
        errno = EINVAL;
        errprintf(err, "invalid ssh user '%s'", user);
        return NULL;
    }
    if (port < 1 || port > 65535) {
        errno = EINVAL;
        errprintf(err, "invalid ssh port %d", port);
        return NULL;
    }
    if (t->key_file && (t->key_file[0] != '/' || strpbrk(t->key_file, "\n\r\" "))) {
        errno = EINVAL;
        errprintf(err, "ssh key file must be an absolute path without blanks: %s", t->key_file);
        return NULL;
    }
    struct sockaddr_un sun;
    if (strlen(state_dir) + strlen("/cm-") + CM_HASH_LEN + CM_KEY_LEN + CM_SUFFIX_LEN >=
        sizeof(sun.sun_path)) {
        errno = ENAMETOOLONG;
        errprintf(err, "ssh state directory %s too long for a control socket; use a shorter path",
                  state_dir);
        return NULL;
    }
    if (mtc_mkdir_p(state_dir, 0700) < 0) {
        errprintf(err, "cannot create %s: %s", state_dir, strerror(errno));
        return NULL;
    }
    if (!(c = calloc(1, sizeof(*c)))) {
        errprintf(err, "out of memory");
        return NULL;
    }
    /* a master authenticated with one key must not serve a handle with another
     * (a changed ssh.keyFile takes effect at once) */
    char key_tag[65];
    mtc_sha256_hex(t->key_file ? t->key_file : "(default identities)", key_tag);
    snprintf(c->host, sizeof(c->host), "%s", t->host);
    snprintf(c->user, sizeof(c->user), "%s", user);
    snprintf(c->known_hosts, sizeof(c->known_hosts), "%s/known_hosts", state_dir);
    /* -F none: neither ~/.ssh/config nor /etc/ssh/ssh_config changes what mtc does */
    int rc = add_opt(c, "-F") | add_opt(c, "none") | add_opt(c, "-T") |
             add_opt(c, "-oBatchMode=yes") | add_opt(c, "-oUser=%s", user) |
             add_opt(c, "-oPort=%d", port) | add_opt(c, "-oUserKnownHostsFile=%s", c->known_hosts) |
             add_opt(c, "-oGlobalKnownHostsFile=/dev/null") |
             add_opt(c, "-oStrictHostKeyChecking=accept-new") | add_opt(c, "-oHashKnownHosts=no") |
             add_opt(c, "-oCheckHostIP=no") | add_opt(c, "-oConnectTimeout=%d", cto) |
             add_opt(c, "-oServerAliveInterval=%d", ALIVE_INTERVAL_S) |
             add_opt(c, "-oServerAliveCountMax=%d", ALIVE_COUNT) |
             add_opt(c, "-oControlMaster=auto") |
             add_opt(c, "-oControlPath=%s/cm-%%C-%.8s", state_dir, key_tag) |
             add_opt(c, "-oControlPersist=%d", PERSIST_S) |
             add_opt(c, "-oPreferredAuthentications=publickey");
    if (rc == 0 && t->key_file)
        rc = add_opt(c, "-oIdentityFile=%s", t->key_file) | add_opt(c, "-oIdentitiesOnly=yes") |
             add_opt(c, "-oIdentityAgent=none");
    if (rc != 0) {
        errprintf(err, "out of memory");
        ssh_destroy(c);
        return NULL;
    }
    return c;
}

/* argv: ssh, the shared options, extra (NULL-terminated, may be NULL), "--",
 * host, then command (may be NULL). Caller frees the array only. */
static char **make_argv(const struct ssh_conn *c, char *const extra[], const char *command)
{
    size_t n = 0;
    while (extra && extra[n])
        n++;
    char **argv = calloc((size_t)c->nopts + n + 5, sizeof(char *));
    if (!argv)
        return NULL;
    size_t k = 0;
    argv[k++] = "ssh";
    for (int i = 0; i < c->nopts; i++)
        argv[k++] = c->opts[i];
    for (size_t i = 0; i < n; i++)
        argv[k++] = extra[i];
    argv[k++] = "--";
    argv[k++] = (char *)c->host;
    if (command)
        argv[k++] = (char *)command;
    return argv;
}

void ssh_destroy(struct ssh_conn *c)
{
    if (!c)
        return;
    int saved = errno;
    if (c->nopts > 0) {
        char *extra[] = {"-O", "exit", NULL};
        char **argv = make_argv(c, extra, NULL);
        struct mtc_io io = {.capture = MTC_IO_MERGE};
        if (argv && mtc_run_io(argv, NULL, &io, 5000) == 0)
            log_msg(LOG_DEBUG, "ssh %s@%s: master closed", c->user, c->host);
        free(io.out);
        free(argv);
    }
    for (int i = 0; i < c->nopts; i++)
        free(c->opts[i]);
    free(c);
    errno = saved;
}

void ssh_free(struct ssh_conn *c)
{
    if (!c)
        return;
    int saved = errno;
    for (int i = 0; i < c->nopts; i++)
        free(c->opts[i]);
    free(c);
    errno = saved;
}

const char *ssh_host(const struct ssh_conn *c)
{
    return c->host;
}

const char *ssh_known_hosts(const struct ssh_conn *c)
{
    return c->known_hosts;
}

int ssh_master_alive(struct ssh_conn *c)
{
    char *extra[] = {"-O", "check", NULL};
    char **argv = make_argv(c, extra, NULL);
    struct mtc_io io = {.capture = MTC_IO_MERGE};
    int rc = argv ? mtc_run_io(argv, NULL, &io, 5000) : -1;
    free(io.out);
    free(argv);
    return rc == 0;
}

/* For the log: the command on one line, shortened. */
static void one_line(const char *s, char *buf, size_t len)
{
    size_t k = 0;
    for (; *s && k + 4 < len; s++)
        buf[k++] = (*s == '\n' || *s == '\r' || *s == '\t') ? ' ' : *s;
    if (*s)
        memcpy(buf + k, "...", 3), k += 3;
    buf[k] = '\0';
}

/* Drop ssh's own notices from the command's stderr (logging the ones that
 * matter) so the last line is the command's. In place. */
static void strip_ssh_notices(const struct ssh_conn *c, char *err)
{
    char *r = err, *w = err;
    while (r && *r) {
        char *nl = strchr(r, '\n');
        size_t len = nl ? (size_t)(nl - r + 1) : strlen(r);
        if (strncmp(r, "Warning: Permanently added", 26) == 0) {
            log_msg(LOG_NOTICE, "ssh %s@%s: new host key accepted into %s", c->user, c->host,
                    c->known_hosts);
        } else {
            memmove(w, r, len);
            w += len;
        }
        r += len;
    }
    if (w)
        *w = '\0';
}

/* The last non-empty line of s into buf. */
static void last_line(const char *s, char *buf, size_t len)
{
    const char *end = s + strlen(s);
    while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > s && start[-1] != '\n')
        start--;
    size_t n = (size_t)(end - start);
    if (n >= len)
        n = len - 1;
    memcpy(buf, start, n);
    buf[n] = '\0';
}

/* A transport failure in ssh's stderr (the call exited 255): errno + err, -1.
 * Returns 0 when stderr names no known ssh failure. */
static int classify(const struct ssh_conn *c, const char *stderr_text, mtc_error_t *err)
{
    for (size_t i = 0; i < sizeof(ssh_errors) / sizeof(ssh_errors[0]); i++) {
        if (!strstr(stderr_text, ssh_errors[i].needle))
            continue;
        const char *off = strstr(stderr_text, "Offending ");
        const char *in = off ? strstr(off, " key in ") : NULL;
        if (ssh_errors[i].err == EKEYREJECTED && in) {
            /* "Offending ED25519 key in /path/known_hosts:3" */
            char path[PATH_MAX];
            int line = 0;
            if (sscanf(in + 8, "%4095[^:\n]:%d", path, &line) == 2) {
                errprintf(err,
                          "host %s: host key changed; if the host was reinstalled, "
                          "remove line %d of %s",
                          c->host, line, path);
                errno = EKEYREJECTED;
                return -1;
            }
        }
        errprintf(err, "host %s: %s", c->host, ssh_errors[i].what);
        errno = ssh_errors[i].err;
        return -1;
    }
    return 0;
}

/* Runs command (already wrapped) with optional stdin; the core of run and put. */
static int run(struct ssh_conn *c, const char *logged, const char *command, const void *in,
               size_t in_len, char **out, int timeout_ms, int flags, mtc_error_t *err)
{
    if (out)
        *out = NULL;
    char **argv = make_argv(c, NULL, command);
    if (!argv)
        return errprintf(err, "out of memory");
    struct mtc_io io = {.in = in, .in_len = in_len, .capture = MTC_IO_OUT | MTC_IO_ERR};
    int64_t t0 = mtc_now_ms();
    int rc = mtc_run_io(argv, NULL, &io, timeout_ms);
    int saved = errno;
    int64_t ms = mtc_now_ms() - t0;
    free(argv);
    strip_ssh_notices(c, io.err);
    char tail[160] = "";
    if (io.err && !(flags & SSH_SECRET))
        last_line(io.err, tail, sizeof(tail));

    if (rc < 0 && saved == ETIMEDOUT) {
        errprintf(err, "host %s: command timed out after %d s", c->host, (timeout_ms + 999) / 1000);
    } else if (rc < 0) {
        errprintf(err, "cannot run ssh: %s", strerror(saved));
    } else if (rc == 255 && classify(c, io.err ? io.err : "", err) < 0) {
        saved = errno;
        rc = -1;
    } else if (rc != 0) {
        errprintf(err, "host %s: command exited with status %d%s%s", c->host, rc, *tail ? ": " : "",
                  tail);
    }
    if (rc >= 0)
        log_msg(LOG_INFO, "ssh %s@%s: %s -> exit %d (%lld ms)", c->user, c->host, logged, rc,
                (long long)ms);
    else
        log_msg(LOG_WARNING, "ssh %s@%s: %s -> failed: %s (%lld ms)", c->user, c->host, logged,
                err ? err->text : strerror(saved), (long long)ms);
    free(io.err);
    if (out)
        *out = io.out;
    else
        free(io.out);
    errno = saved;
    return rc;
}

int ssh_run(struct ssh_conn *c, const char *command, char **out, int timeout_ms, int flags,
            mtc_error_t *err)
{
    return ssh_run_in(c, command, NULL, 0, out, timeout_ms, flags, err);
}

int ssh_run_in(struct ssh_conn *c, const char *command, const void *in, size_t in_len, char **out,
               int timeout_ms, int flags, mtc_error_t *err)
{
    if (timeout_ms <= 0)
        timeout_ms = DEFAULT_TIMEOUT_MS;
    char logged[320] = "[secret]";
    if (!(flags & SSH_SECRET))
        one_line(command, logged, sizeof(logged));
    /* the remote `timeout` kills the command (its process group) at the same
     * deadline even when this side loses the connection */
    char *q = mtc_shell_quote(command), *wrapped = NULL;
    if (!q || asprintf(&wrapped, "exec timeout -k %d %d sh -c %s", KILL_AFTER_S,
                       (timeout_ms + 999) / 1000, q) < 0) {
        free(q);
        if (out)
            *out = NULL;
        errno = ENOMEM;
        return errprintf(err, "out of memory");
    }
    free(q);
    if (in && in_len)
        snprintf(logged + strlen(logged), sizeof(logged) - strlen(logged), " <%zu bytes>", in_len);
    int rc = run(c, logged, wrapped, in, in_len, out, timeout_ms, flags, err);
    int saved = errno;
    free(wrapped);
    errno = saved;
    return rc;
}

int ssh_put(struct ssh_conn *c, const void *data, size_t len, const char *remote_path, mode_t mode,
            int flags, mtc_error_t *err)
{
    if (remote_path[0] != '/' || strstr(remote_path, "/../") || strstr(remote_path, "/.mtc-put") ||
        !valid_chars(remote_path, "._/+@-") || remote_path[strlen(remote_path) - 1] == '/') {
        errno = EINVAL;
        return errprintf(err, "invalid remote path '%s'", remote_path);
    }
    /* the temp file is 0600 (mktemp) while the content lands; a short read
     * (the connection broke) leaves the old file in place */
    char *script = NULL;
    if (asprintf(&script,
                 "set -e; p=%s; d=${p%%/*}; d=${d:-/}; umask 022; mkdir -p \"$d\"; "
                 "t=$(mktemp \"$d/.mtc-put.XXXXXX\"); trap 'rm -f \"$t\"' EXIT; "
                 "cat >\"$t\"; test \"$(wc -c <\"$t\")\" -eq %zu; sync \"$t\" 2>/dev/null || :; "
                 "chmod %04o \"$t\"; mv -f \"$t\" \"$p\"; trap - EXIT",
                 remote_path, len, (unsigned)(mode & 07777)) < 0) {
        errno = ENOMEM;
        return errprintf(err, "out of memory");
    }
    char logged[PATH_MAX + 64];
    snprintf(logged, sizeof(logged), "put %s (mode %04o, %zu bytes%s)", remote_path,
             (unsigned)(mode & 07777), len, (flags & SSH_SECRET) ? ", secret" : "");
    int rc = run(c, logged, script, data, len, NULL, DEFAULT_TIMEOUT_MS, flags, err);
    int saved = errno;
    free(script);
    if (rc > 0) {
        /* "host H: command exited with status N: <why>" from run() */
        char why[256] = "";
        const char *x = err ? strstr(err->text, "exited with") : NULL;
        snprintf(why, sizeof(why), "%s", x ? x : "failed");
        errprintf(err, "host %s: writing %s %s", c->host, remote_path, why);
        saved = EIO;
    }
    errno = saved;
    return rc == 0 ? 0 : -1;
}

int ssh_put_file(struct ssh_conn *c, const char *local_path, const char *remote_path, mode_t mode,
                 int flags, mtc_error_t *err)
{
    size_t len = 0;
    char *data = mtc_read_file(local_path, &len);
    if (!data)
        return errprintf(err, "cannot read %s: %s", local_path, strerror(errno));
    int rc = ssh_put(c, data, len, remote_path, mode, flags, err);
    int saved = errno;
    /* the buffer may hold a secret: do not leave it in freed memory */
    explicit_bzero(data, len);
    free(data);
    errno = saved;
    return rc;
}
