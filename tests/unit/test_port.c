/* Unit tests for src/common/port.c: the rendezvous port's candidates (outside
 * the ephemeral range and the reserved ports) and the pick by binding, which
 * skips a port held by an outgoing connection's local end that a connect probe
 * calls free; a daemon's port, below the rendezvous ports, and its hold. */
#include "check.h"
#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct mtc_port_rules rules;

/* Every candidate of r is outside [lo, hi] and not p1 or p2. */
static int all_outside(const struct mtc_port_rules *r, int lo, int hi, int p1, int p2)
{
    int seen = 0, prev = 0;
    for (int i = 0; i < r->count; i += 1 + i / 50) {        /* a sample, denser at the start */
        int p = mtc_port_candidate(r, (unsigned long)i, 0); /* the i-th port */
        if (p < 1024 || (p >= lo && p <= hi) || p == p1 || p == p2 || p <= prev)
            return 0;
        prev = p;
        seen++;
    }
    return seen > 0;
}

static void test_rules(void)
{
    mtc_error_t err = {""};
    CHECK(mtc_port_rules_init(&rules, "32768\t60999\n", "", &err) == 0, "Linux's default range");
    CHECK(rules.count == (32767 - MTC_PORT_BASE + 1) + (65535 - 61000 + 1),
          "candidates: %d up to the range, 61000-65535 above it (%d)", MTC_PORT_BASE, rules.count);
    CHECK(mtc_port_candidate(&rules, 0, 0) == MTC_PORT_BASE &&
              mtc_port_candidate(&rules, 7, 0) == MTC_PORT_BASE + 7,
          "the search starts at the seed");
    CHECK(mtc_port_candidate(&rules, 32767 - MTC_PORT_BASE + 1, 0) == 61000,
          "the candidates jump over the ephemeral range");
    CHECK(mtc_port_candidate(&rules, (unsigned long)rules.count, 0) == MTC_PORT_BASE &&
              mtc_port_candidate(&rules, (unsigned long)rules.count - 1, 0) == 65535,
          "the seed wraps at the end");
    CHECK(mtc_port_candidate(&rules, 0, 1) == MTC_PORT_BASE + 7919 % rules.count,
          "the next try is a prime stride on, not the next port (%d)",
          mtc_port_candidate(&rules, 0, 1));
    static unsigned char seen[65536];
    int distinct = 0;
    for (int i = 0; i < rules.count; i++) {
        int p = mtc_port_candidate(&rules, 12345, i);
        distinct += p >= MTC_PORT_BASE && !seen[p];
        seen[p] = 1;
    }
    CHECK(distinct == rules.count, "the walk tries every candidate once (%d of %d)", distinct,
          rules.count);
    CHECK(mtc_port_candidate(&rules, 0, rules.count) == 0 && mtc_port_candidate(&rules, 0, -1) == 0,
          "no candidate past the count");
    CHECK(all_outside(&rules, 32768, 60999, 0, 0), "no candidate in the ephemeral range");

    CHECK(mtc_port_rules_init(&rules, "32768 60999", "29500-29509, 61000,65535\n", &err) == 0,
          "reserved ports read");
    CHECK(mtc_port_candidate(&rules, 0, 0) == 29510, "reserved ports are skipped");
    CHECK(all_outside(&rules, 32768, 60999, 61000, 65535), "  each of them");

    CHECK(mtc_port_rules_init(&rules, "20000 40000", "", &err) == 0 &&
              mtc_port_candidate(&rules, 0, 0) == 40001 && all_outside(&rules, 20000, 40000, 0, 0),
          "a range over the base: the candidates start above it");
    CHECK(mtc_port_rules_init(&rules, "1024 65535", "5000-5009", &err) == 0 &&
              rules.count == 65535 - 1024 + 1 - 10 && mtc_port_candidate(&rules, 0, 0) == 1024,
          "a range over every port: any unreserved port from 1024");

    CHECK(mtc_port_rules_init(&rules, "60999", "", &err) < 0 && errno == EINVAL &&
              strstr(err.text, "ephemeral port range"),
          "a range of one number: an error naming it");
    CHECK(mtc_port_rules_init(&rules, "32768 60999", "80,x", &err) < 0 &&
              strstr(err.text, "reserved ports"),
          "a reserved list that is not ports: an error naming it");
    CHECK(mtc_port_rules_init(&rules, NULL, NULL, &err) == 0 && rules.count > 0,
          "this machine's /proc: %d candidates", rules.count);
}

