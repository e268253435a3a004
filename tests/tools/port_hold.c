/* port_hold: holds TCP ports busy the ways that fool a connect probe, for
 * tests/integration/run_ports.sh and bench/ports.sh (issue 50): --bind LO-HI
 * binds every port there that is free without listening (a connect to it is
 * refused, a listen on it fails), --connect N makes N outgoing connections to
 * its own loopback listener (their local ends take ephemeral ports; with
 * --connect-from LO-HI, ports of that range). Then it writes
 * "bound B connected C" to --ready FILE, and on a second line "unheld P..."
 * the ports of --bind it could not bind (someone else's then, and free
 * again later perhaps), and waits for TERM or INT. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stopping;
static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* "LO-HI" into lo, hi. 0/-1. */
static int range(const char *s, int *lo, int *hi)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != '-')
        return -1;
    long b = strtol(end + 1, &end, 10);
    if (*end || a < 1 || b > 65535 || a > b)
        return -1;
    *lo = (int)a, *hi = (int)b;
    return 0;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

/* A socket bound to 127.0.0.1:port (0: the kernel's choice), or -1. */
static int bound(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = loopback(port);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

/* n connections to a listener of ours, each accepted (both ends held); the
 * client ends from ports [lo, hi] when lo > 0. Returns how many were made. */
static int connect_many(int n, int lo, int hi)
{
    int l = bound(0);
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    if (l < 0 || listen(l, 128) < 0 || getsockname(l, (struct sockaddr *)&sa, &len) < 0)
        return 0;
    int made = 0, port = lo;
    while (made < n) {
        int c = -1;
        if (lo > 0) {
            while (c < 0 && port <= hi)
                c = bound(port++);
            if (c < 0)
                break; /* the range is used up */
        } else if ((c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
            break;
        }
        if (connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0 || accept(l, NULL, NULL) < 0) {
            close(c);
            if (lo > 0)
                continue;
            break;
        }
        made++;
    }
    return made;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"bind", 1, 0, 'b'},
                                         {"connect", 1, 0, 'c'},
                                         {"connect-from", 1, 0, 'f'},
                                         {"ready", 1, 0, 'r'},
                                         {0, 0, 0, 0}};
    int blo = 0, bhi = -1, n = 0, clo = 0, chi = 0, o;
    const char *ready = NULL;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if ((o == 'b' && range(optarg, &blo, &bhi) < 0) ||
            (o == 'f' && range(optarg, &clo, &chi) < 0) || o == '?') {
            fprintf(stderr, "usage: port_hold [--bind LO-HI] [--connect N [--connect-from LO-HI]] "
                            "--ready FILE\n");
            return 2;
        }
        if (o == 'c')
            n = atoi(optarg);
        if (o == 'r')
            ready = optarg;
    }
    if (!ready) {
        fprintf(stderr, "port_hold: --ready FILE\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { /* a socket a port, two a connection */
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int nb = 0, nu = 0;
    int *unheld = calloc((size_t)(bhi >= blo ? bhi - blo + 1 : 1), sizeof(int));
    for (int p = blo; p <= bhi; p++) {
        if (bound(p) >= 0)
            nb++;
        else if (unheld)
            unheld[nu++] = p;
    }
    int nc = n > 0 ? connect_many(n, clo, chi) : 0;
    FILE *f = fopen(ready, "w");
    int bad = !f || fprintf(f, "bound %d connected %d\nunheld", nb, nc) < 0;
    for (int i = 0; !bad && i < nu; i++)
        bad = fprintf(f, " %d", unheld[i]) < 0;
    free(unheld);
    if (bad || fprintf(f, "\n") < 0 || fclose(f) != 0) {
        perror("port_hold: --ready");
        return 1;
    }
    while (!stopping)
        pause();
    return 0;
}
