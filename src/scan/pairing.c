/* pairing: the collective pairs check's plan and verdict (scan.h) — all-pairs
 * rounds, seeded random pairings, retests of suspects, bad node vs bad link. */
#include "scan/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health/health.h"

static const char *const pass_names[] = {"all", "first", "second", "retest", "confirm"};

const char *scan_pass_name(enum scan_pass p)
{
    return (unsigned)p < sizeof(pass_names) / sizeof(pass_names[0]) ? pass_names[p] : "unknown";
}

int scan_all_pairs_rounds(int n)
{
    return n < 2 ? 0 : n % 2 ? n : n - 1;
}

/* Circle method over m = n rounded up to even: position m-1 is fixed, the
 * others rotate; a node paired with the phantom (index n when n is odd) sits
 * the round out. */
int scan_all_pairs_round(int n, int r, int *partner)
{
    int m = n + n % 2, pairs = 0;
    for (int i = 0; i < n; i++)
        partner[i] = -1;
    if (n < 2)
        return 0;
    for (int k = 0; k < m / 2; k++) {
        int x = k == 0 ? m - 1 : (r + k) % (m - 1);
        int y = (r - k + (m - 1)) % (m - 1);
        if (x >= n || y >= n)
            continue;
        partner[x] = y;
        partner[y] = x;
        pairs++;
    }
    return pairs;
}

/* splitmix64: a small, well-mixed generator; the pairing only needs to be
 * reproducible from the seed. */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void shuffle_pairing(int n, uint64_t *s, int *order, int *partner)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next_rand(s) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < n; i++)
        partner[i] = -1;
    for (int i = 0; i + 1 < n; i += 2) {
        partner[order[i]] = order[i + 1];
        partner[order[i + 1]] = order[i];
    }
}

/* How far a pairing is from differing from prev: repeated pairs, plus one
 * when the same node sits out. */
static int overlap(int n, const int *prev, const int *partner)
{
    int same = 0;
    for (int i = 0; i < n; i++)
        if (partner[i] >= 0 ? partner[i] == prev[i] && i < partner[i] : prev[i] < 0)
            same++;
    return same;
}

int scan_random_pairing(int n, uint64_t seed, const int *prev, int *partner)
{
    if (n < 2) {
        for (int i = 0; i < n; i++)
            partner[i] = -1;
        return 0;
    }
    int *order = malloc(sizeof(int) * (size_t)n), *cand = malloc(sizeof(int) * (size_t)n);
    uint64_t s = seed;
    shuffle_pairing(n, &s, order, partner);
    if (prev) { /* the least overlapping of a few hundred draws; 0 ends it */
        int best = overlap(n, prev, partner);
        for (int t = 0; t < 512 && best > 0; t++) {
            shuffle_pairing(n, &s, order, cand);
            int o = overlap(n, prev, cand);
            if (o < best) {
                best = o;
                memcpy(partner, cand, sizeof(int) * (size_t)n);
            }
        }
    }
    free(order);
    free(cand);
    return n / 2;
}

void scan_pairs_judge(struct scan_pair *p, int np, double min_gbps, double fail_fraction)
{
    double *peers = malloc(sizeof(double) * (size_t)(np > 0 ? np : 1));
    for (int k = 0; k < np; k++) {
        p[k].median = 0;
        if (min_gbps > 0) {
            p[k].threshold = min_gbps;
            p[k].state = p[k].gbps < min_gbps ? HEALTH_FAIL : HEALTH_PASS;
            continue;
        }
        int n = 0;
        for (int j = 0; j < np; j++)
            if (j != k && p[j].gbps > 0)
                peers[n++] = p[j].gbps;
        double med = 0, frac = 0;
        int s = health_speed_judge(p[k].gbps, peers, n, fail_fraction + (1 - fail_fraction) / 2,
                                    fail_fraction, &med, &frac);
        p[k].state = s < 0 ? HEALTH_PASS : s;
        p[k].median = med;
        p[k].threshold = med * fail_fraction;
    }
    free(peers);
}

static int met(const struct scan_pair *p, int np, int x, int y)
{
    for (int k = 0; k < np; k++)
        if ((p[k].a == x && p[k].b == y) || (p[k].a == y && p[k].b == x))
            return 1;
    return 0;
}