/* A listener on 127.0.0.1 (its port in *port) and a socket bound to local
 * port `local` and connected to it: an outgoing connection holding `local`.
 * The connected socket's fd, or -1. */
static int hold_by_connection(int local, int *listener)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    *listener = socket(AF_INET, SOCK_STREAM, 0);
    if (*listener < 0 || bind(*listener, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(*listener, 4) < 0 || getsockname(*listener, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons((uint16_t)local)};
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c < 0 || bind(c, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (c >= 0)
            close(c);
        return -1;
    }
    return c;
}

/* Whether a TCP connect to 127.0.0.1:port succeeds (the old probe's "in use"). */
static int connects(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void test_pick(void)
{
    mtc_error_t err = {""};
    CHECK(mtc_port_rules_init(&rules, "32768 60999", "", &err) == 0, "rules for the pick");
    /* a seed from the pid: parallel runs of this test start apart */
    unsigned long seed = (unsigned long)getpid() * 7919ul;
    int p = mtc_port_pick(&rules, "127.0.0.1", seed, &err);
    CHECK(p >= MTC_PORT_BASE && (p < 32768 || p > 60999), "a port picked on 127.0.0.1: %d", p);
    CHECK(mtc_port_bind_probe("127.0.0.1", p, &err) == 0,
          "  it binds again: the probe released it");

    int lst = -1, held = hold_by_connection(p, &lst);
    CHECK(held >= 0, "port %d held by an outgoing connection's local end", p);
    CHECK(!connects(p), "  a connect probe finds nothing listening there (the old rule: free)");
    CHECK(mtc_port_bind_probe("127.0.0.1", p, &err) < 0 && errno == EADDRINUSE &&
              strstr(err.text, "bind"),
          "  the bind probe: in use (%s)", err.text);
    CHECK(mtc_port_bind_probe(NULL, p, &err) < 0 && errno == EADDRINUSE,
          "  on the wildcard too, where the ranks' store listens");
    int q = mtc_port_pick(&rules, "127.0.0.1", seed, &err);
    CHECK(q > 0 && q != p && (q < 32768 || q > 60999), "the pick from the same seed skips it: %d",
          q);

    /* a listener on the next one as well: the search goes on past both */
    int l2 = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)q)};
    s6.sin6_addr = in6addr_any;
    int bound = l2 >= 0 && bind(l2, (struct sockaddr *)&s6, sizeof(s6)) == 0 && listen(l2, 1) == 0;
    CHECK(bound, "port %d held by a listener on [::]", q);
    int r = mtc_port_pick(&rules, "127.0.0.1", seed, &err);
    CHECK(r > 0 && r != p && r != q, "the pick skips both: %d", r);
    if (l2 >= 0)
        close(l2);
    if (held >= 0)
        close(held);
    if (lst >= 0)
        close(lst);

    /* 192.0.2.1 (TEST-NET-1, numeric: no lookup) is no address of this host */
    CHECK(mtc_port_pick(&rules, "192.0.2.1", seed, &err) > 0,
          "an address not of this host: the wildcard speaks for it");
    CHECK(mtc_port_bind_probe("127.0.0.1", 70000, &err) < 0 && errno == EINVAL,
          "a port out of range: EINVAL");
}

