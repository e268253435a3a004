/* test_launch: custom tasks (recipes/launch.c, docs/any-framework.md) — the
 * recipe's rules (launch, not model/data/train), --command's word splitting,
 * and the job script: the resume contract's environment, TERM before the
 * time limit, torch.distributed's variables under srun, one torchrun per
 * node, the image, the network's interface; the register field and the
 * script's registration of what the program wrote. */
#include "check.h"
#include "recipes/recipes.h"

#include <stdlib.h>
#include <string.h>

static int valid(const char *text, mtc_error_t *err)
{
    json_t *r = json_loads(text, 0, NULL);
    int rc = r ? recipe_validate(r, err) : -1;
    json_decref(r);
    return rc;
}

static void test_rules(void)
{
    mtc_error_t err = {""};
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"python3\",\"t.py\"]}}", &err) == 0,
          "a custom recipe: a task and a command (%s)", err.text);
    CHECK(valid("{\"task\":\"custom\"}", &err) < 0 && strstr(err.text, "launch"),
          "no launch: named (%s)", err.text);
    CHECK(
        valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"model\":{\"preset\":\"x\"}}",
              &err) < 0 &&
            strstr(err.text, "model") && strstr(err.text, "its own program"),
        "a model beside launch: named (%s)", err.text);
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[]}}", &err) < 0 &&
              strstr(err.text, "launch.command"),
          "an empty command: named (%s)", err.text);
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"],\"launcher\":\"mpirun\"}}",
                &err) < 0 &&
              strstr(err.text, "launch.launcher"),
          "an unknown launcher: named (%s)", err.text);
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"],\"workdir\":\"rel\"}}",
                &err) < 0 &&
              strstr(err.text, "absolute"),
          "a relative workdir: named (%s)", err.text);
    CHECK(valid("{\"task\":\"pretrain\",\"launch\":{\"command\":[\"p\"]},\"model\":{\"preset\":"
                "\"tiny-gpt2\"},\"data\":{\"path\":\"d\",\"tokenizer\":\"t\"},\"train\":{\"steps\":"
                "1,\"global_batch\":1,\"seq_length\":8}}",
                &err) < 0 &&
              strstr(err.text, "only a custom task"),
          "launch in an mtc-train recipe: named (%s)", err.text);
    CHECK(valid("{\"task\":\"pretrain\",\"data\":{\"path\":\"d\",\"tokenizer\":\"t\"},\"train\":{"
                "\"steps\":1,\"global_batch\":1,\"seq_length\":8}}",
                &err) < 0 &&
              strstr(err.text, "model: required"),
          "an mtc-train recipe still needs its model (%s)", err.text);
}

static void test_split(void)
{
    mtc_error_t err = {""};
    json_t *w = recipe_split_command("python3  train.py --name 'a b' \"it's\" x\\ y", &err);
    char *s = w ? json_dumps(w, JSON_COMPACT) : NULL;
    CHECK_STR(s ? s : err.text, "[\"python3\",\"train.py\",\"--name\",\"a b\",\"it's\",\"x y\"]",
              "words split as a shell would, nothing expanded");
    free(s);
    json_decref(w);
    w = recipe_split_command("echo $HOME `id` *", &err);
    s = w ? json_dumps(w, JSON_COMPACT) : NULL;
    CHECK_STR(s ? s : err.text, "[\"echo\",\"$HOME\",\"`id`\",\"*\"]", "no expansion");
    free(s);
    json_decref(w);
    CHECK(!recipe_split_command("python3 'x", &err) && strstr(err.text, "unmatched '"),
          "an unmatched quote (%s)", err.text);
    CHECK(!recipe_split_command("   ", &err) && strstr(err.text, "at least one word"),
          "no word (%s)", err.text);
}

