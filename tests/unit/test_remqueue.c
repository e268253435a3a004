/* test_remqueue: the admission rules of concurrent remediation — the
 * cluster's limit, a pool's drained fraction (and the one-node-per-pool
 * rule), per-node exclusivity, FIFO order, no node queued twice. */
#include "check.h"
#include "control/remqueue.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static enum remq_verdict verdict_of(const struct remq_item *q, int n, const char *node)
{
    for (int i = 0; i < n; i++)
        if (strcmp(q[i].node, node) == 0)
            return q[i].verdict;
    return (enum remq_verdict) - 1;
}

static void test_cap(void)
{
    CHECK(remq_pool_cap(0.1, 4) == 0, "10%% of 4 nodes rounds down to 0");
    CHECK(remq_pool_cap(0.1, 100) == 10, "10%% of 100 nodes is 10");
    CHECK(remq_pool_cap(0.3, 10) == 3, "30%% of 10 is 3 (not 2.999)");
    CHECK(remq_pool_cap(1, 4) == 4, "100%% of 4 is 4");
    CHECK(remq_pool_cap(0, 64) == 0, "0%% is 0");
}

/* maxConcurrentRemediations: the first limit nodes start, the rest wait. */
static void test_cluster_limit(void)
{
    struct remq_limits lim = {2, 1.0};
    struct remq_pool pools[] = {{8, 0, 0}};
    struct remq_item q[] = {
        {"n3", 0, 300, 0, 0}, {"n1", 0, 100, 0, 0}, {"n2", 0, 200, 0, 0}, {"n4", 0, 400, 0, 0}};
    int flight = 0;
    int s = remq_admit(&lim, &flight, pools, N(pools), NULL, 0, q, N(q));
    CHECK(s == 2 && flight == 2, "2 of 4 start under a limit of 2 (started %d)", s);
    CHECK(verdict_of(q, N(q), "n1") == REMQ_START && verdict_of(q, N(q), "n2") == REMQ_START,
          "the two oldest failures start");
    CHECK(verdict_of(q, N(q), "n3") == REMQ_WAIT_CLUSTER &&
              verdict_of(q, N(q), "n4") == REMQ_WAIT_CLUSTER,
          "the newer ones wait for the cluster limit");
    CHECK_STR(q[0].node, "n1", "the queue is sorted oldest first");
    CHECK(pools[0].in_flight == 2 && pools[0].drained == 2, "the pool counts the started nodes");

    /* with one already in flight, only one more */
    struct remq_pool p2[] = {{8, 1, 1}};
    struct remq_item q2[] = {{"a", 0, 5, 0, 0}, {"b", 0, 6, 0, 0}};
    const char *run[] = {"z"};
    flight = 1;
    s = remq_admit(&lim, &flight, p2, 1, run, 1, q2, 2);
    CHECK(s == 1 && verdict_of(q2, 2, "a") == REMQ_START &&
              verdict_of(q2, 2, "b") == REMQ_WAIT_CLUSTER,
          "in-flight remediations count against the limit");
    /* limit 1: strictly serial */
    struct remq_limits one = {1, 1.0};
    struct remq_pool p3[] = {{4, 0, 0}};
    struct remq_item q3[] = {{"a", 0, 5, 0, 0}, {"b", 0, 6, 0, 0}, {"c", 0, 7, 0, 0}};
    flight = 0;
    s = remq_admit(&one, &flight, p3, 1, NULL, 0, q3, 3);
    CHECK(s == 1 && verdict_of(q3, 3, "a") == REMQ_START &&
              verdict_of(q3, 3, "c") == REMQ_WAIT_CLUSTER,
          "maxConcurrentRemediations 1 runs one at a time");
}

