/* mtcd: the mtc daemon — HTTP API on $MTC_HOME/mtcd.sock or --socket (and optional TCP),
 * SQLite store, operation runner and cluster supervisor. */
#include "api/api.h"
#include "backup/backup.h"
#include "control/datasets.h"
#include "control/control.h"
#include "endpoint/endpoint.h"
#include "provider/provider.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const char usage[] =
    "usage: mtcd [--home DIR] [--socket PATH]\n"
    "            [--listen HOST:PORT [--tls-cert PEM --tls-key PEM [--tls-ca PEM]]]\n"
    "            [--daemon]\n"
    "            [--supervise-ms N] [--monitor-ms N] [--nvml-library PATH]...\n"
    "            [--max-connections N] [--max-per-ip N] [--idle-timeout S]\n"
    "            [--cache-dir DIR] [--data-root DIR]...\n"
    "            [--backup-dir DIR [--backup-every DURATION] [--backup-keep N]]\n"
    "  --home DIR         state directory (default $MTC_HOME, else ~/.mtc)\n"
    "  --socket PATH      the admin socket (default HOME/mtcd.sock; the service uses\n"
    "                     /run/mtc/mtcd.sock); HOME/mtcd.sock then links to it\n"
    "  --listen HOST:PORT also serve the API on TCP; requests need a bearer token\n"
    "                     (create one with `mtc token create`); clear-text HTTP unless\n"
    "  --tls-cert, --tls-key  PEM certificate and key: serve TCP over HTTPS\n"
    "  --tls-ca PEM       the CA agents on a cluster's hosts trust for mtcd's\n"
    "                     certificate (default: the certificate itself, self-signed)\n"
    "  --daemon           detach; returns once the API is ready\n"
    "  --supervise-ms N   how often running clusters are checked (default 2000)\n"
    "  --monitor-ms N     how often unfinished training jobs are followed (default 5000)\n"
    "  --nvml-library PATH  an NVML library a spec's healthPolicy.nvmlLibrary may\n"
    "                     name (repeatable; default: only the system's libnvidia-ml)\n"
    "  --max-connections N, --max-per-ip N, --idle-timeout S\n"
    "                     TCP limits (default 512 connections, 64 per client address,\n"
    "                     15 s idle)\n"
    "  --cache-dir DIR    where datasets are prepared (default HOME/cache)\n"
    "  --data-root DIR    a directory a non-admin's dataset source may lie in\n"
    "                     (repeatable; HOME/data always is one)\n"
    "  --backup-dir DIR   take a backup of mtcd's state (`mtc daemon backup`'s file)\n"
    "                     into DIR every --backup-every (default 6h; \"30m\", \"1d\"),\n"
    "                     keeping the newest --backup-keep (default 7)\n"
    "  --version          print mtcd's version\n"
    "Stops cleanly on SIGTERM/SIGINT; clusters keep running and are adopted on restart.\n";

#define MAX_NVML 16
#define MAX_ROOTS 16

/* What the command line sets. */
struct mtcd_args {
    const char *home, *socket, *listen, *tls_ca, *cache_dir;
    const char *backup_dir, *backup_every;
    int backup_keep;
    const char *nvml[MAX_NVML + 1]; /* NULL-terminated */
    const char *roots[MAX_ROOTS + 2]; /* HOME/data, then --data-root's; NULL-terminated */
    int nnvml, nroots, detach, supervise_ms;
    struct api_config api; /* the TCP limits and TLS files */
};

