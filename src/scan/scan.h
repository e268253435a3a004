/* scan: the health scanner's planning and verdict logic, free of MPI so unit
 * tests drive it (mtc-scan runs it on rank 0): the pairings of the collective
 * pairs check (all pairs in rounds of disjoint pairs, or a seeded random
 * perfect pairing and a second, different one), the retest of suspects
 * against nodes that passed, the pairs' judgement and the per-node verdict
 * (bad node vs bad link). A pairing is an array partner[0..n): the node each
 * node is paired with in a round, or -1 when it sits the round out. */
#ifndef MTC_SCAN_H
#define MTC_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* Which pass measured a pair; SCAN_PASS_CONFIRM measures a FAILing pair
 * again (it keeps the pass that found it). */
enum scan_pass {
    SCAN_PASS_ALL,
    SCAN_PASS_FIRST,
    SCAN_PASS_SECOND,
    SCAN_PASS_RETEST,
    SCAN_PASS_CONFIRM,
};
#define SCAN_PASSES 5
/* A FAILing pair is measured again at most this often before the verdict,
 * keeping its best: a moment of noise on a shared host is not a bad link,
 * a bad link is slow every time. */
#define SCAN_CONFIRMS 2
/* "all", "first", "second", "retest", "confirm" */
const char *scan_pass_name(enum scan_pass p);

/* One measured pair of nodes. */
struct scan_pair {
    int a, b; /* node indices, a < b */
    enum scan_pass pass;
    double gbps;      /* measured bandwidth */
    int state;        /* enum health_status, set by scan_pairs_judge */
    double threshold; /* GB/s below which the pair FAILs */
    double median;    /* of the other pairs (measured-relative only; else 0) */
    int confirms;     /* times measured again while FAILing (SCAN_PASS_CONFIRM) */
};

/* Rounds in the all-pairs schedule of n nodes (circle method): n-1 for even
 * n, n for odd n (one node sits out each round); 0 for n < 2. */
int scan_all_pairs_rounds(int n);
/* Round r (0..rounds) of the all-pairs schedule into partner[0..n); every
 * pair of nodes meets in exactly one round. Returns the pairs in the round. */
int scan_all_pairs_round(int n, int r, int *partner);

/* A random perfect pairing of n >= 2 nodes (one left out when n is odd) from
 * seed, the same for the same seed. With prev (the previous pass's pairing,
 * or NULL) it differs from prev: no pair of prev repeated and, for odd n, a
 * different node left out, where n allows (n >= 4, or n == 3). Returns the
 * number of pairs (n / 2). */
int scan_random_pairing(int n, uint64_t seed, const int *prev, int *partner);

/* Judge every pair: with min_gbps > 0 a pair below it FAILs (threshold
 * min_gbps); else against the median of the other pairs' GB/s
 * (health_speed_judge): FAIL below fail_fraction x median, WARN halfway
 * between; no verdict (PASS) with too few other pairs. */
void scan_pairs_judge(struct scan_pair *p, int np, double min_gbps, double fail_fraction);

/* A retest round: every suspect (a node in a FAILing pair) that has no
 * SCAN_PASS_RETEST pair yet is paired with a node that passed (in no FAILing
 * pair) it has not met before, disjoint pairs only; suspects that find no
 * free partner wait for a later round. Fills partner[0..n) and returns the
 * number of pairs; 0 when nothing is left to retest or no partner exists. */
int scan_retest_round(int n, const struct scan_pair *p, int np, int *partner);

/* What a node's pairs say about it. */
enum scan_finding {
    SCAN_OK,        /* no FAILing pair, or each explained by a bad partner */
    SCAN_BAD_NODE,  /* slow with every partner (at least 2; FAIL, or WARN) */
    SCAN_BAD_LINK,  /* slow with peer only, fine with others */
    SCAN_UNDECIDED, /* its only pair FAILed: nothing to retest against */
};

/* A node's verdict from its pairs. */
struct scan_node_verdict {
    int state; /* enum health_status */
    enum scan_finding finding;
    int pairs;  /* pairs the node was in */
    int failed; /* of them FAILing */
    int peer;   /* BAD_LINK/UNDECIDED: the other node of the pair */
};

/* Verdicts of n nodes: a node slow with every partner (at least 2; FAILing
 * with all, or with two or more and WARNing with the others) is a bad node; a FAILing pair not
 * explained by a bad node is a bad link, which FAILs both its nodes and names the other one; a node
 * whose only pair FAILed (nothing to retest against) FAILs as undecided. */
void scan_pairs_verdict(int n, const struct scan_pair *p, int np, struct scan_node_verdict *v);
/* The verdict's one-line reason ("" for SCAN_OK), peer_name naming v->peer. */
void scan_verdict_reason(const struct scan_node_verdict *v, const char *peer_name, char *buf,
                         size_t len);

/* The pairs check's plan: feeds rounds and takes measurements until done.
 * Small clusters (n <= all_pairs_max): every pair, in rounds of disjoint
 * pairs; larger ones: a random pairing from seed, then a second, different
 * one; then retest rounds for the suspects; then confirm rounds, each
 * FAILing pair measured again up to SCAN_CONFIRMS times (its best kept)
 * until it passes; pairs judged as they go (scan_pairs_judge). */
struct scan_plan;
struct scan_plan *scan_plan_create(int n, int all_pairs_max, uint64_t seed, double min_gbps,
                                   double fail_fraction);
void scan_plan_destroy(struct scan_plan *pl);
/* The next round into partner[0..n) and its pass; returns the pairs in it,
 * 0 when the plan is done (the pairs then judged for the last time). */
int scan_plan_next(struct scan_plan *pl, int *partner, enum scan_pass *pass);
/* Record the measured GB/s of pair (a, b) of the current round (a confirm
 * round's: the pair's best so far). */
void scan_plan_record(struct scan_plan *pl, int a, int b, enum scan_pass pass, double gbps);
/* Every measured pair, judged; *np gets the count. */
const struct scan_pair *scan_plan_pairs(const struct scan_plan *pl, int *np);

#endif
