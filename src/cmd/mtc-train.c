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
     train_tokenizer_usage},
    {"prepare", train_prepare_main, "tokenize text/jsonl into train/val shards",
     train_prepare_usage},
    {"data", train_data_main, "datasets: generate built-ins, prepare into a cache, check",
     train_data_usage},
    {"export", train_export_main, "checkpoint -> HF safetensors + config.json", train_export_usage},
    {"import", train_import_main, "llm.c or HF safetensors -> checkpoint (for --init)",
     train_import_usage},
    {"sample", train_sample_main, "generate text from a checkpoint", train_sample_usage},
};

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
                if (subcmds[i].use && mtc_wants_help(argc - 1, argv + 1))
                    return printf("usage: %s", subcmds[i].use), 0;
                return subcmds[i].main(argc - 1, argv + 1);
            }
        fprintf(stderr, "mtc-train: unknown subcommand '%s' (see mtc-train help)\n", argv[1]);
        return 2;
    }
    return train_main(argc, argv);  // argv[0] stands in for "train"
}
