/* Unit tests for a run as one typed thing (src/experiment/run.c, files.c):
 * struct exp_run's named fields from a config.json as recipes writes it,
 * loaded and saved (whole, and read back the same), the setters a
 * submission uses, a bad or missing config.json named, and what a run wrote
 * (the curve after a step, the log's tail and last line, the checkpoints)
 * read through the module. */
#include "check.h"
#include "experiment/experiment.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/mtc-test-experiment.XXXXXX";

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static json_t *config(const char *td, const char *logs, const char *ck)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:s,"
                     " s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:f}, s:{s:s, s:I, s:I}}",
                     "task", "pretrain", "recipe", "pretrain/tiny", "experiment", "demo",
                     "runId", "demo_1764424800", "taskDir", td, "logDir", logs, "nodes",
                     (json_int_t)2, "retryOnError", (json_int_t)3, "jobId", "42", "partition",
                     "gpu", "slurmConf", "/h/clusters/c1/slurm.conf", "checkpoint", "dir", ck,
                     "init", "/ck/step_00000010", "data", "path", "/d", "tokenizer",
                     "/d/tokenizer.json", "register", "model", "demo-model", "dir", ck,
                     "monitor", "hang_timeout_s", 90.0, "runAs", "user", "alice", "uid",
                     (json_int_t)1001, "gid", (json_int_t)1001);
}

static void test_fields(void)
{
    char td[200], logs[256], ck[256], path[512];
    snprintf(td, sizeof(td), "%s/experiments/demo/demo_1764424800/pretrain", dir);
    snprintf(logs, sizeof(logs), "%s/logs", td);
    snprintf(ck, sizeof(ck), "%s/checkpoints", td);
    CHECK(mtc_mkdir_p(logs, 0755) == 0 && mtc_mkdir_p(ck, 0755) == 0, "dirs made");
    json_t *cfg = config(td, logs, ck);
    struct exp_run r;
    exp_run_of(cfg, &r);
    CHECK_STR(r.task, "pretrain", "task");
    CHECK_STR(r.task_dir, td, "task_dir");
    CHECK_STR(r.run_id, "demo_1764424800", "run_id");
    CHECK_STR(r.job_id, "42", "job_id");
    CHECK(r.nodes == 2 && r.retry_on_error == 3, "nodes %lld, retry_on_error %lld",
          (long long)r.nodes, (long long)r.retry_on_error);
    CHECK_STR(r.checkpoint_dir, ck, "checkpoint_dir");
    CHECK_STR(r.checkpoint_init, "/ck/step_00000010", "checkpoint_init");
    CHECK_STR(r.slurm_conf, "/h/clusters/c1/slurm.conf", "slurm_conf");
    CHECK_STR(r.reg.model, "demo-model", "reg.model");
    CHECK_STR(r.tokenizer, "/d/tokenizer.json", "tokenizer");
    CHECK(r.has_user && strcmp(r.user.name, "alice") == 0 && r.user.uid == 1001,
          "runAs: alice 1001");
    CHECK(r.monitor.hang_timeout_s == 90.0, "monitor.hang_timeout_s over the defaults");
    CHECK(r.monitor.window == exp_monitor_default.window, "monitor: the rest default");
    snprintf(path, sizeof(path), "%s/experiments/demo/demo_1764424800", dir);
    CHECK_STR(r.run_dir, path, "run_dir is the task directory's parent");
    snprintf(path, sizeof(path), "%s/42.log", td);
    CHECK_STR(r.log_path, path, "log_path");
    snprintf(path, sizeof(path), "%s/metrics.jsonl", logs);
    CHECK_STR(r.metrics_path, path, "metrics_path");
    CHECK(!exp_is_custom(cfg) && r.launch == NULL, "not a custom task");
    CHECK(!exp_is_local(cfg), "no executor: not the local one");
    json_object_set_new(cfg, "executor", json_string("local"));
    CHECK(exp_is_local(cfg), "executor local: the local one");
    json_object_del(cfg, "executor");

    /* the setters a submission uses, then saved and loaded back whole */
    struct mtc_user bob = {.uid = 1002, .gid = 1003};
    snprintf(bob.name, sizeof(bob.name), "bob");
    exp_set_run_as(cfg, &bob);
    exp_set_recorded_conf(cfg, "/h/clusters/c2/slurm.conf");
    exp_set_from_model_version(cfg, "base@prod", 7);
    exp_set_training_job(cfg, "job-1");
    exp_register_where(cfg, NULL, "p", "l");
    exp_register_via(cfg, "https://10.0.0.1:8443", NULL);
    exp_run_of(cfg, &r);
    mtc_error_t err = {""};
    CHECK(exp_run_save(&r, &err) == 0, "saved: %s", err.text);
    struct exp_run back;
    CHECK(exp_run_load(td, &back, &err) == 0, "loaded: %s", err.text);
    CHECK(back.owned && json_equal(back.cfg, cfg), "what was saved is what loads");
    CHECK(back.has_user && strcmp(back.user.name, "bob") == 0 && back.user.gid == 1003,
          "runAs set: bob");
    CHECK_STR(back.slurm_conf, "/h/clusters/c2/slurm.conf", "slurm_conf set");
    CHECK_STR(back.from_model_version, "base@7", "from_model_version: NAME@version");
    CHECK_STR(back.training_job, "job-1", "training_job set");
    json_t *reg = json_object_get(back.cfg, "register");
    CHECK(!json_object_get(reg, "home") && !strcmp(mtc_json_str_or(reg, "project", ""), "p") &&
              mtc_json_str(reg, "url") && !json_object_get(reg, "caCert"),
          "register: no home (TCP), project, url, no CA");
    exp_run_release(&back);
    CHECK(back.cfg == NULL, "released");

    /* what the run wrote */
    snprintf(path, sizeof(path), "%s/metrics.jsonl", logs);
    put(path, "{\"step\":1,\"loss\":5}\n{\"step\":2,\"loss\":4}\nnot json\n{\"step\":3,\"loss\":3}\n");
    json_t *curve = exp_curve(cfg, 1, 100);
    CHECK(json_array_size(curve) == 2 &&
              json_integer_value(json_object_get(json_array_get(curve, 0), "step")) == 2,
          "curve after step 1: steps 2 and 3 (a bad line skipped)");
    json_decref(curve);
    curve = exp_curve(cfg, -1, 1);
    CHECK(json_array_size(curve) == 1, "curve: at most max rows");
    json_decref(curve);
    snprintf(path, sizeof(path), "%s/42.log", td);
    put(path, "mtc: job 42 start\nstep 1 loss 5\nsrun: error: something\nmtc: job 42 end rc=0\n");
    char line[128];
    CHECK_STR(exp_last_line(cfg, line, sizeof(line)), "step 1 loss 5",
              "last line: the program's, not mtc's or srun's");
    json_t *tail = exp_log_tail(cfg);
    CHECK(json_is_string(tail) && strstr(json_string_value(tail), "step 1 loss 5"), "log tail");
    json_decref(tail);
    snprintf(path, sizeof(path), "%s/step_00000010", ck);
    mkdir(path, 0755);
    json_t *ckpts = exp_checkpoints(cfg, 10);
    CHECK(json_array_size(ckpts) == 1 &&
              strcmp(json_string_value(json_array_get(ckpts, 0)), "step_00000010") == 0,
          "checkpoints listed");
    json_decref(ckpts);
    json_decref(cfg);
}

