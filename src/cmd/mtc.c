/* mtc: the command-line client of mtcd — clusters, operations, tokens, the
 * daemon, a shell on a cluster, container images, datasets, models. Subcommands are a table. */
#include "mtc/cli.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cli_cmd commands[] = {
    {"cluster", cmd_cluster, "create, get, list, update, delete clusters", NULL},
    {"healthscan", cmd_healthscan, "scan a cluster's nodes: gpu, collective, straggler checks",
     NULL},
    {"operations", cmd_operations, "get or wait for a long-running operation", NULL},
    {"env", cmd_env, "print the shell environment of a cluster: eval \"$(mtc env ID)\"", NULL},
    {"login", cmd_login, "open a shell on a cluster's login node", NULL},
    {"token", cmd_token, "create, list, revoke API tokens", NULL},
    {"daemon", cmd_daemon, "start, stop, status, backup and restore of mtcd", NULL},
    {"run", cmd_run, "run a training recipe as a Slurm job (or -e local): mtc run -s RECIPE", NULL},
    {"recipes", cmd_recipes, "list or show the prebuilt training recipes", NULL},
    {"experiment", cmd_experiment, "list, status, logs, cancel of recipe runs", NULL},
    {"rl", cmd_rl, "rl launch: an RL-style job directory, optionally interactive", NULL},
    {"attach", cmd_attach, "a shell inside a running job's allocation: mtc attach JOB [N]", NULL},
    {"chaos", cmd_chaos, "inject faults into a running job (admin): prove it survives them", NULL},
    {"image", cmd_image, "import, build-trainer, inspect squashfs container images", NULL},
    {"data", cmd_data, "list, show, prepare, delete datasets (named, versioned, cached)", NULL},
    {"models", cmd_models,
     "the model registry: list, show, versions, alias, export, delete, upload", NULL},
    {"endpoints", cmd_endpoints,
     "inference endpoints: create, deploy, undeploy, list, predict, delete", NULL},
    {"accounts", cmd_accounts,
     "a cluster's accounts: create, list, show, update, delete (limits, fair share, QoS)", NULL},
    {"users", cmd_users, "an account's users: add, remove, list", NULL},
    {"qos", cmd_qos, "a cluster's QoS: create, list, delete (priority, limits, preemption)", NULL},
    {"console", cmd_console,
     "the web console: start mtcd on 127.0.0.1 if needed, print a login link", NULL},
    {NULL, NULL, NULL, NULL},
};

static const char global_help[] =
    "\nglobal options (before the command): --home DIR (default $MTC_HOME, else ~/.mtc, or\n"
    "  /var/lib/mtc for root while the mtcd service runs and ~/.mtc has no mtcd),\n"
    "  --project P, --location L (default local/local), --json; mtc --version.\n"
    "environment: MTC_URL=http://HOST:PORT (or https://) and MTC_TOKEN to use mtcd over TCP;\n"
    "             MTC_CA_CERT=PEM when mtcd's certificate is not signed by a system CA.\n";

/* No --home and no $MTC_HOME: ~/.mtc, except for root while the packaged
 * service runs (its socket exists) and no mtcd of ~/.mtc does: then the
 * service's home, so that `mtc ...` as root talks to the system's mtcd. */
static const char *default_home(char *buf, size_t len)
{
    const char *h = getenv("HOME");
    char sock[PATH_MAX + 16];
    snprintf(buf, len, "%s/.mtc", h ? h : "/root");
    snprintf(sock, sizeof(sock), "%s/mtcd.sock", buf);
    if (geteuid() == 0 && access(sock, F_OK) < 0 && access(CLI_SYSTEM_SOCKET, F_OK) == 0)
        return CLI_SYSTEM_HOME;
    return buf;
}

int main(int argc, char **argv)
{
    static char home[PATH_MAX];
    /* run through a link named enroot: enroot's import, version, list */
    const char *base = strrchr(argv[0], '/');
    if (strcmp(base ? base + 1 : argv[0], "enroot") == 0)
        return cmd_enroot(argc, argv);
    struct cli c = {.home = getenv("MTC_HOME"),
                    .project = "local",
                    .location = "local",
                    .url = getenv("MTC_URL"),
                    .token = getenv("MTC_TOKEN"),
                    .ca_cert = getenv("MTC_CA_CERT")};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--home") == 0 && i + 1 < argc)
            c.home = argv[++i];
        else if (strcmp(argv[i], "--project") == 0 && i + 1 < argc)
            c.project = argv[++i];
        else if (strcmp(argv[i], "--location") == 0 && i + 1 < argc)
            c.location = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            c.json = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            break;
        else if (strcmp(argv[i], "--version") == 0)
            return printf("mtc %s\n", mtc_version()), 0;
        else
            return cli_fail("unknown option \"%s\"", argv[i]), 2;
    }
    if (!c.home || !*c.home)
        c.home = default_home(home, sizeof(home));
    if (!mtc_name_valid(c.project, 63) || !mtc_name_valid(c.location, 63))
        return cli_fail("--project/--location: must match [a-z][a-z0-9-]{0,62}"), 2;
    if (c.url && !*c.url)
        c.url = NULL;
    snprintf(c.sock, sizeof(c.sock), "%s/mtcd.sock", c.home);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cli_dispatch(&c, "mtc", commands, argc - i, argv + i);
    if (i >= argc || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
        fputs(global_help, rc == 0 ? stdout : stderr);
    curl_global_cleanup();
    return rc;
}