/* A listener (SO_REUSEADDR, as slurmd's) on port: 1 when it binds. */
static int daemon_binds(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 1) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void test_daemon_ports(void)
{
    int base = mtc_free_port_range(5);
    CHECK(base >= 20000 && base + 4 < MTC_PORT_BASE,
          "a daemon's range (%d..%d) is below the rendezvous ports (%d up)", base, base + 4,
          MTC_PORT_BASE);
    int p = base + 3;
    CHECK(!mtc_port_held(p) && daemon_binds(p), "port %d: free, not held", p);
    CHECK(mtc_port_hold(p, "a") == 0 && mtc_port_held(p), "held (for a)");
    CHECK(mtc_port_hold(p, "a") == 0, "  held again for a: a no-op");
    CHECK(mtc_port_hold(p, "b") < 0 && errno == EADDRINUSE, "  for b: taken (EADDRINUSE)");
    mtc_port_release(p, "b");
    CHECK(mtc_port_held(p), "  b's release leaves a's hold");
    CHECK(daemon_binds(p), "  a daemon's listener (SO_REUSEADDR) binds beside it");
    mtc_error_t err = {""};
    CHECK(mtc_port_bind_probe(NULL, p, &err) < 0 && errno == EADDRINUSE, "  a probe finds it taken");
    int again = 0;
    for (int i = 0; i < 50; i++) { /* the range pick never lands on it */
        int b = mtc_free_port_range(5);
        again |= b <= p && p < b + 5;
    }
    CHECK(!again, "  50 range picks of 5 ports: none covers it");
    mtc_port_release(p, "a");
    CHECK(!mtc_port_held(p) && daemon_binds(p), "released: the daemon binds it");

    int lst = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    CHECK(lst >= 0 && bind(lst, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lst, 1) == 0,
          "another process's listener on %d", p);
    CHECK(mtc_port_hold(p, "a") < 0 && errno == EADDRINUSE && !mtc_port_held(p),
          "  a hold then fails: EADDRINUSE");
    if (lst >= 0)
        close(lst);
    /* a connection's TIME_WAIT on it (the daemon closed first, as a killed
     * slurmd does): held still, and the daemon (SO_REUSEADDR) binds it after */
    int srv = socket(AF_INET, SOCK_STREAM, 0), cli = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int conn = -1;
    if (bind(srv, (struct sockaddr *)&lo, sizeof(lo)) == 0 && listen(srv, 1) == 0 &&
        connect(cli, (struct sockaddr *)&lo, sizeof(lo)) == 0)
        conn = accept(srv, NULL, NULL);
    if (conn >= 0)
        close(conn); /* the server's end closes first: its TIME_WAIT is on port p */
    close(srv);
    if (cli >= 0)
        close(cli);
    CHECK(conn >= 0 && mtc_port_bind_probe(NULL, p, &err) < 0,
          "port %d in TIME_WAIT: a probe without SO_REUSEADDR fails", p);
    CHECK(mtc_port_hold(p, "a") == 0, "  the hold takes it");
    mtc_port_release(p, "a");
    CHECK(daemon_binds(p), "  released, the daemon binds it");
    CHECK(mtc_port_hold(0, "a") < 0 && errno == EINVAL, "port 0: EINVAL");
    /* a cluster deleted: every hold of its own ends, another's stays */
    CHECK(mtc_port_hold(base, "a") == 0 && mtc_port_hold(base + 1, "a") == 0 &&
              mtc_port_hold(base + 2, "b") == 0,
          "ports %d, %d held for a, %d for b", base, base + 1, base + 2);
    CHECK(mtc_port_release_owner("a") == 2 && !mtc_port_held(base) && !mtc_port_held(base + 1),
          "  a's holds released at once (2)");
    CHECK(mtc_port_held(base + 2) && mtc_port_release_owner("a") == 0, "  b's stays");
    mtc_port_release(base + 2, "b");
}

int main(void)
{
    test_rules();
    test_pick();
    test_daemon_ports();
    return check_done();
}