static void test_bad(void)
{
    struct exp_run r;
    mtc_error_t err = {""};
    char td[200], path[300];
    snprintf(td, sizeof(td), "%s/none", dir);
    CHECK(exp_run_load(td, &r, &err) < 0 && strstr(err.text, "none/config.json") &&
              strstr(err.text, "No such file"),
          "a missing config.json named: %s", err.text);
    snprintf(td, sizeof(td), "%s/bad", dir);
    mkdir(td, 0755);
    snprintf(path, sizeof(path), "%s/config.json", td);
    put(path, "{\"taskDir\": ");
    CHECK(exp_run_load(td, &r, &err) < 0 && strstr(err.text, "not a JSON object"),
          "a torn config.json named: %s", err.text);
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0, "a FIFO where config.json should be");
    CHECK(exp_run_load(td, &r, &err) < 0, "a FIFO is not read (it would block): %s", err.text);
    json_t *empty = json_object();
    exp_run_of(empty, &r);
    CHECK(!r.task_dir && !*r.log_path && !*r.metrics_path && !r.has_user && !*r.run_dir,
          "an empty config: every field absent, no paths");
    json_t *c = exp_curve(empty, -1, 10), *t = exp_log_tail(empty), *k = exp_checkpoints(empty, 10);
    CHECK(json_array_size(c) == 0 && strcmp(json_string_value(t), "") == 0 &&
              json_array_size(k) == 0,
          "nothing read for a run with no paths");
    json_decref(c);
    json_decref(t);
    json_decref(k);
    json_decref(empty);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    test_fields();
    test_bad();
    mtc_rm_rf(dir);
    return check_done();
}
