/* pull: registry images through Debian's skopeo — the user's side (run as the
 * job's user: enroot's .credentials read and evaluated, an authfile in a
 * memfd, `skopeo inspect --raw` for the digest, `skopeo copy … dir:` streamed
 * as an OCI layout tarball) and the reader's side (the stream checked against
 * the digest it was asked for, then image_import). See docs/containers.md. */
#include "image/internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKOPEO "/usr/bin/skopeo"
#define PULL_TIMEOUT_MS (60 * 60 * 1000)
#define INSPECT_TIMEOUT_MS (5 * 60 * 1000)
#define MAX_MANIFEST (4 << 20)

/* "sha256:<hex>" of len bytes at b. */
static void sha256_buf(const void *b, size_t len, char out[72])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(b, len, md, &n, EVP_sha256(), NULL);
    memcpy(out, "sha256:", 7);
    for (unsigned int i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
}

static int write_all(int fd, const void *b, size_t len)
{
    const char *p = b;
    while (len) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

const char *image_pull_arch(void)
{
    struct utsname u;
    if (uname(&u) == 0 && (strcmp(u.machine, "aarch64") == 0 || strcmp(u.machine, "arm64") == 0))
        return "arm64";
    if (uname(&u) == 0 && strcmp(u.machine, "ppc64le") == 0)
        return "ppc64le";
    return "amd64";
}

/* NAME's value in the user's environment list ("" entries: NULL). */
static const char *uenv(const struct image_pull_opts *o, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; o->env && o->env[i]; i++)
        if (strncmp(o->env[i], name, n) == 0 && o->env[i][n] == '=')
            return o->env[i] + n + 1;
    return NULL;
}

static int yes(const char *v)
{
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "y") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "true") == 0);
}

/* ---- credentials (the user's side) ---- */

/* A password of the credentials file as enroot evaluates one that starts
 * with '$' (common::evalnetrc: the rest of the line after the fifth field,
 * given to `echo` by the shell): $VAR, $(cmd) — in the user's process, as the
 * user, with the user's environment. Caller frees; NULL when it fails. */
static char *cred_eval(const char *rest, char *const env[])
{
    char *script = NULL;
    if (asprintf(&script, "echo %s", rest) < 0)
        return NULL;
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct mtc_io io = {.capture = MTC_IO_OUT, .only_env = 1};
    int rc = mtc_run_io(argv, env, &io, 60000);
    free(script);
    free(io.err);
    if (rc != 0 || !io.out) {
        free(io.out);
        return NULL;
    }
    io.out[strcspn(io.out, "\n")] = '\0';
    return io.out;
}

/* The hosts a machine line may name for r's registry. */
static int machine_matches(const struct image_ref *r, const char *m)
{
    if (strcmp(m, r->registry) == 0)
        return 1;
    size_t hl = strcspn(r->registry, ":");
    if (strlen(m) == hl && strncmp(m, r->registry, hl) == 0)
        return 1; /* netrc names hosts without a port */
    if (strcmp(r->registry, IMAGE_DOCKER_HUB) == 0)
        return strcmp(m, "docker.io") == 0 || strcmp(m, "index.docker.io") == 0 ||
               strcmp(m, "auth.docker.io") == 0;
    return 0;
}

int image_creds_lookup(char *text, const struct image_ref *r, char **login, char **password,
                       int *eval)
{
    /* enroot's reading (common::evalnetrc): one entry a line, "machine H
     * login L password P" by position; a P starting with '$' is the rest of
     * the line, to be evaluated */
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[5], *p = line;
        size_t n = 0;
        for (; n < 5; n++) {
            p += strspn(p, " \t\r");
            if (!*p)
                break;
            f[n] = p;
            p += strcspn(p, " \t\r");
            if (*p)
                *p++ = '\0';
        }
        p += strspn(p, " \t\r");
        char *pw = p;
        pw[strcspn(pw, "\r")] = '\0';
        if (n < 5 || !*pw || strcmp(f[0], "machine") != 0 || strcmp(f[2], "login") != 0 ||
            strcmp(f[4], "password") != 0 || !machine_matches(r, f[1]) ||
            (r->user[0] && strcmp(f[3], r->user) != 0))
            continue;
        *eval = pw[0] == '$';
        if (!*eval)
            pw[strcspn(pw, " \t")] = '\0';
        *login = f[3];
        *password = pw;
        return 1;
    }
    return 0;
}

