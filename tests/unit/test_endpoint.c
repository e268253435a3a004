/* Unit tests for endpoints: the request tables (an endpoint, a deployed
 * model's fields, bounds and rules), the traffic split's checks, the store's
 * endpoints, and routing — the split's shares exact (smooth weighted round
 * robin), the least-busy replica, retries skipping tried replicas, a failed
 * replica out of rotation, unknown and not-ready endpoints. */
#include "check.h"
#include "endpoint/endpoint.h"
#include "store/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *js(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!j)
        fprintf(stderr, "bad test JSON: %s\n", text);
    return j;
}

static void test_requests(void)
{
    mtc_error_t err = {""};
    json_t *in = js("{\"model\":\"tiny@prod\",\"cluster\":\"c1\",\"min_replica_count\":2}");
    json_t *d = endpoint_deployed_parse(in, &err);
    CHECK(d != NULL, "a deployed model: %s", err.text);
    CHECK(d && json_integer_value(json_object_get(d, "maxReplicaCount")) == 2,
          "maxReplicaCount defaults to minReplicaCount");
    json_t *as = d ? json_object_get(d, "autoscaling") : NULL;
    CHECK(as && json_integer_value(json_object_get(as, "targetConcurrentRequests")) == 4 &&
              json_integer_value(json_object_get(as, "scaleDownDelaySeconds")) == 300,
          "autoscaling defaults: 4 requests per replica, 300 s");
    json_decref(in);
    json_decref(d);
    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"cluster\":\"c1\"}", "deployedModel.model: required field missing"},
        {"{\"model\":\"Bad Name\",\"cluster\":\"c1\"}", "deployedModel.model"},
        {"{\"model\":\"m\",\"cluster\":\"Bad_C\"}", "deployedModel.cluster: \"Bad_C\""},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"partition\":\"a b\"}", "deployedModel.partition"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"minReplicaCount\":0}", "minReplicaCount"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"maxReplicaCount\":33}", "maxReplicaCount"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"minReplicaCount\":3,\"maxReplicaCount\":2}",
         "maxReplicaCount (2) is below minReplicaCount (3)"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"autoscaling\":{\"targetConcurrentRequests\":0}}",
         "targetConcurrentRequests"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"id\":\"d1\"}", "deployedModel.id"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"artifact\":\"/etc\"}", "deployedModel.artifact"},
        {"{\"model\":\"m\",\"cluster\":\"c\",\"colour\":1}", "colour"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = js(bad[i].body);
        err.text[0] = '\0';
        d = endpoint_deployed_parse(in, &err);
        CHECK(!d && strstr(err.text, bad[i].msg) && !strchr(err.text, '\n'),
              "refused in one line: %s -> %s", bad[i].body, err.text);
        json_decref(d);
        json_decref(in);
    }
    CHECK(endpoint_deployed_parse(NULL, &err) == NULL && strstr(err.text, "deployedModel"),
          "no deployedModel: %s", err.text);
    json_t *spec = endpoint_spec_parse(NULL, &err);
    CHECK(spec && json_is_string(json_object_get(spec, "displayName")), "an empty create body");
    json_decref(spec);
    in = js("{\"trafficSplit\":{\"d1\":100}}");
    spec = endpoint_spec_parse(in, &err);
    CHECK(!spec && strstr(err.text, "trafficSplit"), "trafficSplit is not create's: %s", err.text);
    json_decref(in);
}

