/* test_recipes: the recipe catalog validates; bad recipes fail with one line
 * naming the field; cluster-type overrides and batch checks; the rendered
 * sbatch script (requeue, signal, srun --mpi=pmix, resume, no secrets, the
 * final checkpoint's registration). */
#include "check.h"
#include "experiment/experiment.h"
#include "recipes/recipes.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *parse(const char *s)
{
    return json_loads(s, 0, NULL);
}

static const char *base_recipe = "{\"task\":\"pretrain\",\"model\":{\"preset\":\"tiny-gpt2\"},"
                                 "\"data\":{\"path\":\"corpus\",\"tokenizer\":\"corpus/tok.json\"},"
                                 "\"train\":{\"steps\":10,\"global_batch\":8,\"seq_length\":64},"
                                 "\"cluster_types\":{\"local\":{\"micro_batch\":2}}}";

/* Validate base_recipe with one edit applied (a JSON object merged in). */
static int validate_with(const char *patch_section, const char *patch, mtc_error_t *err)
{
    json_t *r = parse(base_recipe);
    json_t *p = parse(patch);
    if (patch_section)
        json_object_update(json_object_get(r, patch_section), p);
    else
        json_object_update(r, p);
    int rc = recipe_validate(r, err);
    json_decref(r);
    json_decref(p);
    return rc;
}

static void test_catalog(void)
{
    mtc_error_t err = {""};
    json_t *cat = recipe_catalog(&err);
    CHECK(cat && json_array_size(cat) >= 16, "catalog has the prebuilt recipes (%s)", err.text);
    const char *need[] = {"pretrain/llama3p1_2b_pt", "pretrain/tiny_gpt2_pt",
                          "pretrain/gpt2_124m_pt",   "pretrain/llama3p1_8b_pt",
                          "cpt/llama3p1_2b_cpt",     "sft/llama3p1_2b_sft",
                          "dpo/llama3p1_2b_dpo",     "sft/tiny_llama_sft"};
    for (size_t k = 0; k < sizeof(need) / sizeof(need[0]); k++) {
        int found = 0;
        size_t i;
        json_t *row;
        json_array_foreach(cat, i, row) found |=
            strcmp(json_string_value(json_object_get(row, "name")), need[k]) == 0;
        CHECK(found, "catalog lists %s", need[k]);
    }
    size_t i;
    json_t *row;
    int all_valid = 1;
    json_array_foreach(cat, i, row)
    {
        mtc_error_t e2 = {""};
        json_t *r = recipe_load(json_string_value(json_object_get(row, "name")), NULL, 0, &e2);
        if (!r) {
            all_valid = 0;
            printf("# %s: %s\n", json_string_value(json_object_get(row, "name")), e2.text);
        }
        json_decref(r);
    }
    CHECK(all_valid, "every catalog recipe loads and validates");
    json_decref(cat);
}

static void test_lookup(void)
{
    mtc_error_t err = {""};
    char path[4096];
    json_t *r = recipe_load("pretrain/llama3p1_2b_pt.py", path, sizeof(path), &err);
    CHECK(r != NULL, "NeMo-style name with .py resolves (%s)", err.text);
    CHECK_STR(json_string_value(json_object_get(r, "name")), "pretrain/llama3p1_2b_pt",
              "name is the catalog name");
    CHECK(strstr(path, "recipes/pretrain/llama3p1_2b_pt.json") != NULL, "path is the file");
    json_decref(r);
    r = recipe_load("pretrain/llama3p1_2b_pt", NULL, 0, &err);
    CHECK(r != NULL, "plain catalog name resolves");
    json_decref(r);

    r = recipe_load("pretrain/nope", NULL, 0, &err);
    CHECK(r == NULL && strstr(err.text, "unknown recipe \"pretrain/nope\"") &&
              strstr(err.text, "known recipes: pretrain/") &&
              strstr(err.text, "pretrain/gpt2_124m_pt"),
          "unknown recipe lists the known ones: %s", err.text);
    r = recipe_load("../etc/passwd", NULL, 0, &err);
    CHECK(r == NULL, "path traversal is not a catalog name");

    /* a user's copy, by path, with camelCase keys */
    char tmpl[] = "/tmp/test_recipes.XXXXXX.json";
    int fd = mkstemps(tmpl, 5);
    const char *mine =
        "{\"task\":\"pretrain\",\"model\":{\"preset\":\"tiny-llama\"},"
        "\"data\":{\"path\":\"c\",\"tokenizer\":\"t.json\"},"
        "\"train\":{\"steps\":5,\"globalBatch\":4,\"seqLength\":32,\"microBatch\":2},"
        "\"clusterTypes\":{\"local\":{\"ranksPerNode\":2}}}";
    CHECK(fd >= 0 && write(fd, mine, strlen(mine)) == (ssize_t)strlen(mine), "wrote a user recipe");
    close(fd);
    r = recipe_load(tmpl, NULL, 0, &err);
    CHECK(r != NULL, "a user's recipe file loads by path (%s)", err.text);
    CHECK(json_integer_value(json_object_get(json_object_get(r, "train"), "global_batch")) == 4,
          "camelCase keys are normalised to snake_case");
    CHECK(json_object_get(json_object_get(json_object_get(r, "cluster_types"), "local"),
                          "ranks_per_node") != NULL,
          "nested override keys normalised too");
    json_decref(r);
    unlink(tmpl);
}

