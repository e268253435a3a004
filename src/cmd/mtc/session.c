/* session: `mtc env`, `mtc login`, `mtc token`, `mtc daemon` — the commands
 * around the daemon and a user's shell rather than a cluster's lifecycle. */
#include "cli.h"
#include "cluster/cluster.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mtcd's :env reply for a cluster ({"script", "login"?}). Caller owns. */
static json_t *env_reply(struct cli *c, const char *id, mtc_error_t *err)
{
    if (!cluster_id_valid(id)) {
        errprintf(err, "cluster id \"%s\": must match ^[a-z][a-z0-9]{0,9}$", id);
        return NULL;
    }
    char path[512];
    snprintf(path, sizeof(path),
             "/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:env", c->project,
             c->location, id);
    json_t *r = NULL;
    if (cli_call_ok(c, "GET", path, NULL, &r, err) < 0)
        return NULL;
    return r;
}

/* The cluster's environment script from mtcd. Caller frees. */
static char *env_script(struct cli *c, const char *id, mtc_error_t *err)
{
    json_t *r = env_reply(c, id, err);
    if (!r)
        return NULL;
    const char *s = json_string_value(json_object_get(r, "script"));
    char *out = s ? strdup(s) : NULL;
    json_decref(r);
    if (!out)
        errprintf(err, "mtcd sent no environment for %s", id);
    return out;
}

static int one_id(int argc, char **argv, const char *use, const char **id)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return printf("usage: %s\n", use), 1;
        if (argv[i][0] == '-' || *id)
            return fprintf(stderr, "mtc: unexpected argument \"%s\"\nusage: %s\n", argv[i], use),
                   -1;
        *id = argv[i];
    }
    if (!*id)
        return fprintf(stderr, "usage: %s\n", use), -1;
    return 0;
}

/* The environment script of the one cluster id in argv (*id). NULL with *rc the
 * exit status once said why (0 after --help). Caller frees. */
static char *id_env_script(struct cli *c, int argc, char **argv, const char *use, const char **id,
                           int *rc)
{
    int p = one_id(argc, argv, use, id);
    if (p) {
        *rc = p > 0 ? 0 : 2;
        return NULL;
    }
    mtc_error_t err = {""};
    char *s = env_script(c, *id, &err);
    if (!s)
        *rc = cli_fail("%s", err.text);
    return s;
}

int cmd_env(struct cli *c, int argc, char **argv)
{
    const char *id = NULL;
    int status;
    char *s =
        id_env_script(c, argc, argv, "mtc env ID   (use as: eval \"$(mtc env ID)\")", &id, &status);
    if (!s)
        return status;
    fputs(s, stdout);
    free(s);
    return 0;
}

/* " " (unless first) and text quoted for a POSIX shell, appended to buf.
 * 0, or -1 when it does not fit (nothing appended). */
static int append_quoted(char *buf, size_t len, const char *text, int first)
{
    char *q = mtc_shell_quote(text);
    size_t k = strlen(buf);
    int n = q ? snprintf(buf + k, len - k, "%s%s", first ? "" : " ", q) : -1;
    free(q);
    if (n < 0 || (size_t)n >= len - k) {
        buf[k] = '\0';
        return -1;
    }
    return 0;
}

/* A cluster on hosts: ssh to the login host (mtc's known_hosts, the spec's
 * key), with the cluster's Slurm environment; the command, or a shell. */
