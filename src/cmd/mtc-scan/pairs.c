/* pairs: the collective pairs check. Rank 0 runs the plan (src/scan: all
 * pairs up to --all-pairs-max nodes, else a seeded random pairing and a
 * second, different one, then suspects retested against nodes that passed,
 * then each FAILing pair measured again after a pause, twice at most) and
 * broadcasts each round; the pairs of a round are disjoint and run at once —
 * a ping-pong of min(--max-bytes, 4 MiB) over MPI, the best of 3
 * windows of ~30 ms after a warm-up window, or with --nccl a
 * two-node NCCL all_reduce over both nodes' GPUs. The verdict tells a bad
 * node (slow with every partner) from a bad link (slow with one). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/mtc-scan/scan_mpi.h"
#include "health/health.h"
#include "scan/scan.h"

#define PAIR_WINDOW 0.03 /* seconds of one measurement window */
#define PAIR_WINDOWS 3
/* Seconds every rank sleeps before a confirm round: a FAILing pair is
 * measured again after the moment that slowed it (another job's burst, two
 * ranks placed on a core a busy process holds) has had time to pass, and the
 * sleep lets the kernel place the ranks afresh when they wake. */
#define PAIR_CONFIRM_PAUSE_S 1

/* One message each way, waited for as a measurement (scan_wait_measured). */
static void pp_send(char *buf, size_t bytes, int peer, int tag)
{
    MPI_Request rq;
    MPI_Isend(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &rq);
    scan_wait_measured(&rq, 1);
}

static void pp_recv(char *buf, size_t bytes, int peer, int tag)
{
    MPI_Request rq;
    MPI_Irecv(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, &rq);
    scan_wait_measured(&rq, 1);
}

/* One window: exchanges of bytes with peer until PAIR_WINDOW has passed on
 * the lower rank (the lead), which says in each message's first byte
 * whether another exchange follows. Returns the lead's GB/s (0 elsewhere). */
static double window(int peer, char *buf, size_t bytes)
{
    int lead = scan_rank < peer, count = 0;
    double t0 = MPI_Wtime(), t = 0;
    if (lead) {
        do {
            buf[0] = (char)(MPI_Wtime() - t0 < PAIR_WINDOW);
            pp_send(buf, bytes, peer, 1);
            pp_recv(buf, bytes, peer, 2);
            count++;
        } while (buf[0]);
        t = MPI_Wtime() - t0;
    } else {
        do {
            pp_recv(buf, bytes, peer, 1);
            pp_send(buf, bytes, peer, 2);
        } while (buf[0]);
    }
    return lead && t > 0 ? 2.0 * (double)bytes * count / t / 1e9 : 0;
}

/* GB/s of a ping-pong with peer (on the lower rank; 0 on the other): the
 * best of PAIR_WINDOWS windows of ~PAIR_WINDOW each — long enough to span
 * several CPU-quota periods or a shaped link's bursts, so a node slow part of
 * the time shows its sustained rate, while the best window forgives a
 * healthy pair a moment of noise. A warm-up window first. */
static double pingpong(int peer, char *buf, size_t bytes)
{
    double best = 0;
    window(peer, buf, bytes);
    for (int k = 0; k < PAIR_WINDOWS; k++) {
        double g = window(peer, buf, bytes);
        best = g > best ? g : best;
    }
    return best;
}

/* This rank's measurement in a round (0 when idle or not the pair's lead). */
static double measure(int peer, char *buf, size_t bytes, struct scan_nccl *nc, char *err,
                      size_t len)
{
    if (nc) { /* every rank splits; the pair gets its own communicator */
        MPI_Comm pc;
        int wrong = 0;
        double g = 0;
        MPI_Comm_split(MPI_COMM_WORLD,
                       peer >= 0 ? (scan_rank < peer ? scan_rank : peer) : MPI_UNDEFINED, scan_rank,
                       &pc);
        if (pc == MPI_COMM_NULL)
            return 0;
        g = scan_nccl_busbw(nc, pc, 0, bytes, 5, &wrong, err, len);
        if (wrong && g >= 0)
            snprintf(err, len, "wrong all_reduce result");
        scan_nccl_unbind(nc);
        MPI_Comm_free(&pc);
        return scan_rank < peer && g > 0 && !wrong ? g : 0;
    }
    return peer < 0 ? 0 : pingpong(peer, buf, bytes);
}