static void test_validation(void)
{
    mtc_error_t err = {""};
    CHECK(validate_with(NULL, "{}", &err) == 0, "base recipe is valid (%s)", err.text);
    struct {
        const char *section, *patch, *want;
    } bad[] = {
        {NULL, "{\"bogus\":1}", "bogus: unknown field"},
        {"train", "{\"lr\":\"fast\"}", "train.lr: must be a number"},
        {"train", "{\"steps\":0}", "train.steps: must be >= 1"},
        {"train", "{\"microBatch\":16}", "train.micro_batch: larger than train.global_batch"},
        {"train", "{\"shuffle\":1}", "train.shuffle: must be true or false"},
        {NULL, "{\"task\":\"rlhf\"}", "task: \"rlhf\" is not one of"},
        {"model", "{\"preset\":\"\"}", "model.preset: must be a non-empty string"},
        {"data", "{\"extra\":\"x\"}", "data.extra: unknown field"},
        {NULL, "{\"cluster_types\":{\"hcc-zz\":{}}}", "cluster_types.hcc-zz: unknown cluster type"},
        {NULL, "{\"cluster_types\":{\"local\":{\"gpus\":8}}}",
         "cluster_types.local.gpus: unknown field"},
        {NULL, "{\"env\":{\"A B\":\"x\"}}", "env.A B: not an environment variable name"},
        {NULL, "{\"trainer_args\":{\"Mode\":\"sft\"}}", "trainer_args.Mode: flag names"},
        {NULL, "{\"resources\":{\"time\":\"1h; rm -rf /\"}}", "resources.time"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.text[0] = '\0';
        int rc = validate_with(bad[i].section, bad[i].patch, &err);
        CHECK(rc < 0 && strstr(err.text, bad[i].want) != NULL, "rejects %s: \"%s\"", bad[i].patch,
              err.text);
    }
    json_t *r = parse(base_recipe);
    json_object_del(json_object_get(r, "train"), "seq_length");
    CHECK(recipe_validate(r, &err) < 0 && strstr(err.text, "train.seq_length: required"),
          "missing field named: %s", err.text);
    json_decref(r);
}

static json_t *resolve(const char *recipe_json, struct recipe_run *run, mtc_error_t *err)
{
    json_t *r = parse(recipe_json);
    json_object_set_new(r, "name", json_string("pretrain/test_pt"));
    json_t *cfg = recipe_resolve(r, run, err);
    json_decref(r);
    return cfg;
}

static void test_resolve_render(void)
{
    mtc_error_t err = {""};
    struct recipe_run run = {.home = "/h",
                             .nodes = 2,
                             .partition = "a3m",
                             .timestamp = 1764424800,
                             .trainer = "/opt/mtc/bin/mtc-train",
                             .data_dir = "/data",
                             .experiment = "demo-run"};
    json_t *cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg != NULL && recipe_check_batch(cfg, &err) == 0, "resolves on 2 local nodes (%s)",
          err.text);
    CHECK(json_integer_value(json_object_get(cfg, "ranks")) == 2, "2 ranks (1 per CPU node)");
    CHECK_STR(json_string_value(json_object_get(cfg, "taskDir")),
              "/h/experiments/demo-run/demo-run_1764424800/demo-run",
              "experiment directory layout");
    CHECK_STR(json_string_value(json_object_get(json_object_get(cfg, "data"), "path")),
              "/data/corpus", "data path under --data-dir");
    CHECK_STR(json_string_value(json_object_get(json_object_get(cfg, "checkpoint"), "dir")),
              "/h/experiments/demo-run/demo-run_1764424800/demo-run/checkpoints",
              "checkpoints in the task directory");

    setenv("HF_TOKEN", "hf_secret_value_123", 1);
    setenv("WANDB_API_KEY", "wandb_secret_456", 1);
    char *s = recipe_render_sbatch(cfg, &err);
    CHECK(s != NULL, "renders (%s)", err.text);
    s = s ? s : strdup("");
    CHECK(strstr(s, "#SBATCH --nodes=2\n") && strstr(s, "#SBATCH --partition=a3m\n"),
          "nodes and partition");
    CHECK(strstr(s, "#SBATCH --requeue\n") && strstr(s, "#SBATCH --signal=USR1@120\n"),
          "requeue and a signal before the time limit");
    CHECK(strstr(s, "#SBATCH --output=/h/experiments/demo-run/demo-run_1764424800/demo-run/%j.log"),
          "log is <task dir>/<JOB_ID>.log");
    CHECK(strstr(s, "#SBATCH --open-mode=append\n"), "restarts append to the same log");
    CHECK(strstr(s, "srun --mpi=pmix \"${TRAIN[@]}\""), "srun --mpi=pmix launches the ranks");
    CHECK(strstr(s, "'/opt/mtc/bin/mtc-train'") && strstr(s, "'--resume' 'auto'") &&
              strstr(s, "'--micro-batch' '2'") && strstr(s, "'--batch' '8'"),
          "trainer command line with resume auto and the local micro-batch");
    CHECK(strstr(s, "export OMP_NUM_THREADS='1'"), "one thread per CPU rank");
    CHECK(strstr(s, "SLURM_RESTART_COUNT"), "each start logs its restart count");
    CHECK(strstr(s, "scontrol requeue") && strstr(s, "-eq 75"),
          "exit 75 (checkpointed on signal) requeues");
    CHECK(!strstr(s, "hf_secret_value_123") && !strstr(s, "wandb_secret_456"),
          "secrets are never written into the script");
    CHECK(strstr(s, "HF_TOKEN") && strstr(s, "WANDB_API_KEY"), "but their names are checked");
    CHECK(!strstr(s, "ranks --after"), "no hang detection asked: no rank watcher");
    free(s);
    json_decref(cfg);
    /* hang detection on an mtc-train run: its ranks watched on every node too */
    json_t *hr = parse(base_recipe);
    json_object_set_new(hr, "monitor", json_pack("{s:f}", "stall_factor", 20.0));
    char *htext = json_dumps(hr, 0);
    cfg = resolve(htext, &run, &err);
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "'/opt/mtc/bin/mtc-agent' ranks --after 5 </dev/null &") &&
              strstr(s, "srun --overlap --nodes=2 --ntasks=2"),
          "stall_factor given: mtc-agent ranks beside mtc-train on each of its 2 nodes (%s)",
          err.text);
    free(s);
    free(htext);
    json_decref(hr);
    json_decref(cfg);

    /* GPU cluster type: 8 ranks per node, global batch must divide */
    run.cluster_type = "hcc-a3u";
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg && recipe_check_batch(cfg, &err) < 0 &&
              strstr(err.text, "global_batch 8 is not a multiple of micro_batch 1 x 16 ranks"),
          "batch that does not divide across ranks is refused: %s", err.text);
    json_decref(cfg);
    run.nodes = 1;
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg && json_integer_value(json_object_get(cfg, "ranksPerNode")) == 8,
          "hcc-a3u: 8 ranks/node");
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "#SBATCH --gpus-per-node=8\n") &&
              strstr(s, "srun --mpi=pmix --ntasks-per-node=8 --overcommit"),
          "GPU types ask for 8 GPUs per node and start 8 ranks per node");
    free(s);
    json_decref(cfg);
    run.cluster_type = "hcc-zz";
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg == NULL && strstr(err.text, "--slurm-type hcc-zz: unknown cluster type"),
          "unknown cluster type: %s", err.text);
    run.cluster_type = NULL;
    run.partition = "a3m\n#SBATCH --uid=0";
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg == NULL && strstr(err.text, "not a partition name"),
          "partition checked before it reaches #SBATCH");
    run.partition = "a3m";
    run.time = "1:00:00\nrm";
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg == NULL && strstr(err.text, "--time"), "time checked before it reaches #SBATCH");
    run.time = NULL;
    run.experiment = "bad name!";
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg == NULL && strstr(err.text, "--experiment-name"), "bad experiment name refused");
    run.experiment = NULL;
    cfg = resolve(base_recipe, &run, &err);
    CHECK(cfg && strcmp(json_string_value(json_object_get(cfg, "experiment")), "test-pt") == 0,
          "default experiment name from the recipe name");
    CHECK(cfg && recipe_check_inputs(cfg, &err) < 0 &&
              strstr(err.text, "data.path: /data/corpus does not exist"),
          "missing data named before submitting: %s", err.text);
    json_decref(cfg);
}