static int login_ssh(const json_t *l, int argc, char **argv)
{
    const char *host = json_string_value(json_object_get(l, "host"));
    const char *user = json_string_value(json_object_get(l, "user"));
    const char *kh = json_string_value(json_object_get(l, "knownHosts"));
    const char *key = json_string_value(json_object_get(l, "keyFile"));
    const char *env = json_string_value(json_object_get(l, "remoteEnv"));
    const char *id = json_string_value(json_object_get(l, "cluster"));
    if (!host || !user || !kh || !env)
        return cli_fail("mtcd sent an incomplete login description");
    char port[16], o_kh[4200], o_key[4200], remote[8192];
    snprintf(port, sizeof(port), "%d", (int)json_integer_value(json_object_get(l, "port")));
    snprintf(o_kh, sizeof(o_kh), "UserKnownHostsFile=%s", kh);
    snprintf(o_key, sizeof(o_key), "IdentityFile=%s", key ? key : "");
    snprintf(remote, sizeof(remote), "%s; ", env);
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            if (append_quoted(remote, sizeof(remote), argv[i], i == 0) < 0)
                return cli_fail("command too long for mtc login (at most %zu bytes)",
                                sizeof(remote) - strlen(env) - 64);
    } else {
        snprintf(remote + strlen(remote), sizeof(remote) - strlen(remote),
                 "echo \"mtc: login shell for cluster %s on $(hostname) (sinfo, sbatch, srun, "
                 "squeue work here; exit to leave)\"; exec bash -i",
                 id ? id : "");
    }
    char *args[32] = {"ssh",
                      "-F",
                      "none",
                      "-p",
                      port,
                      "-l",
                      (char *)user,
                      "-o",
                      o_kh,
                      "-o",
                      "GlobalKnownHostsFile=/dev/null",
                      "-o",
                      "StrictHostKeyChecking=yes",
                      "-o",
                      "CheckHostIP=no",
                      "-o",
                      "LogLevel=ERROR"};
    int n = 17;
    if (key) {
        args[n++] = "-o";
        args[n++] = o_key;
        args[n++] = "-o";
        args[n++] = "IdentitiesOnly=yes";
    }
    args[n++] = argc > 0 ? "-T" : "-t";
    args[n++] = "--";
    args[n++] = (char *)host;
    args[n++] = remote;
    args[n] = NULL;
    fflush(NULL);
    execvp("ssh", args);
    return cli_fail("cannot start ssh: %s", strerror(errno));
}

int cmd_login(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc login ID [COMMAND...]   (a shell, or the command, on the cluster's "
                      "login node)";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return argc < 2 ? (fprintf(stderr, "usage: %s\n", use), 2)
                        : (printf("usage: %s\n", use), 0);
    const char *id = argv[1];
    int cargc = argc - 2;
    char **cargv = argv + 2;
    if (cargc > 0 && !strcmp(cargv[0], "--"))
        cargc--, cargv++;
    mtc_error_t err = {""};
    json_t *r = env_reply(c, id, &err);
    if (!r)
        return cli_fail("%s", err.text);
    json_t *login = json_object_get(r, "login");
    if (login)
        return login_ssh(login, cargc, cargv); /* returns only on failure */
    const char *s = json_string_value(json_object_get(r, "script"));
    char rc[PATH_MAX];
    snprintf(rc, sizeof(rc), "%s/login-%s.bashrc", c->home, id);
    int w = cargc > 0 ? mtc_write_file_fmt(rc, 0600, "%s\n", s ? s : "")
                      : mtc_write_file_fmt(rc, 0600,
                                           "[ -f ~/.bashrc ] && . ~/.bashrc\n%s\n"
                                           "PS1='[mtc %s] \\u@\\h:\\w\\$ '\n"
                                           "echo \"mtc: login shell for cluster %s (sinfo, sbatch, "
                                           "srun, squeue work here; exit to leave)\"\n",
                                           s ? s : "", id, id);
    json_decref(r);
    if (w < 0)
        return cli_fail("cannot write %s: %s", rc, strerror(errno));
    fflush(NULL);
    if (cargc > 0) { /* the command with the cluster's environment */
        char **args = calloc((size_t)cargc + 6, sizeof(*args));
        if (!args)
            return cli_fail("out of memory");
        args[0] = "bash";
        args[1] = "-c";
        args[2] = ". \"$0\" && exec \"$@\"";
        args[3] = rc;
        for (int i = 0; i < cargc; i++)
            args[4 + i] = cargv[i];
        execvp("bash", args);
        return cli_fail("cannot start bash: %s", strerror(errno));
    }
    execlp("bash", "bash", "--rcfile", rc, "-i", (char *)NULL);
    return cli_fail("cannot start bash: %s", strerror(errno));
}

/* --- tokens ------------------------------------------------------------- */

static const char t_create_use[] =
    "mtc token create --name NAME [--role viewer|editor|admin] [--user UNIX_USER] [--json]";
static const char t_list_use[] = "mtc token list [--json]",
                  t_revoke_use[] = "mtc token revoke ID|NAME";

static int t_create(struct cli *c, int argc, char **argv)
{
    const char *name = NULL, *role = "viewer", *user = NULL;
    const char *use = t_create_use;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
            name = argv[++i];
        else if (strcmp(argv[i], "--role") == 0 && i + 1 < argc)
            role = argv[++i];
        else if (strcmp(argv[i], "--user") == 0 && i + 1 < argc)
            user = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            c->json = 1;
        else if (strcmp(argv[i], "--help") == 0)
            return printf("usage: %s\n", use), 0;
        else
            return cli_fail("unexpected argument \"%s\"\nusage: %s", argv[i], use), 2;
    }
    if (!name)
        return cli_fail("token create needs --name NAME\nusage: %s", use), 2;
    json_t *body = json_pack("{s:s, s:s}", "name", name, "role", role), *r = NULL;
    if (user) /* its training jobs run as this Unix user */
        json_object_set_new(body, "user", json_string(user));
    mtc_error_t err = {""};
    int rc = cli_call_ok(c, "POST", "/v1/tokens", body, &r, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    if (c->json)
        cli_print_json(r);
    else
        printf("%s\n# token %s (%s, role %s): shown once; keep it secret. Use with "
               "MTC_URL=http://HOST:PORT MTC_TOKEN=...\n",
               json_string_value(json_object_get(r, "token")),
               json_string_value(json_object_get(r, "name")),
               json_string_value(json_object_get(r, "id")), role);
    json_decref(r);
    return 0;
}

static int t_list(struct cli *c, int argc, char **argv)
{
    if (cli_json_only(c, argc, argv, t_list_use))
        return 2;
    json_t *r = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "GET", "/v1/tokens", NULL, &r, &err) < 0)
        return cli_fail("%s", err.text);
    static const struct cli_col cols[] = {{"ID", "id", 14, NULL},
                                          {"NAME", "name", 20, NULL},
                                          {"ROLE", "role", 8, NULL},
                                          {"USER", "user", 10, "-"},
                                          {"CREATED", "createTime", 0, NULL},
                                          {NULL, NULL, 0, NULL}};
    cli_print_list(c, r, json_object_get(r, "tokens"), cols);
    json_decref(r);
    return 0;
}