/* How an option stores its value at off in struct mtcd_args. */
enum okind {
    O_STR,   /* the string */
    O_FLAG,  /* 1 */
    O_INT,   /* atoi */
    O_COUNT, /* a positive integer, else exit 2 */
    O_NVML,  /* appended to nvml[]: an absolute path, at most MAX_NVML */
    O_ROOT,  /* appended to roots[]: an absolute path, at most MAX_ROOTS */
};
#define A(x) offsetof(struct mtcd_args, x)
static const struct mtcd_opt {
    const char *name;
    enum okind kind;
    size_t off;
} mtcd_opts[] = {
    {"home", O_STR, A(home)},
    {"socket", O_STR, A(socket)},
    {"listen", O_STR, A(listen)},
    {"daemon", O_FLAG, A(detach)},
    {"supervise-ms", O_INT, A(supervise_ms)},
    {"monitor-ms", O_COUNT, A(api.monitor_ms)},
    {"nvml-library", O_NVML, 0},
    {"max-connections", O_COUNT, A(api.max_connections)},
    {"max-per-ip", O_COUNT, A(api.max_per_ip)},
    {"idle-timeout", O_COUNT, A(api.idle_timeout_s)},
    {"tls-cert", O_STR, A(api.tls_cert)},
    {"tls-key", O_STR, A(api.tls_key)},
    {"tls-ca", O_STR, A(tls_ca)},
    {"cache-dir", O_STR, A(cache_dir)},
    {"data-root", O_ROOT, 0},
    {"backup-dir", O_STR, A(backup_dir)},
    {"backup-every", O_STR, A(backup_every)},
    {"backup-keep", O_COUNT, A(backup_keep)},
};
#undef A
#define NOPTS (sizeof(mtcd_opts) / sizeof(mtcd_opts[0]))

/* A positive integer option value or exit 2 naming the option. */
static int opt_int(const char *name, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n <= 0 || n > 1000000) {
        fprintf(stderr, "mtcd: --%s: want a positive integer, got \"%s\"\n", name, v);
        exit(2);
    }
    return (int)n;
}

/* Store one option's value v. 0, or -1 after saying why on stderr. */
static int set_opt(struct mtcd_args *a, const struct mtcd_opt *o, const char *v)
{
    char *p = (char *)a + o->off;
    switch (o->kind) {
    case O_STR:
        *(const char **)p = v;
        break;
    case O_FLAG:
        *(int *)p = 1;
        break;
    case O_INT:
        *(int *)p = atoi(v);
        break;
    case O_COUNT:
        *(int *)p = opt_int(o->name, v);
        break;
    case O_NVML:
        if (v[0] != '/' || a->nnvml == MAX_NVML) {
            fprintf(stderr, "mtcd: --nvml-library: want an absolute path (at most %d)\n", MAX_NVML);
            return -1;
        }
        a->nvml[a->nnvml++] = v;
        break;
    case O_ROOT: /* roots[0] is HOME/data, set once the home is known */
        if (v[0] != '/' || a->nroots == MAX_ROOTS) {
            fprintf(stderr, "mtcd: --data-root: want an absolute path (at most %d)\n", MAX_ROOTS);
            return -1;
        }
        a->roots[1 + a->nroots++] = v;
        break;
    }
    return 0;
}

/* The command line into a. 0 to run, 1 when --help was printed, -1 on a bad
 * command line (said on stderr). */