static void test_finetune(void)
{
    mtc_error_t err = {""};
    json_t *r = recipe_load("sft/llama3p1_2b_sft", NULL, 0, &err);
    struct recipe_run run = {.home = "/h",
                             .timestamp = 1,
                             .trainer = "/bin/mtc-train",
                             .from_checkpoint = "/ck/pt/step_00000100",
                             .executor = "local",
                             .nodes = 2};
    json_t *cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    CHECK(cfg != NULL, "sft recipe resolves (%s)", err.text);
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "'--init' '/ck/pt/step_00000100'"), "--from-checkpoint becomes --init");
    CHECK(s && strstr(s, "'--mode' 'sft'"), "trainer_args pass through as flags");
    CHECK(cfg && json_integer_value(json_object_get(cfg, "nodes")) == 1 &&
              json_integer_value(json_object_get(cfg, "ranks")) == 2,
          "-e local puts every rank on this machine");
    CHECK(s && strstr(s, "mpirun -np 2"), "local executor starts 2 ranks with mpirun");
    free(s);
    json_decref(cfg);
    json_decref(r);
}

/* The names `mtc run` and `mtc rl launch` put on #SBATCH lines. */
static void test_sbatch_names(void)
{
    const char *good_t[] = {"30", "30:00", "1:00:00", "2-12", "2-12:30", "2-12:30:00", "UNLIMITED"};
    const char *bad_t[] = {"",   "1:00:00\nrm -rf /", "1h", "-1", "1:2:3:4", "1::2", "1:", "a-1",
                           "1-", "1:00:00 --uid=0"};
    for (size_t i = 0; i < sizeof(good_t) / sizeof(good_t[0]); i++)
        CHECK(recipe_time_valid(good_t[i]), "time \"%s\" accepted", good_t[i]);
    for (size_t i = 0; i < sizeof(bad_t) / sizeof(bad_t[0]); i++)
        CHECK(!recipe_time_valid(bad_t[i]), "time \"%s\" refused", bad_t[i]);
    CHECK(recipe_partition_valid("a3m") && recipe_partition_valid("gpu_big.2"), "partitions");
    CHECK(!recipe_partition_valid("") && !recipe_partition_valid("a b") &&
              !recipe_partition_valid("a\n#SBATCH --uid=0") && !recipe_partition_valid("$(id)"),
          "bad partition names refused");
}