/* The credentials for r from dir/.credentials, as the user: *login and
 * *password (caller frees; NULL when no line matches). The file must be a
 * regular file (not a symlink) of the user or root that no one else can
 * write. 0, or -1 + err naming the file. */
static int creds_find(const struct image_ref *r, const char *path, char *const env[], char **login,
                      char **password, mtc_error_t *err)
{
    *login = *password = NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return errprintf(err, errno == ELOOP ? "credentials file %s is a symlink: refused"
                                             : "credentials file %s: %s",
                         path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return errprintf(err, "credentials file %s is not a regular file: refused", path);
    }
    if ((st.st_uid != getuid() && st.st_uid != 0) || (st.st_mode & 022)) {
        close(fd);
        return errprintf(err, "credentials file %s can be written by another user: refused", path);
    }
    char *text = mtc_read_fd(fd, NULL);
    close(fd);
    if (!text)
        return errprintf(err, "credentials file %s: %s", path, strerror(errno));
    int rc = 0, eval = 0;
    char *l = NULL, *pw = NULL;
    if (image_creds_lookup(text, r, &l, &pw, &eval)) {
        *password = eval ? cred_eval(pw, env) : strdup(pw);
        *login = strdup(l);
        if (!*login || !*password) {
            rc = errprintf(err, "credentials file %s: cannot evaluate the entry for %s", path,
                           r->registry);
            free(*login);
            free(*password);
            *login = *password = NULL;
        }
    }
    explicit_bzero(text, strlen(text));
    free(text);
    return rc;
}

/* skopeo's authfile for r in a memfd (never on disk, never in argv): its
 * fd, or -1 when there are no credentials (*used 0), or -1 + err. */
static int authfile_make(const struct image_ref *r, const char *login, const char *password,
                         mtc_error_t *err)
{
    size_t n = strlen(login) + strlen(password) + 2;
    char *pair = malloc(n), *b64 = malloc(4 * n / 3 + 8), *json = NULL;
    int fd = -1;
    if (!pair || !b64)
        goto out;
    snprintf(pair, n, "%s:%s", login, password);
    EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)pair, (int)strlen(pair));
    const char *key = strcmp(r->registry, IMAGE_DOCKER_HUB) == 0 ? "docker.io" : r->registry;
    if (asprintf(&json, "{\"auths\":{\"%s\":{\"auth\":\"%s\"}}}", key, b64) < 0) {
        json = NULL;
        goto out;
    }
    fd = memfd_create("mtc-auth", MFD_CLOEXEC);
    if (fd >= 0 && write(fd, json, strlen(json)) != (ssize_t)strlen(json)) {
        close(fd);
        fd = -1;
    }
out:
    if (fd < 0)
        errprintf(err, "cannot hold the credentials: %s", strerror(errno));
    if (pair)
        explicit_bzero(pair, strlen(pair));
    if (b64)
        explicit_bzero(b64, strlen(b64));
    if (json)
        explicit_bzero(json, strlen(json));
    free(pair);
    free(b64);
    free(json);
    return fd;
}

/* ---- skopeo (the user's side) ---- */

struct user_run {
    const struct image_ref *ref;
    const struct image_pull_opts *o;
    char *env[40];
    char envbuf[40][1200];
    size_t nenv;
    int authfd;
    char cred_path[PATH_MAX];
    char cred_login[64]; /* shown in messages: whose credentials (never the secret) */
};