/* maxDrainedFraction: a pool's drained nodes, with one always allowed. */
static void test_pool_fraction(void)
{
    struct remq_limits lim = {32, 0.25};
    /* pool 0: 8 nodes, cap 2; pool 1: 4 nodes, cap 1; pool 2: 2 nodes, cap 0 */
    struct remq_pool pools[] = {{8, 0, 0}, {4, 0, 0}, {2, 0, 0}};
    struct remq_item q[] = {
        {"a1", 0, 1, 0, 0}, {"a2", 0, 2, 0, 0}, {"a3", 0, 3, 0, 0}, {"b1", 1, 4, 0, 0},
        {"b2", 1, 5, 0, 0}, {"c1", 2, 6, 0, 0}, {"c2", 2, 7, 0, 0},
    };
    int flight = 0;
    int s = remq_admit(&lim, &flight, pools, N(pools), NULL, 0, q, N(q));
    CHECK(verdict_of(q, N(q), "a1") == REMQ_START && verdict_of(q, N(q), "a2") == REMQ_START &&
              verdict_of(q, N(q), "a3") == REMQ_WAIT_POOL,
          "an 8-node pool at 25%% starts 2, the third waits for the pool");
    CHECK(verdict_of(q, N(q), "b1") == REMQ_START && verdict_of(q, N(q), "b2") == REMQ_WAIT_POOL,
          "a 4-node pool at 25%% starts 1");
    CHECK(verdict_of(q, N(q), "c1") == REMQ_START && verdict_of(q, N(q), "c2") == REMQ_WAIT_POOL,
          "a 2-node pool (cap 0) still heals one node at a time");
    CHECK(s == 4 && flight == 4, "4 start in all (%d)", s);

    /* nodes drained without a remediation (left in ERROR) count */
    struct remq_pool p2[] = {{8, 2, 0}};
    struct remq_item q2[] = {{"x", 0, 1, 0, 0}, {"y", 0, 2, 0, 0}};
    flight = 0;
    s = remq_admit(&lim, &flight, p2, 1, NULL, 0, q2, 2);
    CHECK(s == 1 && verdict_of(q2, 2, "x") == REMQ_START &&
              verdict_of(q2, 2, "y") == REMQ_WAIT_POOL,
          "2 of 8 already drained: only the one-in-flight rule lets x start");
    /* a node already drained (by Slurm's health check) does not add to the count */
    struct remq_pool p3[] = {{8, 2, 1}};
    struct remq_item q3[] = {{"x", 0, 1, 1, 0}, {"y", 0, 2, 0, 0}};
    flight = 1;
    s = remq_admit(&lim, &flight, p3, 1, NULL, 0, q3, 2);
    CHECK(verdict_of(q3, 2, "x") == REMQ_START && verdict_of(q3, 2, "y") == REMQ_WAIT_POOL,
          "a node counted as drained already starts within the cap; the next does not");
    /* fraction 0: one per pool */
    struct remq_limits zero = {32, 0};
    struct remq_pool p4[] = {{100, 0, 0}};
    struct remq_item q4[] = {{"x", 0, 1, 0, 0}, {"y", 0, 2, 0, 0}};
    flight = 0;
    s = remq_admit(&zero, &flight, p4, 1, NULL, 0, q4, 2);
    CHECK(s == 1 && verdict_of(q4, 2, "x") == REMQ_START, "maxDrainedFraction 0: one at a time");
}

/* A node never has two remediations; one queued twice is decided once. */
static void test_exclusive(void)
{
    struct remq_limits lim = {32, 1.0};
    struct remq_pool pools[] = {{4, 1, 1}};
    const char *run[] = {"n2"};
    struct remq_item q[] = {
        {"n2", 0, 1, 1, 0}, {"n3", 0, 2, 0, 0}, {"n3", 0, 9, 0, 0}, {"n1", 0, 3, 0, 0}};
    int flight = 1;
    int s = remq_admit(&lim, &flight, pools, N(pools), run, 1, q, N(q));
    CHECK(q[0].verdict == REMQ_RUNNING, "a node with a remediation in flight is not started again");
    CHECK(q[1].verdict == REMQ_START && !strcmp(q[1].node, "n3"), "n3 starts once");
    CHECK(q[3].verdict == REMQ_DUPLICATE && !strcmp(q[3].node, "n3"),
          "n3 failing again while queued is not queued twice");
    CHECK(s == 2 && flight == 3, "n3 and n1 start (%d), 3 in flight", s);
}

/* FIFO: the order of failure, whatever the order of the input; slots freed
 * later go to the oldest waiting node. */
static void test_fifo(void)
{
    struct remq_limits lim = {1, 1.0};
    struct remq_pool pools[] = {{4, 0, 0}};
    struct remq_item q[] = {{"d", 0, 40, 0, 0}, {"b", 0, 20, 0, 0}, {"c", 0, 20, 0, 0}};
    int flight = 0;
    remq_admit(&lim, &flight, pools, 1, NULL, 0, q, 3);
    CHECK(!strcmp(q[0].node, "b") && q[0].verdict == REMQ_START,
          "oldest failure first, ties by name (b before c)");
    /* b done: the next pass without it */
    struct remq_pool p2[] = {{4, 0, 0}};
    struct remq_item q2[] = {{"d", 0, 40, 0, 0}, {"c", 0, 20, 0, 0}};
    flight = 0;
    remq_admit(&lim, &flight, p2, 1, NULL, 0, q2, 2);
    CHECK(verdict_of(q2, 2, "c") == REMQ_START && verdict_of(q2, 2, "d") == REMQ_WAIT_CLUSTER,
          "the freed slot goes to c, then d");
    CHECK_STR(remq_verdict_name(REMQ_WAIT_POOL), "WAIT_POOL", "verdict names");
}

int main(void)
{
    test_cap();
    test_cluster_limit();
    test_pool_fraction();
    test_exclusive();
    test_fifo();
    return check_done();
}
