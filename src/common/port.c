/* port: ports to listen on. A job's rendezvous port (torch.distributed's
 * MASTER_PORT) chosen the way the ranks use it — bound, not connected to —
 * from MTC_PORT_BASE up, outside the kernel's ephemeral range, whose ports
 * outgoing connections and TIME_WAIT hold without listening, and outside its
 * reserved ports. A daemon's port (an emulated cluster's slurmctld and
 * slurmds) from below MTC_PORT_BASE, and held — bound by this process —
 * while its daemon is not running, so no other one takes it meanwhile. */
#include "common/common.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define RANGE_FILE "/proc/sys/net/ipv4/ip_local_port_range"
#define RESERVED_FILE "/proc/sys/net/ipv4/ip_local_reserved_ports"

static void exclude(struct mtc_port_rules *r, long a, long b)
{
    for (long p = a < 0 ? 0 : a; p <= b && p < 65536; p++)
        r->excluded[p / 8] |= (unsigned char)(1u << (p % 8));
}

static int excluded(const struct mtc_port_rules *r, int p)
{
    return (r->excluded[p / 8] >> (p % 8)) & 1;
}

/* "32768\t60999": the two numbers into lo, hi. 0/-1. */
static int parse_range(const char *s, long *lo, long *hi)
{
    char *end;
    *lo = strtol(s, &end, 10);
    if (end == s)
        return -1;
    s = end;
    *hi = strtol(s, &end, 10);
    while (end != s && isspace((unsigned char)*end))
        end++;
    return end == s || *end || *lo < 1 || *hi > 65535 || *lo > *hi ? -1 : 0;
}

/* "8080,9000-9010" (ip_local_reserved_ports' form; empty: none) excluded. 0/-1. */
static int parse_reserved(struct mtc_port_rules *r, const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0 || a > 65535)
            return -1;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a || b > 65535)
                return -1;
            s = end;
        }
        exclude(r, a, b);
        while (isspace((unsigned char)*s))
            s++;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return 0;
}

int mtc_port_rules_init(struct mtc_port_rules *r, const char *range, const char *reserved,
                        mtc_error_t *err)
{
    memset(r, 0, sizeof(*r));
    char *own_range = range ? NULL : mtc_read_file(RANGE_FILE, NULL);
    char *own_reserved = reserved ? NULL : mtc_read_file(RESERVED_FILE, NULL);
    /* no /proc (a container without it): Linux's default range, none reserved */
    const char *rg = range ? range : own_range ? own_range : "32768 60999";
    const char *rs = reserved ? reserved : own_reserved ? own_reserved : "";
    long lo = 0, hi = 0;
    int rc = 0;
    if (parse_range(rg, &lo, &hi) < 0)
        rc = errprintf(err, "the ephemeral port range \"%.40s\": want two ports, low and high", rg);
    else if (parse_reserved(r, rs) < 0)
        rc = errprintf(err, "the reserved ports \"%.60s\": want PORT or LOW-HIGH, comma-separated",
                       rs);
    free(own_range);
    free(own_reserved);
    if (rc < 0) {
        errno = EINVAL;
        return -1;
    }
    exclude(r, 0, 1023); /* privileged */
    exclude(r, 1024, MTC_PORT_BASE - 1);
    struct mtc_port_rules outside = *r;
    exclude(&outside, lo, hi);
    for (int p = MTC_PORT_BASE; p < 65536; p++)
        if (!excluded(&outside, p))
            outside.ports[outside.count++] = (uint16_t)p;
    if (outside.count > 0) {
        *r = outside;
        return 0;
    }
    /* the range covers every port from MTC_PORT_BASE up: any unreserved one
     * from 1024 (binding still proves each) */
    memset(r, 0, sizeof(*r));
    exclude(r, 0, 1023);
    parse_reserved(r, rs);
    for (int p = 1024; p < 65536; p++)
        if (!excluded(r, p))
            r->ports[r->count++] = (uint16_t)p;
    if (r->count == 0) {
        errno = ENOENT;
        return errprintf(err, "every port is reserved (%s)", RESERVED_FILE);
    }
    return 0;
}

/* The walk's step: a prime, so that (seed + i × STRIDE) mod count visits every
 * candidate once; jobs whose first ports are taken part ways at once instead
 * of crowding onto the first free port above a taken block. */
#define STRIDE 7919

int mtc_port_candidate(const struct mtc_port_rules *r, unsigned long seed, int i)
{
    if (r->count <= 0 || i < 0 || i >= r->count)
        return 0;
    unsigned long n = (unsigned long)r->count;
    unsigned long step = n % STRIDE ? STRIDE : 1;
    return r->ports[(seed % n + (unsigned long)i * step) % n];
}

/* Bind one socket of family af to sa (len), without SO_REUSEADDR: a port in
 * TIME_WAIT or the local end of a connection fails as in use. 0/-1 + errno. */