static void env_add(struct user_run *u, const char *k, const char *v)
{
    if (!v || u->nenv + 1 >= sizeof(u->env) / sizeof(u->env[0]))
        return;
    snprintf(u->envbuf[u->nenv], sizeof(u->envbuf[0]), "%s=%s", k, v);
    u->env[u->nenv] = u->envbuf[u->nenv];
    u->env[++u->nenv] = NULL;
}

/* The user's side's environment (only what skopeo and the credentials'
 * commands need, from the user's list) and credentials. */
static int user_setup(struct user_run *u, const struct image_ref *r,
                      const struct image_pull_opts *o, mtc_error_t *err)
{
    memset(u, 0, sizeof(*u));
    u->ref = r;
    u->o = o;
    u->authfd = -1;
    static const char *const pass[] = {"SSL_CERT_FILE", "SSL_CERT_DIR", "http_proxy", "https_proxy",
                                       "no_proxy",      "HTTP_PROXY",   "HTTPS_PROXY", "NO_PROXY",
                                       "USER",          "LOGNAME",      "XDG_RUNTIME_DIR"};
    env_add(u, "PATH", "/usr/local/bin:/usr/bin:/bin");
    env_add(u, "HOME", o->home && o->home[0] ? o->home : "/");
    const char *tmp = uenv(o, "TMPDIR");
    env_add(u, "TMPDIR", tmp && tmp[0] == '/' ? tmp : "/tmp");
    for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
        env_add(u, pass[i], uenv(o, pass[i]));
    const char *cfg = uenv(o, "ENROOT_CONFIG_PATH");
    int n = cfg && cfg[0] ? snprintf(u->cred_path, sizeof(u->cred_path), "%s/.credentials", cfg)
                          : snprintf(u->cred_path, sizeof(u->cred_path),
                                     "%s/.config/enroot/.credentials",
                                     o->home && o->home[0] ? o->home : "");
    if (n < 0 || (size_t)n >= sizeof(u->cred_path))
        return errprintf(err, "ENROOT_CONFIG_PATH is too long");
    char *login = NULL, *password = NULL;
    if (creds_find(r, u->cred_path, u->env, &login, &password, err) < 0)
        return -1;
    if (login && password) {
        snprintf(u->cred_login, sizeof(u->cred_login), "%s", login);
        u->authfd = authfile_make(r, login, password, err);
    } else if (r->user[0]) {
        errprintf(err, "image %s@%s: no password for %s in %s", r->user, r->registry, r->user,
                  u->cred_path);
    }
    int failed = (login && u->authfd < 0) || (!login && r->user[0]);
    if (password)
        explicit_bzero(password, strlen(password));
    free(login);
    free(password);
    return failed ? -1 : 0;
}