/* -i: every mounted path is shell-quoted, never raw inside double quotes. */
static void test_container_mounts(void)
{
    mtc_error_t err = {""};
    json_t *r = recipe_load("pretrain/tiny_gpt2_pt", NULL, 0, &err);
    struct recipe_run run = {.home = "/h",
                             .timestamp = 1,
                             .trainer = "/bin/mtc-train",
                             .image = "/img/x.sqsh",
                             .work_dir = "/w/$(touch /tmp/pwned)\"x"};
    json_t *cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s &&
              strstr(s, "--container-mounts=\"$TASK_DIR:$TASK_DIR\",'/w/$(touch /tmp/pwned)\"x/") &&
              !strstr(s, ",/w/"),
          "mount paths single-quoted (%s)", err.text);
    free(s);
    json_decref(cfg);
    run.work_dir = "/w/a,b";
    cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(!s && strstr(err.text, "cannot be mounted"), "a ',' in a mounted path refused: %s",
          err.text);
    free(s);
    json_decref(cfg);
    json_decref(r);
}

/* A cluster on hosts: MPI over TCP on its network, the address/prefix checked. */
static void test_mpi_network(void)
{
    mtc_error_t err = {""};
    CHECK(recipe_network_valid("10.20.0.0/24") && recipe_network_valid("fd00::/64"), "networks");
    CHECK(!recipe_network_valid("10.20.0.0") && !recipe_network_valid("10.20.0.0/33") &&
              !recipe_network_valid("10.20.0.0/24' x") && !recipe_network_valid("/24") &&
              !recipe_network_valid("x/24") && !recipe_network_valid("10.0.0.0/"),
          "bad networks refused");
    json_t *r = recipe_load("pretrain/tiny_gpt2_pt", NULL, 0, &err);
    struct recipe_run run = {
        .home = "/h", .timestamp = 1, .trainer = "/bin/mtc-train", .mpi_network = "10.20.0.0/24"};
    json_t *cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp "
                         "OMPI_MCA_btl_tcp_if_include='10.20.0.0/24'\n    srun --mpi=pmix"),
          "ranks use TCP on the network (%s)", err.text);
    free(s);
    json_decref(cfg);
    run.mpi_network = "10.20.0.0/24; id";
    cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    CHECK(!cfg && strstr(err.text, "MTC_MPI_NETWORK"), "a bad network named: %s", err.text);
    json_decref(cfg);
    json_decref(r);
}