static int t_revoke(struct cli *c, int argc, char **argv)
{
    const char *id = NULL;
    int p = one_id(argc, argv, t_revoke_use, &id);
    if (p)
        return p > 0 ? 0 : 2;
    if (!mtc_name_valid(id, 63))
        return cli_fail("token \"%s\": not a token id or name", id);
    char path[128];
    snprintf(path, sizeof(path), "/v1/tokens/%s", id);
    json_t *r = NULL;
    mtc_error_t err = {""};
    if (cli_call_ok(c, "DELETE", path, NULL, &r, &err) < 0)
        return cli_fail("%s", err.text);
    json_decref(r);
    printf("token %s revoked\n", id);
    return 0;
}

static const struct cli_cmd token_cmds[] = {
    {"create", t_create, "create an API token for TCP clients (shown once)", t_create_use},
    {"list", t_list, "list tokens (never their secrets)", t_list_use},
    {"revoke", t_revoke, "revoke a token by id or name", t_revoke_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_token(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc token", token_cmds, argc - 1, argv + 1);
}

/* --- daemon ------------------------------------------------------------- */

static int healthy(struct cli *c, json_t **out)
{
    mtc_error_t err;
    json_t *r = NULL;
    int ok = cli_call_ok(c, "GET", "/healthz", NULL, &r, &err) == 0;
    if (out)
        *out = r;
    else
        json_decref(r);
    return ok;
}

/* mtcd next to this mtc binary, else from PATH. */
static void mtcd_path(char *buf, size_t len)
{
    if (cli_sibling("mtcd", buf, len) < 0)
        snprintf(buf, len, "mtcd");
}

/* Run args (mtcd --daemon, systemctl) to its end; 0, or -1 with its last words
 * in why. */
static int run_quiet(char **args, char *why, size_t len)
{
    char *out = NULL;
    int rc = mtc_run(args, NULL, &out, 60000);
    size_t n = out ? strlen(out) : 0;
    while (n > 0 && out[n - 1] == '\n')
        out[--n] = '\0';
    snprintf(why, len, "%s", rc != 0 ? (out && *out ? out : strerror(errno)) : "");
    free(out);
    return rc != 0 ? -1 : 0;
}

/* For the packaged service's home (CLI_SYSTEM_HOME) `mtc daemon start` asks
 * systemd to start the unit when systemd runs and has the unit. */
#define SYSTEM_UNIT "mtcd.service"

/* The systemd service pid runs in ("" when none: started by hand). */
static void service_of(pid_t pid, char *unit, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    char *text = mtc_read_file(path, NULL);
    if (!text || !mtc_cgroup_service(text, unit, len))
        *unit = '\0';
    free(text);
}

/* systemctl VERB unit; 0, or -1 with its words in why. */
static int systemctl(const char *verb, const char *unit, char *why, size_t len)
{
    char *args[] = {"systemctl", (char *)verb, (char *)unit, NULL};
    return run_quiet(args, why, len);
}

/* Started through the unit: systemd runs, the unit is installed, and this is
 * the unit's home. 1 started, 0 not for the unit, -1 it failed (why). */
static int start_unit(struct cli *c, char *why, size_t len)
{
    char home[PATH_MAX];
    struct stat st;
    if (stat("/run/systemd/system", &st) < 0 || !S_ISDIR(st.st_mode) ||
        !realpath(c->home, home) || strcmp(home, CLI_SYSTEM_HOME) != 0)
        return 0;
    if (systemctl("cat", SYSTEM_UNIT, why, len) < 0) /* the unit is not installed */
        return 0;
    return systemctl("start", SYSTEM_UNIT, why, len) < 0 ? -1 : 1;
}

/* The port mtcd listens on for the console and TCP clients when none is given. */
#define CONSOLE_PORT 8470

/* mtc daemon start [--no-listen] [MTCD OPTIONS]: mtcd in the background. It
 * also listens on 127.0.0.1 (tokens required there, as on any TCP listener;
 * the unix socket stays the owner's) so that `mtc console` can give a login
 * link: port 8470, else one the kernel picks when that is taken — unless
 * --listen is given or --no-listen asks for the socket alone. */
static const char d_start_use[] = "mtc daemon start [--no-listen] [MTCD OPTIONS] (see mtcd --help)",
                  d_stop_use[] = "mtc daemon stop   (clusters keep running)",
                  d_status_use[] = "mtc daemon status   (exit 1 when mtcd is not running; "
                                   "periodic backups' last outcome too)";

static int d_start(struct cli *c, int argc, char **argv)
{
    if (healthy(c, NULL)) {
        printf("mtcd already running (%s)\n", c->sock);
        return 0;
    }
    char bin[PATH_MAX + 8], why[512], listen[32];
    int unit = argc == 1 ? start_unit(c, why, sizeof(why)) : 0; /* options: by hand */
    if (unit < 0)
        return cli_fail("cannot start %s: %s", SYSTEM_UNIT, why), 1;
    if (unit > 0)
        return printf("mtcd started by systemd (%s, home %s)\n", SYSTEM_UNIT, c->home), 0;
    /* mtcd's own options pass through (mtcd checks them) */
    mtcd_path(bin, sizeof(bin));
    char **args = calloc((size_t)argc + 7, sizeof(*args));
    if (!args)
        return cli_fail("out of memory"), 1;
    int n = 0, given = 0, no_listen = 0;
    args[n++] = bin;
    args[n++] = "--daemon";
    args[n++] = "--home";
    args[n++] = (char *)c->home;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-listen") == 0) {
            no_listen = 1;
            continue;
        }
        given |= strcmp(argv[i], "--listen") == 0 || strncmp(argv[i], "--listen=", 9) == 0;
        args[n++] = argv[i];
    }
    int rc;
    if (given || no_listen) {
        rc = run_quiet(args, why, sizeof(why));
        *listen = '\0';
    } else {
        args[n++] = "--listen";
        args[n++] = listen;
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", CONSOLE_PORT);
        rc = run_quiet(args, why, sizeof(why));
        if (rc < 0 && strstr(why, "in use")) { /* taken: any free port */
            snprintf(listen, sizeof(listen), "127.0.0.1:0");
            rc = run_quiet(args, why, sizeof(why));
        }
    }
    free(args);
    if (rc < 0)
        return cli_fail("cannot start mtcd: %s", why), 1;
    printf("mtcd started (home %s, log %s/log/mtcd.log%s%s%s)\n", c->home, c->home,
           *listen ? "; also on " : "", *listen ? listen : "",
           *listen ? " for the console and token holders: `mtc console`" : "");
    return 0;
}