/* One line for what skopeo said (its last "msg=" line), naming the image. */
static int skopeo_error(const struct user_run *u, const char *shown, const char *out, int rc,
                        mtc_error_t *err)
{
    const char *reg = u->ref->registry;
    const char *creds = u->authfd >= 0 ? "credentials were used" : "no credentials were found";
    if (!out)
        out = "";
    if (rc == -1 && errno == ETIMEDOUT)
        return errprintf(err, "image %s: the registry %s did not answer in time", shown, reg);
    if (strstr(out, "connection refused"))
        return errprintf(err, "image %s: cannot reach the registry %s: connection refused", shown,
                         reg);
    if (strstr(out, "no such host") || strstr(out, "server misbehaving"))
        return errprintf(err, "image %s: unknown registry host %s", shown, reg);
    /* (not a bare "401"/"403": a port or a digest may hold those digits) */
    if (strstr(out, "manifest unknown") || strstr(out, "name unknown"))
        return errprintf(err, "image %s: no such tag or digest in the registry %s", shown, reg);
    if (strstr(out, "unauthorized") || strstr(out, "authentication required") ||
        strstr(out, "denied") || strstr(out, "401 Unauthorized") || strstr(out, "403 Forbidden") ||
        strstr(out, "status 401") || strstr(out, "status 403"))
        return errprintf(err, "image %s: the registry %s refused access (401/403; %s%s%s%s)", shown,
                         reg, creds, u->authfd >= 0 ? ": login " : ", looked in ",
                         u->authfd >= 0 ? u->cred_login : u->cred_path,
                         u->authfd >= 0 ? "" : "");
    if (strstr(out, "not found"))
        return errprintf(err, "image %s: no such tag or digest in the registry %s", shown, reg);
    if (strstr(out, "did not match") || strstr(out, "Digest did not match") ||
        strstr(out, "digest mismatch"))
        return errprintf(err, "image %s: a blob's digest does not match (corrupted download)",
                         shown);
    if (strstr(out, "HTTP response to HTTPS client"))
        return errprintf(err,
                         "image %s: the registry %s speaks plain HTTP (ENROOT_ALLOW_HTTP=1 allows it)",
                         shown, reg);
    if (strstr(out, "x509") || strstr(out, "certificate"))
        return errprintf(err, "image %s: the registry %s's TLS certificate is not trusted", shown,
                         reg);
    /* the last line's msg="..." */
    const char *m = NULL;
    for (const char *p = strstr(out, "msg=\""); p; p = strstr(p + 5, "msg=\""))
        m = p + 5;
    char line[200];
    snprintf(line, sizeof(line), "%s", m ? m : out);
    line[strcspn(line, "\n")] = '\0';
    return errprintf(err, "image %s: skopeo failed (exit %d): %s", shown, rc, line);
}

/* Run skopeo SUB ... on ref (docker://...), the common options added. */
static int skopeo(struct user_run *u, const char *sub, const char *src, const char *dst,
                  const char *shown, char **out, size_t *out_len, int timeout_ms, mtc_error_t *err)
{
    char authpath[40], retry[] = "--retry-times=3";
    const char *argv[20];
    size_t a = 0;
    argv[a++] = SKOPEO;
    argv[a++] = "--override-os=linux";
    char arch[64];
    snprintf(arch, sizeof(arch), "--override-arch=%s", u->o->arch ? u->o->arch : image_pull_arch());
    argv[a++] = arch;
    argv[a++] = sub;
    if (strcmp(sub, "inspect") == 0)
        argv[a++] = "--raw";
    argv[a++] = retry;
    int http = yes(uenv(u->o, "ENROOT_ALLOW_HTTP"));
    if (strcmp(sub, "copy") == 0) {
        if (http)
            argv[a++] = "--src-tls-verify=false";
        argv[a++] = "--quiet";
    } else if (http) {
        argv[a++] = "--tls-verify=false";
    }
    int keep[2] = {-1, -1};
    if (u->authfd >= 0) {
        snprintf(authpath, sizeof(authpath), "/dev/fd/%d", u->authfd);
        argv[a++] = strcmp(sub, "copy") == 0 ? "--src-authfile" : "--authfile";
        argv[a++] = authpath;
        keep[0] = u->authfd;
    } else {
        argv[a++] = strcmp(sub, "copy") == 0 ? "--src-no-creds" : "--no-creds";
    }
    argv[a++] = src;
    if (dst)
        argv[a++] = dst;
    argv[a] = NULL;
    struct mtc_io io = {.capture = MTC_IO_OUT | MTC_IO_ERR, .only_env = 1, .keep_fds = keep};
    int rc = mtc_run_io((char *const *)argv, u->env, &io, timeout_ms);
    if (rc != 0) {
        skopeo_error(u, shown, io.err, rc, err);
        free(io.out);
        free(io.err);
        return -1;
    }
    free(io.err);
    if (out) {
        *out = io.out;
        *out_len = io.out_len;
    } else {
        free(io.out);
    }
    return 0;
}

/* The user's side of a pull, in a child with the user's ids: what it writes
 * to fd (the raw manifest, or the layout's tarball) is the only thing the
 * reader takes from it; its one-line error goes to efd. */
enum user_job { USER_INSPECT, USER_FETCH };