static int parse_args(int argc, char **argv, struct mtcd_args *a)
{
    struct option lo[NOPTS + 3];
    for (size_t i = 0; i < NOPTS; i++)
        lo[i] = (struct option){mtcd_opts[i].name,
                                mtcd_opts[i].kind == O_FLAG ? no_argument : required_argument, NULL,
                                1000 + (int)i};
    lo[NOPTS] = (struct option){"help", no_argument, NULL, 'h'};
    lo[NOPTS + 1] = (struct option){"version", no_argument, NULL, 'V'};
    lo[NOPTS + 2] = (struct option){0};
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == 'h')
            return fputs(usage, stdout), 1;
        if (c == 'V')
            return printf("mtcd %s\n", mtc_version()), 1;
        if (c < 1000)
            return fputs(usage, stderr), -1;
        if (set_opt(a, &mtcd_opts[c - 1000], optarg) < 0)
            return -1;
    }
    if (optind < argc)
        return fprintf(stderr, "mtcd: unexpected argument \"%s\"\n%s", argv[optind], usage), -1;
    if ((a->api.tls_cert || a->api.tls_key) && (!a->api.tls_cert || !a->api.tls_key || !a->listen))
        return fprintf(stderr, "mtcd: --tls-cert and --tls-key go together, with --listen\n"), -1;
    if (a->tls_ca && !a->api.tls_cert)
        return fprintf(stderr, "mtcd: --tls-ca goes with --tls-cert\n"), -1;
    if (a->socket && (a->socket[0] != '/' || strlen(a->socket) >= 100))
        return fprintf(stderr, "mtcd: --socket: want an absolute path under 100 characters\n"), -1;
    if (a->cache_dir && a->cache_dir[0] != '/')
        return fprintf(stderr, "mtcd: --cache-dir: want an absolute path\n"), -1;
    if (a->backup_dir && (a->backup_dir[0] != '/' || strlen(a->backup_dir) >= 4000))
        return fprintf(stderr, "mtcd: --backup-dir: want an absolute path\n"), -1;
    if ((a->backup_every || a->backup_keep) && !a->backup_dir)
        return fprintf(stderr, "mtcd: --backup-every and --backup-keep go with --backup-dir\n"),
               -1;
    int64_t ms;
    if (a->backup_every && (mtc_duration_ms(a->backup_every, &ms) < 0 || ms < 1000))
        return fprintf(stderr,
                       "mtcd: --backup-every \"%s\": want a duration of at least 1s (\"30m\", "
                       "\"6h\", \"1d\")\n",
                       a->backup_every),
               -1;
    return 0;
}

