/* Unit tests for the health scanner's pairs plan (src/scan/pairing.c): the
 * all-pairs rounds, seeded random pairings and a second pass that differs,
 * suspects retested against a node that passed, and the verdicts (a bad node
 * slow with every partner vs a bad link slow with one) on simulated
 * measurements driven through the same plan mtc-scan runs. */
#include "check.h"
#include "health/health.h"
#include "scan/scan.h"

#include <stdlib.h>

/* every node in at most one pair, partner symmetric, want pairs in all */
static int valid(int n, const int *partner, int want)
{
    int pairs = 0;
    for (int i = 0; i < n; i++) {
        int j = partner[i];
        if (j < -1 || j >= n || j == i || (j >= 0 && partner[j] != i))
            return 0;
        pairs += j > i;
    }
    return pairs == want;
}

/* Simulated link speeds: 10 GB/s (a little noise), 1 GB/s for a pair with
 * slow_node or for the slow link (la, lb). */
struct sim {
    int slow_node, la, lb;
};

static double speed(const struct sim *s, int a, int b)
{
    if (a == s->slow_node || b == s->slow_node ||
        (s->la >= 0 && ((a == s->la && b == s->lb) || (a == s->lb && b == s->la))))
        return 1.0;
    return 10.0 + 0.1 * ((a * 7 + b * 3) % 5);
}

/* Run the whole plan; verdicts into v, returns the pairs measured; counts
 * per pass in passes[SCAN_PASSES]; fails if a round is not a valid disjoint pairing. */
static int simulate(int n, int all_max, uint64_t seed, const struct sim *s,
                    struct scan_node_verdict *v, int *passes, int *rounds_ok)
{
    struct scan_plan *pl = scan_plan_create(n, all_max, seed, 0, 0.5);
    int *partner = malloc(sizeof(int) * (size_t)n), k, np;
    enum scan_pass pass;
    *rounds_ok = 1;
    for (int i = 0; i < SCAN_PASSES; i++)
        passes[i] = 0;
    for (int guard = 0; guard < 8 * n && (k = scan_plan_next(pl, partner, &pass)) > 0; guard++) {
        *rounds_ok &= valid(n, partner, k);
        for (int a = 0; a < n; a++)
            if (partner[a] > a) {
                scan_plan_record(pl, a, partner[a], pass, speed(s, a, partner[a]));
                passes[pass]++;
            }
    }
    const struct scan_pair *p = scan_plan_pairs(pl, &np);
    scan_pairs_verdict(n, p, np, v);
    scan_plan_destroy(pl);
    free(partner);
    return np;
}