/* Recipes naming a dataset: the job prepares it first (MTC_DATA), --data replaces it,
 * --from-experiment needs a completed run with a checkpoint. */
static void test_datasets(void)
{
    mtc_error_t err = {""};
    CHECK(validate_with("data", "{\"dataset\":\"builtin:tiny-corpus\"}", &err) < 0 &&
              strstr(err.text, "give one of \"path\""),
          "path and dataset together refused: %s", err.text);
    const char *cat[] = {"pretrain/tiny_gpt2_pt", "pretrain/tiny_llama_pt", "cpt/tiny_gpt2_cpt",
                         "cpt/tiny_llama_cpt",    "sft/tiny_gpt2_sft",      "sft/tiny_llama_sft",
                         "dpo/tiny_gpt2_dpo",     "dpo/tiny_llama_dpo"};
    for (size_t i = 0; i < sizeof(cat) / sizeof(cat[0]); i++) {
        json_t *r = recipe_load(cat[i], NULL, 0, &err);
        const char *ds = json_string_value(json_object_get(json_object_get(r, "data"), "dataset"));
        CHECK(ds && !strncmp(ds, "builtin:tiny-", 13), "%s names a built-in dataset (%s)", cat[i],
              ds ? ds : err.text);
        json_decref(r);
    }
    json_t *r = recipe_load("sft/tiny_gpt2_sft", NULL, 0, &err);
    struct recipe_run run = {.home = "/h", .timestamp = 1, .trainer = "/bin/mtc-train"};
    json_t *cfg = r ? recipe_resolve(r, &run, &err) : NULL;
    json_t *d = json_object_get(cfg, "data");
    CHECK(json_is_true(json_object_get(d, "prepare")) &&
              !strcmp(json_string_value(json_object_get(d, "source")), "builtin:tiny-sft") &&
              !strcmp(json_string_value(json_object_get(d, "kind")), "sft") &&
              !strcmp(json_string_value(json_object_get(d, "cacheDir")), "/h/cache"),
          "a built-in dataset: prepared as sft into HOME/cache (%s)", err.text);
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "PREPARE=('/bin/mtc-train' data prepare --source 'builtin:tiny-sft' "
                         "--kind 'sft' --cache-dir '/h/cache' --tokenizer 'builtin:tiny-corpus')"),
          "the script prepares the data first");
    CHECK(s && strstr(s, "'--data' \"${MTC_DATA}\"") &&
              strstr(s, "'--tokenizer' \"${MTC_DATA}/tokenizer.json\"") &&
              strstr(s, "if [ $rc -eq 0 ]; then\nif [ -n \"${SLURM_JOB_ID:-}\" ]"),
          "and trains on what it prepared, only when that worked");
    CHECK(s && strstr(s, "mtc: data: preparing"), "with a progress line in the job log");
    free(s);
    json_decref(cfg);
    run.data = "/u/mine.jsonl";
    run.cache_dir = "/c";
    cfg = recipe_resolve(r, &run, &err);
    d = json_object_get(cfg, "data");
    CHECK(d && !strcmp(json_string_value(json_object_get(d, "source")), "/u/mine.jsonl") &&
              !strcmp(json_string_value(json_object_get(d, "cacheDir")), "/c"),
          "--data and --cache-dir replace the recipe's dataset and cache");
    json_decref(cfg);
    run.data = NULL;
    run.image = "/img/t.sqsh";
    cfg = recipe_resolve(r, &run, &err);
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "PREPARE=('mtc-train' data prepare") &&
              strstr(s, "MTC_DATA=$(srun --nodes=1 --ntasks=1 --container-image='/img/t.sqsh' "
                        "--container-mounts='/c':'/c' \"${PREPARE[@]}\")") &&
              strstr(s, ",'/c':'/c'"),
          "-i: the image's trainer prepares, the cache mounted for it and for the ranks");
    free(s);
    json_decref(cfg);
    run.image = NULL;
    run.data = "builtin:tiny-rl";
    cfg = recipe_resolve(r, &run, &err);
    CHECK(cfg && !strcmp(json_string_value(json_object_get(json_object_get(cfg, "data"), "source")),
                         "builtin:tiny-rl"),
          "--data builtin:NAME stays a name");
    json_decref(cfg);
    run.data = "/u/a\nb";
    cfg = recipe_resolve(r, &run, &err);
    CHECK(!cfg && strstr(err.text, "--data"), "a newline in --data refused: %s", err.text);
    run.data = NULL;
    run.from_experiment = "nope";
    run.home = "/nonexistent-home";
    cfg = recipe_resolve(r, &run, &err);
    CHECK(!cfg && strstr(err.text, "--from-experiment nope: no experiment \"nope\""),
          "--from-experiment of an unknown experiment: %s", err.text);
    run.from_checkpoint = "/ck";
    cfg = recipe_resolve(r, &run, &err);
    CHECK(!cfg && strstr(err.text, "give one of them"), "--from-experiment with "
                                                         "--from-checkpoint: %s",
          err.text);
    json_decref(r);
    /* a path-style recipe keeps its path */
    r = parse(base_recipe);
    json_object_set_new(r, "name", json_string("test/pt"));
    run = (struct recipe_run){.home = "/h", .timestamp = 1, .trainer = "/t", .data_dir = "/d"};
    cfg = recipe_resolve(r, &run, &err);
    d = json_object_get(cfg, "data");
    CHECK(d && !json_object_get(d, "prepare") &&
              !strcmp(json_string_value(json_object_get(d, "path")), "/d/corpus"),
          "a path recipe is not prepared");
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && !strstr(s, "PREPARE") && strstr(s, "'--data' '/d/corpus'"), "nor is its script");
    free(s);
    json_decref(cfg);
    json_decref(r);
}

