/* Unit tests for the straggler check (src/control/straggler.c): the median,
 * the fail/warn thresholds against it, and a report judged against the
 * latest stored values of the other nodes of the same node pool. */
#include "check.h"
#include "control/reports.h"
#include "control/control.h"
#include "health/health.h"

#include <stdlib.h>
#include <unistd.h>

static void put(struct store *st, const char *node, double gflops)
{
    struct health_result r = {.check = "speed.compute", .status = HEALTH_PASS};
    r.value = gflops;
    struct store_health h = {.results = health_results_json(&r, 1)};
    snprintf(h.status, sizeof(h.status), "PASS");
    snprintf(h.severity, sizeof(h.severity), "NONE");
    store_health_put(st, "c1", node, &h);
    json_decref(h.results);
}

int main(void)
{
    double odd[] = {5, 1, 3}, even[] = {4, 1, 3, 2}, one[] = {7};
    CHECK(health_median(odd, 3) == 3, "median of 3 values");
    CHECK(health_median(even, 4) == 2.5, "median of 4 values: mean of the middle two");
    CHECK(health_median(one, 1) == 7, "median of one value");
    CHECK(health_median(NULL, 0) == 0, "median of none is 0");

    double m = 0, f = 0;
    double p1[] = {60, 70, 80};
    CHECK(health_speed_judge(12, p1, 3, 0.8, 0.5, &m, &f) == HEALTH_FAIL, "0.17 of median FAILs");
    CHECK(m == 70 && f > 0.17 && f < 0.18, "median %.1f, fraction %.3f", m, f);
    double p2[] = {60, 70, 80};
    CHECK(health_speed_judge(50, p2, 3, 0.8, 0.5, &m, &f) == HEALTH_WARN, "0.71 of median WARNs");
    double p3[] = {60, 70, 80};
    CHECK(health_speed_judge(65, p3, 3, 0.8, 0.5, &m, &f) == HEALTH_PASS, "0.93 of median passes");
    double p4[] = {70, 80};
    CHECK(health_speed_judge(35, p4, 2, 0.8, 0.5, &m, &f) == HEALTH_FAIL && m == 75,
          "two peers suffice (median 75)");
    double p5[] = {70};
    CHECK(health_speed_judge(1, p5, 1, 0.8, 0.5, &m, &f) == -1, "one peer: no verdict");
    double p6[] = {0, 0};
    CHECK(health_speed_judge(1, p6, 2, 0.8, 0.5, &m, &f) == -1, "zero median: no verdict");

    /* a report against the stored rows: n1..n3 in pool a3m, login in another */
    char dir[] = "/tmp/mtc-straggler-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(path, sizeof(path), "%s/mtc.db", dir);
    mtc_error_t err = {""};
    struct store *st = store_open(path, &err);
    CHECK(st != NULL, "store opens (%s)", err.text);
    struct store_cluster cl = {.id = "c1"};
    cl.spec = json_pack("{s:{s:f, s:f}}", "healthPolicy", "speedWarnFraction", 0.8,
                        "speedFailFraction", 0.5);
    cl.nodes = json_pack("[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]", "instanceName", "n1",
                         "nodePoolId", "a3m", "instanceName", "n2", "nodePoolId", "a3m",
                         "instanceName", "n3", "nodePoolId", "a3m", "instanceName", "login0",
                         "nodePoolId", "login");
    struct health_result r = {.check = "speed.compute", .status = HEALTH_PASS, .value = 10};
    put(st, "n2", 60);
    CHECK(control_speed_compare(st, &cl, "n1", &r, 1) == 0 && r.status == HEALTH_PASS,
          "one other node reported: no verdict");
    put(st, "login0", 1); /* another pool: not a peer */
    CHECK(control_speed_compare(st, &cl, "n1", &r, 1) == 0 && r.status == HEALTH_PASS,
          "a node of another pool is no peer");
    put(st, "n3", 80);
    put(st, "n1", 75); /* n1's own earlier value is not its peer */
    CHECK(control_speed_compare(st, &cl, "n1", &r, 1) == 1, "two peers: rejudged");
    CHECK(r.status == HEALTH_WARN && r.severity == HEALTH_SEV_NONE,
          "one slow probe after a normal one only WARNs");
    put(st, "n1", 10); /* the slow probe is now n1's stored value */
    struct health_result again = {.check = "speed.compute", .status = HEALTH_PASS, .value = 10};
    CHECK(control_speed_compare(st, &cl, "n1", &again, 1) == 1 && again.status == HEALTH_WARN,
          "the same (cached) measurement reported again is no second strike");
    struct health_result r2 = {.check = "speed.compute", .status = HEALTH_PASS, .value = 12};
    CHECK(control_speed_compare(st, &cl, "n1", &r2, 1) == 1, "second slow probe: rejudged");
    CHECK(r2.status == HEALTH_FAIL && r2.severity == HEALTH_SEV_REBOOT,
          "two slow probes in a row: FAIL, severity REBOOT");
    CHECK_STR(r2.reason, "12.0 GFLOP/s is 0.17 of the pool median 70.0 (fail below 0.50, 2 nodes)",
              "reason names the pool median");
    struct health_result ok = {.check = "speed.compute", .status = HEALTH_PASS, .value = 66};
    CHECK(control_speed_compare(st, &cl, "n1", &ok, 1) == 0 && ok.status == HEALTH_PASS,
          "a node near the median passes");
    struct health_result w = {.check = "speed.membw", .status = HEALTH_PASS, .value = 1};
    CHECK(control_speed_compare(st, &cl, "n1", &w, 1) == 0, "no peer values for membw: none");
    /* an agent's report passes the cluster's head only: spec and nodes are read
     * from the store when a speed probe is to be judged */
    struct store_op op = {.id = "op-1", .cluster_id = "c1", .kind = "CREATE", .request = cl.spec};
    CHECK(store_cluster_create(st, &cl, &op, &err) == 0 &&
              store_cluster_set_nodes(st, "c1", cl.nodes) == 0,
          "cluster c1 stored with its nodes");
    struct store_cluster head = {.id = "c1"};
    struct health_result r3 = {.check = "speed.compute", .status = HEALTH_PASS, .value = 11};
    CHECK(control_speed_compare(st, &head, "n1", &r3, 1) == 1 && r3.status == HEALTH_FAIL,
          "a head only: judged against the stored spec and pool");
    json_decref(cl.spec);
    json_decref(cl.nodes);
    store_close(st);
    unlink(path);
    rmdir(dir);
    return check_done();
}
