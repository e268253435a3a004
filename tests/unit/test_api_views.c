/* Unit tests for the API's kept GET replies (src/api/viewcache.c): a cluster
 * GET or list page answered from the cache says exactly what one built from
 * the store says, and any change to the store (state, nodes, health, events,
 * delete) shows in the next GET; another parent is still a 404. And the
 * route table's roles, where one wrong word lets a lesser token in: a fault
 * into a job, accounts and tokens are an admin's, a cancel an editor's. */
#include "check.h"
#include "api/internal.h"
#include "store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define PATH "/v1beta1/projects/local/locations/local/modelDevelopmentClusters"

static struct store *st;
static struct api_principal caller = {.role = ROLE_VIEWER}; /* whom get() asks as */

/* GET path (query q or NULL) as caller (a viewer): the reply's status and its JSON
 * text into *text (caller frees); whether it came from the cache in *kept. */
static int get(const char *path, const char *q, char **text, int *kept)
{
    struct api_req r = {.st = st, .method = "GET", .path = path, .query = q};
    r.who = caller;
    struct api_resp out = {0};
    int status = 0;
    const struct api_route *route = api_route_find(&r, &status);
    if (!route || api_authorize(&r, route, &out) < 0)
        return -1;
    api_run(&r, route, NULL, 0, &out);
    *kept = out.text != NULL;
    if (out.text) {
        *text = out.text;
        if (!out.text_type || strcmp(out.text_type, "application/json") != 0)
            *kept = -1;
    } else {
        *text = json_dumps(out.body, JSON_COMPACT);
    }
    json_decref(out.body);
    return out.status;
}

/* GET twice: the second from the cache and the same bytes; the text in *text. */
static int get_twice(const char *path, const char *q, char **text)
{
    char *a = NULL, *b = NULL;
    int k1 = 0, k2 = 0;
    int s1 = get(path, q, &a, &k1), s2 = get(path, q, &b, &k2);
    int ok = s1 == 200 && s2 == 200 && !k1 && k2 == 1 && a && b && strcmp(a, b) == 0;
    free(b);
    *text = a;
    return ok;
}

/* Is role allowed METHOD path? 1 yes, 0 refused with a 403 naming the
 * role needed, -1 no such route (or any other answer). */
static int allowed(const char *method, const char *path, enum api_role role)
{
    struct api_req r = {.st = st, .method = method, .path = path};
    r.who.role = role;
    struct api_resp out = {0};
    int status = 0, rc = -1;
    const struct api_route *route = api_route_find(&r, &status);
    if (route && api_authorize(&r, route, &out) == 0)
        rc = 1;
    else if (route && out.status == 403) {
        const char *m = json_string_value(
            json_object_get(json_object_get(out.body, "error"), "message"));
        rc = m && strstr(m, "it needs ") ? 0 : -1;
    }
    json_decref(out.body);
    return rc;
}

static void test_roles(void)
{
    const char *fault = PATH "/a/trainingJobs/j:injectFault";
    CHECK(allowed("POST", fault, ROLE_EDITOR) == 0 && allowed("POST", fault, ROLE_VIEWER) == 0,
          ":injectFault: an editor's or a viewer's token gets 403 (it needs admin)");
    CHECK(allowed("POST", fault, ROLE_ADMIN) == 1, ":injectFault: an admin's token may");
    CHECK(allowed("POST", PATH "/a/accounts", ROLE_EDITOR) == 0 &&
              allowed("DELETE", PATH "/a/accounts/x", ROLE_EDITOR) == 0,
          "accounts: created and deleted by an admin only");
    CHECK(allowed("POST", "/v1/tokens", ROLE_EDITOR) == 0, "tokens: made by an admin only");
    CHECK(allowed("POST", PATH "/a/trainingJobs/j:cancel", ROLE_EDITOR) == 1 &&
              allowed("POST", PATH "/a/trainingJobs/j:cancel", ROLE_VIEWER) == 0,
          "a cancel: an editor's, not a viewer's");
}

