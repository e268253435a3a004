/* test_request: the one field table behind `mtc run`'s flags and the API's
 * trainingJobs body — round trip through struct recipe_run, snake_case and
 * aliases, unknown and server-only fields, bad values named, every member of
 * struct recipe_run covered, flags mapped to fields and back. */
#include "check.h"
#include "recipes/recipes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static json_t *parse(const char *text)
{
    return json_loads(text, 0, NULL);
}

/* Parse text; NULL-safe err text into msg. Returns parse's result. */
static int try(const char *text, char *msg, size_t len)
{
    json_t *in = parse(text), *canon = NULL;
    struct recipe_run run = {0};
    mtc_error_t err = {""};
    int rc = recipe_request_parse(in, &run, &canon, &err);
    snprintf(msg, len, "%s", err.text);
    json_decref(in);
    json_decref(canon);
    return rc;
}

static void test_round_trip(void)
{
    json_t *in = parse("{\"recipe\":\"pretrain/tiny_gpt2_pt\",\"executor\":\"slurm\","
                       "\"clusterType\":\"hcc-a3u\",\"partition\":\"a3m\",\"workDir\":\"/w\","
                       "\"containerImage\":\"/i.sqsh\",\"logDir\":\"/l\",\"cacheDir\":\"/c\","
                       "\"dataDir\":\"/d\",\"time\":\"01:00:00\",\"fromCheckpoint\":\"/ck\","
                       "\"experimentName\":\"demo-run\",\"nodeCount\":2}");
    json_t *canon = NULL;
    struct recipe_run run = {0};
    mtc_error_t err = {""};
    CHECK(recipe_request_parse(in, &run, &canon, &err) == 0, "a full request parses (%s)",
          err.text);
    CHECK_STR(run.recipe, "pretrain/tiny_gpt2_pt", "recipe filled");
    CHECK_STR(run.partition, "a3m", "partition filled");
    CHECK_STR(run.image, "/i.sqsh", "containerImage fills image");
    CHECK_STR(run.from_checkpoint, "/ck", "fromCheckpoint filled");
    CHECK_STR(run.experiment, "demo-run", "experimentName filled");
    CHECK(run.nodes == 2, "nodeCount fills nodes");
    CHECK(run.trainer == NULL && run.home == NULL, "server-set members untouched");
    json_t *back = recipe_request_json(&run);
    CHECK(json_equal(back, in), "struct -> JSON gives the request back");
    json_t *canon2 = NULL;
    struct recipe_run run2 = {0};
    CHECK(recipe_request_parse(back, &run2, &canon2, &err) == 0 && json_equal(canon2, canon),
          "and it parses to the same canonical body");
    /* server-set members are never sent */
    run.trainer = "/bin/evil";
    run.home = "/root";
    run.timestamp = 42;
    json_t *sent = recipe_request_json(&run);
    CHECK(!json_object_get(sent, "trainer") && !json_object_get(sent, "home") &&
              !json_object_get(sent, "timestamp"),
          "trainer, home, timestamp are not part of a request body");
    json_decref(sent);
    json_decref(back);
    json_decref(canon2);
    json_decref(canon);
    json_decref(in);
}

static void test_spellings(void)
{
    json_t *in = parse("{\"recipe\":\"sft/tiny_gpt2_sft\",\"node_count\":\"3\","
                       "\"experiment_name\":\"x1\",\"container_image\":\"/a.sqsh\","
                       "\"data_dir\":\"/d\",\"secret_env\":{\"HF_TOKEN\":\"t\"}}");
    json_t *canon = NULL;
    struct recipe_run run = {0};
    mtc_error_t err = {""};
    CHECK(recipe_request_parse(in, &run, &canon, &err) == 0, "snake_case accepted (%s)", err.text);
    CHECK(run.nodes == 3, "a quoted integer (proto3) for node_count");
    CHECK_STR(run.experiment, "x1", "experiment_name");
    CHECK(json_object_get(canon, "nodeCount") && json_object_get(canon, "secretEnv"),
          "canonical names are camelCase");
    json_decref(canon);
    json_decref(in);
    in = parse("{\"recipe\":\"r\",\"nodes\":2,\"image\":\"/b.sqsh\"}");
    run = (struct recipe_run){0};
    CHECK(recipe_request_parse(in, &run, &canon, &err) == 0 && run.nodes == 2 &&
              strcmp(run.image, "/b.sqsh") == 0,
          "aliases: nodes, image");
    json_decref(canon);
    json_decref(in);
    in = parse("{\"recipe\":{\"task\":\"pretrain\"},\"nodeCount\":1}");
    run = (struct recipe_run){0};
    CHECK(recipe_request_parse(in, &run, &canon, &err) == 0 && run.recipe == NULL &&
              json_is_object(json_object_get(canon, "recipe")),
          "a recipe object stays in the body, run.recipe NULL");
    json_decref(canon);
    json_decref(in);
}

