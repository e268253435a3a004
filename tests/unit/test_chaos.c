/* test_chaos: what `mtc chaos` and :injectFault agree on without a cluster —
 * the fault names (one table), the request body's checks (an unknown fault,
 * a node that is no name, seed and index bounds, unknown fields, proto3's
 * quoted numbers, validateOnly), and the seeded picks: the same seed picks the same nodes
 * and ranks everywhere, other seeds others, every node in reach. */
#include "check.h"
#include "jobs/jobs.h"

#include <string.h>

/* body normalized: NULL and the error into msg when refused. */
static json_t *norm(const char *body, char *msg, size_t len)
{
    json_t *in = json_loads(body, 0, NULL);
    mtc_error_t err = {""};
    json_t *out = in ? schema_normalize(in, &jobs_fault_request_schema, "", &err) : NULL;
    snprintf(msg, len, "%s", err.text);
    json_decref(in);
    return out;
}

static void test_names(void)
{
    char names[80];
    CHECK_STR(schema_enum_list(&jobs_fault_enum, names, sizeof(names)),
              "node, hang, kill-rank, slurmd", "the four faults, the CLI's spelling");
    CHECK(schema_enum_parse(&jobs_fault_enum, "kill-rank", 0) == JOBS_FAULT_KILL_RANK,
          "kill-rank names JOBS_FAULT_KILL_RANK");
    CHECK(schema_enum_parse(&jobs_fault_enum, "kill_rank", 0) < 0 &&
              schema_enum_parse(&jobs_fault_enum, "NODE", 0) < 0,
          "other spellings are not faults");
}

static void test_body(void)
{
    char msg[256];
    json_t *o = norm("{\"fault\": \"node\"}", msg, sizeof(msg));
    CHECK(o && json_integer_value(json_object_get(o, "index")) == 1 &&
              !json_object_get(o, "seed") && !json_object_get(o, "node"),
          "fault alone: index 1, no seed (the server picks one), no node");
    json_decref(o);
    o = norm("{\"fault\": \"hang\", \"node\": \"c-a3m-1\", \"seed\": \"42\", \"index\": 3}", msg,
             sizeof(msg));
    CHECK(o && json_integer_value(json_object_get(o, "seed")) == 42 &&
              json_integer_value(json_object_get(o, "index")) == 3,
          "node, a quoted seed (proto3) and index taken");
    json_decref(o);
    o = norm("{\"fault\": \"slurmd\", \"validate_only\": true}", msg, sizeof(msg));
    CHECK(o && json_is_true(json_object_get(o, "validateOnly")),
          "validate_only (snake_case) is validateOnly: check, inject nothing");
    json_decref(o);
    static const struct {
        const char *body, *says;
    } bad[] = {
        {"{}", "fault"},
        {"{\"fault\": \"disk\"}", "node, hang, kill-rank, slurmd"},
        {"{\"fault\": \"hang\", \"node\": \"../etc\"}", "not a node name"},
        {"{\"fault\": \"hang\", \"node\": \"a;b\"}", "not a node name"},
        {"{\"fault\": \"hang\", \"node\": \"\"}", "node"},
        {"{\"fault\": \"hang\", \"seed\": -1}", "seed"},
        {"{\"fault\": \"hang\", \"seed\": 2147483648}", "seed"},
        {"{\"fault\": \"hang\", \"index\": 0}", "index"},
        {"{\"fault\": \"hang\", \"index\": 1.5}", "index"},
        {"{\"fault\": \"hang\", \"pid\": 1}", "pid"},
        {"{\"fault\": \"hang\", \"validateOnly\": \"yes\"}", "validateOnly"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o = norm(bad[i].body, msg, sizeof(msg));
        CHECK(!o && strstr(msg, bad[i].says) && !strchr(msg, '\n'), "%s refused, naming %s: %s",
              bad[i].body, bad[i].says, msg);
        json_decref(o);
    }
}

static void test_picks(void)
{
    int same = 1, both[2] = {0, 0}, agree = 0, like7 = 0;
    for (int k = 1; k <= 40; k++) {
        same &= jobs_fault_pick(7, k, 0) == jobs_fault_pick(7, k, 0);
        both[jobs_fault_pick(7, k, 0) % 2]++;
        agree += jobs_fault_pick(7, k, 0) % 2 == jobs_fault_pick(7, k, 1) % 2;
    }
    /* three faults on two nodes: 8 possible runs, so about 1 seed in 8 picks seed 7's */
    for (int seed = 100; seed < 300; seed++) {
        int eq = 1;
        for (int k = 1; k <= 3; k++)
            eq &= jobs_fault_pick(seed, k, 0) % 2 == jobs_fault_pick(7, k, 0) % 2;
        like7 += eq;
    }
    CHECK(same, "the same seed and index: the same pick");
    CHECK(both[0] >= 8 && both[1] >= 8, "both nodes of two in reach (%d, %d of 40)", both[0],
          both[1]);
    CHECK(like7 >= 10 && like7 <= 45, "other seeds, other runs: %d of 200 seeds pick seed 7's 3 nodes",
          like7);
    CHECK(agree >= 10 && agree <= 30, "the node's pick and the rank's are independent (%d of 40 agree)",
          agree);
    /* pinned: a seed given today picks the same tomorrow, on any machine */
    CHECK(jobs_fault_pick(7, 1, 0) % 2 == 1 && jobs_fault_pick(7, 2, 0) % 2 == 0 &&
              jobs_fault_pick(7, 3, 0) % 2 == 0,
          "seed 7 on 2 nodes: node 1, then 0, 0 (as chaos.sh saw)");
}

int main(void)
{
    test_names();
    test_body();
    test_picks();
    return check_done();
}
