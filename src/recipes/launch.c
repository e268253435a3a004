/* launch: custom tasks — a program of the user's (any training framework)
 * run as an mtc job (docs/any-framework.md). Its resolved "launch" section
 * (command, launcher, ranks per node, working directory), and the job
 * script's part for it: the resume contract's environment (MTC_CHECKPOINT_DIR,
 * MTC_RESTART_COUNT, MTC_RUN_DIR, MTC_METRICS_FILE, MTC_TENSORBOARD_DIR),
 * torch.distributed's rendezvous (MASTER_ADDR: the first node's address,
 * MASTER_PORT: bound there by mtc-agent at each start) and the ranks: one
 * srun task per rank with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, or
 * one torchrun per node, or (-e local) every rank on this machine; a rank
 * that exits non-zero ends the others. */
#include "recipes/recipes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *recipe_resolve_launch(const json_t *recipe, int tasks_per_node)
{
    const json_t *l = json_object_get(recipe, "launch");
    const char *launcher = json_string_value(json_object_get(l, "launcher"));
    json_t *out = json_pack("{s:O, s:s, s:i}", "command", json_object_get(l, "command"), "launcher",
                            launcher ? launcher : "srun", "tasksPerNode", tasks_per_node);
    const char *wd = json_string_value(json_object_get(l, "workdir"));
    if (out && wd)
        json_object_set_new(out, "workdir", json_string(wd));
    return out;
}

void recipe_put_contract(FILE *f, const json_t *cfg)
{
    const char *logdir = json_string_value(json_object_get(cfg, "logDir"));
    fprintf(f, "\n# the resume contract (docs/any-framework.md): checkpoints go to\n"
               "# MTC_CHECKPOINT_DIR and the newest complete one is resumed from; progress\n"
               "# rows to MTC_METRICS_FILE, TensorBoard events to MTC_TENSORBOARD_DIR\n"
               "export MTC_CHECKPOINT_DIR=");
    recipe_put_quoted(
        f, json_string_value(json_object_get(json_object_get(cfg, "checkpoint"), "dir")));
    fprintf(f, " MTC_RUN_DIR=\"$TASK_DIR\" MTC_RESTART_COUNT=\"${SLURM_RESTART_COUNT:-0}\"\n"
               "export MTC_METRICS_FILE=");
    recipe_put_quoted(f, logdir);
    fprintf(f, "/metrics.jsonl MTC_TENSORBOARD_DIR=");
    recipe_put_quoted(f, logdir);
    fprintf(f, "/tensorboard\nmkdir -p \"$MTC_CHECKPOINT_DIR\" \"$MTC_TENSORBOARD_DIR\"\n");
}

/* MASTER_ADDR (the first node's NodeAddr: emulated nodes share this host's
 * addresses, nodes on hosts have their own) and MASTER_PORT, chosen at each
 * start on the first node, where this script runs, the way the ranks use it:
 * mtc-agent binds it there (a connect probe calls a port free that an
 * outgoing connection or TIME_WAIT holds, and the ranks' bind fails), outside
 * the ephemeral range, from the job id on. Without the agent, the old probe,
 * said in the log. */
static void put_rendezvous(FILE *f, const char *agent)
{
    fprintf(f, "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n"
               "    FIRST=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
               "    MASTER_ADDR=$(scontrol show node \"$FIRST\" -o | sed -n 's/.*NodeAddr=\\([^ "
               "]*\\).*/\\1/p')\n"
               "    MASTER_ADDR=${MASTER_ADDR:-${FIRST:-$(hostname)}}\n"
               "else\n    MASTER_ADDR=127.0.0.1\nfi\n"
               "MASTER_PORT=$(");
    recipe_put_quoted(f, agent ? agent : "mtc-agent");
    /* the seed: the job id, and the cluster's name (clusters emulated on one
     * host each have a job 1, whose ranks would race for the same port) */
    fprintf(f, " port --addr \"$MASTER_ADDR\" --seed \"$((JOB_ID + $(printf %%s "
               "\"${SLURM_CLUSTER_NAME:-}\" | cksum | cut -d' ' -f1)))\") || MASTER_PORT=\n"
               "if [ -z \"$MASTER_PORT\" ]; then\n"
               "    echo \"mtc: no MASTER_PORT from mtc-agent port; the first port from 29500 "
               "that refuses a connection\"\n"
               "    MASTER_PORT=$((29500 + JOB_ID %% 3000))\n"
               "    while (exec 3<>\"/dev/tcp/$MASTER_ADDR/$MASTER_PORT\") 2>/dev/null; do\n"
               "        MASTER_PORT=$((MASTER_PORT + 1))\n    done\nfi\n"
               "export MASTER_ADDR MASTER_PORT\n");
}