/* The job script of a custom recipe (launch section text) on nodes nodes. */
static char *script(const char *launch, int nodes, const char *net, const char *image)
{
    char text[1024];
    snprintf(text, sizeof(text), "{\"name\":\"custom\",\"task\":\"custom\",\"launch\":%s}", launch);
    json_t *r = json_loads(text, 0, NULL);
    mtc_error_t err = {""};
    json_t *canon = r ? recipe_normalize(r, &err) : NULL;
    if (canon)
        json_object_set_new(canon, "name", json_string("custom"));
    struct recipe_run run = {.home = "/h",
                             .timestamp = 7,
                             .nodes = nodes,
                             .mpi_network = net,
                             .image = image,
                             .trainer = "/opt/mtc/bin/mtc-train"};
    json_t *cfg = canon ? recipe_resolve(canon, &run, &err) : NULL;
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    if (!s)
        fprintf(stderr, "# %s\n", err.text);
    json_decref(cfg);
    json_decref(canon);
    json_decref(r);
    return s;
}

static void test_render(void)
{
    char *s = script("{\"command\":[\"python3\",\"t.py\",\"--lr\",\"3e-4\"],\"tasks_per_node\":2,"
                     "\"env\":{\"NCCL_DEBUG\":\"WARN\"}}",
                     2, NULL, NULL);
    CHECK(s && strstr(s, "#SBATCH --signal=TERM@120\n"), "TERM before the time limit");
    CHECK(s && strstr(s, "#SBATCH --nodes=2\n") && strstr(s, "#SBATCH --ntasks-per-node=2\n"),
          "2 nodes, 2 ranks each");
    CHECK(s && strstr(s, "export MTC_CHECKPOINT_DIR='/h/experiments/custom/custom_7/custom/"
                         "checkpoints' MTC_RUN_DIR=\"$TASK_DIR\" "
                         "MTC_RESTART_COUNT=\"${SLURM_RESTART_COUNT:-0}\"\n"),
          "the resume contract: checkpoints, run dir, restart count");
    CHECK(s && strstr(s, "/logs'/metrics.jsonl MTC_TENSORBOARD_DIR="), "metrics file, TensorBoard");
    CHECK(s && strstr(s, "export NCCL_DEBUG='WARN'\n"), "launch.env reaches the job");
    CHECK(s && strstr(s, "CMD=('python3' 't.py' '--lr' '3e-4')\n"),
          "the command, each word quoted");
    CHECK(s && strstr(s, "srun --kill-on-bad-exit=1 --ntasks=4 --ntasks-per-node=2 sh -c ") &&
              strstr(s, "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
                        "NODE_RANK=$SLURM_NODEID WORLD_SIZE=4 LOCAL_WORLD_SIZE=2; exec \"$@\"' "
                        "mtc-rank \"${CMD[@]}\"\n"),
          "srun: one task per rank with torch.distributed's variables; a rank's non-zero exit "
          "ends the others");
    CHECK(s && strstr(s, "export MASTER_ADDR MASTER_PORT\n") && strstr(s, "NodeAddr="),
          "the rendezvous on the first node's address");
    CHECK(s &&
              strstr(s, "MASTER_PORT=$('/opt/mtc/bin/mtc-agent' port --addr \"$MASTER_ADDR\" "
                        "--seed \"$((JOB_ID + $(printf %s \"${SLURM_CLUSTER_NAME:-}\" | cksum | "
                        "cut -d' ' -f1)))\") || MASTER_PORT=\n") &&
              !strstr(s, "29500 + ${SLURM_JOB_ID"),
          "MASTER_PORT bound on MASTER_ADDR by the agent beside the trainer, at each start");
    CHECK(
        s && strstr(s, "    if [ $rc -gt 128 ]; then\n") &&
            strstr(s,
                   "/^srun: error: .*: task [0-9]+: Exited with exit code [0-9]+$/ { x = $NF }") &&
            strstr(s, "[ -n \"$first\" ] && [ \"$first\" -ne 0 ] && rc=$first\n"),
        "srun killed the others (143): the status is the first rank's that exited non-zero");
    CHECK(s && strstr(s, "wait -n -p DONE \"${LIVE[@]}\"\n") &&
              strstr(s, "echo \"mtc: rank $r (pid $DONE) exited with status $s; stopping the "
                        "other ranks\"\n        rc=$s\n") &&
              strstr(s, "kill -TERM \"${LIVE[@]}\"") && strstr(s, "kill -KILL \"${LIVE[@]}\""),
          "-e local: the first rank that exits non-zero is said and stops the others");
    CHECK(s && strstr(s, "cd \"$TASK_DIR\" || exit 1\n"), "no workdir: the run's directory");
    CHECK(s && !strstr(s, "mtc-train") && !strstr(s, "models upload"),
          "no trainer, no registration of mtc-train's checkpoint");
    CHECK(s && !strstr(s, "retry_on_error"), "no retry_on_error: a non-zero exit is final");
    free(s);
    s = script("{\"command\":[\"python3\",\"t.py\"],\"launcher\":\"torchrun\",\"tasks_per_node\":"
               "8,\"workdir\":\"/code\"}",
               3, "10.20.0.0/24", NULL);
    CHECK(s && strstr(s, "srun --kill-on-bad-exit=1 --ntasks=3 --ntasks-per-node=1 sh -c ") &&
              strstr(s, "exec torchrun --nnodes=3 --nproc_per_node=8 --node_rank=$SLURM_NODEID "
                        "--rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT "
                        "--rdzv_id=$SLURM_JOB_ID --no_python \"$@\"' mtc-node \"${CMD[@]}\"\n"),
          "torchrun: one per node, c10d rendezvous, underscore spellings");
    CHECK(s && strstr(s, "export MTC_NETWORK='10.20.0.0/24'\n") &&
              strstr(s, "export GLOO_SOCKET_IFNAME=$IF NCCL_SOCKET_IFNAME=$IF"),
          "gloo and NCCL on the interface of the cluster's network");
    CHECK(s && strstr(s, "cd '/code' || exit 1\n"), "the workdir");
    free(s);
    char *r = NULL;
    json_t *rj = json_loads("{\"name\":\"c\",\"task\":\"custom\",\"retry_on_error\":2,"
                            "\"launch\":{\"command\":[\"p\"]}}",
                            0, NULL);
    mtc_error_t err = {""};
    json_t *canon = rj ? recipe_normalize(rj, &err) : NULL;
    struct recipe_run run = {.home = "/h", .timestamp = 7};
    json_t *cfg = canon ? recipe_resolve(canon, &run, &err) : NULL;
    r = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(r && strstr(r, "if [ $rc -ne 0 ] && [ -n \"${SLURM_JOB_ID:-}\" ] && "
                         "[ \"${SLURM_RESTART_COUNT:-0}\" -lt 2 ]; then\n") &&
              strstr(r, "retry_on_error 2: requeueing it"),
          "retry_on_error 2: a non-zero exit requeued while restarts < 2 (%s)", err.text);
    CHECK(r && strstr(r, "    echo \"mtc: job $JOB_ID end $(date -u +%Y-%m-%dT%H:%M:%SZ), "
                         "requeued\"\n    scontrol requeue"),
          "a requeue by the script ends the start in the log (the breakdown's restart gap)");
    CHECK(r && strstr(r, "trap 'echo \"mtc: job $JOB_ID end $(date -u +%Y-%m-%dT%H:%M:%SZ), "
                         "signal TERM\"; trap - TERM; kill -TERM $$' TERM\n"),
          "so does a requeue or cancel by Slurm (TERM)");
    CHECK(r && !strstr(r, "ranks --after"), "no hang detection: no rank watcher");
    free(r);
    json_decref(cfg), json_decref(canon), json_decref(rj);
    /* hang detection: mtc-agent ranks on each node, beside the trainer */
    rj = json_loads("{\"name\":\"c\",\"task\":\"custom\",\"monitor\":{\"hang_timeout_s\":3},"
                    "\"launch\":{\"command\":[\"p\"]}}",
                    0, NULL);
    canon = rj ? recipe_normalize(rj, &err) : NULL;
    run = (struct recipe_run){.home = "/h", .timestamp = 7, .nodes = 2, .trainer = "/opt/mtc/bin/mtc-train"};
    cfg = canon ? recipe_resolve(canon, &run, &err) : NULL;
    r = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(r && strstr(r, "    MTC_RANK_WATCH=1 srun --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1 --quiet "
                         "'/opt/mtc/bin/mtc-agent' ranks --after 3 </dev/null &\n    WATCH=$!\n"),
          "hang_timeout_s 3: a watcher per node, a stop said after 3 s (%s)", err.text);
    const char *w = r ? strstr(r, "WATCH=$!") : NULL, *p = r ? strstr(r, "CMD=(") : NULL;
    const char *k = r ? strstr(r, "kill \"$WATCH\"") : NULL, *rc = r ? strstr(r, "\nrc=$?\n") : NULL;
    CHECK(w && p && k && rc && w < p && rc < k, "started before the program, stopped after it");
    free(r);
    json_decref(cfg), json_decref(canon), json_decref(rj);
    /* a log rule that does not compile: named, one line */
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"monitor\":{"
                "\"log_rules\":[{\"pattern\":\"it (?<stp>[0-9]+)\"}]}}",
                &err) < 0 &&
              strstr(err.text, "monitor.log_rules[0].pattern") && strstr(err.text, "\"stp\""),
          "a log rule's unknown group name: named (%s)", err.text);
    CHECK(valid("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"monitor\":{"
                "\"log_rules\":[{\"pattern\":\"it (?<step>[0-9]+) loss (?<loss>[0-9.]+)\"}]}}",
                &err) == 0,
          "a log rule with step and loss (%s)", err.text);
    s = script("{\"command\":[\"python3\",\"t.py\"]}", 1, NULL, "/img/pt.sqsh");
    CHECK(s && strstr(s, "sh -c") &&
              strstr(s, " --container-image='/img/pt.sqsh' "
                        "--container-mounts=\"$TASK_DIR:$TASK_DIR\""),
          "the image, with the run's directory mounted");
    free(s);
}