/* A completed mtc-train run registers its final checkpoint (recipes/register.c):
 * the checkpoint directory, no format (the upload finds its newest step);
 * "register": false registers nothing. */
static void test_register_checkpoint(void)
{
    mtc_error_t err = {""};
    struct recipe_run run = {.home = "/h",
                             .timestamp = 1764424800,
                             .data_dir = "/data",
                             .experiment = "Demo_Run",
                             .registrar = "/opt/mtc/bin/mtc"};
    json_t *cfg = resolve(base_recipe, &run, &err);
    char *d = cfg ? json_dumps(json_object_get(cfg, "register"), JSON_COMPACT) : NULL;
    CHECK_STR(d,
              "{\"model\":\"demo-run\",\"mtc\":\"/opt/mtc/bin/mtc\",\"dir\":\"/h/experiments/"
              "Demo_Run/Demo_Run_1764424800/Demo_Run/checkpoints\"}",
              "config.json: the final checkpoint's directory as model demo-run");
    free(d);
    json_object_set_new(json_object_get(cfg, "register"), "home", json_string("/h"));
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s &&
              strstr(s, "    CKPT_DIR='/h/experiments/Demo_Run/Demo_Run_1764424800/Demo_Run/"
                        "checkpoints'\n    MTC_HOME='/h' '/opt/mtc/bin/mtc' models upload "
                        "\"$CKPT_DIR\" --name demo-run --run \"$TASK_DIR\" ||\n        echo \"mtc: "
                        "the model registry did not take the checkpoint; it stays in $CKPT_DIR"),
          "the job uploads its checkpoints through mtcd's socket (%s)", err.text);
    free(s);
    json_decref(cfg);
    json_t *r = parse(base_recipe);
    json_object_set_new(r, "register", json_false());
    json_object_set_new(r, "name", json_string("pretrain/test_pt"));
    cfg = recipe_resolve(r, &run, &err);
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && !json_object_get(cfg, "register") && !strstr(s, "models upload"),
          "\"register\": false: nothing registered");
    free(s);
    json_decref(cfg);
    json_decref(r);
}