int main(void)
{
    int partner[16], prev[16], again[16];

    /* all pairs: every pair exactly once, rounds disjoint */
    for (int n = 2; n <= 9; n++) {
        int seen[16][16] = {{0}}, ok = 1, rounds = scan_all_pairs_rounds(n);
        for (int r = 0; r < rounds; r++) {
            int k = scan_all_pairs_round(n, r, partner);
            ok &= valid(n, partner, k);
            for (int i = 0; i < n; i++)
                if (partner[i] > i)
                    seen[i][partner[i]]++;
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++)
                ok &= seen[i][j] == 1;
        CHECK(ok, "all pairs of %d nodes in %d rounds of disjoint pairs, each pair once", n,
              rounds);
    }

    /* random pairing: perfect, reproducible, the second pass differs */
    for (int n = 3; n <= 12; n++) {
        int k = scan_random_pairing(n, 42, NULL, prev);
        scan_random_pairing(n, 42, NULL, again);
        int same = 1, repeated = 0;
        for (int i = 0; i < n; i++)
            same &= prev[i] == again[i];
        CHECK(k == n / 2 && valid(n, prev, n / 2) && same,
              "%d nodes: a perfect pairing (%d pairs), the same for the same seed", n, k);
        k = scan_random_pairing(n, 43, prev, partner);
        for (int i = 0; i < n; i++)
            repeated += partner[i] >= 0 ? partner[i] == prev[i] : prev[i] < 0;
        CHECK(valid(n, partner, n / 2) && repeated == 0,
              "%d nodes: the second pairing repeats no pair%s of the first", n,
              n % 2 ? " and leaves out another node" : "");
    }
    int diff = 0;
    scan_random_pairing(10, 1, NULL, prev);
    scan_random_pairing(10, 2, NULL, partner);
    for (int i = 0; i < 10; i++)
        diff |= prev[i] != partner[i];
    CHECK(diff, "another seed gives another pairing");

    /* judging: absolute and measured-relative */
    struct scan_pair jp[4] = {{0, 1, SCAN_PASS_ALL, 10, 0, 0, 0, 0},
                              {0, 2, SCAN_PASS_ALL, 11, 0, 0, 0, 0},
                              {1, 2, SCAN_PASS_ALL, 2, 0, 0, 0, 0},
                              {2, 3, SCAN_PASS_ALL, 9, 0, 0, 0, 0}};
    scan_pairs_judge(jp, 4, 0, 0.5);
    CHECK(jp[2].state == HEALTH_FAIL && jp[2].threshold == 5 && jp[0].state == HEALTH_PASS,
          "measured-relative: 2 GB/s against the others' median 10 FAILs (threshold 5)");
    scan_pairs_judge(jp, 4, 9.5, 0.5);
    CHECK(jp[3].state == HEALTH_FAIL && jp[3].threshold == 9.5 && jp[0].state == HEALTH_PASS,
          "absolute: 9 GB/s below --min-bus-gbps 9.5 FAILs");

    /* retest: a suspect is paired with a passing node it has not met */
    struct scan_pair rp[3] = {{0, 1, SCAN_PASS_FIRST, 1, HEALTH_FAIL, 0, 0, 0},
                              {2, 3, SCAN_PASS_FIRST, 10, HEALTH_PASS, 0, 0, 0},
                              {4, 5, SCAN_PASS_FIRST, 10, HEALTH_PASS, 0, 0, 0}};
    int k = scan_retest_round(6, rp, 3, partner);
    CHECK(k == 2 && partner[0] >= 2 && partner[1] >= 2 && partner[0] != partner[1] &&
              valid(6, partner, 2),
          "both suspects of the failing pair retested against passing nodes (%d, %d)", partner[0],
          partner[1]);

    struct scan_node_verdict v[16];
    int passes[SCAN_PASSES], rounds_ok;
    char reason[200];
    /* 6 nodes, all pairs: node 4 slow with everyone */
    struct sim s = {4, -1, -1};
    simulate(6, 8, 7, &s, v, passes, &rounds_ok);
    CHECK(rounds_ok && passes[SCAN_PASS_ALL] == 15 && passes[SCAN_PASS_RETEST] == 0,
          "6 nodes, all pairs: 15 pairs, no retest needed");
    CHECK(v[4].state == HEALTH_FAIL && v[4].finding == SCAN_BAD_NODE && v[0].state == HEALTH_PASS &&
              v[5].state == HEALTH_PASS,
          "all pairs: the slow node is the bad node, its partners pass");

    /* large: random pairing + second pass + retest, for several seeds and sizes */
    for (int n = 5; n <= 12; n++) {
        int ok = 1, retests = 1, fine = 1;
        for (uint64_t seed = 1; seed <= 5; seed++) {
            s = (struct sim){n - 2, -1, -1};
            simulate(n, 2, seed, &s, v, passes, &rounds_ok);
            ok &=
                rounds_ok && passes[SCAN_PASS_FIRST] == n / 2 && passes[SCAN_PASS_SECOND] == n / 2;
            retests &= passes[SCAN_PASS_RETEST] > 0;
            for (int i = 0; i < n; i++)
                fine &= i == n - 2 ? v[i].finding == SCAN_BAD_NODE : v[i].state == HEALTH_PASS;
        }
        CHECK(ok && retests && fine,
              "%d nodes, random pairing (5 seeds): two passes, suspects retested, only the slow "
              "node is named bad",
              n);
    }

    /* a bad link between 1 and 3 in an 8-node cluster (random pairings that
     * put them together: try seeds until one does) */
    int found = 0;
    for (uint64_t seed = 1; seed < 200 && !found; seed++) {
        scan_random_pairing(8, seed, NULL, prev);
        if (prev[1] != 3)
            continue;
        found = 1;
        s = (struct sim){-1, 1, 3};
        simulate(8, 2, seed, &s, v, passes, &rounds_ok);
        int others = 1;
        for (int i = 0; i < 8; i++)
            others &= i == 1 || i == 3 || v[i].state == HEALTH_PASS;
        CHECK(v[1].finding == SCAN_BAD_LINK && v[1].peer == 3 && v[3].finding == SCAN_BAD_LINK &&
                  v[3].peer == 1 && others,
              "a slow link 1-3: both named a bad link with the other, no bad node, others pass");
        scan_verdict_reason(&v[1], "n3", reason, sizeof(reason));
        CHECK_STR(reason, "bad link with n3: slow only with some partners (1 of 3 pairs)",
                  "the link's reason names the peer");
    }
    CHECK(found, "a seed pairing 1 with 3 exists");

    /* slow with every partner, though one pair only WARNs: still the bad node */
    struct scan_pair wp[4] = {{0, 3, SCAN_PASS_FIRST, 1, HEALTH_FAIL, 0, 0, 0},
                              {1, 3, SCAN_PASS_SECOND, 6, HEALTH_WARN, 0, 0, 0},
                              {2, 3, SCAN_PASS_RETEST, 1, HEALTH_FAIL, 0, 0, 0},
                              {0, 1, SCAN_PASS_RETEST, 10, HEALTH_PASS, 0, 0, 0}};
    scan_pairs_verdict(4, wp, 4, v);
    CHECK(v[3].finding == SCAN_BAD_NODE && v[0].state == HEALTH_PASS && v[2].state == HEALTH_PASS,
          "FAIL, WARN and FAIL with its 3 partners: a bad node, its partners pass");

    /* one FAIL (with the bad node) and one WARN: not a bad node */
    struct scan_pair np2[5] = {{0, 4, SCAN_PASS_FIRST, 1, HEALTH_FAIL, 0, 0, 0},
                               {1, 4, SCAN_PASS_SECOND, 1, HEALTH_FAIL, 0, 0, 0},
                               {3, 4, SCAN_PASS_RETEST, 1, HEALTH_FAIL, 0, 0, 0},
                               {0, 3, SCAN_PASS_SECOND, 6, HEALTH_WARN, 0, 0, 0},
                               {1, 2, SCAN_PASS_FIRST, 10, HEALTH_PASS, 0, 0, 0}};
    scan_pairs_verdict(5, np2, 5, v);
    CHECK(v[4].finding == SCAN_BAD_NODE && v[3].state == HEALTH_PASS && v[0].state == HEALTH_PASS,
          "a noisy node (WARN) retested against the bad node is not named");

    /* 2 nodes: nothing to retest against */
    s = (struct sim){-1, 0, 1};
    struct scan_plan *pl = scan_plan_create(2, 8, 1, 5, 0.5);
    enum scan_pass pass;
    k = scan_plan_next(pl, partner, &pass);
    scan_plan_record(pl, 0, 1, pass, 1.0);
    int confirms = 0;
    for (int guard = 0; guard < 5 && scan_plan_next(pl, partner, &pass) == 1; guard++) {
        confirms += pass == SCAN_PASS_CONFIRM && partner[0] == 1;
        scan_plan_record(pl, 0, 1, pass, 1.5);
    }
    CHECK(k == 1 && confirms == SCAN_CONFIRMS && scan_plan_next(pl, partner, &pass) == 0,
          "2 nodes: one pair, below --min-bus-gbps measured again %d times (%d), then done",
          SCAN_CONFIRMS, confirms);
    int np;
    const struct scan_pair *p2 = scan_plan_pairs(pl, &np);
    scan_pairs_verdict(2, p2, np, v);
    CHECK(v[0].finding == SCAN_UNDECIDED && v[1].state == HEALTH_FAIL && np == 1 &&
              p2[0].gbps == 1.5 && p2[0].confirms == SCAN_CONFIRMS && p2[0].pass == SCAN_PASS_ALL,
          "2 nodes below --min-bus-gbps: both FAIL, bad node or link undecided; the pair's best "
          "of its measurements kept, and the pass that found it");
    scan_plan_destroy(pl);

    /* a pair slow once (a moment of noise on a shared host): measured again,
     * it passes, and nothing is named */
    pl = scan_plan_create(3, 8, 1, 0, 0.1);
    int measured[3][3] = {{0}}, guard = 0;
    while (guard++ < 12 && (k = scan_plan_next(pl, partner, &pass)) > 0)
        for (int a = 0; a < 3; a++)
            if (partner[a] > a) {
                int b = partner[a];
                double g = a == 1 && b == 2 && measured[1][2] == 0 ? 0.03 : 4.6;
                measured[a][b]++;
                scan_plan_record(pl, a, b, pass, g);
            }
    p2 = scan_plan_pairs(pl, &np);
    scan_pairs_verdict(3, p2, np, v);
    CHECK(np == 3 && measured[1][2] == 2 && measured[0][1] == 1 && v[1].state == HEALTH_PASS &&
              v[2].state == HEALTH_PASS,
          "3 nodes, one pair 150x slow once: measured again (%d times in all), it passes, no bad "
          "link named",
          measured[1][2]);
    scan_plan_destroy(pl);
    CHECK_STR(scan_pass_name(SCAN_PASS_RETEST), "retest", "pass names");
    CHECK_STR(scan_pass_name(SCAN_PASS_CONFIRM), "confirm", "pass names: confirm");
    return check_done();
}