static void die(int ready_fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die(int ready_fd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    log_vformat(LOG_ERR, msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ready_fd >= 0) {
        if (write(ready_fd, msg, strlen(msg)) < 0) {
        }
    } else {
        fprintf(stderr, "mtcd: %s\n", msg);
    }
    exit(1);
}

/* --daemon: fork; the parent exits with the child's verdict (empty = ready). */
static int daemonize(void)
{
    int p[2];
    if (pipe(p) < 0) {
        perror("mtcd: pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("mtcd: fork");
        exit(1);
    }
    if (pid > 0) {
        close(p[1]);
        char buf[512];
        ssize_t n = read(p[0], buf, sizeof(buf) - 1);
        if (n > 0) {
            buf[n] = '\0';
            fprintf(stderr, "mtcd: %s\n", buf);
            exit(1);
        }
        exit(n == 0 ? 0 : 1);
    }
    close(p[0]);
    setsid();
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2)
        close(null);
    return p[1];
}

/* mtc-agent on every node: next to this binary (copied to a cluster's hosts).
 * It runs continuously (started and supervised by the provider) and as
 * Slurm's HealthCheckProgram, Prolog and Epilog, with the node's own config
 * and environment ({nodedir}), draining its node on a failure. Agents on
 * other hosts report to mtcd's TCP address (listen), over https with tls. */
static int set_agent_hooks(struct provider *prov, const char *listen, const char *tls_cert,
                           const char *tls_ca, mtc_error_t *err)
{
    struct provider_hooks h = {
        .listen = listen, .tls = tls_cert != NULL, .ca_file = tls_ca ? tls_ca : tls_cert};
    char exe[PATH_MAX], agent[PATH_MAX + 16], health[2 * PATH_MAX], prolog[2 * PATH_MAX],
        epilog[2 * PATH_MAX];
    int have_dir = mtc_exe_dir(exe, sizeof(exe)) == 0;
    /* the container plugin: <exe>/../lib/mtc (the build tree and an install alike) */
    char so[PATH_MAX + 32], spank[PATH_MAX];
    snprintf(so, sizeof(so), "%s/../lib/mtc/spank_mtc.so", have_dir ? exe : ".");
    if (have_dir && realpath(so, spank) && !strpbrk(spank, " \t\n'"))
        h.spank = spank;
    else
        log_msg(LOG_WARNING, "no container plugin at %s: clusters run no containers", so);
    /* elastic pools: Slurm's power-saving programs ask mtcd through mtc-power */
    char power[PATH_MAX + 16];
    snprintf(power, sizeof(power), "%s/mtc-power", have_dir ? exe : ".");
    if (have_dir && access(power, X_OK) == 0 && !strpbrk(power, " \t\n'\"\\"))
        h.power = power;
    else
        log_msg(LOG_WARNING, "no usable mtc-power next to mtcd (%s): no elastic node pools", power);
    snprintf(agent, sizeof(agent), "%s/mtc-agent", have_dir ? exe : ".");
    if (!have_dir || access(agent, X_OK) < 0 || strchr(agent, '\'')) {
        log_msg(LOG_WARNING, "no usable mtc-agent next to mtcd (%s): nodes run no health checks",
                agent);
        return provider_set_hooks(prov, &h, err);
    }
    /* {agent}: this binary here, its copy on a cluster's hosts */
    static const char cmd[] = ". {nodedir}/agent.env && exec '{agent}' check --config "
                              "{nodedir}/agent.json --mode %s --drain";
    snprintf(health, sizeof(health), cmd, "health");
    /* in a subshell: the spec's own prolog/epilog scripts run after it */
    char inner[2 * PATH_MAX - 8];
    snprintf(inner, sizeof(inner), cmd, "prolog");
    snprintf(prolog, sizeof(prolog), "(%s)", inner);
    snprintf(inner, sizeof(inner), cmd, "epilog");
    snprintf(epilog, sizeof(epilog), "(%s)", inner);
    h.health_check = health;
    h.health_interval_s = 30;
    h.prolog = prolog;
    h.epilog = epilog;
    h.agent = agent;
    log_msg(LOG_INFO, "nodes run %s", agent);
    return provider_set_hooks(prov, &h, err);
}

/* The endpoints' view of a cluster's environment: its provider's. */
static char *cluster_env(void *prov, const char *cluster, mtc_error_t *err)
{
    return provider_env(prov, cluster, err);
}

/* Datasets: mtc-train next to this binary prepares them into the cache
 * (HOME/cache unless --cache-dir); non-admins' sources lie under HOME/data or
 * a --data-root. Both directories are made here. */
static void set_datasets(struct control *ctl, const char *home, struct mtcd_args *a)
{
    static char trainer[PATH_MAX + 16], cache[PATH_MAX + 16], data[PATH_MAX + 16];
    char exe[PATH_MAX];
    struct control_datasets d = {.roots = a->roots};
    if (mtc_exe_dir(exe, sizeof(exe)) == 0) {
        snprintf(trainer, sizeof(trainer), "%s/mtc-train", exe);
        if (access(trainer, X_OK) == 0)
            d.trainer = trainer;
    }
    if (!d.trainer)
        log_msg(LOG_WARNING, "no mtc-train next to mtcd: datasets cannot be prepared");
    snprintf(cache, sizeof(cache), "%s", a->cache_dir ? a->cache_dir : "");
    if (!a->cache_dir)
        snprintf(cache, sizeof(cache), "%s/cache", home);
    snprintf(data, sizeof(data), "%s/data", home);
    if (mtc_mkdir_p(cache, 0700) < 0 || mtc_mkdir_p(data, 0700) < 0)
        log_msg(LOG_WARNING, "cannot create %s or %s: %s", cache, data, strerror(errno));
    d.cache_dir = cache;
    a->roots[0] = data;
    control_set_datasets(ctl, &d);
}

/* The running daemon: its home, its parts, and what it must undo at exit. */
struct mtcd {
    const char *home;
    int ready_fd; /* --daemon: the pipe the waiting parent reads, else -1 */
    struct store *st;
    struct provider *prov;
    struct control *ctl;
    struct endpoint_ctl *ep;
    struct api *api;
    /* --backup-dir: the periodic backups' thread, woken early to stop */
    struct backup_sched backup;
    pthread_t backup_thread;
    int backup_on, backup_stop;
    pthread_mutex_t backup_lock;
    pthread_cond_t backup_wake;
    char sock[PATH_MAX + 32], pidfile[PATH_MAX + 32];
    char sock_link[PATH_MAX + 32]; /* --socket: HOME/mtcd.sock, a link to it; else "" */
};

/* --home, else $MTC_HOME, else ~/.mtc (into buf). */
static const char *home_dir(const char *home, char *buf, size_t len)
{
    if (home && *home)
        return home;
    const char *h = getenv("HOME");
    snprintf(buf, len, "%s/.mtc", h ? h : "/root");
    return buf;
}

/* home/log exists and this process holds home's lock for as long as it runs
 * (one mtcd per home: a second one would double-start every daemon).
 * 0, or -1 after saying why on stderr. */
static int claim_home(const char *home)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/log", home);
    if (mtc_mkdir_p(path, 0700) < 0) {
        fprintf(stderr, "mtcd: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/mtcd.lock", home);
    int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0) {
        snprintf(path, sizeof(path), "%s/mtcd.pid", home);
        fprintf(stderr, "mtcd: already running for %s (pid %d)\n", home, (int)mtc_pid_read(path));
        return -1;
    }
    return 0;
}