static void test_split(void)
{
    mtc_error_t err = {""};
    json_t *deps = js("[{\"id\":\"d1\"},{\"id\":\"d2\"}]");
    json_t *in = js("{\"d1\":80,\"0\":20}");
    json_t *s = endpoint_split_check(in, deps, "d2", &err);
    CHECK(s && json_integer_value(json_object_get(s, "d2")) == 20, "\"0\" names the new model");
    json_decref(s);
    json_decref(in);
    in = js("{\"d1\":100}");
    s = endpoint_split_check(in, deps, NULL, &err);
    CHECK(s && json_integer_value(json_object_get(s, "d2")) == 0 && json_object_size(s) == 2,
          "an absent deployed model gets 0");
    json_decref(s);
    json_decref(in);
    static const struct {
        const char *split, *msg;
    } bad[] = {
        {"{\"d1\":80,\"d2\":30}", "sum to 110, not 100"},
        {"{\"d1\":50}", "sum to 50, not 100"},
        {"{\"d1\":100,\"d3\":0}", "\"d3\" is not a model deployed"},
        {"{\"d1\":101,\"d2\":-1}", "integer percentage"},
        {"{\"d1\":50.5,\"d2\":49.5}", "integer percentage"},
        {"[1]", "must be an object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = js(bad[i].split);
        s = endpoint_split_check(in, deps, NULL, &err);
        CHECK(!s && strstr(err.text, bad[i].msg), "split %s refused: %s", bad[i].split, err.text);
        json_decref(s);
        json_decref(in);
    }
    json_decref(deps);
}

static void put_endpoint(struct store *st, const char *name, const char *spec, const char *status)
{
    struct store_endpoint e = {.spec = js(spec), .status = js(status)};
    snprintf(e.project, sizeof(e.project), "p");
    snprintf(e.location, sizeof(e.location), "l");
    snprintf(e.name, sizeof(e.name), "%s", name);
    CHECK(store_endpoint_create(st, &e) == 0, "store endpoint %s", name);
    CHECK(store_endpoint_create(st, &e) < 0 && errno == EEXIST, "twice: EEXIST");
    store_endpoint_release(&e);
}

static void test_routing(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/db", dir);
    mtc_error_t err = {""};
    struct store *st = store_open(path, &err);
    CHECK(st != NULL, "store: %s", err.text);
    put_endpoint(st, "e",
                 "{\"deployedModels\":[{\"id\":\"d1\"},{\"id\":\"d2\"}],"
                 "\"trafficSplit\":{\"d1\":80,\"d2\":20}}",
                 "{\"replicas\":["
                 "{\"id\":\"r1\",\"deployedModelId\":\"d1\",\"state\":\"READY\",\"address\":\"a:1\"},"
                 "{\"id\":\"r2\",\"deployedModelId\":\"d1\",\"state\":\"READY\",\"address\":\"a:2\"},"
                 "{\"id\":\"r3\",\"deployedModelId\":\"d2\",\"state\":\"READY\",\"address\":\"a:3\"},"
                 "{\"id\":\"r4\",\"deployedModelId\":\"d2\",\"state\":\"STARTING\"},"
                 "{\"id\":\"r5\",\"deployedModelId\":\"d1\",\"state\":\"DRAINING\",\"address\":\"a:5\"}]}");
    put_endpoint(st, "cold", "{\"deployedModels\":[{\"id\":\"d1\"}],\"trafficSplit\":{\"d1\":100}}",
                 "{\"replicas\":[{\"id\":\"r1\",\"deployedModelId\":\"d1\",\"state\":\"STARTING\"}]}");
    struct store_endpoint got;
    CHECK(store_endpoint_get(st, "p", "l", "e", &got) == 0 &&
              json_array_size(json_object_get(got.status, "replicas")) == 5,
          "get returns the status");
    store_endpoint_release(&got);
    int n = 0;
    struct store_endpoint *all = store_endpoint_list(st, "p", "l", "", 10, &n);
    CHECK(n == 2 && strcmp(all[0].name, "cold") == 0, "list by name (%d)", n);
    for (int i = 0; i < n; i++)
        store_endpoint_release(&all[i]);
    free(all);

    struct endpoint_config cfg = {.store = st, .home = dir, .serve = "/nonexistent"};
    struct endpoint_ctl *c = endpoint_ctl_create(&cfg, &err);
    CHECK(c != NULL, "controller");
    endpoint_ctl_load(c);
    struct endpoint_pick p;
    int d1 = 0, r1 = 0, wrong = 0;
    for (int i = 0; i < 500; i++) {
        if (endpoint_pick(c, "p", "l", "e", NULL, 0, &p, &err) < 0) {
            wrong++;
            continue;
        }
        d1 += strcmp(p.deployed, "d1") == 0;
        r1 += strcmp(p.replica, "r1") == 0;
        wrong += strcmp(p.replica, "r4") == 0 || strcmp(p.replica, "r5") == 0; /* not READY */
        endpoint_done(c, &p, 0);
    }
    CHECK(d1 == 400 && wrong == 0, "80/20 exactly over 500 requests (d1 %d), never a starting "
                                   "or draining replica", d1);
    CHECK(r1 == 200, "d1's two replicas share its requests (r1 %d of 400)", r1);
    /* the least busy replica: r1 busy, so the next d1 request goes to r2 */
    struct endpoint_pick held[4];
    int nh = 0;
    while (nh < 4 && endpoint_pick(c, "p", "l", "e", NULL, 0, &held[nh], &err) == 0 &&
           strcmp(held[nh].deployed, "d1") == 0)
        nh++;
    CHECK(nh >= 2 && strcmp(held[0].replica, held[1].replica) != 0,
          "concurrent requests spread over the replicas");
    for (int i = 0; i < nh; i++)
        endpoint_done(c, &held[i], 0);
    /* retries skip the tried replicas, then run out */
    char tried[3][16] = {"r1", "r2", "r3"};
    CHECK(endpoint_pick(c, "p", "l", "e", tried, 1, &p, &err) == 0 &&
              strcmp(p.replica, "r1") != 0,
          "a retry skips the replica tried (got %s)", p.replica);
    endpoint_done(c, &p, 0);
    CHECK(endpoint_pick(c, "p", "l", "e", tried, 3, &p, &err) < 0 && errno == EAGAIN,
          "every replica tried: EAGAIN (%s)", err.text);
    /* a failed replica leaves the rotation */
    struct endpoint_pick f;
    do {
        CHECK(endpoint_pick(c, "p", "l", "e", NULL, 0, &f, &err) == 0, "pick");
        endpoint_done(c, &f, strcmp(f.replica, "r3") == 0);
    } while (strcmp(f.replica, "r3") != 0);
    int r3 = 0;
    for (int i = 0; i < 50; i++) {
        if (endpoint_pick(c, "p", "l", "e", NULL, 0, &p, &err) == 0) {
            r3 += strcmp(p.replica, "r3") == 0;
            endpoint_done(c, &p, 0);
        }
    }
    CHECK(r3 == 0, "a replica that failed gets nothing until checked again; d2's share goes to d1");
    CHECK(endpoint_pick(c, "p", "l", "cold", NULL, 0, &p, &err) < 0 && errno == EAGAIN &&
              strstr(err.text, "no ready replica"),
          "no READY replica: EAGAIN (%s)", err.text);
    CHECK(endpoint_pick(c, "p", "l", "ghost", NULL, 0, &p, &err) < 0 && errno == ENOENT,
          "unknown endpoint: ENOENT");
    CHECK(endpoint_pick(c, "q", "l", "e", NULL, 0, &p, &err) < 0 && errno == ENOENT,
          "another project's: ENOENT");
    endpoint_ctl_destroy(c);
    CHECK(store_endpoint_delete(st, "p", "l", "e") == 0, "delete");
    CHECK(store_endpoint_delete(st, "p", "l", "e") < 0 && errno == ENOENT, "delete again: ENOENT");
    store_close(st);
}

int main(void)
{
    char dir[] = "/tmp/mtc-endpoint-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    test_requests();
    test_split();
    test_routing(dir);
    mtc_rm_rf(dir);
    return check_done();
}
