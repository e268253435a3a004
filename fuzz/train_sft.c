/* Fuzz harness: SFT and DPO JSONL from bytes — the data set loaded (train and val) with a
 * plain and a Llama 3 chat template tokenizer, one step and one evaluation on a tiny model,
 * and the data position saved and restored. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "train/train.h"

static char train_path[128], val_path[128];
static struct tok *toks[2]; /* plain "<|role|>" markers; Llama 3 header tokens */
static struct model *policy;
static struct model_config mc;

static void cleanup(void)
{
    tok_destroy(toks[0]);
    tok_destroy(toks[1]);
    model_destroy(policy);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("OMP_NUM_THREADS", "1", 1);
    fuzz_make_dir("sft");
    atexit(cleanup);
    fuzz_path(train_path, sizeof train_path, "train.jsonl");
    fuzz_path(val_path, sizeof val_path, "val.jsonl");
    static const char corpus[] = "<|system|>\nYou are terse.\n<|user|>\nWhat is two plus two?\n"
                                 "<|assistant|>\nFour.<|endoftext|> user assistant system "
                                 "the cat sat on the mat. 0123456789 {}[]\":, \n\n";
    char p1[160], p2[160];
    fuzz_path(p1, sizeof p1, "tok.json");
    fuzz_path(p2, sizeof p2, "tok3.json");
    mtc_error_t err;
    if (tok_train(corpus, sizeof corpus - 1, 300, p1, &err) < 0 || !(toks[0] = tok_load(p1, &err)))
        abort();
    json_t *j = json_load_file(p1, 0, NULL);
    static const char *const l3[] = {"<|begin_of_text|>", "<|start_header_id|>",
                                     "<|end_header_id|>", "<|eot_id|>"};
    for (int i = 0; i < 4; i++)
        json_array_append_new(json_object_get(j, "added_tokens"),
                              json_pack("{s:i,s:s,s:b}", "id", tok_vocab_size(toks[0]) + i,
                                        "content", l3[i], "special", 1));
    if (!j || json_dump_file(j, p2, 0) < 0 || !(toks[1] = tok_load(p2, &err)))
        abort();
    json_decref(j);
    if (model_preset("tiny-llama", &mc, &err) < 0)
        abort();
    mc.vocab_size = 320, mc.padded_vocab = 0, mc.max_seq = 32, mc.n_layer = 1;
    mc.n_head = 2, mc.n_kv_head = 1, mc.d_model = 8, mc.d_ff = 16;
    if (!(policy = model_create(&mc, &err)))
        abort();
    model_init_weights(policy, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_put(train_path, data, size);
    fuzz_put(val_path, data, size);
    for (int k = 0; k < 2; k++)
        for (int mode = FT_SFT; mode <= FT_DPO; mode++) {
            struct ft_config c = {.mode = mode,
                                  .data = train_path,
                                  .tok = toks[k],
                                  .micro = 2,
                                  .accum = 1,
                                  .seq = 16,
                                  .rank = 0,
                                  .nranks = 1,
                                  .seed = 3,
                                  .shuffle = 1,
                                  .want_val = 1,
                                  .beta = 0.1f};
            mtc_error_t err;
            struct ft *f = ft_create(&c, &mc, &err);
            if (!f)
                continue;
            model_zero_grad(policy);
            double loss;
            if (ft_accumulate(f, policy, &loss, &err) == 0) {
                json_t *fields = json_object();
                ft_metrics(f, fields);
                json_decref(fields);
            }
            ft_evaluate(f, policy, 1, &err);
            struct loader_pos pos;
            ft_get_pos(f, &pos);
            if (ft_set_pos(f, &pos, &err) < 0 || ft_size(f) == 0)
                abort(); /* its own position always fits */
            ft_destroy(f);
        }
    return 0;
}