/* The log file, and the stop signals blocked in every thread (sigwait takes them). */
static void prepare_process(const struct mtcd *m, sigset_t *sigs)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/log/mtcd.log", m->home);
    if (log_open(path, "mtcd", LOG_INFO) < 0)
        die(m->ready_fd, "cannot open log %s: %s", path, strerror(errno));
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, sigs, NULL); /* every thread inherits the mask */
    signal(SIGPIPE, SIG_IGN);
}

/* --socket elsewhere: HOME/mtcd.sock becomes a symbolic link to it, replaced
 * atomically, so that whatever finds mtcd through its home (the CLI's --home,
 * the local agents' and mtc-power's configs, those written by an older mtcd
 * before an upgrade) reaches the socket. 0, or -1 + err. */
static int link_socket(struct mtcd *m, mtc_error_t *err)
{
    char tmp[PATH_MAX + 48];
    snprintf(m->sock_link, sizeof(m->sock_link), "%s/mtcd.sock", m->home);
    if (strcmp(m->sock_link, m->sock) == 0) {
        m->sock_link[0] = '\0';
        return 0;
    }
    snprintf(tmp, sizeof(tmp), "%s.%d", m->sock_link, (int)getpid());
    unlink(tmp);
    if (symlink(m->sock, tmp) < 0 || rename(tmp, m->sock_link) < 0) {
        errprintf(err, "cannot link %s to %s: %s", m->sock_link, m->sock, strerror(errno));
        unlink(tmp);
        m->sock_link[0] = '\0';
        return -1;
    }
    return 0;
}

/* The periodic backups: one every backup.every_ms until shut_down; a failure
 * is logged and recorded as an event (cluster "": mtcd's own), never fatal. */
static void *backups(void *arg)
{
    struct mtcd *m = arg;
    pthread_mutex_lock(&m->backup_lock);
    while (!m->backup_stop) {
        struct timespec at = mtc_deadline_ms(m->backup.every_ms);
        while (!m->backup_stop &&
               pthread_cond_timedwait(&m->backup_wake, &m->backup_lock, &at) != ETIMEDOUT) {
        }
        if (m->backup_stop)
            break;
        pthread_mutex_unlock(&m->backup_lock);
        mtc_error_t err = {""};
        control_backup_prepare(m->ctl);
        if (backup_sched_run(&m->backup, m->st, m->home, &err) < 0) {
            char msg[400];
            snprintf(msg, sizeof(msg), "periodic backup into %s failed: %s", m->backup.dir,
                     err.text);
            log_msg(LOG_ERR, "%s", msg);
            store_event_add(m->st, "", "BACKUP_FAILED", NULL, msg);
        } else {
            log_msg(LOG_INFO, "periodic backup: %s", m->backup.last_file);
        }
        pthread_mutex_lock(&m->backup_lock);
    }
    pthread_mutex_unlock(&m->backup_lock);
    return NULL;
}