/* A run's files are its user's to plant: the exit record and a run's
 * config.json are read only when regular files (a FIFO is refused at once,
 * never waited on) and never through a link into /proc; runAs's ids. */
static void test_run_files(void)
{
    char dir[] = "/tmp/mtc-test-runfiles.XXXXXX", p[PATH_MAX + 128];
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    json_t *cfg = json_pack("{s:s}", "taskDir", dir);
    snprintf(p, sizeof(p), "%s/7.exit", dir);
    CHECK(mtc_write_file_atomic(p, "3\n", 2, 0644) == 0, "an exit record");
    char *rec = exp_exit_record(cfg, "7");
    CHECK(rec && strcmp(rec, "3\n") == 0, "run_files: the exit record read (%s)", rec ? rec : "-");
    free(rec);
    snprintf(p, sizeof(p), "%s/8.exit", dir);
    alarm(10);
    CHECK(mkfifo(p, 0600) == 0 && exp_exit_record(cfg, "8") == NULL,
          "run_files: a FIFO as the exit record is not read (no wait)");
    snprintf(p, sizeof(p), "%s/9.exit", dir);
    CHECK(symlink("/proc/self/status", p) == 0 && exp_exit_record(cfg, "9") == NULL,
          "run_files: an exit record linked into /proc is not read");
    /* --from-experiment's lookup: a FIFO as a run's config.json */
    char td[PATH_MAX + 64];
    snprintf(td, sizeof(td), "%s/experiments", dir);
    CHECK(mkdir(td, 0755) == 0, "experiments");
    snprintf(td, sizeof(td), "%s/experiments/e1", dir);
    CHECK(mkdir(td, 0755) == 0, "e1");
    snprintf(td, sizeof(td), "%s/experiments/e1/e1_1", dir);
    CHECK(mkdir(td, 0755) == 0, "e1_1");
    snprintf(td, sizeof(td), "%s/experiments/e1/e1_1/e1", dir);
    CHECK(mkdir(td, 0755) == 0, "e1_1/e1");
    snprintf(p, sizeof(p), "%s/config.json", td);
    mtc_error_t err = {""};
    CHECK(mkfifo(p, 0600) == 0, "a FIFO config.json");
    json_t *all = exp_list(dir, &err);
    CHECK(all && json_array_size(all) == 0, "run_files: a FIFO config.json is no run (no wait)");
    json_decref(all);
    unlink(p);
    const char *c1 = "{\"experiment\":\"e1\"}";
    CHECK(mtc_write_file_atomic(p, c1, strlen(c1), 0644) == 0, "a config");
    all = exp_list(dir, &err);
    CHECK(all && json_array_size(all) == 1, "run_files: a regular config.json is a run");
    json_decref(all);
    alarm(0);
    char uid[24], gid[24];
    CHECK(recipe_run_as_ids(cfg, uid, gid, sizeof(uid)) < 0, "run_as_ids: none without runAs");
    json_object_set_new(cfg, "runAs", json_pack("{s:s,s:i,s:i}", "user", "u", "uid", 1001, "gid",
                                                100));
    CHECK(recipe_run_as_ids(cfg, uid, gid, sizeof(uid)) == 0 && strcmp(uid, "1001") == 0 &&
              strcmp(gid, "100") == 0,
          "run_as_ids: runAs's uid and gid");
    json_decref(cfg);
    mtc_rm_rf(dir);
}