static void test_bad(void)
{
    char msg[256];
    CHECK(try("{\"recipe\":\"r\",\"colour\":1}", msg, sizeof(msg)) < 0 &&
              strcmp(msg, "colour: unknown field") == 0,
          "unknown field named (%s)", msg);
    CHECK(try("{\"nodeCount\":1}", msg, sizeof(msg)) < 0 && strstr(msg, "recipe: required"),
          "recipe required (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"nodeCount\":0}", msg, sizeof(msg)) < 0 &&
              strncmp(msg, "nodeCount:", 10) == 0,
          "nodeCount 0 (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"nodeCount\":\"many\"}", msg, sizeof(msg)) < 0 &&
              strncmp(msg, "nodeCount:", 10) == 0,
          "nodeCount not a number (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"partition\":\"a b\"}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "partition: a b: not a partition name"),
          "bad partition (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"experimentName\":\"../x\"}", msg, sizeof(msg)) < 0 &&
              strncmp(msg, "experimentName: ../x", 20) == 0,
          "bad experiment name (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"dataDir\":\"rel/dir\"}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "want an absolute path"),
          "relative path (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"workDir\":\"/a/../../etc\"}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "\"..\""),
          ".. in a path (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"time\":\"1h; id\"}", msg, sizeof(msg)) < 0 &&
              strncmp(msg, "time:", 5) == 0,
          "bad time (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"clusterType\":\"hcc-x\"}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "known: hcc-a3m"),
          "unknown cluster type lists the known (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"trainer\":\"/bin/sh\"}", msg, sizeof(msg)) < 0 &&
              strcmp(msg, "trainer: set by the server, not by a request") == 0,
          "trainer is the server's (%s)", msg);
    CHECK(try("{\"recipe\":\"r\",\"home\":\"/\"}", msg, sizeof(msg)) < 0, "home is the server's");
    CHECK(try("{\"recipe\":\"r\",\"secretEnv\":{\"PATH\":\"/x\"}}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "secretEnv.PATH"),
          "only known secrets (%s)", msg);
    CHECK(try("{\"recipe\":\"a\\nb\"}", msg, sizeof(msg)) < 0, "a recipe name with a newline");
}

static void test_coverage(void)
{
    /* every member of struct recipe_run has a row: the rows' sizes add up to
     * the members' (the build checks the layout too) */
    size_t sum = 0;
    int rows = 0;
    for (const struct schema_field *f = recipe_request_schema.fields; f->name; f++) {
        sum += f->size;
        rows += f->size > 0;
    }
    size_t size = sizeof(struct recipe_run);
    CHECK(sum <= size && size - sum < _Alignof(struct recipe_run) && rows == 27,
          "rows cover struct recipe_run (%zu of %zu bytes, %d rows)", sum, size, rows);
    /* account and qos (issue 31) reach #SBATCH lines: names only */
    char msg[256];
    CHECK(try("{\"recipe\":\"a\",\"account\":\"team-a\",\"qos\":\"high\"}", msg, sizeof(msg)) == 0,
          "account and qos taken (%s)", msg);
    CHECK(try("{\"recipe\":\"a\",\"account\":\"x --uid=0\"}", msg, sizeof(msg)) < 0 &&
              strstr(msg, "account"),
          "an account that is not a name: refused (%s)", msg);
    /* every flag names a row, and a row with a member that a user sets has a flag */
    int bad = 0;
    for (const struct recipe_flag *fl = recipe_flags; fl->field; fl++) {
        int found = 0;
        for (const struct schema_field *f = recipe_request_schema.fields; f->name; f++)
            found |= strcmp(f->name, fl->field) == 0;
        bad += !found;
    }
    for (const struct schema_field *f = recipe_request_schema.fields; f->name; f++)
        if (f->size && !(f->flags & SCHEMA_NOINPUT) && !recipe_flag_find(f->name))
            bad++;
    CHECK(bad == 0, "flags and rows agree");
    CHECK_STR(recipe_flag_find("-n")->field, "nodeCount", "-n is nodeCount");
    CHECK_STR(recipe_flag_find("--from-checkpoint")->field, "fromCheckpoint",
              "--from-checkpoint is fromCheckpoint");
    char buf[256];
    CHECK_STR(recipe_request_cli_text("nodeCount: 3: partition a3m has 2 nodes", buf, sizeof(buf)),
              "-n 3: partition a3m has 2 nodes", "an API error as the CLI says it");
    CHECK_STR(recipe_request_cli_text("data.path: /x does not exist", buf, sizeof(buf)),
              "data.path: /x does not exist", "other errors unchanged");
}

int main(void)
{
    test_round_trip();
    test_spellings();
    test_bad();
    test_coverage();
    return check_done();
}
