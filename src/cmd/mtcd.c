/* mtcd: the mtc daemon — HTTP API on $MTC_HOME/mtcd.sock (and optional TCP),
 * SQLite store, operation runner and cluster supervisor. */
#include "api/api.h"
#include "control/control.h"
#include "provider/provider.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const char usage[] =
    "usage: mtcd [--home DIR] [--listen HOST:PORT [--tls-cert PEM --tls-key PEM [--tls-ca PEM]]]\n"
    "            [--daemon]\n"
    "            [--supervise-ms N] [--nvml-library PATH]... [--max-connections N]\n"
    "            [--max-per-ip N] [--idle-timeout S]\n"
    "  --home DIR         state directory (default $MTC_HOME, else ~/.mtc)\n"
    "  --listen HOST:PORT also serve the API on TCP; requests need a bearer token\n"
    "                     (create one with `mtc token create`); clear-text HTTP unless\n"
    "  --tls-cert, --tls-key  PEM certificate and key: serve TCP over HTTPS\n"
    "  --tls-ca PEM       the CA agents on a cluster's hosts trust for mtcd's\n"
    "                     certificate (default: the certificate itself, self-signed)\n"
    "  --daemon           detach; returns once the API is ready\n"
    "  --supervise-ms N   how often running clusters are checked (default 2000)\n"
    "  --nvml-library PATH  an NVML library a spec's healthPolicy.nvmlLibrary may\n"
    "                     name (repeatable; default: only the system's libnvidia-ml)\n"
    "  --max-connections N, --max-per-ip N, --idle-timeout S\n"
    "                     TCP limits (default 512 connections, 64 per client address,\n"
    "                     15 s idle)\n"
    "Stops cleanly on SIGTERM/SIGINT; clusters keep running and are adopted on restart.\n";

#define MAX_NVML 16

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