static int user_inspect(struct user_run *u, const char *shown, int fd, mtc_error_t *err)
{
    char src[700];
    if (image_ref_format(u->ref, NULL, src, sizeof(src)) < 0)
        return errprintf(err, "image %s: reference too long", shown);
    char *raw = NULL;
    size_t len = 0;
    if (skopeo(u, "inspect", src, NULL, shown, &raw, &len, INSPECT_TIMEOUT_MS, err) < 0)
        return -1;
    int rc = write_all(fd, raw, len) < 0 ? errprintf(err, "write: %s", strerror(errno)) : 0;
    free(raw);
    return rc;
}

/* skopeo's dir: transport keeps the manifest byte for byte (the oci:
 * transport would rewrite a Docker manifest, and its digest with it); the
 * directory is then made an OCI layout and streamed as a tarball. */
static int user_fetch(struct user_run *u, const char *digest, const char *shown, int fd,
                      mtc_error_t *err)
{
    char src[700], work[PATH_MAX], dst[PATH_MAX + 8], path[PATH_MAX + 200];
    if (image_ref_format(u->ref, digest, src, sizeof(src)) < 0)
        return errprintf(err, "image %s: reference too long", shown);
    const char *tmp = uenv(u->o, "TMPDIR");
    snprintf(work, sizeof(work), "%s/mtc-pull.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(work))
        return errprintf(err, "image %s: cannot make a temporary directory: %s", shown,
                         strerror(errno));
    snprintf(dst, sizeof(dst), "dir:%s/d", work);
    int rc = -1;
    if (skopeo(u, "copy", src, dst, shown, NULL, NULL, PULL_TIMEOUT_MS, err) < 0)
        goto out;
    snprintf(path, sizeof(path), "%s/d/manifest.json", work);
    size_t mlen = 0;
    char *m = mtc_read_file(path, &mlen);
    json_t *mj = m ? json_loadb(m, mlen, 0, NULL) : NULL;
    const char *mt = json_string_value(json_object_get(mj, "mediaType"));
    char *index = NULL;
    if (!mj ||
        asprintf(&index,
                 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
                 "\"size\":%zu}]}",
                 mt ? mt : "application/vnd.oci.image.manifest.v1+json", digest, mlen) < 0) {
        errprintf(err, "image %s: skopeo wrote no readable manifest", shown);
        free(m);
        json_decref(mj);
        goto out;
    }
    free(m);
    json_decref(mj);
    char lay[PATH_MAX + 8];
    snprintf(lay, sizeof(lay), "%s/d", work);
    snprintf(path, sizeof(path), "%s/blobs/sha256", lay);
    int ok = mtc_mkdir_p(path, 0700) == 0;
    /* manifest.json → blobs/sha256/<hex>; the blobs skopeo named <hex> */
    char from[PATH_MAX + 200], to[PATH_MAX + 300];
    snprintf(from, sizeof(from), "%s/manifest.json", lay);
    snprintf(to, sizeof(to), "%s/blobs/sha256/%s", lay, digest + 7);
    ok = ok && rename(from, to) == 0;
    DIR *d = ok ? opendir(lay) : NULL;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strlen(e->d_name) == 64 && strspn(e->d_name, "0123456789abcdef") == 64) {
            snprintf(from, sizeof(from), "%s/%s", lay, e->d_name);
            snprintf(to, sizeof(to), "%s/blobs/sha256/%s", lay, e->d_name);
            ok = ok && rename(from, to) == 0;
        }
    if (d)
        closedir(d);
    snprintf(path, sizeof(path), "%s/version", lay);
    unlink(path);
    snprintf(path, sizeof(path), "%s/index.json", lay);
    ok = ok && mtc_write_file_atomic(path, index, strlen(index), 0600) == 0;
    snprintf(path, sizeof(path), "%s/oci-layout", lay);
    ok = ok && mtc_write_file_fmt(path, 0600, "{\"imageLayoutVersion\":\"1.0.0\"}") == 0;
    free(index);
    if (!ok) {
        errprintf(err, "image %s: cannot arrange the layout: %s", shown, strerror(errno));
        goto out;
    }
    /* the tarball to fd: tar's stdout is fd itself */
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        execle("/bin/tar", "tar", "-C", lay, "-cf", "-", ".", (char *)NULL, u->env);
        _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        errprintf(err, "image %s: tar of the pulled layout failed", shown);
        goto out;
    }
    rc = 0;