/* --backup-dir: the directory made (owner-only) and the thread started. */
static void start_backups(struct mtcd *m, struct mtcd_args *a)
{
    backup_sched_init(&m->backup);
    pthread_mutex_init(&m->backup_lock, NULL);
    pthread_cond_init(&m->backup_wake, NULL);
    /* what a backup holds from outside the home: the TLS files given here */
    static const char *extra[4];
    int n = 0;
    const char *tls[] = {a->api.tls_cert, a->api.tls_key, a->tls_ca};
    for (int i = 0; i < 3; i++)
        if (tls[i])
            extra[n++] = tls[i];
    a->api.backup_extra = extra;
    m->backup.extra = extra;
    if (!a->backup_dir)
        return;
    snprintf(m->backup.dir, sizeof(m->backup.dir), "%s", a->backup_dir);
    m->backup.keep = a->backup_keep ? a->backup_keep : 7;
    m->backup.every_ms = 6 * 3600 * 1000LL;
    if (a->backup_every)
        mtc_duration_ms(a->backup_every, &m->backup.every_ms);
    if (mtc_mkdir_p(m->backup.dir, 0700) < 0)
        die(m->ready_fd, "--backup-dir: cannot create %s: %s", m->backup.dir, strerror(errno));
    a->api.backup = &m->backup;
}

/* Store, provider (with the agent hooks), controller and API, started in that
 * order; any failure ends the process with the reason (to the parent with --daemon). */
static void start_services(struct mtcd *m, struct mtcd_args *a)
{
    mtc_error_t err = {""};
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/mtcd.db", m->home);
    if (!(m->st = store_open(path, &err)))
        die(m->ready_fd, "%s", err.text);
    if (!(m->prov = provider_create("local", m->home, &err)))
        die(m->ready_fd, "provider: %s", err.text);
    if (set_agent_hooks(m->prov, a->listen, a->api.tls_cert, a->tls_ca, &err) < 0)
        die(m->ready_fd, "provider: %s", err.text);
    if (!(m->ctl = control_create(m->st, m->prov, a->supervise_ms, &err)))
        die(m->ready_fd, "%s", err.text);
    /* a home just restored from a backup (`mtc daemon restore`): its clusters adopted */
    if (control_adopt_restored(m->ctl, m->home, &err) < 0)
        die(m->ready_fd, "%s", err.text);
    set_datasets(m->ctl, m->home, a);
    start_backups(m, a);
    if (a->socket) {
        snprintf(m->sock, sizeof(m->sock), "%s", a->socket);
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", a->socket);
        *strrchr(dir, '/') = '\0';
        if (*dir && mtc_mkdir_p(dir, 0755) < 0)
            die(m->ready_fd, "--socket: cannot create %s: %s", dir, strerror(errno));
    } else {
        snprintf(m->sock, sizeof(m->sock), "%s/mtcd.sock", m->home);
    }
    a->api.socket_path = m->sock;
    a->api.listen = a->listen;
    a->api.nvml_libraries = a->nvml;
    /* training jobs' experiments: an absolute path, whatever the cwd */
    static char home_abs[PATH_MAX];
    a->api.home = realpath(m->home, home_abs) ? home_abs : m->home;
    a->api.store = m->st;
    a->api.control = m->ctl;
    a->api.provider = m->prov;
    api_models_recover(m->st, a->api.home);
    /* endpoints: replicas run mtc-serve built beside mtcd */
    static char serve[PATH_MAX];
    if (mtc_exe_dir(serve, sizeof(serve) - 16) == 0)
        strcat(serve, "/mtc-serve");
    struct endpoint_config ec = {.store = m->st, .cluster_env = cluster_env, .env_arg = m->prov,
                                 .home = a->api.home,
                                 .serve = serve};
    if (!(m->ep = endpoint_ctl_create(&ec, &err)))
        die(m->ready_fd, "%s", err.text);
    a->api.endpoints = m->ep;
    if (!(m->api = api_start(&a->api, &err)))
        die(m->ready_fd, "%s", err.text);
    if (a->socket && link_socket(m, &err) < 0)
        die(m->ready_fd, "%s", err.text);
    if (control_start(m->ctl, &err) < 0 || endpoint_ctl_start(m->ep, &err) < 0)
        die(m->ready_fd, "%s", err.text);
    if (a->backup_dir) {
        if (pthread_create(&m->backup_thread, NULL, backups, m) != 0)
            die(m->ready_fd, "cannot start the backup thread");
        m->backup_on = 1;
    }
}