/* The trainer's `data check` reads the request's source as the job's user
 * (runAs), not as root: exec ends the thread's file ids, so it runs under
 * setpriv. As root only, with the trainer built beside the tests. */
static void test_check_as_user(void)
{
    char trainer[PATH_MAX];
    if (geteuid() != 0 || !realpath("build/bin/mtc-train", trainer))
        return;
    char dir[] = "/tmp/mtc-test-checkas.XXXXXX", open_[PATH_MAX + 32], shut[PATH_MAX + 32];
    CHECK(mkdtemp(dir) != NULL && chmod(dir, 0755) == 0, "a temp dir");
    snprintf(open_, sizeof(open_), "%s/open.txt", dir);
    snprintf(shut, sizeof(shut), "%s/shut.txt", dir);
    const char *text = "hello world, a line of text\n";
    CHECK(mtc_write_file_atomic(open_, text, strlen(text), 0644) == 0 &&
              mtc_write_file_atomic(shut, text, strlen(text), 0600) == 0,
          "two sources");
    json_t *cfg = json_pack("{s:s, s:{s:b, s:s, s:s, s:s}}", "trainer", trainer, "data", "prepare",
                            1, "source", shut, "kind", "pretrain", "tokenizer",
                            "builtin:tiny-corpus");
    mtc_error_t err = {""};
    CHECK(recipe_check_data(cfg, &err) == 0, "check_as: root's own check reads a 0600 file (%s)",
          err.text);
    json_object_set_new(cfg, "runAs",
                        json_pack("{s:s,s:i,s:i}", "user", "nobody", "uid", 65534, "gid", 65534));
    CHECK(recipe_check_data(cfg, &err) < 0,
          "check_as: a job's user's check cannot read root's 0600 source");
    json_object_set_new(json_object_get(cfg, "data"), "source", json_string(open_));
    err.text[0] = '\0';
    CHECK(recipe_check_data(cfg, &err) == 0, "check_as: the user's check reads a 0644 source (%s)",
          err.text);
    json_decref(cfg);
    mtc_rm_rf(dir);
}

/* An init checkpoint's meta.json (and the tokenizer it names) are the
 * user's files: a FIFO planted there is an error at once, never a request
 * thread waiting for a writer (alarm: a hang fails the test). */
static void test_init_fifo(void)
{
    char dir[] = "/tmp/mtc-test-initfifo.XXXXXX", meta[PATH_MAX + 16], tok[PATH_MAX + 16];
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    snprintf(meta, sizeof(meta), "%s/meta.json", dir);
    snprintf(tok, sizeof(tok), "%s/tok.json", dir);
    CHECK(mkfifo(meta, 0644) == 0, "meta.json is a FIFO");
    json_t *cfg = json_pack("{s:{}, s:{s:s}}", "data", "checkpoint", "init", dir);
    mtc_error_t err = {""};
    alarm(20);
    CHECK(recipe_check_data(cfg, &err) < 0 && strstr(err.text, "meta.json: not a regular file") &&
              strstr(err.text, "checkpoint.init"),
          "a FIFO meta.json: refused at once (%s)", err.text);
    unlink(meta);
    CHECK(mkfifo(tok, 0644) == 0 &&
              mtc_write_file_fmt(meta, 0644, "{\"tokenizer\": \"%s\"}", tok) == 0,
          "meta.json names a tokenizer that is a FIFO");
    json_object_set_new(json_object_get(cfg, "data"), "tokenizer", json_string(meta));
    err.text[0] = '\0';
    CHECK(recipe_check_data(cfg, &err) < 0 && strstr(err.text, "tok.json: not a regular file"),
          "  refused at once too (%s)", err.text);
    alarm(0);
    json_decref(cfg);
    mtc_rm_rf(dir);
}

int main(void)
{
    test_catalog();
    test_lookup();
    test_validation();
    test_resolve_render();
    test_finetune();
    test_sbatch_names();
    test_container_mounts();
    test_mpi_network();
    test_datasets();
    test_register_checkpoint();
    test_run_files();
    test_check_as_user();
    test_init_fifo();
    return check_done();
}