static void create(const char *id, const char *project)
{
    struct store_cluster c = {.spec = json_pack("{s:s}", "displayName", id)};
    snprintf(c.id, sizeof(c.id), "%s", id);
    snprintf(c.project, sizeof(c.project), "%s", project);
    snprintf(c.location, sizeof(c.location), "local");
    snprintf(c.state, sizeof(c.state), "PROVISIONING");
    struct store_op op;
    memset(&op, 0, sizeof(op));
    snprintf(op.id, sizeof(op.id), "op-%s", id);
    snprintf(op.project, sizeof(op.project), "%s", project);
    snprintf(op.location, sizeof(op.location), "local");
    snprintf(op.cluster_id, sizeof(op.cluster_id), "%s", id);
    snprintf(op.kind, sizeof(op.kind), "CREATE");
    op.request = c.spec;
    CHECK(store_cluster_create(st, &c, &op, NULL) == 0, "cluster %s stored", id);
    json_decref(c.spec);
}

int main(void)
{
    char dir[] = "/tmp/mtc-views-XXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    snprintf(path, sizeof(path), "%s/mtcd.db", dir);
    mtc_error_t err;
    st = store_open(path, &err);
    CHECK(st != NULL, "store opened");
    create("a", "local");
    create("b", "local");
    create("o", "other");
    test_roles();

    char *t = NULL, *u = NULL;
    int kept = 0;
    CHECK(get_twice(PATH "/a", NULL, &t) && strstr(t, "\"PROVISIONING\""),
          "a second GET of a cluster is the kept reply, byte for byte");
    free(t);
    CHECK(get(PATH "/o", NULL, &t, &kept) == 404 && !kept,
          "a cluster under another parent: 404, not from the cache");
    free(t);
    CHECK(get("/v1beta1/projects/other/locations/local/modelDevelopmentClusters/a", NULL, &t,
              &kept) == 404 &&
              !kept,
          "a kept cluster asked for under another parent: still 404");
    free(t);

    CHECK(store_cluster_set_state(st, "a", "RUNNING") == 0, "a is RUNNING");
    CHECK(get_twice(PATH "/a", NULL, &t) && strstr(t, "\"RUNNING\"") && !strstr(t, "PROVISIONING"),
          "a state change shows in the next GET");
    free(t);
    json_t *nodes = json_pack("[{s:s, s:s}]", "instanceName", "a-x-0", "nodeState", "RUNNING");
    CHECK(store_cluster_set_nodes(st, "a", nodes) == 0, "a has a node");
    json_decref(nodes);
    struct store_health h = {.time_ms = 1000};
    snprintf(h.status, sizeof(h.status), "FAIL");
    snprintf(h.failing_check, sizeof(h.failing_check), "gpu.ecc");
    CHECK(store_health_put(st, "a", "a-x-0", &h) == 0, "a-x-0 reports FAIL");
    CHECK(get_twice(PATH "/a", NULL, &t) && strstr(t, "\"a-x-0\"") &&
              strstr(t, "\"failingCheck\":\"gpu.ecc\""),
          "new nodes and a health report show in the next GET");
    free(t);
    CHECK(store_event_add(st, "a", "TEST_EVENT", "a-x-0", "hello") == 0, "an event");
    CHECK(get_twice(PATH "/a", NULL, &t) && strstr(t, "TEST_EVENT"),
          "a new event shows in the next GET");
    free(t);

    /* an event about a job's run: its message (the run's log line) for the
     * job's owners, its brief for anyone else; a kept reply is per caller */
    CHECK(store_event_add_job(st, "a", "TRAINING_HANG", "alice", "job j hung (brief)",
                              "job j hung; last line: SECRET-LINE") == 0,
          "an event about alice's job");
    static const struct {
        enum api_role role;
        const char *user;
        int whole;
    } eyes[] = {{ROLE_VIEWER, "alice", 1}, {ROLE_EDITOR, "bob", 0}, {ROLE_VIEWER, "", 0},
                {ROLE_ADMIN, "", 1},       {ROLE_VIEWER, "bob", 0}};
    for (size_t i = 0; i < sizeof(eyes) / sizeof(eyes[0]); i++) {
        caller.role = eyes[i].role;
        snprintf(caller.user, sizeof(caller.user), "%s", eyes[i].user);
        int kept = 0, status = get(PATH "/a", NULL, &t, &kept);
        CHECK(status == 200 && !!strstr(t, "SECRET-LINE") == eyes[i].whole &&
                  !!strstr(t, "job j hung (brief)") == !eyes[i].whole,
              "role %d bound to \"%s\": %s (%s)", (int)eyes[i].role, eyes[i].user,
              eyes[i].whole ? "the whole event" : "its brief only", kept ? "kept" : "built");
        free(t);
    }
    caller.role = ROLE_VIEWER;
    caller.user[0] = '\0';
    CHECK(store_event_add_job(st, "a", "TRAINING_FAILED", "", "job k FAILED (brief)",
                              "job k FAILED; last line: OWN-LINE") == 0,
          "an event about a job of mtcd's own user");
    CHECK(get_twice(PATH "/a", NULL, &t) && strstr(t, "OWN-LINE"),
          "  an unbound token sees it whole");
    free(t);
    snprintf(caller.user, sizeof(caller.user), "alice");
    CHECK(get_twice(PATH "/a", NULL, &t) && !strstr(t, "OWN-LINE") && strstr(t, "SECRET-LINE"),
          "  alice's token its brief (and her own job's event whole)");
    free(t);
    caller.user[0] = '\0';

    CHECK(get_twice(PATH, NULL, &t) && strstr(t, "/a\"") && strstr(t, "/b\"") && !strstr(t, "/o\""),
          "a list page is kept too");
    CHECK(get_twice(PATH, "pageSize=1", &u) && !strstr(u, "/b\"") && strstr(u, "nextPageToken"),
          "another page size is another reply");
    free(u);
    CHECK(get_twice(PATH, "pageSize=1&pageToken=a", &u) && strstr(u, "/b\"") && !strstr(u, "/a\""),
          "another page token is another reply");
    free(u);
    CHECK(get(PATH, "pageSize=x", &u, &kept) == 400 && !kept, "a bad page size: 400 still");
    free(u);
    free(t);

    CHECK(store_cluster_delete(st, "b") == 0, "b deleted");
    CHECK(get(PATH "/b", NULL, &t, &kept) == 404 && !kept, "a deleted cluster: 404 at once");
    free(t);
    CHECK(get_twice(PATH, NULL, &t) && !strstr(t, "/b\""), "and gone from the list");
    free(t);

    struct store_cluster c = {.spec = json_pack("{s:[{s:s, s:[s]}]}", "nodePools", "id", "gpu",
                                                "hosts", "10.0.0.1")};
    snprintf(c.id, sizeof(c.id), "h");
    snprintf(c.project, sizeof(c.project), "local");
    snprintf(c.location, sizeof(c.location), "local");
    snprintf(c.state, sizeof(c.state), "RUNNING");
    struct store_op op = {.request = c.spec};
    snprintf(op.id, sizeof(op.id), "op-h");
    snprintf(op.project, sizeof(op.project), "local");
    snprintf(op.location, sizeof(op.location), "local");
    snprintf(op.cluster_id, sizeof(op.cluster_id), "h");
    snprintf(op.kind, sizeof(op.kind), "CREATE");
    CHECK(store_cluster_create(st, &c, &op, NULL) == 0, "cluster h on hosts stored");
    json_decref(c.spec);
    int k2 = 0;
    CHECK(get(PATH "/h", NULL, &t, &kept) == 200 && get(PATH "/h", NULL, &u, &k2) == 200 &&
              !kept && !k2 && !strcmp(t, u),
          "a cluster on hosts is never kept (its hosts are the provider's)");
    free(t);
    free(u);
    CHECK(get(PATH, NULL, &t, &kept) == 200 && get(PATH, NULL, &u, &k2) == 200 && !kept && !k2 &&
              strstr(t, "/h\""),
          "nor a list page with it");
    free(t);
    free(u);

    api_view_forget(st);
    CHECK(get(PATH "/a", NULL, &t, &kept) == 200 && !kept, "forgotten: built again");
    free(t);
    api_view_forget(st);
    store_close(st);
    unlink(path);
    char wal[300];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    unlink(wal);
    snprintf(wal, sizeof(wal), "%s-shm", path);
    unlink(wal);
    rmdir(dir);
    return check_done();
}