/* The pid file, the log line, the waiting parent released, and systemd told. */
static void announce_ready(struct mtcd *m, const char *listen)
{
    snprintf(m->pidfile, sizeof(m->pidfile), "%s/mtcd.pid", m->home);
    mtc_write_file_fmt(m->pidfile, 0644, "%d\n", (int)getpid());
    log_msg(LOG_NOTICE, "mtcd ready: home %s, socket %s%s%s (schema v%d)", m->home, m->sock,
            listen ? ", tcp " : "", listen ? listen : "", store_schema_version(m->st));
    if (m->ready_fd >= 0)
        close(m->ready_fd);
    char state[sizeof(m->sock) + 64]; /* a Type=notify unit: started once requests are answered */
    snprintf(state, sizeof(state), "READY=1\nMAINPID=%d\nSTATUS=serving %s", (int)getpid(),
             m->sock);
    if (mtc_sd_notify(state) < 0)
        log_msg(LOG_WARNING, "cannot tell systemd mtcd is ready: %s", strerror(errno));
}

/* After a stop signal: the API first, then the controller; operations still
 * running are left to resume on restart (their progress is stored). */
static int shut_down(struct mtcd *m, int sig)
{
    log_msg(LOG_NOTICE, "signal %d: shutting down", sig);
    mtc_sd_notify("STOPPING=1");
    api_stop(m->api);
    if (m->backup_on) { /* a backup under way ends first */
        pthread_mutex_lock(&m->backup_lock);
        m->backup_stop = 1;
        pthread_cond_signal(&m->backup_wake);
        pthread_mutex_unlock(&m->backup_lock);
        pthread_join(m->backup_thread, NULL);
    }
    endpoint_ctl_destroy(m->ep); /* replicas keep running: the next mtcd adopts them */
    int left = control_stop(m->ctl, 5000);
    unlink(m->pidfile);
    if (m->sock_link[0])
        unlink(m->sock_link);
    if (left > 0) {
        log_msg(LOG_NOTICE, "%d operation(s) still running; they resume on restart", left);
        log_close();
        _exit(0);
    }
    control_destroy(m->ctl);
    provider_destroy(m->prov);
    store_close(m->st);
    log_msg(LOG_NOTICE, "stopped");
    log_close();
    return 0;
}

int main(int argc, char **argv)
{
    struct mtcd_args a = {.home = getenv("MTC_HOME"), .supervise_ms = 2000};
    int p = parse_args(argc, argv, &a);
    if (p)
        return p > 0 ? 0 : 2;
    char homebuf[PATH_MAX];
    struct mtcd m = {.home = home_dir(a.home, homebuf, sizeof(homebuf))};
    if (claim_home(m.home) < 0)
        return 1;
    m.ready_fd = a.detach ? daemonize() : -1;
    sigset_t sigs;
    prepare_process(&m, &sigs);
    start_services(&m, &a);
    announce_ready(&m, a.listen);
    int sig = 0;
    sigwait(&sigs, &sig);
    return shut_down(&m, sig);
}