out:
    mtc_rm_rf(work);
    return rc;
}

/* Become the user for good (root only): groups, gid, uid. */
static int become(const struct image_pull_opts *o, mtc_error_t *err)
{
    if (geteuid() != 0 || o->uid == (uid_t)-1)
        return 0;
    struct passwd pw, *res = NULL;
    char buf[4096];
    int ok = getpwuid_r(o->uid, &pw, buf, sizeof(buf), &res) == 0 && res
                 ? initgroups(res->pw_name, o->gid) == 0
                 : setgroups(0, NULL) == 0;
    if (!ok || setresgid(o->gid, o->gid, o->gid) < 0 || setresuid(o->uid, o->uid, o->uid) < 0 ||
        (o->uid != 0 && setuid(0) == 0)) /* no way back to root */
        return errprintf(err, "cannot become uid %u: %s", (unsigned)o->uid, strerror(errno));
    return 0;
}

/* Run job on the user's side; its output to sink (read by the caller as it
 * comes): into *buf (USER_INSPECT) or the file wfd (USER_FETCH). */
static int as_user(const struct image_ref *r, const struct image_pull_opts *o, const char *shown,
                   enum user_job job, const char *digest, char **buf, size_t *len, int wfd,
                   mtc_error_t *err)
{
    int dp[2], ep[2];
    if (pipe2(dp, O_CLOEXEC) < 0)
        return errprintf(err, "pipe: %s", strerror(errno));
    if (pipe2(ep, O_CLOEXEC) < 0) {
        close(dp[0]);
        close(dp[1]);
        return errprintf(err, "pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(dp[0]);
        close(ep[0]);
        signal(SIGPIPE, SIG_DFL);
        mtc_error_t e = {""};
        struct user_run *u = calloc(1, sizeof(*u));
        int rc = !u ? errprintf(&e, "out of memory")
                 : become(o, &e) < 0 || user_setup(u, r, o, &e) < 0 ? -1
                 : job == USER_INSPECT ? user_inspect(u, shown, dp[1], &e)
                                       : user_fetch(u, digest, shown, dp[1], &e);
        if (rc < 0 && write(ep[1], e.text, strlen(e.text)) < 0)
            _exit(3);
        _exit(rc < 0 ? 1 : 0);
    }
    close(dp[1]);
    close(ep[1]);
    if (pid < 0) {
        close(dp[0]);
        close(ep[0]);
        return errprintf(err, "fork: %s", strerror(errno));
    }
    size_t cap = 0, n = 0;
    char *b = NULL, chunk[65536];
    int werr = 0;
    for (;;) {
        ssize_t k = read(dp[0], chunk, sizeof(chunk));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        if (job == USER_INSPECT) {
            if (n + (size_t)k > MAX_MANIFEST) {
                werr = EFBIG;
                break;
            }
            if (n + (size_t)k + 1 > cap) {
                cap = (n + (size_t)k + 1) * 2;
                char *nb = realloc(b, cap);
                if (!nb) {
                    werr = ENOMEM;
                    break;
                }
                b = nb;
            }
            memcpy(b + n, chunk, (size_t)k);
            n += (size_t)k;
        } else if (o->max_bytes > 0 && (long long)(n += (size_t)k) > o->max_bytes) {
            werr = EFBIG; /* a stream beyond the cache's limit: stopped, not stored */
            break;
        } else if (!werr && write_all(wfd, chunk, (size_t)k) < 0) {
            werr = errno;
        }
    }
    close(dp[0]);
    char msg[sizeof(err->text)] = "";
    ssize_t m = read(ep[0], msg, sizeof(msg) - 1);
    close(ep[0]);
    msg[m > 0 ? m : 0] = '\0';
    int st = 0;
    if (werr)
        kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!werr && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        if (buf) {
            if (b)
                b[n] = '\0';
            *buf = b ? b : strdup("");
            *len = n;
        } else {
            free(b);
        }
        return 0;
    }
    free(b);
    /* the reader stopped it: that is the reason, not what the child said dying */
    if (werr == EFBIG && !buf)
        return errprintf(err, "image %s: larger than the image cache's limit (%lld bytes)", shown,
                         o->max_bytes);
    if (msg[0] && !werr)
        return errprintf(err, "%s", msg);
    return errprintf(err, "image %s: the pull failed: %s", shown,
                     werr ? strerror(werr) : "the puller died");
}