/* The local executor: every rank on this machine, in the background. A rank
 * that exits non-zero ends the run as srun --kill-on-bad-exit does: said in
 * the log (the status, which rank), the others stopped (TERM, KILL after
 * 10 s), its status the run's. */
static void put_local_ranks(FILE *f, int world)
{
    fprintf(f,
            "else\n"
            "    PIDS=()\n"
            "    for r in $(seq 0 %d); do\n"
            "        RANK=$r LOCAL_RANK=$r NODE_RANK=0 WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d "
            "\"${CMD[@]}\" &\n"
            "        PIDS+=($!)\n"
            "    done\n"
            "    rc=0 LIVE=(\"${PIDS[@]}\")\n"
            "    while [ ${#LIVE[@]} -gt 0 ]; do\n"
            "        DONE=\n"
            "        wait -n -p DONE \"${LIVE[@]}\"\n"
            "        s=$?\n"
            "        [ -n \"$DONE\" ] || continue # a signal, not a rank\n"
            "        REST=()\n"
            "        for p in \"${LIVE[@]}\"; do [ \"$p\" = \"$DONE\" ] || REST+=(\"$p\"); done\n"
            "        LIVE=(\"${REST[@]}\")\n"
            "        [ $s -eq 0 ] && continue\n"
            "        for r in \"${!PIDS[@]}\"; do [ \"${PIDS[$r]}\" = \"$DONE\" ] && break; done\n"
            "        echo \"mtc: rank $r (pid $DONE) exited with status $s; stopping the other "
            "ranks\"\n"
            "        rc=$s\n"
            "        [ ${#LIVE[@]} -gt 0 ] || break\n"
            "        kill -TERM \"${LIVE[@]}\" 2>/dev/null\n"
            "        for _ in $(seq 100); do\n"
            "            kill -0 \"${LIVE[@]}\" 2>/dev/null || break\n"
            "            sleep 0.1\n"
            "        done\n"
            "        kill -KILL \"${LIVE[@]}\" 2>/dev/null\n"
            "        wait \"${LIVE[@]}\" 2>/dev/null\n"
            "        break\n"
            "    done\n"
            "    (exit $rc)\n"
            "fi\nrc=$?\n",
            world - 1, world, world);
}

void recipe_put_custom_launch(FILE *f, const json_t *cfg, const char *container)
{
    const json_t *l = json_object_get(cfg, "launch");
    int nodes = (int)json_integer_value(json_object_get(cfg, "nodes"));
    int rpn = (int)json_integer_value(json_object_get(l, "tasksPerNode"));
    int world = nodes * rpn;
    /* emulated GPU nodes may have fewer CPUs than GPUs (one rank each) */
    const char *over =
        json_integer_value(json_object_get(cfg, "gpusPerNode")) > 0 ? " --overcommit" : "";
    const char *launcher = json_string_value(json_object_get(l, "launcher"));
    int torchrun =
        schema_enum_parse(&recipe_launcher_enum, launcher ? launcher : "", 0) == RECIPE_TORCHRUN;
    const char *net = json_string_value(json_object_get(cfg, "mpiNetwork"));
    fprintf(f, "\n# the program (task custom, launcher %s)\nCMD=(", torchrun ? "torchrun" : "srun");
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(l, "command"), i, w)
    {
        fputs(i ? " " : "", f);
        recipe_put_quoted(f, json_string_value(w));
    }
    fprintf(f, ")\n");
    put_rendezvous(f, json_string_value(json_object_get(l, "agent")));
    if (net) { /* gloo and NCCL on the interface of the cluster's network, on each node */
        fprintf(f, "export MTC_NETWORK=");
        recipe_put_quoted(f, net);
        fprintf(f, "\n");
    }
    const char *wd = json_string_value(json_object_get(l, "workdir"));
    fprintf(f, "cd ");
    if (wd)
        recipe_put_quoted(f, wd);
    else
        fprintf(f, "\"$TASK_DIR\"");
    fprintf(f, " || exit 1\n");
    /* per node (torchrun) or per rank (srun): the interface, then exec */
    const char *iface = "[ -n \"${MTC_NETWORK:-}\" ] && command -v ip >/dev/null && "
                        "IF=$(ip -o -4 addr show to \"$MTC_NETWORK\" | awk '{print $2; exit}') && "
                        "[ -n \"$IF\" ] && export GLOO_SOCKET_IFNAME=$IF NCCL_SOCKET_IFNAME=$IF; ";
    char inner[1024];
    if (torchrun)
        snprintf(inner, sizeof(inner),
                 "%sexec torchrun --nnodes=%d --nproc_per_node=%d --node_rank=$SLURM_NODEID "
                 "--rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT "
                 "--rdzv_id=$SLURM_JOB_ID --no_python \"$@\"",
                 iface, nodes, rpn);
    else
        snprintf(inner, sizeof(inner),
                 "%sexport RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID NODE_RANK=$SLURM_NODEID "
                 "WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d; exec \"$@\"",
                 iface, world, rpn);
    fprintf(f,
            "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n    srun --kill-on-bad-exit=1 --ntasks=%d "
            "--ntasks-per-node=%d%s%s sh -c ",
            torchrun ? nodes : world, torchrun ? 1 : rpn, torchrun ? "" : over, container);
    recipe_put_quoted(f, inner);
    fprintf(f, " %s \"${CMD[@]}\"\n", torchrun ? "mtc-node" : "mtc-rank");
    /* srun's status is the highest of its tasks': 143 for the ones it killed */
    fprintf(f,
            "    rc=$?\n"
            "    # --kill-on-bad-exit: the rank whose exit stopped the others gives the status\n"
            "    if [ $rc -gt 128 ]; then\n"
            "        first=$(awk -v s=\"mtc: job $JOB_ID start\" 'index($0, s) == 1 { x = \"\" }\n"
            "            x == \"\" && /^srun: error: .*: task [0-9]+: Exited with exit code "
            "[0-9]+$/ { x = $NF }\n"
            "            END { print x }' \"$TASK_DIR/$JOB_ID.log\" 2>/dev/null)\n"
            "        [ -n \"$first\" ] && [ \"$first\" -ne 0 ] && rc=$first\n"
            "    fi\n"
            "    (exit $rc)\n");
    put_local_ranks(f, world);
}

