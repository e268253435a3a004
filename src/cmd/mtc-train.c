/* mtc-train: the trainer's command line — a table of subcommands (train is the
 * default), each implemented in the trainer library. Exit 0 ok, 1 error, 2 usage,
 * 75 (EX_TEMPFAIL) when SIGTERM/SIGUSR1 made it checkpoint and stop: requeue it. */
#include <stdio.h>
#include <string.h>

#include "train/data.h"
#include "train/train.h"

static const struct {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *help;
    const char *use; /* answers SUBCOMMAND --help (NULL: the subcommand answers it) */
} subcmds[] = {
    {"train", train_main, "train a model (default; --help for options)", NULL},
    {"tokenizer", train_tokenizer_main, "train/encode/decode a byte-level BPE tokenizer",
     "mtc-train tokenizer train [--kind byte-level-bpe|sentencepiece-bpe] --vocab-size N "
     "--input F --output tok.json\n"
     "       mtc-train tokenizer encode|decode --tokenizer T [--input F]\n"},
    {"prepare", train_prepare_main, "tokenize text/jsonl into train/val shards",
     "mtc-train prepare --tokenizer T --input F(.txt|.jsonl) --output DIR "
     "[--val-fraction 0..1] [--shard-tokens N]\n"},
    {"data", train_data_main, "datasets: generate built-ins, prepare into a cache, check",
     "mtc-train data generate --name tiny-corpus|tiny-sft|tiny-dpo|tiny-rl|tiny-countdown "
     "--output PATH\n"
     "       mtc-train data prepare --source SRC --kind pretrain|sft|dpo|rl --cache-dir DIR "
     "[--tokenizer PATH|builtin:tiny-corpus] [--vocab-size N] [--name NAME] [--val-fraction X] "
     "[--json]\n"
     "       mtc-train data check --source SRC --kind pretrain|sft|dpo|rl [--json]\n"
     "  (docs/datasets.md)\n"},
    {"export", train_export_main, "checkpoint -> HF safetensors + config.json",
     "mtc-train export --checkpoint DIR --format safetensors|llmc --output DIR|FILE.bin\n"},
    {"import", train_import_main, "llm.c or HF safetensors -> checkpoint (for --init)",
     "mtc-train import --from llmc|safetensors PATH --output CKPTDIR [--model PRESET]\n"},
    {"sample", train_sample_main, "generate text from a checkpoint",
     "mtc-train sample --checkpoint DIR [--tokenizer T] --prompt TEXT [--tokens N] "
     "[--temperature X] [--seed S]\n"},
};

/* 1 when argv[1..] (up to a "--") holds --help or -h. */
static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: mtc-train [SUBCOMMAND] [options]   (mtc-train --version)\n");
        for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++)
            printf("  %-10s %s\n", subcmds[i].name, subcmds[i].help);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--version") == 0)
        return printf("mtc-train %s\n", mtc_version()), 0;
    if (argc > 1 && argv[1][0] != '-') {
        for (size_t i = 0; i < sizeof subcmds / sizeof subcmds[0]; i++)
            if (strcmp(argv[1], subcmds[i].name) == 0) {
                if (subcmds[i].use && wants_help(argc - 1, argv + 1))
                    return printf("usage: %s", subcmds[i].use), 0;
                return subcmds[i].main(argc - 1, argv + 1);
            }
        fprintf(stderr, "mtc-train: unknown subcommand '%s' (see mtc-train help)\n", argv[1]);
        return 2;
    }
    return train_main(argc, argv);  // argv[0] stands in for "train"
}