static json_t *report_json(const struct scan_opts *o, const struct scan_pair *p, int np,
                           const struct scan_node_verdict *v, int rounds, int all, int state,
                           size_t bytes, struct scan_nccl *nc, const char *nccl_why)
{
    json_t *pairs = json_array(), *nodes = json_array(), *bad_nodes = json_array(),
           *bad_links = json_array();
    char reason[300];
    for (int k = 0; k < np; k++) {
        const char *a = scan_names[p[k].a], *b = scan_names[p[k].b];
        json_t *j =
            json_pack("{s:[s,s], s:s, s:s, s:o, s:o}", "nodes", a, b, "pass",
                      scan_pass_name(p[k].pass), "state", scan_state_name(p[k].state), "busGBps",
                      scan_num(p[k].gbps), "thresholdGBps", scan_num(p[k].threshold));
        if (p[k].median > 0)
            json_object_set_new(j, "median", scan_num(p[k].median));
        if (p[k].confirms > 0) /* FAILing, measured again: busGBps is its best */
            json_object_set_new(j, "confirms", json_integer(p[k].confirms));
        if (p[k].state == HEALTH_FAIL) {
            const struct scan_node_verdict *va = &v[p[k].a], *vb = &v[p[k].b];
            int link = va->finding != SCAN_BAD_NODE && vb->finding != SCAN_BAD_NODE;
            snprintf(reason, sizeof(reason), "%.3f GB/s below the threshold %.3f GB/s: %s%s",
                     p[k].gbps, p[k].threshold,
                     !link                          ? "bad node "
                     : va->finding == SCAN_BAD_LINK ? "bad link"
                                                    : "bad node or bad link undecided",
                     !link ? (va->finding == SCAN_BAD_NODE ? a : b) : "");
            json_object_set_new(j, "reason", json_string(reason));
            if (link && va->finding == SCAN_BAD_LINK)
                json_array_append_new(bad_links, json_pack("[s,s]", a, b));
        }
        json_array_append_new(pairs, j);
    }
    for (int i = 0; i < scan_size; i++) {
        scan_verdict_reason(&v[i], v[i].peer >= 0 ? scan_names[v[i].peer] : "", reason,
                            sizeof(reason));
        json_t *j = scan_node(scan_names[i], v[i].state, reason);
        json_object_set_new(j, "pairs", json_integer(v[i].pairs));
        json_object_set_new(j, "failedPairs", json_integer(v[i].failed));
        json_array_append_new(nodes, j);
        if (v[i].finding == SCAN_BAD_NODE)
            json_array_append_new(bad_nodes, json_string(scan_names[i]));
    }
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:I, s:i, s:I, s:o, s:o, s:s, s:i, s:I}", "check", "collective.pairs",
        "state", scan_state_name(state), "pairing", all ? "all" : "random", "seed",
        (json_int_t)o->seed, "allPairsMax", o->all_pairs_max, "bytes", (json_int_t)bytes,
        "failFraction", scan_num(o->fail_fraction), "minBusGBps", scan_num(o->min_bus_gbps),
        "transport", nc ? "nccl" : "mpi", "rounds", rounds, "ranks", (json_int_t)scan_size);
    json_object_set_new(r, "pairs", pairs);
    json_object_set_new(r, "badNodes", bad_nodes);
    json_object_set_new(r, "badLinks", bad_links);
    json_object_set_new(r, "nodes", nodes);
    scan_nccl_report(o, r, nc, nccl_why);
    return r;
}

int scan_pairs(const struct scan_opts *o, json_t **report)
{
    int size = scan_size, failed = 0, rounds = 0;
    char nccl_why[200] = "", err[200] = "";
    struct scan_nccl *nc = scan_nccl_for(o, nccl_why, sizeof(nccl_why));
    size_t bytes = nc ? o->max_bytes : o->max_bytes < (4u << 20) ? o->max_bytes : (4u << 20);
    char *buf = nc ? NULL : calloc(bytes, 1);
    int *msg = calloc((size_t)size + 1, sizeof(int)); /* [pass or -1 (done), partner...] */
    double *got = calloc((size_t)size, sizeof(double));
    struct scan_plan *pl = scan_rank == 0 ? scan_plan_create(size, o->all_pairs_max, o->seed,
                                                             o->min_bus_gbps, o->fail_fraction)
                                          : NULL;
    for (;;) {
        if (scan_rank == 0) {
            enum scan_pass pass;
            int k = scan_plan_next(pl, msg + 1, &pass);
            msg[0] = k > 0 ? (int)pass : -1;
        }
        MPI_Request rq;
        MPI_Ibcast(msg, size + 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
        scan_wait_idle(&rq, 1);
        if (msg[0] < 0)
            break;
        if (msg[0] == SCAN_PASS_CONFIRM)
            sleep(PAIR_CONFIRM_PAUSE_S);
        rounds++;
        double g = measure(msg[1 + scan_rank], buf, bytes, nc, err, sizeof(err));
        MPI_Igather(&g, 1, MPI_DOUBLE, got, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq);
        scan_wait_idle(&rq, 1);
        if (scan_rank == 0)
            for (int a = 0; a < size; a++)
                if (msg[1 + a] > a)
                    scan_plan_record(pl, a, msg[1 + a], (enum scan_pass)msg[0], got[a]);
    }
    /* a NCCL error seen by any rank (the first, by rank) reaches the report */
    char(*errs)[200] = scan_rank == 0 ? calloc((size_t)size, sizeof(*errs)) : NULL;
    MPI_Gather(err, sizeof(err), MPI_CHAR, errs, sizeof(err), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (scan_rank == 0) {
        int np;
        const struct scan_pair *p = scan_plan_pairs(pl, &np);
        struct scan_node_verdict *v = calloc((size_t)size, sizeof(*v));
        scan_pairs_verdict(size, p, np, v);
        for (int k = 0; k < np; k++)
            failed |= p[k].state == HEALTH_FAIL;
        int all = size <= o->all_pairs_max;
        *report = report_json(o, p, np, v, rounds, all, failed ? HEALTH_FAIL : HEALTH_PASS, bytes,
                              nc, nccl_why);
        for (int r = 0; r < size; r++)
            if (errs[r][0]) {
                char line[280];
                snprintf(line, sizeof(line), "%s: %s", scan_names[r], errs[r]);
                json_object_set_new(*report, "ncclError", json_string(line));
                break;
            }
        free(v);
    }
    free(errs);
    scan_plan_destroy(pl);
    scan_nccl_close(nc);
    free(msg);
    free(got);
    free(buf);
    return failed;
}