/* register (issue 30): a custom task registers the directory its program
 * wrote, named relative to the run directory; bad values are one line
 * naming the field. */
static void test_register_rules(void)
{
    mtc_error_t err = {""};
    static const char *const head = "{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},";
    char text[512];
    static const struct {
        const char *reg, *want; /* want: a substring of the error, NULL: valid */
    } cases[] = {
        {"{\"path\":\"out/hf\",\"format\":\"hf\"}", NULL},
        {"{\"path\":\"out/hf/\"}", NULL},
        {"{\"path\":\"ck\",\"format\":\"native\"}", NULL},
        {"false", NULL},
        {"true", "register: a custom task must name the path of what it trained"},
        {"\"out/hf\"", "register: must be true, false or {\"path\""},
        {"{\"format\":\"hf\"}", "register.path: required field missing"},
        {"{\"path\":\"\"}", "register.path"},
        {"{\"path\":\"/abs/hf\"}", "register.path: \"/abs/hf\": must be relative to the run"},
        {"{\"path\":\"../other/hf\"}", "register.path: \"../other/hf\": an empty, \".\" or \"..\""},
        {"{\"path\":\"out/../../hf\"}", "register.path: \"out/../../hf\": an empty"},
        {"{\"path\":\"out/..\"}", "register.path: \"out/..\": an empty"},
        {"{\"path\":\".\"}", "register.path: \".\": an empty"},
        {"{\"path\":\"out//hf\"}", "register.path: \"out//hf\": an empty"},
        {"{\"path\":\"out/h'f\"}", "register.path: must not contain a quote"},
        {"{\"path\":\"out/h\\\"f\"}", "register.path: must not contain a quote"},
        {"{\"path\":\"out/h\\u0001f\"}",
         "register.path: must not contain a quote, backslash or control"},
        {"{\"path\":\"out\\nhf\"}", "register.path"},
        {"{\"path\":\"out/hf\",\"format\":\"onnx\"}", "register.format"},
        {"{\"path\":\"out/hf\",\"dir\":\"x\"}", "register.dir: unknown field"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "%s\"register\":%s}", head, cases[i].reg);
        err.text[0] = 0;
        int rc = valid(text, &err);
        if (!cases[i].want)
            CHECK(rc == 0, "register %s: valid (%s)", cases[i].reg, err.text);
        else
            CHECK(rc < 0 && strstr(err.text, cases[i].want) && !strchr(err.text, '\n'),
                  "register %s: one line naming it (%s)", cases[i].reg, err.text);
    }
    /* the canonical form: format defaults to hf, from the registry's name table */
    json_t *r = json_loads("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"Register\":"
                           "{\"PATH\":\"out/hf\"}}",
                           0, NULL);
    json_t *canon = r ? recipe_normalize(r, &err) : NULL;
    char *d = canon ? json_dumps(json_object_get(canon, "register"), JSON_COMPACT) : NULL;
    CHECK_STR(d, "{\"path\":\"out/hf\",\"format\":\"hf\"}", "register's canonical form");
    free(d);
    json_decref(canon), json_decref(r);
    /* mtc-train's tasks register their final checkpoint: true or false */
    CHECK(valid("{\"task\":\"pretrain\",\"model\":{\"preset\":\"tiny-gpt2\"},\"data\":{\"path\":"
                "\"d\",\"tokenizer\":\"t\"},\"train\":{\"steps\":1,\"global_batch\":1,"
                "\"seq_length\":8},\"register\":{\"path\":\"out\"}}",
                &err) < 0 &&
              strstr(err.text, "register: true or false for task pretrain"),
          "a path in an mtc-train recipe: named (%s)", err.text);
}

