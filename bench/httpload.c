/* httpload: a small closed-loop HTTP/1.1 load generator for the benchmarks —
 * N keep-alive connections over a unix socket or TCP, each sending GETs back to
 * back for S seconds; prints requests/s and latency percentiles. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *unix_path, *tcp_host, *path = "/", *header = "";
static int tcp_port, conns = 4;
static double seconds = 5;

struct worker {
    pthread_t t;
    double *lat;
    size_t n, cap;
    long errors;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int dial(void)
{
    int fd;
    if (unix_path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", unix_path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
    } else {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
        inet_pton(AF_INET, tcp_host, &sa.sin_addr);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
    }
    if (fd >= 0)
        close(fd);
    return -1;
}

/* One request/response on fd; 0 ok (status 200), -1 error. *reuse says keep-alive. */
static int roundtrip(int fd, const char *req, size_t reqlen, int *reuse)
{
    static __thread char buf[1 << 20];
    if (write(fd, req, reqlen) != (ssize_t)reqlen)
        return -1;
    size_t have = 0;
    char *body = NULL;
    long clen = -1;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - have - 1);
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        if (!body && (body = strstr(buf, "\r\n\r\n"))) {
            body += 4;
            char *cl = strcasestr(buf, "\r\nContent-Length:");
            clen = cl ? strtol(cl + 17, NULL, 10) : 0;
            *reuse = !strcasestr(buf, "\r\nConnection: close");
        }
        if (body && (long)(have - (size_t)(body - buf)) >= clen)
            break;
    }
    if (strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 8, " 200", 4) == 0)
        return 0;
    static int told;
    if (!told++) /* say once why requests fail */
        fprintf(stderr, "httpload: %.*s\n", (int)strcspn(buf, "\r\n"), buf);
    return -1;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    char req[2048];
    int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: localhost\r\n%s%s\r\n", path,
                       header, *header ? "\r\n" : "");
    int fd = -1, reuse = 1;
    double end = now() + seconds;
    while (now() < end) {
        if (fd < 0 && (fd = dial()) < 0) {
            w->errors++;
            usleep(1000);
            continue;
        }
        double t0 = now();
        int rc = roundtrip(fd, req, (size_t)len, &reuse);
        double dt = now() - t0;
        if (rc < 0)
            w->errors++;
        if (w->n == w->cap) {
            w->cap = w->cap ? w->cap * 2 : 4096;
            w->lat = realloc(w->lat, w->cap * sizeof(double));
        }
        w->lat[w->n++] = dt;
        if (rc < 0 || !reuse) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--unix"))
            unix_path = argv[i + 1];
        else if (!strcmp(argv[i], "--tcp")) {
            static char host[64];
            snprintf(host, sizeof(host), "%s", argv[i + 1]);
            char *c = strrchr(host, ':');
            if (!c)
                return fprintf(stderr, "--tcp HOST:PORT\n"), 2;
            *c = '\0';
            tcp_host = host;
            tcp_port = atoi(c + 1);
        } else if (!strcmp(argv[i], "--path"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--header"))
            header = argv[i + 1];
        else if (!strcmp(argv[i], "--conns"))
            conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else
            return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    if (!unix_path && !tcp_host)
        return fprintf(stderr, "usage: httpload --unix PATH|--tcp HOST:PORT --path P "
                               "[--header 'K: V'] [--conns N] [--seconds S]\n"),
               2;
    struct worker *w = calloc((size_t)conns, sizeof(*w));
    double t0 = now();
    for (int i = 0; i < conns; i++)
        pthread_create(&w[i].t, NULL, run, &w[i]);
    size_t total = 0;
    long errors = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(w[i].t, NULL);
        total += w[i].n;
        errors += w[i].errors;
    }
    double el = now() - t0;
    double *all = malloc((total ? total : 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < conns; i++) {
        memcpy(all + k, w[i].lat, w[i].n * sizeof(double));
        k += w[i].n;
    }
    qsort(all, total, sizeof(double), cmp);
    double p50 = total ? all[total / 2] : 0, p99 = total ? all[(size_t)(total * 0.99)] : 0;
    printf("requests=%zu errors=%ld req_per_s=%.0f p50_ms=%.3f p99_ms=%.3f\n", total, errors,
           total / el, p50 * 1e3, p99 * 1e3);
    return errors > 0 && total == 0;
}