/* ---- the reader's side ---- */

static int is_list(const char *mt)
{
    return mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
                  strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

int image_pull_resolve(const struct image_ref *r, const struct image_pull_opts *o,
                       const char *shown, char digest[72], mtc_error_t *err)
{
    char *raw = NULL;
    size_t len = 0;
    if (as_user(r, o, shown, USER_INSPECT, NULL, &raw, &len, -1, err) < 0)
        return -1;
    char top[72];
    sha256_buf(raw, len, top);
    json_t *m = json_loadb(raw, len, 0, NULL);
    free(raw);
    if (!m)
        return errprintf(err, "image %s: the registry sent a manifest that is not JSON", shown);
    if (r->digest[0] && strcmp(top, r->digest) != 0) {
        json_decref(m);
        return errprintf(err, "image %s: the registry's manifest does not match the digest",
                         shown);
    }
    const char *mt = json_string_value(json_object_get(m, "mediaType"));
    int rc = 0;
    if (is_list(mt) || (!mt && json_is_array(json_object_get(m, "manifests")))) {
        const char *arch = o->arch ? o->arch : image_pull_arch();
        json_t *ms = json_object_get(m, "manifests"), *d;
        size_t i;
        const char *pick = NULL;
        json_array_foreach(ms, i, d)
        {
            json_t *pl = json_object_get(d, "platform");
            const char *os = json_string_value(json_object_get(pl, "os"));
            const char *ar = json_string_value(json_object_get(pl, "architecture"));
            if (os && ar && strcmp(os, "linux") == 0 && strcmp(ar, arch) == 0) {
                pick = json_string_value(json_object_get(d, "digest"));
                break;
            }
        }
        if (!pick)
            rc = errprintf(err, "image %s: the manifest list has no linux/%s entry", shown, arch);
        else if (!image_digest_valid(pick))
            rc = errprintf(err, "image %s: the manifest list has a bad digest", shown);
        else
            snprintf(digest, 72, "%s", pick);
    } else {
        snprintf(digest, 72, "%s", top);
    }
    json_decref(m);
    return rc;
}

int image_pull_fetch(const struct image_ref *r, const struct image_pull_opts *o, const char *shown,
                     const char *digest, const char *tar, const char *out, mtc_error_t *err)
{
    unsigned procs;
    if (image_max_processors(o->env, &procs, err) < 0)
        return -1;
    int fd = open(tar, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return errprintf(err, "%s: %s", tar, strerror(errno));
    int rc = as_user(r, o, shown, USER_FETCH, digest, NULL, NULL, fd, err);
    if (close(fd) < 0 && rc == 0)
        rc = errprintf(err, "%s: %s", tar, strerror(errno));
    if (rc == 0) {
        /* the tarball must be the layout of digest: checked on what is
         * unpacked (index.json and the manifest), then every config and layer
         * against the manifest, by the import itself */
        mtc_error_t e;
        if (image_import_procs(tar, out, digest, procs, &e) < 0) {
            /* the import names the tarball, a temporary name: name the image */
            const char *why = strstr(e.text, ": ");
            rc = errprintf(err, "image %s: %s", shown, why ? why + 2 : e.text);
        }
    }
    unlink(tar);
    return rc;
}