void recipe_put_watch(FILE *f, const json_t *cfg, int start)
{
    const json_t *w = json_object_get(cfg, "rankWatch");
    const char *agent = json_string_value(json_object_get(w, "agent"));
    if (!agent)
        return;
    if (!start) {
        fprintf(f, "[ -n \"${WATCH:-}\" ] && kill \"$WATCH\" 2>/dev/null && wait \"$WATCH\" 2>/dev/null\n");
        return;
    }
    int nodes = (int)json_integer_value(json_object_get(cfg, "nodes"));
    fprintf(f,
            "\n# hang detection: a watcher on each node names a process of this job that stops\n"
            "# or turns zombie (mtc-agent ranks; MTC_RANK_WATCH marks its tasks as no rank);\n"
            "# mtcd's job monitor reads it in this log\n"
            "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n"
            "    MTC_RANK_WATCH=1 srun --overlap --nodes=%d --ntasks=%d --ntasks-per-node=1 --quiet ",
            nodes > 0 ? nodes : 1, nodes > 0 ? nodes : 1);
    recipe_put_quoted(f, agent);
    fprintf(f, " ranks --after %d </dev/null &\n    WATCH=$!\nfi\n",
            (int)json_integer_value(json_object_get(w, "after")));
}

json_t *recipe_split_command(const char *s, mtc_error_t *err)
{
    json_t *words = json_array();
    size_t n = strlen(s);
    char *w = malloc(n + 1);
    if (!w || !words) {
        free(w);
        json_decref(words);
        return errprintf(err, "out of memory"), NULL;
    }
    size_t len = 0;
    int in_word = 0;
    char quote = 0;
    for (const char *p = s;; p++) {
        char c = *p;
        if (c == '\0' || (!quote && (c == ' ' || c == '\t' || c == '\n'))) {
            if (quote) {
                free(w);
                json_decref(words);
                return errprintf(err, "--command: an unmatched %c quote", quote), NULL;
            }
            if (in_word)
                json_array_append_new(words, json_stringn(w, len));
            len = 0, in_word = 0;
            if (c == '\0')
                break;
            continue;
        }
        in_word = 1;
        if (quote && c == quote) {
            quote = 0;
        } else if (!quote && (c == '\'' || c == '"')) {
            quote = c;
        } else if (c == '\\' && quote != '\'' && p[1]) {
            w[len++] = *++p; /* a backslash keeps the next character as it is */
        } else {
            w[len++] = c;
        }
    }
    free(w);
    if (json_array_size(words) == 0) {
        json_decref(words);
        return errprintf(err, "--command: the program and its arguments, at least one word"), NULL;
    }
    return words;
}