static int d_stop(struct cli *c, int argc, char **argv)
{
    (void)argc, (void)argv; /* --help: cli_dispatch */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/mtcd.pid", c->home);
    pid_t pid = mtc_pid_read(path);
    if (pid <= 0 || !mtc_pid_alive(pid)) {
        printf("mtcd is not running\n");
        return 0;
    }
    char unit[256], why[512];
    service_of(pid, unit, sizeof(unit));
    if (*unit) { /* systemd would see a stop it did not ask for: ask it */
        if (systemctl("stop", unit, why, sizeof(why)) < 0)
            return cli_fail("systemctl stop %s: %s", unit, why);
    } else if (mtc_pid_stop(pid, 15000) < 0) {
        return cli_fail("mtcd (pid %d) did not stop", (int)pid);
    }
    printf("mtcd stopped (clusters keep running; `mtc daemon start` adopts them)\n");
    return 0;
}

static int d_status(struct cli *c, int argc, char **argv)
{
    (void)argc, (void)argv; /* --help: cli_dispatch */
    json_t *h = NULL;
    if (!healthy(c, &h))
        return printf("mtcd is not running; start it with `mtc daemon start`\n"), 1;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/mtcd.pid", c->home);
    pid_t pid = mtc_pid_read(path);
    char unit[256];
    service_of(pid, unit, sizeof(unit));
    const char *version = json_string_value(json_object_get(h, "version"));
    printf("mtcd %s running (pid %d, socket %s, schema v%d%s%s)\n", version ? version : "",
           (int)pid, c->sock,
           (int)json_integer_value(json_object_get(h, "schemaVersion")),
           *unit ? ", systemd unit " : "", unit);
    const json_t *b = json_object_get(h, "backup");
    if (b) /* mtcd --backup-dir */
        printf("backups: into %s every %llds, keeping %d; last %s%s (%lld bytes)%s%s\n",
               mtc_json_str_or(b, "dir", "-"),
               (long long)json_integer_value(json_object_get(b, "everySeconds")),
               (int)json_integer_value(json_object_get(b, "keep")),
               mtc_json_str_or(b, "lastTime", "none yet"),
               json_is_false(json_object_get(b, "lastOk")) ? " FAILED" : "",
               (long long)json_integer_value(json_object_get(b, "lastBytes")),
               mtc_json_str(b, "lastError") ? ": " : "", mtc_json_str_or(b, "lastError", ""));
    json_decref(h);
    return 0;
}