/* The resolved config of a custom recipe text registered through registrar
 * (NULL: none) as model (NULL: from the experiment's name). */
static json_t *reg_config(const char *text, const char *registrar, const char *model)
{
    json_t *r = json_loads(text, 0, NULL);
    mtc_error_t err = {""};
    json_t *canon = r ? recipe_normalize(r, &err) : NULL;
    if (canon)
        json_object_set_new(canon, "name", json_string("custom"));
    struct recipe_run run = {.home = "/h",
                             .timestamp = 7,
                             .experiment = "Hf_Run",
                             .registrar = registrar,
                             .model_name = model};
    json_t *cfg = canon ? recipe_resolve(canon, &run, &err) : NULL;
    if (!cfg)
        fprintf(stderr, "# %s\n", err.text);
    json_decref(canon);
    json_decref(r);
    return cfg;
}

static void test_register_render(void)
{
    static const char *const text =
        "{\"task\":\"custom\",\"launch\":{\"command\":[\"python3\",\"t.py\"]},"
        "\"register\":{\"path\":\"out/hf\"}}";
    json_t *cfg = reg_config(text, "/opt/mtc/bin/mtc", NULL);
    const char *td = json_string_value(json_object_get(cfg, "taskDir"));
    char want[512];
    snprintf(want, sizeof(want),
             "{\"model\":\"hf-run\",\"mtc\":\"/opt/mtc/bin/mtc\",\"dir\":\"%s/out/hf\","
             "\"format\":\"hf\"}",
             td ? td : "?");
    char *d = cfg ? json_dumps(json_object_get(cfg, "register"), JSON_COMPACT) : NULL;
    CHECK_STR(d, want,
              "config.json: the directory in the run dir, format hf, the model from "
              "the experiment's name");
    free(d);
    /* what jobs_resolve adds for mtcd's socket */
    json_object_set_new(json_object_get(cfg, "register"), "home", json_string("/h/.mtc"));
    json_object_set_new(json_object_get(cfg, "register"), "project", json_string("p1"));
    mtc_error_t err = {""};
    char *s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    snprintf(want, sizeof(want), "    REG_DIR='%s/out/hf'\n", td ? td : "?");
    CHECK(s && strstr(s, want), "the job registers <run dir>/out/hf");
    CHECK(s && strstr(s, "MTC_HOME='/h/.mtc' '/opt/mtc/bin/mtc' --project 'p1' models upload "
                         "\"$REG_DIR\" --format hf --name hf-run --run \"$TASK_DIR\" ||\n"),
          "through mtcd's socket: upload as format hf with the run's lineage");
    const char *reg = s ? strstr(s, "REG_DIR=") : NULL, *ran = s ? strstr(s, "\nrc=$?\n") : NULL,
               *exit_rec = s ? strstr(s, ".exit.tmp") : NULL;
    CHECK(reg && ran && exit_rec && ran < reg && reg < exit_rec &&
              strstr(s, "if [ $rc -eq 0 ]; then\n    # the model registry: what the program wrote"),
          "after the program exits 0, before its exit status is recorded");
    CHECK(s && strstr(s, "    if [ ! -d \"$REG_DIR\" ]; then\n        echo \"mtc: register: "
                         "$REG_DIR: no such directory"),
          "a missing directory: one line, nothing registered");
    CHECK(s && strstr(s, "elif [ ! -f \"$REG_DIR/config.json\" ] || [ ! -f "
                         "\"$REG_DIR/model.safetensors\" ]; then\n        echo \"mtc: register: "
                         "$REG_DIR is not an HF directory"),
          "not an HF directory: one line, nothing registered");
    CHECK(s && strstr(s, "realpath -e --relative-base=\"$TASK_DIR\" \"$REG_DIR\" | grep -q '^/'") &&
              strstr(s, "leads outside the run directory; nothing registered"),
          "a link out of the run directory: refused in the script too");
    CHECK(s && strstr(s, "echo \"mtc: the model registry did not take $REG_DIR (register it with: "
                         "mtc models upload $REG_DIR --format hf --name hf-run --run $TASK_DIR)\""),
          "a failed upload: one line with the command, the exit status unchanged");
    CHECK(s && !strstr(s, "CKPT_DIR"), "not mtc-train's checkpoint");
    free(s);
    /* on a cluster on hosts: mtcd's TCP listener with the registrar token */
    json_object_del(json_object_get(cfg, "register"), "home");
    json_object_set_new(json_object_get(cfg, "register"), "url",
                        json_string("http://10.0.0.1:8080"));
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "REGISTER_TOKEN=${MTC_REGISTER_TOKEN:-}\nunset MTC_REGISTER_TOKEN\n") &&
              strstr(s, "MTC_URL='http://10.0.0.1:8080' MTC_TOKEN=\"$REGISTER_TOKEN\" "
                        "'/opt/mtc/bin/mtc' --project 'p1' models upload \"$REG_DIR\" --format hf"),
          "on hosts: the registrar token, over TCP");
    free(s);
    json_decref(cfg);

    cfg = reg_config("{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"register\":{\"path\":"
                     "\"ck\",\"format\":\"native\"}}",
                     "/opt/mtc/bin/mtc", "my-model");
    s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
    CHECK(s && strstr(s, "models upload \"$REG_DIR\" --format native --name my-model ") &&
              !strstr(s, "is not an HF directory"),
          "--model-name names the model; format native: the upload checks the directory");
    free(s);
    json_decref(cfg);
    static const struct {
        const char *text, *registrar, *what;
    } none[] = {
        {"{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]}}", "/opt/mtc/bin/mtc",
         "a custom task without register"},
        {"{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"register\":false}",
         "/opt/mtc/bin/mtc", "register false"},
        {"{\"task\":\"custom\",\"launch\":{\"command\":[\"p\"]},\"register\":{\"path\":\"o\"}}",
         NULL, "no mtc to register with"},
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        cfg = reg_config(none[i].text, none[i].registrar, NULL);
        s = cfg ? recipe_render_sbatch(cfg, &err) : NULL;
        CHECK(s && !json_object_get(cfg, "register") && !strstr(s, "models upload"),
              "%s: registers nothing", none[i].what);
        free(s);
        json_decref(cfg);
    }
}

int main(void)
{
    test_rules();
    test_split();
    test_render();
    test_register_rules();
    test_register_render();
    return check_done();
}