static int bind_once(int af, const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int no = 0;
    if (af == AF_INET6) /* [::] takes the port on IPv4 too, as the ranks' store does */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    int rc = bind(fd, sa, len) == 0 && listen(fd, 1) == 0 ? 0 : -1;
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int mtc_port_bind_probe(const char *addr, int port, mtc_error_t *err)
{
    if (port < 1 || port > 65535) {
        errno = EINVAL;
        return errprintf(err, "port %d: out of range", port);
    }
    /* the wildcard, where the ranks' store listens: IPv6 (dual stack), else IPv4 */
    struct sockaddr_in6 any6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    any6.sin6_addr = in6addr_any;
    struct sockaddr_in any4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    int rc = bind_once(AF_INET6, (struct sockaddr *)&any6, sizeof(any6));
    if (rc < 0 && errno == EAFNOSUPPORT)
        rc = bind_once(AF_INET, (struct sockaddr *)&any4, sizeof(any4));
    if (rc < 0)
        return errprintf(err, "port %d: bind: %s", port, strerror(errno));
    if (!addr || !*addr)
        return 0;
    /* and MASTER_ADDR itself, where it is an address of this host */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    char ps[8];
    snprintf(ps, sizeof(ps), "%d", port);
    int g = getaddrinfo(addr, ps, &hints, &ai);
    if (g != 0) {
        errno = EINVAL;
        return errprintf(err, "address \"%.80s\": %s", addr, gai_strerror(g));
    }
    rc = bind_once(ai->ai_family, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    freeaddrinfo(ai);
    if (rc < 0 && e != EADDRNOTAVAIL) { /* not this host's: the wildcard spoke for it */
        errno = e;
        return errprintf(err, "port %d on %.80s: bind: %s", port, addr, strerror(e));
    }
    return 0;
}

int mtc_port_pick(const struct mtc_port_rules *r, const char *addr, unsigned long seed,
                  mtc_error_t *err)
{
    mtc_error_t last = {""};
    for (int i = 0; i < r->count; i++) {
        int p = mtc_port_candidate(r, seed, i);
        if (mtc_port_bind_probe(addr, p, &last) == 0)
            return p;
        if (errno != EADDRINUSE && errno != EACCES) /* a bad address: every port would fail */
            return errprintf(err, "%s", last.text);
    }
    errno = EADDRINUSE;
    return errprintf(err, "no port from %d up binds on %s (%d tried; last: %s)", MTC_PORT_BASE,
                     addr && *addr ? addr : "this host", r->count, last.text);
}

/* ---- daemon ports ---- */

#define DAEMON_PORT_LOW 20000 /* .. MTC_PORT_BASE - 1: never a job's rendezvous port */

/* A socket bound to port on the wildcard, with SO_REUSEADDR when reuse is
 * set; fd, or -1 + errno. Without it a port fails where a socket of any kind
 * has it — a connection's TIME_WAIT too, which a daemon's listener with
 * SO_REUSEADDR (slurmd's) ignores; with it, where a socket without it, or a
 * listener, has it. */
static int bind_hold(int port, int reuse)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) < 0) {
        close(fd);
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int mtc_free_port(void)
{
    return mtc_free_port_range(1);
}

int mtc_free_port_range(int count)
{
    const int span = MTC_PORT_BASE - DAEMON_PORT_LOW;
    if (count < 1 || count > span)
        return 0;
    for (int attempt = 0; attempt < 200; attempt++) {
        uint32_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != sizeof(r))
            return 0;
        int base = DAEMON_PORT_LOW + (int)(r % (uint32_t)(span - count + 1)), ok = 1;
        for (int i = 0; i < count && ok; i++) {
            int fd = bind_hold(base + i, 0);
            ok = fd >= 0;
            if (ok)
                close(fd);
        }
        if (ok)
            return base;
    }
    return 0;
}

/* The ports held: a short list (the elastic nodes that are off) */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int port, fd;
    char owner[64];
} *holds;
static size_t nholds, capholds;

/* Hold i is owner's (holds and owner under hold_lock). */
static int owned_by(size_t i, const char *owner)
{
    return owner && strncmp(holds[i].owner, owner, sizeof(holds[i].owner) - 1) == 0;
}

/* Hold i ends; the last takes its place. */
static void drop(size_t i)
{
    close(holds[i].fd);
    holds[i] = holds[--nholds];
}

int mtc_port_hold(int port, const char *owner)
{
    if (port < 1 || port > 65535 || !owner) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&hold_lock);
    int rc = 0;
    size_t i = 0;
    while (i < nholds && holds[i].port != port)
        i++;
    if (i < nholds && !owned_by(i, owner)) {
        rc = -1; /* another owner's: as taken as a listener's */
        errno = EADDRINUSE;
    } else if (i == nholds) {
        if (nholds == capholds) {
            size_t cap = capholds ? 2 * capholds : 16;
            void *m = realloc(holds, cap * sizeof(*holds));
            if (!m) {
                pthread_mutex_unlock(&hold_lock);
                errno = ENOMEM;
                return -1;
            }
            holds = m;
            capholds = cap;
        }
        /* SO_REUSEADDR: the node's slurmd, just killed, leaves connections
         * in TIME_WAIT on it; a pick's probe (no SO_REUSEADDR) still fails */
        int fd = bind_hold(port, 1);
        if (fd < 0) {
            rc = -1;
        } else {
            holds[nholds].port = port;
            holds[nholds].fd = fd;
            snprintf(holds[nholds++].owner, sizeof(holds[0].owner), "%s", owner);
        }
    }
    int e = errno;
    pthread_mutex_unlock(&hold_lock);
    errno = e;
    return rc;
}

void mtc_port_release(int port, const char *owner)
{
    pthread_mutex_lock(&hold_lock);
    for (size_t i = 0; i < nholds; i++)
        if (holds[i].port == port && owned_by(i, owner)) {
            drop(i);
            break;
        }
    pthread_mutex_unlock(&hold_lock);
}

int mtc_port_release_owner(const char *owner)
{
    int n = 0;
    pthread_mutex_lock(&hold_lock);
    for (size_t i = 0; i < nholds;)
        if (owned_by(i, owner))
            drop(i), n++;
        else
            i++;
    pthread_mutex_unlock(&hold_lock);
    return n;
}

int mtc_port_held(int port)
{
    pthread_mutex_lock(&hold_lock);
    int held = 0;
    for (size_t i = 0; i < nholds && !held; i++)
        held = holds[i].port == port;
    pthread_mutex_unlock(&hold_lock);
    return held;
}