static const struct cli_cmd daemon_cmds[] = {
    {"start", d_start, "start mtcd in the background (adopts running clusters)", d_start_use},
    {"stop", d_stop, "stop mtcd (clusters keep running)", d_stop_use},
    {"status", d_status, "is mtcd running?", d_status_use},
    {"backup", cli_daemon_backup, "mtcd's state into one file, while it serves (admin)",
     cli_backup_use},
    {"restore", cli_daemon_restore, "a backup into an empty home (mtcd stopped)",
     cli_restore_use},
    {NULL, NULL, NULL, NULL},
};

int cmd_daemon(struct cli *c, int argc, char **argv)
{
    return cli_dispatch(c, "mtc daemon", daemon_cmds, argc - 1, argv + 1);
}

/* --- console ------------------------------------------------------------ */

/* mtc console [--port N]: start mtcd on 127.0.0.1:N (default 8470) unless it
 * runs, then print the console's URL and a one-time login link (admin, as the
 * owner of $MTC_HOME; valid 5 minutes, one use). A mtcd started by `mtc
 * daemon start` listens on 127.0.0.1 already; one started with --no-listen
 * gets the console's one-line error. */
int cmd_console(struct cli *c, int argc, char **argv)
{
    const char *use = "mtc console [--port N]";
    if (mtc_wants_help(argc, argv))
        return printf("usage: %s\n", use), 0;
    long port = CONSOLE_PORT;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            port = strtol(argv[++i], &end, 10);
            if (*end || port < 1 || port > 65535)
                return cli_fail("--port \"%s\": want 1..65535\nusage: %s", argv[i], use), 2;
        } else {
            return cli_fail("unknown argument \"%s\"\nusage: %s", argv[i], use), 2;
        }
    }
    if (!healthy(c, NULL)) {
        char bin[PATH_MAX + 8], listen[32];
        mtcd_path(bin, sizeof(bin));
        snprintf(listen, sizeof(listen), "127.0.0.1:%ld", port);
        char *args[] = {bin, "--daemon", "--home", (char *)c->home, "--listen", listen, NULL};
        char why[512];
        if (run_quiet(args, why, sizeof(why)) < 0)
            return cli_fail("cannot start mtcd: %s", why), 1;
        printf("mtcd started on %s (home %s)\n", listen, c->home);
    }
    json_t *link = NULL;
    mtc_error_t err = {""};
    json_t *body = json_object();
    int rc = cli_call_ok(c, "POST", "/v1/consoleLinks", body, &link, &err);
    json_decref(body);
    if (rc < 0)
        return cli_fail("%s", err.text);
    printf("console: %s\nlog in (one-time link, %d s): %s\n",
           json_string_value(json_object_get(link, "url")),
           (int)json_integer_value(json_object_get(link, "expiresInSeconds")),
           json_string_value(json_object_get(link, "loginUrl")));
    json_decref(link);
    return 0;
}