static void die(int ready_fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die(int ready_fd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_msg(LOG_ERR, "%s", msg);
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
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash)
        *slash = '\0';
    snprintf(agent, sizeof(agent), "%s/mtc-agent", slash ? exe : ".");
    if (!slash || access(agent, X_OK) < 0 || strchr(agent, '\'')) {
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"home", required_argument, 0, 'H'},
                                         {"listen", required_argument, 0, 'l'},
                                         {"daemon", no_argument, 0, 'd'},
                                         {"supervise-ms", required_argument, 0, 's'},
                                         {"nvml-library", required_argument, 0, 'N'},
                                         {"max-connections", required_argument, 0, 'C'},
                                         {"max-per-ip", required_argument, 0, 'I'},
                                         {"idle-timeout", required_argument, 0, 'T'},
                                         {"tls-cert", required_argument, 0, 'c'},
                                         {"tls-key", required_argument, 0, 'k'},
                                         {"tls-ca", required_argument, 0, 'A'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *home = getenv("MTC_HOME"), *listen = NULL, *tls_ca = NULL;
    const char *nvml[MAX_NVML + 1] = {NULL};
    int detach = 0, supervise_ms = 2000, c, nnvml = 0;
    struct api_config cfg = {0};
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'N':
            if (optarg[0] != '/' || nnvml == MAX_NVML) {
                fprintf(stderr, "mtcd: --nvml-library: want an absolute path (at most %d)\n",
                        MAX_NVML);
                return 2;
            }
            nvml[nnvml++] = optarg;
            break;
        case 'C':
            cfg.max_connections = opt_int("max-connections", optarg);
            break;
        case 'I':
            cfg.max_per_ip = opt_int("max-per-ip", optarg);
            break;
        case 'T':
            cfg.idle_timeout_s = opt_int("idle-timeout", optarg);
            break;
        case 'c':
            cfg.tls_cert = optarg;
            break;
        case 'k':
            cfg.tls_key = optarg;
            break;
        case 'A':
            tls_ca = optarg;
            break;
        case 'H':
            home = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'd':
            detach = 1;
            break;
        case 's':
            supervise_ms = atoi(optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mtcd: unexpected argument \"%s\"\n%s", argv[optind], usage);
        return 2;
    }
    if ((cfg.tls_cert || cfg.tls_key) && (!cfg.tls_cert || !cfg.tls_key || !listen)) {
        fprintf(stderr, "mtcd: --tls-cert and --tls-key go together, with --listen\n");
        return 2;
    }
    if (tls_ca && !cfg.tls_cert) {
        fprintf(stderr, "mtcd: --tls-ca goes with --tls-cert\n");
        return 2;
    }
    char homebuf[PATH_MAX], path[PATH_MAX + 32], sock[PATH_MAX + 32];
    if (!home || !*home) {
        const char *h = getenv("HOME");
        snprintf(homebuf, sizeof(homebuf), "%s/.mtc", h ? h : "/root");
        home = homebuf;
    }
    snprintf(path, sizeof(path), "%s/log", home);
    if (mtc_mkdir_p(path, 0700) < 0) {
        fprintf(stderr, "mtcd: cannot create %s: %s\n", path, strerror(errno));
        return 1;
    }
    /* One mtcd per home: a second one would double-start every daemon. */
    snprintf(path, sizeof(path), "%s/mtcd.lock", home);
    int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0) {
        snprintf(path, sizeof(path), "%s/mtcd.pid", home);
        fprintf(stderr, "mtcd: already running for %s (pid %d)\n", home, (int)mtc_pid_read(path));
        return 1;
    }
    int ready_fd = detach ? daemonize() : -1;

    snprintf(path, sizeof(path), "%s/log/mtcd.log", home);
    if (log_open(path, "mtcd", LOG_INFO) < 0)
        die(ready_fd, "cannot open log %s: %s", path, strerror(errno));

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread inherits the mask */
    signal(SIGPIPE, SIG_IGN);

    mtc_error_t err = {""};
    snprintf(path, sizeof(path), "%s/mtcd.db", home);
    struct store *st = store_open(path, &err);
    if (!st)
        die(ready_fd, "%s", err.text);
    struct provider *prov = provider_create("local", home, &err);
    if (!prov)
        die(ready_fd, "provider: %s", err.text);
    if (set_agent_hooks(prov, listen, cfg.tls_cert, tls_ca, &err) < 0)
        die(ready_fd, "provider: %s", err.text);
    struct control *ctl = control_create(st, prov, supervise_ms, &err);
    if (!ctl)
        die(ready_fd, "%s", err.text);
    snprintf(sock, sizeof(sock), "%s/mtcd.sock", home);
    cfg.socket_path = sock;
    cfg.listen = listen;
    cfg.nvml_libraries = nvml;
    cfg.store = st;
    cfg.control = ctl;
    struct api *api = api_start(&cfg, &err);
    if (!api)
        die(ready_fd, "%s", err.text);
    if (control_start(ctl, &err) < 0)
        die(ready_fd, "%s", err.text);
    snprintf(path, sizeof(path), "%s/mtcd.pid", home);
    mtc_write_file_fmt(path, 0644, "%d\n", (int)getpid());
    log_msg(LOG_NOTICE, "mtcd ready: home %s, socket %s%s%s (schema v%d)", home, sock,
            listen ? ", tcp " : "", listen ? listen : "", store_schema_version(st));
    if (ready_fd >= 0)
        close(ready_fd);

    int sig = 0;
    sigwait(&sigs, &sig);
    log_msg(LOG_NOTICE, "signal %d: shutting down", sig);
    api_stop(api);
    int left = control_stop(ctl, 5000);
    unlink(path);
    if (left > 0) {
        /* their progress is stored; the next mtcd resumes them */
        log_msg(LOG_NOTICE, "%d operation(s) still running; they resume on restart", left);
        log_close();
        _exit(0);
    }
    control_destroy(ctl);
    provider_destroy(prov);
    store_close(st);
    log_msg(LOG_NOTICE, "stopped");
    log_close();
    return 0;
}