/* suspect[i]: in a FAILing pair; retested[i]: has a retest pair. */
static void classify(int n, const struct scan_pair *p, int np, char *suspect, char *retested)
{
    memset(suspect, 0, (size_t)n);
    memset(retested, 0, (size_t)n);
    for (int k = 0; k < np; k++) {
        if (p[k].state == HEALTH_FAIL)
            suspect[p[k].a] = suspect[p[k].b] = 1;
        if (p[k].pass == SCAN_PASS_RETEST)
            retested[p[k].a] = retested[p[k].b] = 1;
    }
}

int scan_retest_round(int n, const struct scan_pair *p, int np, int *partner)
{
    char *suspect = calloc((size_t)n + 1, 1), *retested = calloc((size_t)n + 1, 1);
    int pairs = 0;
    classify(n, p, np, suspect, retested);
    for (int i = 0; i < n; i++)
        partner[i] = -1;
    for (int s = 0; s < n; s++) {
        if (!suspect[s] || retested[s])
            continue;
        for (int g = 0; g < n; g++)
            if (g != s && !suspect[g] && partner[g] < 0 && !met(p, np, s, g)) {
                partner[s] = g;
                partner[g] = s;
                pairs++;
                break;
            }
    }
    free(suspect);
    free(retested);
    return pairs;
}

void scan_pairs_verdict(int n, const struct scan_pair *p, int np, struct scan_node_verdict *v)
{
    for (int i = 0; i < n; i++)
        v[i] = (struct scan_node_verdict){.state = HEALTH_PASS, .finding = SCAN_OK, .peer = -1};
    int *slow = calloc((size_t)n + 1, sizeof(int)); /* pairs FAILing or WARNing */
    for (int k = 0; k < np; k++) {
        v[p[k].a].pairs++;
        v[p[k].b].pairs++;
        if (p[k].state == HEALTH_FAIL) {
            v[p[k].a].failed++;
            v[p[k].b].failed++;
        }
        if (p[k].state == HEALTH_FAIL || p[k].state == HEALTH_WARN) {
            slow[p[k].a]++;
            slow[p[k].b]++;
        }
    }
    /* slow with every partner: FAILing with all, or with two or more and at
     * best WARNing with the rest (one FAIL and one WARN is not enough: a
     * noisy node retested against a bad one would be named) */
    for (int i = 0; i < n; i++)
        if (v[i].pairs >= 2 && slow[i] == v[i].pairs &&
            (v[i].failed == v[i].pairs || v[i].failed >= 2)) {
            v[i].finding = SCAN_BAD_NODE;
            v[i].state = HEALTH_FAIL;
        }
    /* FAILing pairs no bad node explains: links (or, alone, undecided); the
     * first such pair names the node's peer */
    for (int k = 0; k < np; k++) {
        if (p[k].state != HEALTH_FAIL || v[p[k].a].finding == SCAN_BAD_NODE ||
            v[p[k].b].finding == SCAN_BAD_NODE)
            continue;
        for (int side = 0; side < 2; side++) {
            int me = side ? p[k].b : p[k].a, other = side ? p[k].a : p[k].b;
            if (v[me].state == HEALTH_FAIL)
                continue;
            v[me].state = HEALTH_FAIL;
            v[me].finding = v[me].pairs >= 2 ? SCAN_BAD_LINK : SCAN_UNDECIDED;
            v[me].peer = other;
        }
    }
    free(slow);
}

void scan_verdict_reason(const struct scan_node_verdict *v, const char *peer_name, char *buf,
                         size_t len)
{
    switch (v->finding) {
    case SCAN_BAD_NODE:
        snprintf(buf, len, "bad node: slow with every partner (%d of %d pairs)", v->failed,
                 v->pairs);
        break;
    case SCAN_BAD_LINK:
        snprintf(buf, len, "bad link with %s: slow only with some partners (%d of %d pairs)",
                 peer_name, v->failed, v->pairs);
        break;
    case SCAN_UNDECIDED:
        snprintf(buf, len,
                 "slow pair with %s: no passing node to retest against, bad node or bad link "
                 "undecided",
                 peer_name);
        break;
    default:
        snprintf(buf, len, "%s", "");
    }
}

enum plan_stage { STAGE_ALL, STAGE_FIRST, STAGE_SECOND, STAGE_RETEST, STAGE_CONFIRM, STAGE_DONE };

struct scan_plan {
    int n;
    uint64_t seed;
    double min_gbps, fail_fraction;
    enum plan_stage stage;
    int round;
    int *prev; /* the first random pairing */
    struct scan_pair *p;
    int np, cap;
};

