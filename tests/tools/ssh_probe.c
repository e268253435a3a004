/* ssh_probe: drives src/provider/ssh.c for tests/integration/hosts_ssh.sh.
 * Runs a sequence of actions over one connection and prints, after each,
 * "= ACTION rc=N errno=NAME ms=N" and, on failure, "! <the one-line error>". */
#include "common/common.h"
#include "provider/ssh.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    int err;
    const char *name;
} errno_names[] = {
    {0, "0"},
    {EHOSTUNREACH, "EHOSTUNREACH"},
    {ECONNREFUSED, "ECONNREFUSED"},
    {EACCES, "EACCES"},
    {EKEYREJECTED, "EKEYREJECTED"},
    {ETIMEDOUT, "ETIMEDOUT"},
    {ECONNRESET, "ECONNRESET"},
    {EIO, "EIO"},
    {EINVAL, "EINVAL"},
    {ENAMETOOLONG, "ENAMETOOLONG"},
};

static const char *errno_name(int e)
{
    for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
        if (errno_names[i].err == e)
            return errno_names[i].name;
    return "OTHER";
}

static void usage(void)
{
    fprintf(stderr, "usage: ssh_probe -s STATE_DIR [-k KEY] [-u USER] [-p PORT] [-c CONNECT_S]\n"
                    "                 [-t TIMEOUT_MS] [-l LOGFILE] HOST ACTION...\n"
                    "actions: run CMD | secret-run CMD | put LOCAL REMOTE MODE |\n"
                    "         secret-put LOCAL REMOTE MODE | check\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct ssh_target t = {0};
    const char *state = NULL, *logfile = NULL;
    int timeout_ms = 0, opt;
    while ((opt = getopt(argc, argv, "+s:k:u:p:c:t:l:")) != -1) {
        switch (opt) {
        case 's':
            state = optarg;
            break;
        case 'k':
            t.key_file = optarg;
            break;
        case 'u':
            t.user = optarg;
            break;
        case 'p':
            t.port = atoi(optarg);
            break;
        case 'c':
            t.connect_timeout_s = atoi(optarg);
            break;
        case 't':
            timeout_ms = atoi(optarg);
            break;
        case 'l':
            logfile = optarg;
            break;
        default:
            usage();
        }
    }
    if (!state || optind >= argc)
        usage();
    t.host = argv[optind++];
    if (log_open(logfile, "ssh_probe", LOG_DEBUG) < 0) {
        perror(logfile);
        return 2;
    }
    mtc_error_t err = {{0}};
    struct ssh_conn *c = ssh_create(&t, state, &err);
    if (!c) {
        printf("= create rc=-1 errno=%s ms=0\n! %s\n", errno_name(errno), err.text);
        return 1;
    }
    int failed = 0;
    for (int i = optind; i < argc;) {
        const char *a = argv[i++];
        int secret = strncmp(a, "secret-", 7) == 0;
        const char *verb = secret ? a + 7 : a;
        int rc, e = 0;
        err.text[0] = '\0';
        int64_t t0 = mtc_now_ms();
        if (strcmp(verb, "run") == 0 && i < argc) {
            char *out = NULL;
            rc = ssh_run(c, argv[i++], &out, timeout_ms, secret ? SSH_SECRET : 0, &err);
            e = rc < 0 ? errno : 0;
            fputs(out ? out : "", stdout);
            free(out);
        } else if (strcmp(verb, "put") == 0 && i + 2 < argc) {
            const char *local = argv[i], *remote = argv[i + 1];
            mode_t mode = (mode_t)strtol(argv[i + 2], NULL, 8);
            i += 3;
            rc = ssh_put_file(c, local, remote, mode, secret ? SSH_SECRET : 0, &err);
            e = rc < 0 ? errno : 0;
        } else if (strcmp(a, "check") == 0) {
            rc = ssh_master_alive(c) ? 0 : 1;
        } else {
            usage();
        }
        printf("= %s rc=%d errno=%s ms=%lld\n", a, rc, errno_name(e),
               (long long)(mtc_now_ms() - t0));
        if (rc != 0) {
            failed = 1;
            if (err.text[0])
                printf("! %s\n", err.text);
        }
        fflush(stdout);
    }
    ssh_destroy(c);
    log_close();
    return failed;
}