struct scan_plan *scan_plan_create(int n, int all_pairs_max, uint64_t seed, double min_gbps,
                                   double fail_fraction)
{
    struct scan_plan *pl = calloc(1, sizeof(*pl));
    if (!pl)
        return NULL;
    pl->n = n;
    pl->seed = seed;
    pl->min_gbps = min_gbps;
    pl->fail_fraction = fail_fraction;
    pl->stage = n < 2 ? STAGE_DONE : n <= all_pairs_max ? STAGE_ALL : STAGE_FIRST;
    pl->prev = calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    if (!pl->prev) {
        free(pl);
        return NULL;
    }
    return pl;
}

void scan_plan_destroy(struct scan_plan *pl)
{
    if (!pl)
        return;
    free(pl->prev);
    free(pl->p);
    free(pl);
}

static struct scan_pair *find_pair(struct scan_plan *pl, int a, int b)
{
    for (int k = pl->np - 1; k >= 0; k--)
        if ((pl->p[k].a == a && pl->p[k].b == b) || (pl->p[k].a == b && pl->p[k].b == a))
            return &pl->p[k];
    return NULL;
}

/* A confirm round: FAILing pairs measured again fewer than SCAN_CONFIRMS
 * times, disjoint (a node in one pair per round). */
static int confirm_round(const struct scan_plan *pl, int *partner)
{
    int pairs = 0;
    for (int i = 0; i < pl->n; i++)
        partner[i] = -1;
    for (int k = 0; k < pl->np; k++) {
        const struct scan_pair *q = &pl->p[k];
        if (q->state == HEALTH_FAIL && q->confirms < SCAN_CONFIRMS && partner[q->a] < 0 &&
            partner[q->b] < 0) {
            partner[q->a] = q->b;
            partner[q->b] = q->a;
            pairs++;
        }
    }
    return pairs;
}

int scan_plan_next(struct scan_plan *pl, int *partner, enum scan_pass *pass)
{
    int pairs = 0;
    switch (pl->stage) {
    case STAGE_ALL:
        if (pl->round < scan_all_pairs_rounds(pl->n)) {
            *pass = SCAN_PASS_ALL;
            return scan_all_pairs_round(pl->n, pl->round++, partner);
        }
        pl->stage = STAGE_RETEST;
        return scan_plan_next(pl, partner, pass);
    case STAGE_FIRST:
        *pass = SCAN_PASS_FIRST;
        pairs = scan_random_pairing(pl->n, pl->seed, NULL, partner);
        memcpy(pl->prev, partner, sizeof(int) * (size_t)pl->n);
        pl->stage = STAGE_SECOND;
        return pairs;
    case STAGE_SECOND:
        *pass = SCAN_PASS_SECOND;
        pl->stage = STAGE_RETEST;
        return scan_random_pairing(pl->n, pl->seed ^ 0x5ca9a55ULL, pl->prev, partner);
    case STAGE_RETEST:
        scan_pairs_judge(pl->p, pl->np, pl->min_gbps, pl->fail_fraction);
        *pass = SCAN_PASS_RETEST;
        pairs = scan_retest_round(pl->n, pl->p, pl->np, partner);
        if (pairs > 0)
            return pairs;
        pl->stage = STAGE_CONFIRM;
        return scan_plan_next(pl, partner, pass);
    case STAGE_CONFIRM:
        scan_pairs_judge(pl->p, pl->np, pl->min_gbps, pl->fail_fraction);
        *pass = SCAN_PASS_CONFIRM;
        if ((pairs = confirm_round(pl, partner)) > 0)
            return pairs;
        pl->stage = STAGE_DONE;
        return 0;
    case STAGE_DONE:
        break;
    }
    return 0;
}

void scan_plan_record(struct scan_plan *pl, int a, int b, enum scan_pass pass, double gbps)
{
    if (pass == SCAN_PASS_CONFIRM) {
        struct scan_pair *q = find_pair(pl, a, b);
        if (q) {
            q->confirms++;
            q->gbps = gbps > q->gbps ? gbps : q->gbps;
        }
        return;
    }
    if (pl->np == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 16;
        struct scan_pair *p = realloc(pl->p, sizeof(*p) * (size_t)cap);
        if (!p)
            return; /* the pair goes unrecorded; the verdict still stands on the rest */
        pl->p = p;
        pl->cap = cap;
    }
    pl->p[pl->np++] = (struct scan_pair){
        .a = a < b ? a : b, .b = a < b ? b : a, .pass = pass, .gbps = gbps, .state = HEALTH_PASS};
}

const struct scan_pair *scan_plan_pairs(const struct scan_plan *pl, int *np)
{
    *np = pl->np;
    return pl->p;
}
